//! `/v1/realtime` against the voice-agent clients people use, at their defaults, on the demo
//! package: the OpenAI Agents SDK (`openai-agents`: `RealtimeAgent` + `RealtimeRunner`, its
//! default session with `semantic_vad` and input transcription) answers a spoken question
//! streamed at real-time pace with speech, and its `interrupt()` cancels and truncates a reply
//! whose next turn goes on (`realtime_agents.py`); LiveKit Agents' OpenAI
//! realtime client (`livekit-plugins-openai`: `RealtimeModel(base_url=...)`) with
//! `turn_detection=None` (`update_instructions`, `update_tools`, `push_audio`, `commit_audio`,
//! `generate_reply()` resolving, `interrupt`) and at its defaults (`realtime_livekit.py`).
//! The README's snippets for both clients run as written. Each reply's audio equals the
//! library's S2S of the question the server committed, byte for byte.
//!
//! The clients come from PyPI: a Python that imports `agents` and `livekit.plugins.openai`
//! (`$LFM2E_PYTHON`, else `python3`; `pip install openai-agents livekit-agents
//! livekit-plugins-openai`). Without one, or without espeak-ng (the spoken questions), a test
//! says it skipped, and fails when `CI=true`.
//!
//! The Agents SDK's default session also gets the user's transcript (input transcription), and
//! its `send_message` (a typed question) is answered with the library's speech; so is a text
//! message LiveKit's `update_chat_ctx` adds, then `generate_reply()`.

mod common;

use std::process::Command;

use serde_json::Value;

use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{
    Artifact, ArtifactKind, S2sOptions, S2sRequest, Session, SessionOptions, QUESTION_ID,
};
use common::realtime::*;
use common::*;

const MODEL: &str = "lfm2-audio-s2s";

/// Skips (returns `None`, with the `ci-skip` marker) or, in CI, fails: `why` could not be had.
fn missing<T>(why: &str) -> Option<T> {
    let test = std::thread::current()
        .name()
        .unwrap_or("realtime_clients")
        .to_owned();
    ci_skip::skip(&test, why);
    None
}

/// Where the server's `semantic_vad` at `auto` puts the first turn of `heard` (24 kHz), ms: the
/// library's smart-turn detector when its weights are installed (the server loads the same
/// file), else the segmenter with the eagerness's silence (the server's fallback).
fn semantic_turn(heard: &[i16]) -> (usize, usize) {
    use voice_activity::{Eagerness, SmartTurn, TurnDetector, VadConfig, VadEvent};
    let f: Vec<f32> = heard.iter().map(|&s| f32::from(s) / 32768.0).collect();
    let events = match SmartTurn::load_default() {
        Ok(m) => {
            let mut d = TurnDetector::new(
                std::sync::Arc::new(m),
                Eagerness::Auto.policy(),
                VadConfig::default(),
                24_000,
            )
            .unwrap();
            f.chunks(2_400).flat_map(|c| d.push(c)).collect::<Vec<_>>()
        }
        Err(_) => voice_activity::Segmenter::new(VadConfig::default(), 24_000)
            .unwrap()
            .push(&f),
    };
    let (mut a, mut b) = (None, None);
    for e in events {
        match e {
            VadEvent::SpeechStarted { audio_start_ms } => {
                a.get_or_insert(audio_start_ms as usize);
            }
            VadEvent::SpeechStopped { audio_end_ms } => {
                b.get_or_insert(audio_end_ms as usize);
            }
            _ => {}
        }
    }
    (a.expect("speech heard"), b.expect("the turn ended"))
}

/// A Python that imports `modules` (`$LFM2E_PYTHON`, else `python3`).
fn python_with(modules: &str, packages: &str) -> Option<String> {
    let py = std::env::var("LFM2E_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&py)
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Some(py)
    } else {
        missing(&format!(
            "no Python that imports {modules} (`{py}`): pip install {packages}, or set \
             LFM2E_PYTHON"
        ))
    }
}

