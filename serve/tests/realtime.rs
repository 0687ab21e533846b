//! `GET /v1/realtime`, the OpenAI Realtime-compatible WebSocket, on the demo package: bad
//! events answered with `error` events on a socket that stays usable (and a second socket
//! served meanwhile); a cancelled, truncated reply whose next turn equals a fresh session's
//! S2S given the truncated history, byte for byte; a disconnect mid-response that gives the
//! session back; and the official OpenAI Python SDK as a client (`realtime_client.py`), its
//! audio equal to the library's S2S of the same questions, byte for byte (skipped without a
//! Python that imports `openai` and `websockets`: `$LFM2E_PYTHON`, else `python3`).

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use futures_util::SinkExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use audio_engine::lfm2_audio::conversation::{truncate_reply, FRAME_MS};
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{
    Artifact, ArtifactKind, ReplyEvent, S2sOptions, S2sRequest, Session, SessionOptions,
    QUESTION_ID,
};
use common::realtime::*;
use common::*;

/// A deterministic 24 kHz question, different per `i` (1 s + 0.25 s per i).
fn question_pcm(i: usize) -> Vec<i16> {
    let n = 24_000 + 6_000 * i;
    (0..n)
        .map(|t| ((((t * (5 + 2 * i)) % 600) as i32 - 300) * 50) as i16)
        .collect()
}

fn question_artifact(wav: &[u8]) -> Artifact {
    Artifact {
        id: QUESTION_ID.into(),
        kind: ArtifactKind::Custom,
        payload: wav.to_vec(),
        meta: Default::default(),
    }
}

fn request(question: &[u8], history: Vec<Artifact>, max: usize) -> S2sRequest {
    S2sRequest {
        question: question.to_vec().into(),
        history,
        return_codes: true,
        s2s: S2sOptions {
            max_new_tokens: max,
            ..S2sOptions::default()
        },
    }
}

/// Sends `v` and expects an `error` event with `code`, answering `v`'s event_id.
async fn expect_error(ws: &mut Ws, v: Value, code: &str) {
    let id = v["event_id"].clone();
    send(ws, v.clone()).await;
    let e = next(ws).await;
    assert_eq!(e["type"], "error", "{v} -> {e}");
    assert_eq!(e["error"]["code"], code, "{v} -> {e}");
    assert_eq!(e["error"]["type"], "invalid_request_error", "{e}");
    assert_eq!(e["error"]["event_id"], id, "{e}");
    assert!(e["event_id"].is_string(), "{e}");
}

/// Appends `pcm` in 100 ms chunks.
async fn append(ws: &mut Ws, pcm: &[i16]) {
    for chunk in pcm.chunks(2_400) {
        send(
            ws,
            json!({"type": "input_audio_buffer.append", "audio": b64(&pcm_bytes(chunk))}),
        )
        .await;
    }
}

/// Commits the buffer and reads `committed` and the item's events; the item id.
async fn commit(ws: &mut Ws) -> String {
    send(ws, json!({"type": "input_audio_buffer.commit"})).await;
    let c = next(ws).await;
    assert_eq!(c["type"], "input_audio_buffer.committed", "{c}");
    let added = next(ws).await;
    assert_eq!(added["type"], "conversation.item.added", "{added}");
    assert_eq!(added["item"]["id"], c["item_id"]);
    assert_eq!(next(ws).await["type"], "conversation.item.done");
    c["item_id"].as_str().unwrap().to_owned()
}