/// Speech by espeak-ng at 24 kHz (PCM16); without espeak-ng a skip (a failure in CI).
fn speech_24k(text: &str) -> Option<Vec<i16>> {
    let dir = scratch(&format!("clients-espeak-{}", text.len()));
    espeak_24k(&dir.join("s.wav"), &["-v", "en-us"], text)
        .or_else(|| missing("no espeak-ng (the spoken questions): apt-get install espeak-ng"))
}

/// The library's replies (PCM16 bytes) to `turns` (question WAVs) in one conversation, with
/// `system` as the system prompt (`None`: the default) and the server's default step limit.
async fn library_replies(turns: Vec<Vec<u8>>, system: Option<&str>) -> Vec<Vec<u8>> {
    let model = model();
    let system = system.map(str::to_owned);
    tokio::task::spawn_blocking(move || {
        let mut s = Session::new(model, SessionOptions::default());
        let mut history: Vec<Artifact> = Vec::new();
        let mut out = Vec::new();
        for q in turns {
            let d = S2sOptions::default();
            let r = s
                .s2s(&S2sRequest {
                    question: q.clone().into(),
                    history: history.clone(),
                    return_codes: true,
                    s2s: S2sOptions {
                        system_prompt: system.clone().unwrap_or(d.system_prompt.clone()),
                        ..d
                    },
                })
                .unwrap();
            history.push(Artifact {
                id: QUESTION_ID.into(),
                kind: ArtifactKind::Custom,
                payload: q,
                meta: Default::default(),
            });
            history.push(r.artifact.clone().unwrap());
            out.push(serve::audio_io::pcm16(&r.reply.audio));
        }
        out
    })
    .await
    .unwrap()
}

/// The library's reply (PCM16 bytes) to the typed question `text`, first in a conversation,
/// with `system` as the system prompt and the server's default step limit.
async fn library_typed_reply(text: &str, system: &str) -> Vec<u8> {
    let (model, text, system) = (model(), text.to_owned(), system.to_owned());
    tokio::task::spawn_blocking(move || {
        let mut s = Session::new(model, SessionOptions::default());
        let r = s
            .s2s(&S2sRequest {
                question: Default::default(),
                history: vec![Artifact {
                    id: QUESTION_ID.into(),
                    kind: ArtifactKind::Text,
                    payload: text.into_bytes(),
                    meta: Default::default(),
                }],
                return_codes: true,
                s2s: S2sOptions {
                    system_prompt: system,
                    ..S2sOptions::default()
                },
            })
            .unwrap();
        serve::audio_io::pcm16(&r.reply.audio)
    })
    .await
    .unwrap()
}

/// Runs `script` with `args` (the scratch dir last) and reads its `report.json`.
async fn run_client(py: &str, script: &str, args: Vec<String>, dir: &std::path::Path) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(script);
    let mut cmd = Command::new(py);
    cmd.arg(&path).args(args);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let report = std::fs::read(dir.join("report.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    assert!(
        out.status.success(),
        "{script} failed\n{}\n{}\nreport: {report}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    report
}

/// The server event types a client script saw, in order (its report's `raw`).
fn raw_kinds(report: &Value) -> Vec<&str> {
    report["raw"]
        .as_array()
        .expect("the report lists the raw events")
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

/// A finished reply's status: completed, or stopped at the step limit exactly as OpenAI says
/// it (`incomplete`, reason `max_output_tokens`).
fn assert_finished(done: &Value) {
    match done["status"].as_str() {
        Some("completed") => assert_eq!(done["status_details"], Value::Null, "{done}"),
        Some("incomplete") => assert_eq!(
            done["status_details"],
            serde_json::json!({"type": "incomplete", "reason": "max_output_tokens"}),
            "{done}"
        ),
        _ => panic!("the reply did not finish: {done}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_sdk_at_its_defaults_answers_a_spoken_question_with_speech() {
    let Some(py) = python_with("agents.realtime", "openai-agents") else {
        return;
    };
    let Some(speech) = speech_24k("What is the capital of France?") else {
        return;
    };
    // The microphone keeps streaming after the question: silence, long enough for the turn
    // detection to end the turn while the reply comes.
    let stream = [silence(300), speech, silence(3_000)].concat();
    let srv = server().await;
    let dir = scratch("clients-agents");
    std::fs::write(dir.join("q.pcm"), pcm_bytes(&stream)).unwrap();
    let url = format!("ws://{}/v1/realtime?model={MODEL}", srv.addr);
    let report = run_client(
        &py,
        "realtime_agents.py",
        vec![url, dir.display().to_string()],
        &dir,
    )
    .await;
    assert_eq!(report["errors"], serde_json::json!([]), "{report}");
    // The SDK's default session was taken: semantic_vad and input transcription, echoed as
    // such.
    let session = report["sessions"].as_array().unwrap().last().unwrap();
    let input = &session["audio"]["input"];
    assert_eq!(input["turn_detection"]["type"], "semantic_vad", "{session}");
    assert_eq!(input["turn_detection"]["interrupt_response"], true);
    assert!(input["transcription"]["model"].is_string(), "{session}");
    // The user's transcript arrived, after the reply (transcription waits for it), and the
    // SDK put it in its history.
    let transcript = report["transcripts"][0].as_str().unwrap_or_default();
    assert!(!transcript.is_empty(), "{report}");
    assert_eq!(
        report["history_transcripts"],
        serde_json::json!([transcript]),
        "{report}"
    );
    assert_eq!(session["audio"]["output"]["voice"], "ash", "{session}");
    assert_eq!(
        session["instructions"], "You are a helpful voice assistant.",
        "{session}"
    );
    let raw = raw_kinds(&report);
    for kind in [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "response.created",
        "response.output_audio.delta",
    ] {
        assert!(raw.contains(&kind), "no {kind}: {raw:?}");
    }
    assert!(!raw.contains(&"error"), "{raw:?}");
    let done = &report["done"][0];
    assert_finished(done);
    // The reply is the library's S2S of what the server heard.
    let h = &report["heard"][0];
    let (a, b) = (
        h["start_ms"].as_u64().unwrap() as usize,
        h["end_ms"].as_u64().unwrap() as usize,
    );
    println!("the turn detection heard {a}..{b} ms");
    assert!(a <= 300 && b > 300, "{h}");
    let got = std::fs::read(dir.join("reply.pcm")).unwrap();
    assert!(!got.is_empty(), "no audio came back");
    // The agent's instructions are the session's system prompt.
    let want = library_replies(
        vec![wav_24k(&stream[a * 24..b * 24])],
        Some("You are a helpful voice assistant."),
    )
    .await;
    assert_eq!(got.len(), want[0].len(), "{done}");
    assert!(got == want[0], "the SDK's audio differs from the library's");
    println!(
        "first audio {} ms after the end of the turn",
        done["lfm2_audio"]["latency_ms"]
    );
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_sdk_send_message_is_answered_with_speech() {
    let Some(py) = python_with("agents.realtime", "openai-agents") else {
        return;
    };
    const Q: &str = "What is the capital of France?";
    let srv = server().await;
    let dir = scratch("clients-agents-text");
    std::fs::write(dir.join("q.txt"), Q).unwrap();
    let url = format!("ws://{}/v1/realtime?model={MODEL}", srv.addr);
    let report = run_client(
        &py,
        "realtime_agents.py",
        vec![url, dir.display().to_string(), "text".into()],
        &dir,
    )
    .await;
    assert_eq!(report["errors"], serde_json::json!([]), "{report}");
    let raw = raw_kinds(&report);
    assert!(!raw.contains(&"error"), "{raw:?}");
    for kind in [
        "conversation.item.added",
        "conversation.item.done",
        "response.created",
        "response.output_audio.delta",
    ] {
        assert!(raw.contains(&kind), "no {kind}: {raw:?}");
    }
    assert_finished(&report["done"][0]);
    // The spoken reply is the library's S2S of the typed question.
    let got = std::fs::read(dir.join("reply.pcm")).unwrap();
    let want = library_typed_reply(Q, "You are a helpful voice assistant.").await;
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the SDK's audio differs from the library's");
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_sdk_interrupt_cancels_and_truncates_the_reply_and_the_next_turn_goes_on() {
    let Some(py) = python_with("agents.realtime", "openai-agents") else {
        return;
    };
    let Some(speech) = speech_24k("Tell me a long story about a fox.") else {
        return;
    };
    let stream = [silence(300), speech, silence(2_000)].concat();
    let srv = server().await;
    let dir = scratch("clients-agents-interrupt");
    std::fs::write(dir.join("q.pcm"), pcm_bytes(&stream)).unwrap();
    let url = format!("ws://{}/v1/realtime?model={MODEL}", srv.addr);
    let report = run_client(
        &py,
        "realtime_agents.py",
        vec![url, dir.display().to_string(), "interrupt".into()],
        &dir,
    )
    .await;
    assert_eq!(report["errors"], serde_json::json!([]), "{report}");
    let raw = raw_kinds(&report);
    assert!(!raw.contains(&"error"), "{raw:?}");
    // At its defaults the SDK's interrupt() sends only the truncate (the session has
    // interrupt_response): the reply is cancelled by it, then cut where the client stopped.
    let first = &report["done"][0];
    assert_eq!(first["status"], "cancelled", "{first}");
    assert_eq!(first["status_details"]["reason"], "client_cancelled");
    let done_at = raw.iter().position(|k| *k == "response.done").unwrap();
    let truncated_at = raw
        .iter()
        .position(|k| *k == "conversation.item.truncated")
        .expect("the truncate is acknowledged");
    assert!(truncated_at > done_at, "{raw:?}");
    // The next turn is heard and answered, with the first one in its history.
    let second = &report["done"][1];
    assert_finished(second);
    assert_eq!(second["lfm2_audio"]["reused_questions"], 1, "{second}");
    assert_eq!(report["heard"].as_array().unwrap().len(), 2, "{report}");
    srv.shutdown().await.unwrap();
}

/// The client events of `kind` the client sent.
fn sent<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    report["client"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

/// The server events of `kind`.
fn received<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    report["server"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn livekit_update_chat_ctx_with_a_text_message_is_answered_with_speech() {
    let Some(py) = python_with(
        "livekit.plugins.openai",
        "livekit-agents livekit-plugins-openai",
    ) else {
        return;
    };
    const Q: &str = "Tell me about the weather.";
    let srv = server().await;
    let dir = scratch("clients-livekit-text");
    std::fs::write(dir.join("q.txt"), Q).unwrap();
    let report = run_client(
        &py,
        "realtime_livekit.py",
        vec![
            format!("http://{}/v1", srv.addr),
            MODEL.into(),
            dir.display().to_string(),
            "text".into(),
        ],
        &dir,
    )
    .await;
    assert_eq!(report["errors"], serde_json::json!([]), "{report}");
    assert!(received(&report, "error").is_empty(), "{report}");
    // update_chat_ctx created the message at the root and got its acks.
    let create = sent(&report, "conversation.item.create");
    assert_eq!(create.len(), 1, "{report}");
    assert_eq!(create[0]["previous_item_id"], "root", "{}", create[0]);
    let added = received(&report, "conversation.item.added");
    assert_eq!(added[0]["item"]["id"], create[0]["item"]["id"]);
    assert_eq!(added[0]["item"]["content"][0]["text"], Q);
    assert!(report["generate_reply_resolved"].is_string(), "{report}");
    let done = &report["done"][0];
    assert_finished(done);
    // The spoken reply is the library's S2S of the typed question, with the session's
    // system prompt.
    let system = received(&report, "session.updated")
        .last()
        .and_then(|u| u["session"]["instructions"].as_str().map(str::to_owned))
        .unwrap_or_else(|| S2sOptions::default().system_prompt);
    let got = std::fs::read(dir.join("reply.pcm")).unwrap();
    let want = library_typed_reply(Q, &system).await;
    assert_eq!(got.len(), want.len(), "{done}");
    assert!(got == want, "LiveKit's audio differs from the library's");
    // LiveKit's chat context holds the question then the reply.
    let ctx = report["chat_ctx"].as_array().unwrap();
    assert_eq!(
        ctx[0],
        serde_json::json!({"role": "user", "text": Q}),
        "{report}"
    );
    assert_eq!(ctx[1]["role"], "assistant", "{report}");
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn livekit_without_turn_detection_commits_generates_and_interrupts() {
    let Some(py) = python_with(
        "livekit.plugins.openai",
        "livekit-agents livekit-plugins-openai",
    ) else {
        return;
    };
    let Some(speech) = speech_24k("Tell me about the weather.") else {
        return;
    };
    let q = [silence(200), speech, silence(200)].concat();
    let srv = server().await;
    let dir = scratch("clients-livekit-manual");
    std::fs::write(dir.join("q.pcm"), pcm_bytes(&q)).unwrap();
    let report = run_client(
        &py,
        "realtime_livekit.py",
        vec![
            format!("http://{}/v1", srv.addr),
            MODEL.into(),
            dir.display().to_string(),
            "manual".into(),
        ],
        &dir,
    )
    .await;
    assert!(
        report["generate_reply_resolved"].is_string(),
        "generate_reply did not resolve: {report}"
    );
    assert_eq!(
        report["errors"],
        serde_json::json!([]),
        "{}",
        report["errors"]
    );
    assert!(received(&report, "error").is_empty(), "{report}");
    // Its sessions: turn detection off, the instructions taken.
    let updated = received(&report, "session.updated");
    let last = &updated.last().unwrap()["session"];
    assert_eq!(
        last["audio"]["input"]["turn_detection"],
        Value::Null,
        "{last}"
    );
    assert_eq!(
        last["instructions"], "Answer in one short sentence.",
        "{last}"
    );
    // Its tools are echoed and listed in the system turn (below).
    assert_eq!(last["tools"][0]["name"], "get_weather", "{last}");
    assert_eq!(last["tools"][0]["type"], "function", "{last}");
    let tools: Vec<Value> = last["tools"].as_array().unwrap().clone();
    // Each response.create's metadata comes back on its response.created and response.done.
    let creates = sent(&report, "response.create");
    let created = received(&report, "response.created");
    let done = received(&report, "response.done");
    assert_eq!((creates.len(), created.len(), done.len()), (2, 2, 2));
    for i in 0..2 {
        let meta = &creates[i]["response"]["metadata"];
        assert_eq!(meta["client_event_id"], creates[i]["event_id"], "{meta}");
        assert_eq!(&created[i]["response"]["metadata"], meta);
        assert_eq!(&done[i]["response"]["metadata"], meta);
        assert_eq!(
            created[i]["response"]["output_modalities"],
            serde_json::json!(["audio"])
        );
        assert!(created[i]["response"]["conversation_id"].is_string());
    }
    assert_finished(&done[0]["response"]);
    // The interrupted one: cancelled by the client.
    assert_eq!(done[1]["response"]["status"], "cancelled", "{}", done[1]);
    assert_eq!(
        done[1]["response"]["status_details"]["reason"],
        "client_cancelled"
    );
    // The first reply is the library's S2S of the committed question with those instructions
    // and the tools in LFM2's form after them.
    let got = std::fs::read(dir.join("reply.pcm")).unwrap();
    let system = audio_engine::lfm2_audio::tools::tool_system_prompt(
        "Answer in one short sentence.",
        &tools,
    );
    let want = library_replies(vec![wav_24k(&q)], Some(&system)).await;
    assert_eq!(got.len(), want[0].len());
    assert!(got == want[0], "LiveKit's audio differs from the library's");
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn livekit_at_its_defaults_hears_the_turn_and_answers_it() {
    let Some(py) = python_with(
        "livekit.plugins.openai",
        "livekit-agents livekit-plugins-openai",
    ) else {
        return;
    };
    let Some(speech) = speech_24k("What is the capital of France?") else {
        return;
    };
    let stream = [silence(300), speech, silence(3_000)].concat();
    let srv = server().await;
    let dir = scratch("clients-livekit-default");
    std::fs::write(dir.join("q.pcm"), pcm_bytes(&stream)).unwrap();
    let report = run_client(
        &py,
        "realtime_livekit.py",
        vec![
            format!("http://{}/v1", srv.addr),
            MODEL.into(),
            dir.display().to_string(),
            "default".into(),
        ],
        &dir,
    )
    .await;
    assert_eq!(
        report["errors"],
        serde_json::json!([]),
        "{}",
        report["errors"]
    );
    assert!(received(&report, "error").is_empty(), "{report}");
    assert_eq!(report["server_initiated"], true);
    let first = &received(&report, "session.updated")[0]["session"];
    let td = &first["audio"]["input"]["turn_detection"];
    assert_eq!(td["type"], "semantic_vad", "{first}");
    let start = received(&report, "input_audio_buffer.speech_started");
    let stop = received(&report, "input_audio_buffer.speech_stopped");
    let (a, b) = (
        start[0]["audio_start_ms"].as_u64().unwrap() as usize,
        stop[0]["audio_end_ms"].as_u64().unwrap() as usize,
    );
    let done = received(&report, "response.done");
    assert_finished(&done[0]["response"]);
    let got = std::fs::read(dir.join("reply.pcm")).unwrap();
    let want = library_replies(vec![wav_24k(&stream[a * 24..b * 24])], None).await;
    assert_eq!(got.len(), want[0].len());
    assert!(got == want[0], "LiveKit's audio differs from the library's");
    srv.shutdown().await.unwrap();
}

/// The README's Python block that follows `marker`, its base URL (`base`, which it must name)
/// replaced by `with`.
fn readme_snippet(marker: &str, base: &str, with: &str) -> String {
    let readme = readme();
    let at = readme
        .find(marker)
        .unwrap_or_else(|| panic!("the README's {marker:?}"));
    let rest = &readme[at..];
    let open = rest.find("```python\n").expect("its python block") + "```python\n".len();
    let close = rest[open..].find("\n```").unwrap() + open;
    let code = &rest[open..close];
    assert!(code.contains(base), "the snippet names {base}");
    code.replace(base, with)
}

/// Runs `code` as `example.py` in `dir` (which holds its `q.wav`); its `reply.pcm`.
async fn run_snippet(py: &str, code: String, dir: &std::path::Path) -> Vec<u8> {
    std::fs::write(dir.join("example.py"), code).unwrap();
    let mut cmd = Command::new(py);
    cmd.arg("example.py").current_dir(dir);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(dir.join("reply.pcm")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_client_snippets_run_and_their_replies_equal_the_library_s2s() {
    let Some(py) = python_with(
        "agents.realtime, livekit.plugins.openai",
        "openai-agents livekit-agents livekit-plugins-openai",
    ) else {
        return;
    };
    let Some(speech) = speech_24k("Where is the nearest train station?") else {
        return;
    };
    let q = [silence(300), speech].concat();
    let srv = server().await;

    // The Agents SDK: the server's turn detection (semantic_vad at `auto`: smart-turn's checks,
    // or without its weights the segmenter with 500 ms of silence) hears the question in q.wav
    // and the 3 s of silence the snippet adds; where it ends depends only on the audio.
    let dir = scratch("clients-readme-agents");
    std::fs::write(dir.join("q.wav"), wav_24k(&q)).unwrap();
    let code = readme_snippet(
        "The OpenAI Agents SDK (`pip install openai-agents`)",
        "ws://127.0.0.1:8080/v1",
        &format!("ws://{}/v1", srv.addr),
    );
    let got = run_snippet(&py, code, &dir).await;
    let heard = [q.clone(), silence(3_000)].concat();
    let (a, b) = semantic_turn(&heard);
    let want = library_replies(
        vec![wav_24k(&heard[a * 24..b * 24])],
        Some("You are a helpful voice assistant."),
    )
    .await;
    assert_eq!(got.len(), want[0].len());
    assert!(got == want[0], "the Agents SDK snippet's reply differs");

    // LiveKit, turn detection off: the commit holds all of q.wav.
    let dir = scratch("clients-readme-livekit");
    std::fs::write(dir.join("q.wav"), wav_24k(&q)).unwrap();
    let code = readme_snippet(
        "LiveKit Agents' OpenAI realtime client",
        "http://127.0.0.1:8080/v1",
        &format!("http://{}/v1", srv.addr),
    );
    let got = run_snippet(&py, code, &dir).await;
    let want = library_replies(vec![wav_24k(&q)], None).await;
    assert_eq!(got.len(), want[0].len());
    assert!(got == want[0], "the LiveKit snippet's reply differs");
    srv.shutdown().await.unwrap();
}