/// The PCM of a response's audio deltas and its `response.done`.
fn response_audio(events: &[Value]) -> (Vec<u8>, Value) {
    let mut pcm = Vec::new();
    for e in events {
        if e["type"] == "response.output_audio.delta" {
            pcm.extend(unb64(e["delta"].as_str().unwrap()));
        }
    }
    (pcm, events.last().unwrap()["response"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_events_get_error_events_and_the_sockets_stay_usable() {
    let srv = server().await;
    let mut ws = connect(&srv, "").await;
    send(
        &mut ws,
        json!({"type": "session.update", "session": {"type": "realtime"}}),
    )
    .await;
    assert_eq!(next(&mut ws).await["type"], "session.updated");

    ws.send(Message::text("{not json")).await.unwrap();
    let e = next(&mut ws).await;
    assert_eq!(e["error"]["code"], "invalid_json", "{e}");
    // A 20 MiB append: past the longest question (60 s), refused before it is decoded.
    let big = "A".repeat(20 << 20);
    let bad = [
        (
            json!({"type": "no.such.event", "event_id": "e1"}),
            "unknown_event",
        ),
        (json!({"event_id": "e2"}), "missing_type"),
        (
            json!({"type": "input_audio_buffer.append", "audio": "!!!not base64", "event_id": "e3"}),
            "invalid_base64",
        ),
        (
            json!({"type": "input_audio_buffer.append", "audio": b64(&[1, 2, 3]), "event_id": "e4"}),
            "invalid_audio",
        ),
        (
            json!({"type": "input_audio_buffer.append", "audio": big, "event_id": "e5"}),
            "input_audio_buffer_full",
        ),
        (
            json!({"type": "input_audio_buffer.commit", "event_id": "e6"}),
            "input_audio_buffer_commit_empty",
        ),
        (
            json!({"type": "response.create", "event_id": "e7"}),
            "conversation_empty",
        ),
        (
            json!({"type": "response.cancel", "event_id": "e8"}),
            "response_cancel_not_active",
        ),
        (
            json!({"type": "conversation.item.truncate", "item_id": "item_x", "content_index": 0,
                   "audio_end_ms": 10, "event_id": "e9"}),
            "item_not_found",
        ),
        (
            json!({"type": "session.update", "event_id": "e10",
                   "session": {"audio": {"input": {"format": {"type": "audio/pcm", "rate": 8000}}}}}),
            "invalid_value",
        ),
        (
            json!({"type": "session.update", "event_id": "e12",
                   "session": {"audio": {"input": {"turn_detection": {"type": "server_vad", "threshold": 1.5}}}}}),
            "invalid_value",
        ),
    ];
    for (event, code) in bad {
        expect_error(&mut ws, event, code).await;
    }
    // A bad update changes nothing: the session is still at 24 kHz.
    send(&mut ws, json!({"type": "session.update", "session": {}})).await;
    let u = next(&mut ws).await;
    assert_eq!(
        u["session"]["audio"]["input"]["format"]["rate"], 24_000,
        "{u}"
    );

    // Usable: a question (with the 20 MiB append not in it), and two responses at once.
    append(&mut ws, &question_pcm(0)).await;
    commit(&mut ws).await;
    send(
        &mut ws,
        json!({"type": "response.create", "response": {"max_output_tokens": 30}}),
    )
    .await;
    assert_eq!(next(&mut ws).await["type"], "response.created");
    send(
        &mut ws,
        json!({"type": "response.create", "event_id": "e11"}),
    )
    .await;
    // The running response's events go on around the error.
    let mut first = until(&mut ws, "error").await;
    let e = first.pop().unwrap();
    assert_eq!(
        e["error"]["code"], "conversation_already_has_active_response",
        "{e}"
    );
    assert_eq!(e["error"]["event_id"], "e11", "{e}");
    // Meanwhile a second socket runs a whole turn.
    let mut other = connect(&srv, "").await;
    append(&mut other, &question_pcm(1)).await;
    commit(&mut other).await;
    send(
        &mut other,
        json!({"type": "response.create", "response": {"max_output_tokens": 30}}),
    )
    .await;
    let (pcm, done) = response_audio(&until(&mut other, "response.done").await);
    assert!(!pcm.is_empty());
    assert_ne!(done["status"], "failed", "{done}");
    // And the first socket's response ends normally.
    first.extend(until(&mut ws, "response.done").await);
    let (pcm, done) = response_audio(&first);
    assert!(!pcm.is_empty());
    assert_eq!(done["usage"]["output_tokens"], 30, "{done}");
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_truncated_reply_is_the_history_of_the_next_turn() {
    let srv = server().await;
    let mut ws = connect(&srv, "").await;
    let (q0, q1) = (question_pcm(0), question_pcm(1));
    append(&mut ws, &q0).await;
    commit(&mut ws).await;
    send(
        &mut ws,
        json!({"type": "response.create", "response": {"max_output_tokens": 4000}}),
    )
    .await;
    // Cancel once 4 audio deltas have come.
    let mut events = Vec::new();
    let mut deltas = 0;
    while deltas < 4 {
        let e = next(&mut ws).await;
        deltas += usize::from(e["type"] == "response.output_audio.delta");
        assert_ne!(
            e["type"], "response.done",
            "the reply ended before the cancel: {e}"
        );
        events.push(e);
    }
    send(&mut ws, json!({"type": "response.cancel"})).await;
    events.extend(until(&mut ws, "response.done").await);
    let (pcm, done) = response_audio(&events);
    assert_eq!(done["status"], "cancelled", "{done}");
    assert_eq!(
        done["status_details"]["reason"], "client_cancelled",
        "{done}"
    );
    let heard_ms = (pcm.len() / 2 * 1000 / 24_000) as u64;
    assert!(heard_ms > 2 * FRAME_MS, "{heard_ms} ms");
    let item_id = done["output"][0]["id"].as_str().unwrap().to_owned();
    // Past the audio sent: refused. Then a cut in the middle of a frame.
    expect_error(
        &mut ws,
        json!({"type": "conversation.item.truncate", "item_id": item_id, "content_index": 0,
               "audio_end_ms": heard_ms + 1000}),
        "invalid_audio_end_ms",
    )
    .await;
    let cut_ms = heard_ms / 2 + FRAME_MS / 2;
    send(
        &mut ws,
        json!({"type": "conversation.item.truncate", "item_id": item_id, "content_index": 0,
               "audio_end_ms": cut_ms}),
    )
    .await;
    let t = next(&mut ws).await;
    assert_eq!(t["type"], "conversation.item.truncated", "{t}");
    assert_eq!(t["audio_end_ms"], cut_ms);
    send(
        &mut ws,
        json!({"type": "conversation.item.retrieve", "item_id": item_id}),
    )
    .await;
    let r = next(&mut ws).await;
    assert_eq!(r["type"], "conversation.item.retrieved", "{r}");
    assert_eq!(r["item"]["status"], "incomplete", "{r}");
    let cut_text = r["item"]["content"][0]["transcript"]
        .as_str()
        .unwrap()
        .to_owned();
    let sent_text = done["output"][0]["content"][0]["transcript"]
        .as_str()
        .unwrap()
        .to_owned();
    println!("transcript {sent_text:?} cut at {cut_ms} ms to {cut_text:?}");

    append(&mut ws, &q1).await;
    commit(&mut ws).await;
    send(
        &mut ws,
        json!({"type": "response.create", "response": {"max_output_tokens": 40}}),
    )
    .await;
    let (got, done2) = response_audio(&until(&mut ws, "response.done").await);
    assert_ne!(done2["status"], "failed", "{done2}");
    assert_eq!(done2["lfm2_audio"]["reused_questions"], 1, "{done2}");

    // The library: the first reply generated as far as the cut needs, cut there with
    // truncate_reply, then a fresh session answers the second question given that history.
    let model = model();
    let (w0, w1) = (wav_24k(&q0), wav_24k(&q1));
    let expected = tokio::task::spawn_blocking(move || {
        let mut s = Session::new(model.clone(), SessionOptions::default());
        let mut samples = 0usize;
        let need = ((cut_ms + FRAME_MS) * 24) as usize;
        let first = s
            .run(
                &audio_engine::lfm2_audio::Job::S2s(request(&w0, vec![], 4000)),
                &mut |ev| {
                    if let ReplyEvent::Audio(a) = &ev {
                        samples += a.len();
                    }
                    samples < need
                },
            )
            .unwrap();
        let fmt = model.reply_format();
        let cut = truncate_reply(first.artifact.as_ref().unwrap(), &fmt, cut_ms).unwrap();
        // The cut reply's transcript: its text up to the last frame kept, a prefix of the text.
        assert!(
            first.text.starts_with(&cut_text),
            "{cut_text:?} vs {:?}",
            first.text
        );
        assert!(cut_text.len() <= sent_text.len());
        let mut fresh = Session::new(model.clone(), SessionOptions::default());
        let r = fresh
            .s2s(&request(&w1, vec![question_artifact(&w0), cut], 40))
            .unwrap();
        serve::audio_io::pcm16(&r.reply.audio)
    })
    .await
    .unwrap();
    assert_eq!(got.len(), expected.len());
    assert!(
        got == expected,
        "the second turn differs from the library's"
    );
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnect_mid_response_gives_the_session_back_and_a_reconnect_starts_clean() {
    let mut s = settings();
    s.slots = 1;
    let srv = server_with(s).await;
    let client = reqwest::Client::new();
    let mut ws = connect(&srv, "").await;
    append(&mut ws, &question_pcm(0)).await;
    commit(&mut ws).await;
    send(
        &mut ws,
        json!({"type": "response.create", "response": {"max_output_tokens": 4000}}),
    )
    .await;
    let first_audio = loop {
        let e = next(&mut ws).await;
        assert_ne!(e["type"], "response.done", "{e}");
        if e["type"] == "response.output_audio.delta" {
            break e;
        }
    };
    assert!(first_audio["delta"].is_string());
    let m = get_text(&client, &url(&srv, "/metrics")).await;
    assert_eq!(metric_sum(&m, "serve_sessions_active"), 1.0, "{m}");
    let t = Instant::now();
    drop(ws);
    let pool = srv.state.entries[0].pool.clone();
    while pool.active() > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the session never came back"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!("session back {:?} after the disconnect", t.elapsed());
    let m = get_text(&client, &url(&srv, "/metrics")).await;
    assert_eq!(metric_sum(&m, "serve_sessions_active"), 0.0, "{m}");
    assert_eq!(metric_sum(&m, "serve_client_disconnects_total"), 1.0, "{m}");

    // A new socket is a new conversation: nothing to answer yet, then a turn of its own.
    let mut ws = connect(&srv, "").await;
    expect_error(
        &mut ws,
        json!({"type": "response.create"}),
        "conversation_empty",
    )
    .await;
    append(&mut ws, &question_pcm(1)).await;
    commit(&mut ws).await;
    send(
        &mut ws,
        json!({"type": "response.create", "response": {"max_output_tokens": 20}}),
    )
    .await;
    let (pcm, done) = response_audio(&until(&mut ws, "response.done").await);
    assert!(!pcm.is_empty());
    assert_eq!(done["lfm2_audio"]["reused_questions"], 0, "{done}");
    // An idle socket holds no session: the only one is free while this socket stays open.
    let t = Instant::now();
    while pool.active() > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the idle socket keeps its session"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let r = client
        .post(url(&srv, "/v1/tasks/run"))
        .json(&task(
            MODEL,
            json!({"audio": b64(&question(0)), "max_tokens": 5}),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    drop(ws);
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_api_key_the_socket_needs_the_bearer_token() {
    let mut s = settings();
    s.api_key = Some("sekret".into());
    let srv = server_with(s).await;
    let url = format!("ws://{}/v1/realtime?model={MODEL}", srv.addr);
    let refused = tokio_tungstenite::connect_async(url.as_str()).await;
    match refused {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => assert_eq!(r.status(), 401),
        other => panic!(
            "connected without the key: {:?}",
            other.map(|(_, r)| r.status())
        ),
    }
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req = url.into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", "Bearer sekret".parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    assert_eq!(next(&mut ws).await["type"], "session.created");
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beta_clients_get_the_beta_event_names() {
    let srv = server().await;
    let mut ws = connect(&srv, "&beta=1").await;
    send(
        &mut ws,
        json!({"type": "session.update",
                         "session": {"input_audio_format": "pcm16", "turn_detection": null}}),
    )
    .await;
    let u = next(&mut ws).await;
    assert_eq!(u["session"]["input_audio_format"], "pcm16", "{u}");
    append(&mut ws, &question_pcm(0)).await;
    send(&mut ws, json!({"type": "input_audio_buffer.commit"})).await;
    assert_eq!(next(&mut ws).await["type"], "input_audio_buffer.committed");
    assert_eq!(next(&mut ws).await["type"], "conversation.item.created");
    send(
        &mut ws,
        json!({"type": "response.create", "response": {"max_output_tokens": 20}}),
    )
    .await;
    let events = until(&mut ws, "response.done").await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(kinds.contains(&"response.audio.delta"), "{kinds:?}");
    assert!(!kinds.contains(&"response.output_audio.delta"), "{kinds:?}");
    assert!(kinds.contains(&"response.audio.done"), "{kinds:?}");
    srv.shutdown().await.unwrap();
}

/// A Python that imports `openai` and `websockets` (`$LFM2E_PYTHON`, else `python3`).
fn python_with_realtime_sdk() -> Option<String> {
    let py = std::env::var("LFM2E_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&py)
        .args(["-c", "import openai, websockets"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(py)
}

/// Runs `realtime_client.py` on two questions streamed as `streams` (with `vad`: server VAD
/// commits them); checks each reply's PCM against the library's S2S of the question the server
/// committed (all of a stream, or the VAD's range of it) and the second turn's reuse.
async fn sdk_two_turns(py: &str, streams: [Vec<i16>; 2], vad: bool) {
    let srv = server().await;
    let dir = scratch(if vad {
        "realtime-sdk-vad"
    } else {
        "realtime-sdk"
    });
    for (i, q) in streams.iter().enumerate() {
        std::fs::write(dir.join(format!("q{i}.pcm")), pcm_bytes(q)).unwrap();
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/realtime_client.py");
    let mut cmd = Command::new(py);
    cmd.arg(&script)
        .arg(format!("ws://{}/v1", srv.addr))
        .arg(MODEL)
        .arg(&dir);
    if vad {
        cmd.arg("vad");
    }
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
    // The questions the server committed: with VAD, the range it heard on the socket's
    // timeline (all audio appended, both streams one after the other).
    let all: Vec<i16> = streams.concat();
    let questions: Vec<Vec<u8>> = (0..2)
        .map(|i| {
            if !vad {
                return wav_24k(&streams[i]);
            }
            let h = &report["turns"][i]["heard"];
            let (a, b) = (
                h["start_ms"].as_u64().unwrap(),
                h["end_ms"].as_u64().unwrap(),
            );
            println!("turn {i}: the VAD heard {a}..{b} ms");
            wav_24k(&all[a as usize * 24..b as usize * 24])
        })
        .collect();
    let model = model();
    let qs = questions.clone();
    let expected = tokio::task::spawn_blocking(move || {
        let mut s = Session::new(model, SessionOptions::default());
        let a = s.s2s(&request(&qs[0], vec![], 40)).unwrap();
        let history = vec![question_artifact(&qs[0]), a.artifact.clone().unwrap()];
        let b = s.s2s(&request(&qs[1], history, 40)).unwrap();
        [a, b].map(|t| serve::audio_io::pcm16(&t.reply.audio))
    })
    .await
    .unwrap();
    for (i, want) in expected.iter().enumerate() {
        let turn = &report["turns"][i];
        let got = std::fs::read(dir.join(format!("reply{i}.pcm"))).unwrap();
        assert_eq!(got.len(), want.len(), "turn {i}: {turn}");
        assert!(
            &got == want,
            "turn {i}: the SDK's audio differs from the library's"
        );
        let status = turn["done"]["status"].as_str().unwrap();
        assert!(["completed", "incomplete"].contains(&status), "{turn}");
    }
    let second = &report["turns"][1]["done"]["lfm2_audio"];
    assert_eq!(second["reused_questions"], 1, "{second}");
    assert!(
        second["resumed_prefill_positions"].as_u64().unwrap() > 0,
        "{second}"
    );
    assert_eq!(second["affinity"], true, "{second}");
    println!(
        "first audio after the end of the turn: {:?} ms",
        report["turns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["done"]["lfm2_audio"]["latency_ms"].clone())
            .collect::<Vec<_>>()
    );
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_python_sdk_streams_two_turns_equal_to_the_library_s2s() {
    let Some(py) = python_with_realtime_sdk() else {
        ci_skip::skip(
            "the_openai_python_sdk_streams_two_turns_equal_to_the_library_s2s",
            "no Python with `openai[realtime]` (pip install 'openai[realtime]', or set \
             LFM2E_PYTHON to one)",
        );
        return;
    };
    sdk_two_turns(&py, [question_pcm(0), question_pcm(1)], false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_python_sdk_with_server_vad_equals_the_library_s2s_of_what_it_committed() {
    let Some(py) = python_with_realtime_sdk() else {
        ci_skip::skip(
            "the_openai_python_sdk_with_server_vad_equals_the_library_s2s_of_what_it_committed",
            "no Python with `openai[realtime]` (pip install 'openai[realtime]', or set \
             LFM2E_PYTHON to one)",
        );
        return;
    };
    let (Some(s0), Some(s1)) = (
        speech_24k("Good morning, how are you?"),
        speech_24k("Please say that again, slowly."),
    ) else {
        ci_skip::skip(
            "the_openai_python_sdk_with_server_vad_equals_the_library_s2s_of_what_it_committed",
            "espeak-ng did not run (apt-get install espeak-ng)",
        );
        return;
    };
    let pad = |s: Vec<i16>| [silence(400), s, silence(1000)].concat();
    sdk_two_turns(&py, [pad(s0), pad(s1)], true).await;
}

/// The README's Realtime example, as written (the base URL replaced), run in a scratch
/// directory holding its `q.wav`: its `reply.pcm` equals the library's S2S of that question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_realtime_example_runs_and_its_reply_equals_the_library_s2s() {
    let Some(py) = python_with_realtime_sdk() else {
        ci_skip::skip(
            "the_readme_realtime_example_runs_and_its_reply_equals_the_library_s2s",
            "no Python with `openai[realtime]` (pip install 'openai[realtime]', or set \
             LFM2E_PYTHON to one)",
        );
        return;
    };
    let readme = readme();
    let marker = "Realtime with the OpenAI Python SDK";
    let at = readme.find(marker).expect("the README's Realtime example");
    let rest = &readme[at..];
    let open = rest.find("```python\n").expect("its python block") + "```python\n".len();
    let close = rest[open..].find("\n```").unwrap() + open;
    let base = "ws://127.0.0.1:8080/v1";
    assert!(rest[open..close].contains(base), "the example names {base}");
    let srv = server().await;
    let code = rest[open..close].replace(base, &format!("ws://{}/v1", srv.addr));
    let max: usize = code
        .split("\"max_output_tokens\": ")
        .nth(1)
        .and_then(|s| s.split('}').next())
        .and_then(|s| s.trim().parse().ok())
        .expect("the example sets max_output_tokens");
    let dir = scratch("realtime-readme");
    let q = question_pcm(2);
    std::fs::write(dir.join("q.wav"), wav_24k(&q)).unwrap();
    std::fs::write(dir.join("example.py"), &code).unwrap();
    let mut cmd = Command::new(&py);
    cmd.arg("example.py").current_dir(&dir);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = std::fs::read(dir.join("reply.pcm")).unwrap();
    let model = model();
    let w = wav_24k(&q);
    let want = tokio::task::spawn_blocking(move || {
        let mut s = Session::new(model, SessionOptions::default());
        let r = s.s2s(&request(&w, vec![], max)).unwrap();
        (serve::audio_io::pcm16(&r.reply.audio), r.reply.text)
    })
    .await
    .unwrap();
    assert_eq!(got.len(), want.0.len(), "{stdout}");
    assert!(
        got == want.0,
        "the example's reply differs from the library's"
    );
    assert!(stdout.starts_with(&want.1), "{stdout:?} vs {:?}", want.1);
    srv.shutdown().await.unwrap();
}

/// Speech by espeak-ng at 24 kHz (PCM16), or `None` without espeak-ng.
fn speech_24k(text: &str) -> Option<Vec<i16>> {
    let dir = scratch(&format!("espeak-{}", text.len()));
    espeak_24k(&dir.join("s.wav"), &["-v", "en-us"], text)
}

/// `s` without its quiet end (below -50 dBFS).
fn trim_end(mut s: Vec<i16>) -> Vec<i16> {
    let loud = s
        .iter()
        .rposition(|v| v.unsigned_abs() > 100)
        .map_or(0, |i| i + 1);
    s.truncate(loud);
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_vad_commits_answers_and_is_interrupted_by_speech() {
    let (Some(s0), Some(s1)) = (
        speech_24k("What is the weather like in Paris today?"),
        speech_24k("Tell me a story about a small red fox."),
    ) else {
        ci_skip::skip(
            "server_vad_commits_answers_and_is_interrupted_by_speech",
            "espeak-ng did not run (apt-get install espeak-ng)",
        );
        return;
    };
    let srv = server().await;
    let mut ws = connect(&srv, "").await;
    send(
        &mut ws,
        json!({"type": "session.update", "session": {"type": "realtime",
        "max_output_tokens": 40,
        "audio": {"input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 500,
                                                "prefix_padding_ms": 300}}}}}),
    )
    .await;
    let u = next(&mut ws).await;
    assert_eq!(
        u["session"]["audio"]["input"]["turn_detection"]["type"], "server_vad",
        "{u}"
    );
    // Turn 1: speech padded with silence; the VAD commits it and a response starts by itself.
    let stream: Vec<i16> = [silence(500), s0.clone(), silence(1200)].concat();
    append(&mut ws, &stream).await;
    let events = until(&mut ws, "response.done").await;
    let kind = |k: &str| {
        events
            .iter()
            .find(|e| e["type"] == k)
            .cloned()
            .unwrap_or_else(|| {
                panic!(
                    "no {k} in {:?}",
                    events.iter().map(|e| e["type"].clone()).collect::<Vec<_>>()
                )
            })
    };
    let started = kind("input_audio_buffer.speech_started");
    let stopped = kind("input_audio_buffer.speech_stopped");
    let committed = kind("input_audio_buffer.committed");
    assert_eq!(started["item_id"], stopped["item_id"]);
    assert_eq!(committed["item_id"], stopped["item_id"]);
    let (a, b) = (
        started["audio_start_ms"].as_u64().unwrap(),
        stopped["audio_end_ms"].as_u64().unwrap(),
    );
    println!(
        "speech 500..{} ms heard as {a}..{b} ms",
        500 + s0.len() / 24
    );
    assert!(
        a <= 500 && b > 500 && b <= (500 + s0.len() / 24 + 100) as u64,
        "{a}..{b}"
    );
    let (got, done) = response_audio(&events);
    assert_ne!(done["status"], "failed", "{done}");
    // The question is the audio between the VAD's marks: the library's S2S of it, byte for byte.
    let q0 = stream[a as usize * 24..b as usize * 24].to_vec();
    let w0 = wav_24k(&q0);
    let model = model();
    let want = tokio::task::spawn_blocking(move || {
        let mut s = Session::new(model, SessionOptions::default());
        serve::audio_io::pcm16(&s.s2s(&request(&w0, vec![], 40)).unwrap().reply.audio)
    })
    .await
    .unwrap();
    assert!(
        got == want,
        "the VAD turn differs from the library's S2S of its audio"
    );

    // Turn 2 runs long; speech during it cancels it (barge-in) and is the next question.
    send(
        &mut ws,
        json!({"type": "session.update", "session": {"max_output_tokens": 4000}}),
    )
    .await;
    assert_eq!(next(&mut ws).await["type"], "session.updated");
    append(&mut ws, &[s1.clone(), silence(1200)].concat()).await;
    loop {
        let e = next(&mut ws).await;
        assert_ne!(e["type"], "response.done", "{e}");
        if e["type"] == "response.output_audio.delta" {
            break;
        }
    }
    append(&mut ws, &[s0, silence(1200)].concat()).await;
    let events = until(&mut ws, "response.done").await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    let at = kinds
        .iter()
        .position(|k| *k == "input_audio_buffer.speech_started")
        .expect("speech_started");
    let done = &events.last().unwrap()["response"];
    assert_eq!(done["status"], "cancelled", "{done}");
    assert_eq!(done["status_details"]["reason"], "turn_detected", "{done}");
    // After the barge-in no audio of the cancelled reply is sent.
    assert!(
        !kinds[at..].contains(&"response.output_audio.delta"),
        "{kinds:?}"
    );
    // The interrupting speech is answered next, by itself.
    let events = until(&mut ws, "response.created").await;
    assert!(events
        .iter()
        .any(|e| e["type"] == "input_audio_buffer.committed"));
    send(&mut ws, json!({"type": "response.cancel"})).await;
    let done = until(&mut ws, "response.done").await.pop().unwrap();
    assert_eq!(done["response"]["status"], "cancelled", "{done}");
    assert_eq!(
        done["response"]["lfm2_audio"]["reused_questions"], 2,
        "{done}"
    );
    srv.shutdown().await.unwrap();
}

/// A client truncates right after it cancels (or after the VAD's `speech_started`), while the
/// cancelled reply is still stopping: the cut waits for the reply's end and is acknowledged
/// after its `response.done`, as a later truncate would be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncate_of_a_reply_still_stopping_applies_when_it_ends() {
    let srv = server().await;
    let mut ws = connect(&srv, "").await;
    append(&mut ws, &question_pcm(0)).await;
    commit(&mut ws).await;
    send(
        &mut ws,
        json!({"type": "response.create", "response": {"max_output_tokens": 4000}}),
    )
    .await;
    let mut item_id = String::new();
    let mut deltas = 0;
    while deltas < 3 {
        let e = next(&mut ws).await;
        assert_ne!(e["type"], "response.done", "ended before the cancel: {e}");
        if e["type"] == "response.output_audio.delta" {
            deltas += 1;
            item_id = e["item_id"].as_str().unwrap().to_owned();
        }
    }
    send(&mut ws, json!({"type": "response.cancel"})).await;
    send(
        &mut ws,
        json!({"type": "conversation.item.truncate", "item_id": item_id, "content_index": 0,
               "audio_end_ms": FRAME_MS + 10}),
    )
    .await;
    let events = until(&mut ws, "response.done").await;
    assert!(
        events.iter().all(|e| e["type"] != "error"),
        "the truncate was refused: {events:?}"
    );
    assert_eq!(events.last().unwrap()["response"]["status"], "cancelled");
    let t = next(&mut ws).await;
    assert_eq!(t["type"], "conversation.item.truncated", "{t}");
    assert_eq!(t["audio_end_ms"], FRAME_MS + 10);
    send(
        &mut ws,
        json!({"type": "conversation.item.retrieve", "item_id": item_id}),
    )
    .await;
    let r = next(&mut ws).await;
    assert_eq!(r["type"], "conversation.item.retrieved", "{r}");
    assert_eq!(r["item"]["status"], "incomplete", "{r}");
    srv.shutdown().await.unwrap();
}

/// One server-VAD turn of `parts` appended in turn (a pause of `gap_ms` between them), on a
/// server that starts turns early after `early_turn_ms` of silence: the reply's PCM, the
/// question the VAD committed (WAV) and the response's `lfm2_audio` figures.
async fn vad_turn(
    early_turn_ms: u32,
    parts: &[Vec<i16>],
    gap_ms: u64,
) -> (Vec<u8>, Vec<u8>, Value) {
    let srv = server_with(serve::config::Settings {
        early_turn_ms,
        ..settings()
    })
    .await;
    let mut ws = connect(&srv, "").await;
    send(
        &mut ws,
        json!({"type": "session.update", "session": {"type": "realtime",
        "max_output_tokens": 40,
        "audio": {"input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 500,
                                                "prefix_padding_ms": 300}}}}}),
    )
    .await;
    assert_eq!(next(&mut ws).await["type"], "session.updated");
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            // why: the early start at the pause before this part encodes on a leased session;
            // a pause while it still holds that session starts nothing.
            tokio::time::sleep(Duration::from_millis(gap_ms)).await;
        }
        append(&mut ws, part).await;
    }
    let events = until(&mut ws, "response.done").await;
    let get = |k: &str| events.iter().find(|e| e["type"] == k).cloned().unwrap();
    let (a, b) = (
        get("input_audio_buffer.speech_started")["audio_start_ms"]
            .as_u64()
            .unwrap(),
        get("input_audio_buffer.speech_stopped")["audio_end_ms"]
            .as_u64()
            .unwrap(),
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "input_audio_buffer.committed")
            .count(),
        1,
        "one turn"
    );
    let all: Vec<i16> = parts.concat();
    assert!(
        b as usize * 24 > all.len() - parts.last().unwrap().len(),
        "the turn ends in the last part ({a}..{b} ms)"
    );
    let question = wav_24k(&all[a as usize * 24..b as usize * 24]);
    let (got, done) = response_audio(&events);
    assert_eq!(done["status"], "incomplete", "{done}");
    srv.shutdown().await.unwrap();
    (got, question, done["lfm2_audio"].clone())
}

/// `--early-turn-ms`: at a pause shorter than the silence duration the server starts the turn
/// the silence would commit. Speech that goes on drops that start; a pause that holds finds the
/// turn's whole prompt prefilled. Either way the reply is the library's S2S of the committed
/// audio, byte for byte, as with early starts off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_started_at_the_pause_changes_no_byte_and_a_held_pause_restores_its_prompt() {
    let (Some(s0), Some(s1)) = (
        speech_24k("What is the weather like in Paris today?"),
        speech_24k("And in London?"),
    ) else {
        ci_skip::skip(
            "a_turn_started_at_the_pause_changes_no_byte_and_a_held_pause_restores_its_prompt",
            "espeak-ng did not run (apt-get install espeak-ng)",
        );
        return;
    };
    // A 300 ms gap (over the 200 ms pause, under the 500 ms silence) inside one turn; espeak's
    // own trailing silence is cut so that the gap is what is heard.
    let s0 = trim_end(s0);
    let parts = [
        [silence(400), s0, silence(300)].concat(),
        [s1, silence(1200)].concat(),
    ];
    let (early, question, figures) = vad_turn(200, &parts, 500).await;
    let (off, question_off, figures_off) = vad_turn(0, &parts, 500).await;
    println!("early start: {figures}\noff: {figures_off}");
    assert_eq!(question, question_off, "the VAD commits the same audio");
    assert!(early == off, "an early start changed the reply's bytes");
    let model = model();
    let want = tokio::task::spawn_blocking(move || {
        let mut s = Session::new(model, SessionOptions::default());
        serve::audio_io::pcm16(&s.s2s(&request(&question, vec![], 40)).unwrap().reply.audio)
    })
    .await
    .unwrap();
    assert!(
        early == want,
        "the reply differs from the library's S2S of the committed audio"
    );
    // The held pause's start was used: the whole prompt came back, none of it ran again.
    let whole = figures["prompt_positions"].as_u64().unwrap();
    assert_eq!(figures["resumed_prefill_positions"], whole, "{figures}");
    assert!(
        figures_off["resumed_prefill_positions"].as_u64().unwrap() < whole,
        "{figures_off}"
    );
}
