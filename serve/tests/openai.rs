//! The OpenAI-compatible routes: response shapes field by field; chat multi-turn through the
//! `lfm2_audio_reply` extension gives the same bytes as the task route; streamed chat and
//! speech add up to their offline responses; speech (every format, streamed or not) and the
//! tts task route give the Rust library's TTS audio byte for byte; conversations mixing typed
//! and spoken turns (chat and the s2s task route) give the library's reply bytes.

mod common;

use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{
    Artifact, ArtifactKind, AudioInput, Request, RequestContext, SamplerConfig, Task, TtsOptions,
    Voice, QUESTION_ID, REPLY_ID,
};
use serde_json::{json, Value};

use common::*;

fn user(i: usize) -> Value {
    json!({"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": b64(&question(i)), "format": "wav"}}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcriptions_and_speech() {
    let srv = server().await;
    let c = reqwest::Client::new();
    let u = url(&srv, "/v1/audio/transcriptions");
    let form = |fmt: &str| {
        reqwest::multipart::Form::new()
            .part(
                "file",
                reqwest::multipart::Part::bytes(question(0))
                    .file_name("q.wav")
                    .mime_str("audio/wav")
                    .unwrap(),
            )
            .text("model", "lfm2-audio-asr")
            .text("response_format", fmt.to_owned())
            .text("max_tokens", "12")
    };
    let j: Value = c
        .post(&u)
        .multipart(form("json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let text = j["text"].as_str().unwrap().to_owned();
    assert!(j["timing"]["wall_ms"].is_number());
    let t = c.post(&u).multipart(form("text")).send().await.unwrap();
    assert!(t.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    assert_eq!(t.text().await.unwrap(), text);
    let v: Value = c
        .post(&u)
        .multipart(form("verbose_json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["task"], "transcribe");
    assert_eq!(v["language"], "en");
    assert_eq!(v["text"], text.as_str());
    assert!((v["duration"].as_f64().unwrap() - 1.5).abs() < 1e-9);
    assert_eq!(v["segments"][0]["text"], text.as_str());
    // JSON body too (audio.cpp's form), and errors.
    let jb = post_json(
        &c,
        &u,
        &json!({"model": "lfm2-audio-asr", "audio": b64(&question(0)), "max_tokens": 12}),
    )
    .await;
    assert_eq!(jb["text"], text.as_str());
    let bad = form("json").text("diarize", "1");
    assert!(expect_error(
        c.post(&u).multipart(bad).send().await.unwrap(),
        400,
        "invalid_request_error"
    )
    .await
    .contains("diarize"));
    assert!(expect_error(
        c.post(&u).multipart(form("srt")).send().await.unwrap(),
        400,
        "invalid_request_error"
    )
    .await
    .contains("srt"));
    let f = reqwest::multipart::Form::new()
        .part("file", reqwest::multipart::Part::bytes(question(0)))
        .text("model", "whisper-1");
    expect_error(
        c.post(&u).multipart(f).send().await.unwrap(),
        404,
        "not_found",
    )
    .await;

    // Speech: wav with the timing headers, pcm, json; streamed as chunked PCM and as SSE.
    let s = url(&srv, "/v1/audio/speech");
    let body = |extra: Value| {
        let mut b = json!({"model": "lfm2-audio-tts", "input": "Hello there, numbers 2024 and voices.", "voice": "us-male", "max_tokens": 200, "seed": 5});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    let r = c.post(&s).json(&body(json!({}))).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "audio/wav");
    for h in [
        "x-audiocpp-wall-ms",
        "x-audiocpp-audio-duration-ms",
        "x-audiocpp-rtf",
    ] {
        assert!(
            r.headers()[h].to_str().unwrap().parse::<f64>().is_ok(),
            "{h}"
        );
    }
    let wav = r.bytes().await.unwrap().to_vec();
    let samples = wav_i16(&wav);
    // why: the demo package's random TTS may end before it speaks; the shapes and the equality
    // of the four forms below hold either way.
    println!("speech: {} samples", samples.len());
    let pcm = c
        .post(&s)
        .json(&body(json!({"response_format": "pcm"})))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(pcm.len(), samples.len() * 2);
    assert_eq!(&pcm[..], &wav[44..]);
    let j = post_json(&c, &s, &body(json!({"response_format": "json"}))).await;
    assert_eq!(j["format"], "wav");
    assert_eq!(unb64(j["audio"].as_str().unwrap()), wav);
    let chunked = c
        .post(&s)
        .json(&body(json!({"stream": true})))
        .send()
        .await
        .unwrap();
    assert_eq!(chunked.headers()["content-type"], "audio/pcm");
    assert_eq!(chunked.bytes().await.unwrap(), pcm);
    let sse = c
        .post(&s)
        .json(&body(json!({"stream": true, "stream_format": "sse"})))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let ev = sse_events(&sse);
    assert_eq!(ev.last().unwrap(), "[DONE]");
    let done = &ev[ev.len() - 2];
    assert_eq!(done["type"], "speech.audio.done");
    assert!(done["timing"].get("ttft_ms").is_some()); // null when no audio came
    let mut joined = Vec::new();
    for e in &ev[..ev.len() - 2] {
        assert_eq!(e["type"], "speech.audio.delta");
        joined.extend(unb64(e["audio"].as_str().unwrap()));
    }
    assert_eq!(joined, pcm.to_vec());
    assert!(expect_error(
        c.post(&s)
            .json(&body(json!({"stream": true, "response_format": "wav"})))
            .send()
            .await
            .unwrap(),
        400,
        "invalid_request_error"
    )
    .await
    .contains("pcm"));
    assert!(expect_error(
        c.post(&s)
            .json(&body(json!({"voice": "alloy"})))
            .send()
            .await
            .unwrap(),
        400,
        "invalid_request_error"
    )
    .await
    .contains("alloy"));
    assert!(expect_error(
        c.post(&s)
            .json(&body(json!({"speed": 1.2})))
            .send()
            .await
            .unwrap(),
        400,
        "invalid_request_error"
    )
    .await
    .contains("speed"));
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completions_multi_turn_and_streamed() {
    let srv = server().await;
    let c = reqwest::Client::new();
    let u = url(&srv, "/v1/chat/completions");
    let mut messages = vec![user(0)];
    let mut artifacts: Vec<Value> = Vec::new();
    for turn in 0..2 {
        let body = json!({"model": "lfm2-audio-s2s", "modalities": ["text", "audio"], "messages": messages,
                          "max_completion_tokens": 60, "seed": 9});
        let r = post_json(&c, &u, &body).await;
        assert!(r["id"].as_str().unwrap().starts_with("chatcmpl-"));
        assert_eq!(r["object"], "chat.completion");
        assert!(r["created"].is_u64());
        assert_eq!(r["model"], "lfm2-audio-s2s");
        let ch = &r["choices"][0];
        assert_eq!(ch["index"], 0);
        assert!(ch["finish_reason"] == "stop" || ch["finish_reason"] == "length");
        let m = &ch["message"];
        assert_eq!(m["role"], "assistant");
        assert!(m["content"].is_string());
        assert_eq!(m["audio"]["transcript"], m["content"]);
        assert!(m["audio"]["id"].as_str().unwrap().starts_with("audio-"));
        assert!(m["audio"]["expires_at"].is_u64());
        let reply = m["lfm2_audio_reply"].clone();
        assert_eq!(reply["id"], "lfm2_audio.reply");
        let u2 = &r["usage"];
        assert_eq!(
            u2["total_tokens"].as_u64().unwrap(),
            u2["prompt_tokens"].as_u64().unwrap() + u2["completion_tokens"].as_u64().unwrap()
        );
        // The same turn through the task route: the same bytes.
        let t = post_json(
            &c,
            &url(&srv, "/v1/tasks/run"),
            &task(
                "lfm2-audio-s2s",
                json!({
            "audio": b64(&question(turn)), "max_tokens": 60, "seed": 9,
            "options": {"return_codes": true}, "artifacts": artifacts}),
            ),
        )
        .await;
        assert_eq!(t["text"], m["content"]);
        assert_eq!(t["audio"], m["audio"]["data"]);
        assert_eq!(t["artifacts"][0], reply);
        // Streamed: role, text deltas, audio deltas (PCM16 + rate), the final chunk, [DONE].
        let mut sb = body.clone();
        sb["stream"] = json!(true);
        let sse = c
            .post(&u)
            .json(&sb)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let ev = sse_events(&sse);
        assert_eq!(ev.last().unwrap(), "[DONE]");
        assert_eq!(ev[0]["choices"][0]["delta"]["role"], "assistant");
        let (mut text, mut pcm) = (String::new(), Vec::new());
        for e in &ev[..ev.len() - 1] {
            assert_eq!(e["object"], "chat.completion.chunk");
            let d = &e["choices"][0]["delta"];
            if let Some(s) = d["content"].as_str() {
                text.push_str(s);
            }
            if let Some(a) = d["audio"]["data"].as_str() {
                assert_eq!(d["audio"]["sample_rate"], 24_000);
                pcm.extend(unb64(a));
            }
        }
        let last = &ev[ev.len() - 2];
        assert_eq!(last["choices"][0]["finish_reason"], ch["finish_reason"]);
        assert_eq!(last["choices"][0]["delta"]["lfm2_audio_reply"], reply);
        assert_eq!(text, m["content"].as_str().unwrap());
        assert_eq!(
            pcm,
            unb64(m["audio"]["data"].as_str().unwrap())[44..].to_vec()
        );
        messages.push(json!({"role": "assistant", "content": m["content"], "audio": {"id": m["audio"]["id"]}, "lfm2_audio_reply": reply}));
        messages.push(user(turn + 1));
        artifacts.push(question_artifact(&question(turn)));
        artifacts.push(reply);
    }
    // Errors: an assistant turn with neither its reply artifact nor text, a bad modality.
    let no_reply = json!({"messages": [user(0), {"role": "assistant", "content": null}, user(1)]});
    assert!(expect_error(
        c.post(&u).json(&no_reply).send().await.unwrap(),
        400,
        "invalid_request_error"
    )
    .await
    .contains("lfm2_audio_reply"));
    let modality = json!({"modalities": ["video"], "messages": [user(0)]});
    assert!(expect_error(
        c.post(&u).json(&modality).send().await.unwrap(),
        400,
        "invalid_request_error"
    )
    .await
    .contains("video"));
    let unknown = json!({"messages": [user(0)], "frequency_penalty": 1});
    assert!(expect_error(
        c.post(&u).json(&unknown).send().await.unwrap(),
        400,
        "invalid_request_error"
    )
    .await
    .contains("frequency_penalty"));
    expect_error(
        c.post(&u)
            .json(&json!({"model": "gpt-4o", "messages": [user(0)]}))
            .send()
            .await
            .unwrap(),
        404,
        "not_found",
    )
    .await;
    srv.shutdown().await.unwrap();
}

/// The Rust library's TTS for what a request asks: text, voice, seed and max_tokens over the
/// defaults (the server's `/v1/audio/speech` and tts task options).
fn library_tts(text: &str, voice: Voice, seed: u64, max_tokens: usize) -> (String, Vec<f32>) {
    let d = TtsOptions::default();
    let r = model()
        .tts(
            text,
            &TtsOptions {
                voice,
                max_new_tokens: max_tokens,
                audio: SamplerConfig { seed, ..d.audio },
                ..d
            },
        )
        .unwrap();
    (r.text, r.audio)
}

/// `samples` as 16-bit PCM (rounded, clipped to full scale), little-endian.
fn reference_pcm(samples: &[f32]) -> Vec<u8> {
    samples
        .iter()
        .flat_map(|&s| ((s.clamp(-1.0, 1.0) * 32767.0).round() as i16).to_le_bytes())
        .collect()
}

/// A 24 kHz mono 16-bit WAV of `samples`, converted here and written by hound (not by the
/// server's writer).
fn reference_wav(samples: &[f32]) -> Vec<u8> {
    let pcm: Vec<i16> = samples
        .iter()
        .map(|s| (s.clamp(-1.0, 1.0) * 32767.0).round() as i16)
        .collect();
    realtime::wav_24k(&pcm)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speech_and_the_tts_task_give_the_librarys_bytes() {
    const TEXT: &str = "Hello there, numbers 2024 and voices.";
    const MAX_TOKENS: usize = 64;
    // why: the demo package's random TTS ends before it speaks for some requests; take the
    // first of these whose library output holds samples, so real audio is compared.
    let (voice, seed, (lib_text, want)) = tokio::task::spawn_blocking(|| {
        for (voice, name) in [
            (Voice::UkFemale, "uk-female"),
            (Voice::UsMale, "us-male"),
            (Voice::UsFemale, "us-female"),
            (Voice::UkMale, "uk-male"),
        ] {
            for seed in [11, 5] {
                let out = library_tts(TEXT, voice, seed, MAX_TOKENS);
                if !out.1.is_empty() {
                    return (name, seed, out);
                }
            }
        }
        panic!("no voice and seed tried speaks `{TEXT}` on the demo package")
    })
    .await
    .unwrap();
    println!("{voice} seed {seed}: {} samples", want.len());
    let wav = reference_wav(&want);
    let pcm = reference_pcm(&want);
    assert_eq!(&wav[44..], &pcm[..]);

    let srv = server().await;
    let c = reqwest::Client::new();
    let s = url(&srv, "/v1/audio/speech");
    let body = |extra: Value| {
        let mut b = json!({"model": "lfm2-audio-tts", "input": TEXT, "voice": voice,
                           "max_tokens": MAX_TOKENS, "seed": seed});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    let r = c.post(&s).json(&body(json!({}))).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "audio/wav");
    assert_eq!(
        r.headers()["x-audiocpp-audio-duration-ms"],
        format!("{:.1}", want.len() as f64 / 24.0).as_str()
    );
    assert!(r.bytes().await.unwrap() == wav, "speech wav differs");
    for (extra, want_bytes, what) in [
        (json!({"response_format": "pcm"}), &pcm, "pcm"),
        (json!({"stream": true}), &pcm, "chunked pcm"),
    ] {
        let got = c.post(&s).json(&body(extra)).send().await.unwrap();
        assert_eq!(got.status(), 200, "{what}");
        assert!(read_to_end(got).await == *want_bytes, "{what} differs");
    }
    let j = post_json(&c, &s, &body(json!({"response_format": "json"}))).await;
    assert!(
        unb64(j["audio"].as_str().unwrap()) == wav,
        "json audio differs"
    );
    let sse = c
        .post(&s)
        .json(&body(json!({"stream": true, "stream_format": "sse"})))
        .send()
        .await
        .unwrap();
    let ev = sse_events(&String::from_utf8(read_to_end(sse).await).unwrap());
    let joined: Vec<u8> = ev
        .iter()
        .filter(|e| e["type"] == "speech.audio.delta")
        .flat_map(|e| unb64(e["audio"].as_str().unwrap()))
        .collect();
    assert!(joined == pcm, "sse audio differs");

    // The tts task route: run, stream as JSON, stream as SSE. Voice ids take `_` there too.
    let request = json!({"text": TEXT, "voice_id": voice.replace('-', "_"), "seed": seed,
                         "max_tokens": MAX_TOKENS});
    let run = post_json(
        &c,
        &url(&srv, "/v1/tasks/run"),
        &task("lfm2-audio-tts", request.clone()),
    )
    .await;
    assert_eq!(run["sample_rate"], 24_000);
    assert_eq!(run["channels"], 1);
    assert_eq!(run["text"], lib_text.as_str());
    assert!(
        unb64(run["audio"].as_str().unwrap()) == wav,
        "task run audio differs"
    );
    let streamed = post_json(
        &c,
        &url(&srv, "/v1/tasks/stream"),
        &task("lfm2-audio-tts", request.clone()),
    )
    .await;
    assert!(unb64(streamed["result"]["audio"].as_str().unwrap()) == wav);
    let from_events: Vec<i16> = streamed["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["audio"].as_str())
        .flat_map(|a| wav_i16(&unb64(a)))
        .collect();
    assert_eq!(from_events, wav_i16(&wav));
    let mut sse_body = task("lfm2-audio-tts", request);
    sse_body["stream_format"] = json!("sse");
    let (events, result) = sse_task(&c, &url(&srv, "/v1/tasks/stream"), &[], &sse_body).await;
    assert!(unb64(result["audio"].as_str().unwrap()) == wav);
    let from_sse: Vec<i16> = events
        .iter()
        .filter_map(|e| e["audio"].as_str())
        .flat_map(|a| wav_i16(&unb64(a)))
        .collect();
    assert_eq!(from_sse, wav_i16(&wav));

    // Neither route naming a voice: the library's default voice, audio.cpp's us_male (what the
    // C ABI gives too, tests/c_abi.rs).
    let default_wav = tokio::task::spawn_blocking(move || {
        assert_eq!(Voice::default(), Voice::UsMale);
        reference_wav(&library_tts(TEXT, Voice::default(), seed, MAX_TOKENS).1)
    })
    .await
    .unwrap();
    let mut speech = body(json!({}));
    speech.as_object_mut().unwrap().remove("voice");
    let r = c.post(&s).json(&speech).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.bytes().await.unwrap() == default_wav,
        "speech without a voice differs from the library's default voice"
    );
    let request = json!({"text": TEXT, "seed": seed, "max_tokens": MAX_TOKENS});
    let run = post_json(
        &c,
        &url(&srv, "/v1/tasks/run"),
        &task("lfm2-audio-tts", request),
    )
    .await;
    assert!(
        unb64(run["audio"].as_str().unwrap()) == default_wav,
        "the tts task without a voice_id differs from the library's default voice"
    );
    srv.shutdown().await.unwrap();
}

/// The library's reply to one s2s turn as the chat route asks for it (`max_tokens`, `seed`,
/// the reply artifact returned): its text, its audio as the route's WAV, its artifact.
fn library_s2s(
    history: Vec<Artifact>,
    text: Option<&str>,
    audio: Option<Vec<u8>>,
    max_tokens: usize,
    seed: u64,
) -> (String, Vec<u8>, Artifact) {
    let req = Request {
        history,
        text: text.map(str::to_owned),
        audio: audio.map(AudioInput::Wav),
        ..Request::new(Task::S2s)
    }
    .option("max_tokens", json!(max_tokens))
    .option("seed", json!(seed))
    .option("return_codes", json!(true));
    let job = req
        .resolve(&RequestContext::new("en", 60.0))
        .expect("a valid request")
        .job;
    let o = model().run(&job, &mut |_| true).unwrap();
    (
        o.text,
        reference_wav(&o.audio),
        o.artifact.expect("return_codes"),
    )
}

fn typed_artifact(id: &str, text: &str) -> Artifact {
    Artifact {
        id: id.into(),
        kind: ArtifactKind::Text,
        payload: text.as_bytes().to_vec(),
        meta: Default::default(),
    }
}

fn spoken_artifact(wav: Vec<u8>) -> Artifact {
    Artifact {
        id: QUESTION_ID.into(),
        kind: ArtifactKind::Custom,
        payload: wav,
        meta: Default::default(),
    }
}

/// A chat completion's message checked against the library's reply, byte for byte.
fn assert_library_reply(m: &Value, lib: &(String, Vec<u8>, Artifact), what: &str) {
    assert_eq!(m["content"], lib.0.as_str(), "{what}: text");
    assert_eq!(
        unb64(m["audio"]["data"].as_str().unwrap()),
        lib.1,
        "{what}: audio"
    );
    let reply = &m["lfm2_audio_reply"];
    assert_eq!(reply["id"], REPLY_ID, "{what}");
    assert_eq!(
        unb64(reply["payload"].as_str().unwrap()),
        lib.2.payload,
        "{what}: reply codes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_turns_give_the_librarys_bytes() {
    const MAX: usize = 24;
    const SEED: u64 = 9;
    const Q1: &str = "What is the weather like today?";
    const R1: &str = "Sunny, I think.";
    const Q3: &str = "Thanks! And tomorrow?";
    let srv = server().await;
    let c = reqwest::Client::new();
    let u = url(&srv, "/v1/chat/completions");
    let chat = |messages: Value| {
        json!({"model": "lfm2-audio-s2s", "modalities": ["text", "audio"], "messages": messages,
               "max_completion_tokens": MAX, "seed": SEED})
    };

    // Turn 1, typed: string content.
    let r1 = post_json(&c, &u, &chat(json!([{"role": "user", "content": Q1}]))).await;
    let lib1 = tokio::task::spawn_blocking(|| library_s2s(Vec::new(), Some(Q1), None, MAX, SEED))
        .await
        .unwrap();
    assert_library_reply(&r1["choices"][0]["message"], &lib1, "typed first turn");
    let t1 = post_json(
        &c,
        &url(&srv, "/v1/tasks/run"),
        &task(
            "lfm2-audio-s2s",
            json!({"text": Q1, "max_tokens": MAX, "seed": SEED, "options": {"return_codes": true}}),
        ),
    )
    .await;
    assert_eq!(t1["text"], lib1.0.as_str());
    assert_eq!(unb64(t1["audio"].as_str().unwrap()), lib1.1);

    // Turn 2, spoken, after a typed turn answered by a text-only assistant message.
    let messages2 = json!([
        {"role": "user", "content": Q1},
        {"role": "assistant", "content": R1},
        user(0),
    ]);
    let r2 = post_json(&c, &u, &chat(messages2.clone())).await;
    let history2 = vec![
        typed_artifact(QUESTION_ID, Q1),
        typed_artifact(REPLY_ID, R1),
    ];
    let lib2 = {
        let h = history2.clone();
        tokio::task::spawn_blocking(move || library_s2s(h, None, Some(question(0)), MAX, SEED))
            .await
            .unwrap()
    };
    let m2 = &r2["choices"][0]["message"];
    assert_library_reply(m2, &lib2, "spoken turn after typed ones");
    // The typed turn is in the prompt: the same question alone is another prompt.
    let alone = post_json(&c, &u, &chat(json!([user(0)]))).await;
    assert!(
        r2["usage"]["prompt_tokens"].as_u64().unwrap()
            > alone["usage"]["prompt_tokens"].as_u64().unwrap()
    );

    // Turn 3, typed as text parts, after the spoken turn and its reply artifact.
    let mut messages3 = messages2.as_array().unwrap().clone();
    messages3.push(json!({"role": "assistant", "content": m2["content"],
                          "lfm2_audio_reply": m2["lfm2_audio_reply"]}));
    messages3.push(json!({"role": "user", "content": [{"type": "text", "text": Q3}]}));
    let r3 = post_json(&c, &u, &chat(Value::Array(messages3))).await;
    let mut history3 = history2.clone();
    history3.push(spoken_artifact(question(0)));
    history3.push(lib2.2.clone());
    let lib3 = {
        let h = history3.clone();
        tokio::task::spawn_blocking(move || library_s2s(h, Some(Q3), None, MAX, SEED))
            .await
            .unwrap()
    };
    assert_library_reply(&r3["choices"][0]["message"], &lib3, "typed third turn");
    // The same turn on the task route: typed artifacts are kind text, the question is `text`.
    let t3 = post_json(
        &c,
        &url(&srv, "/v1/tasks/run"),
        &task(
            "lfm2-audio-s2s",
            json!({"text": Q3, "max_tokens": MAX, "seed": SEED, "options": {"return_codes": true},
            "artifacts": [
                {"id": QUESTION_ID, "kind": "text", "payload": b64(Q1.as_bytes())},
                {"id": REPLY_ID, "kind": "text", "payload": b64(R1.as_bytes())},
                question_artifact(&question(0)),
                m2["lfm2_audio_reply"],
            ]}),
        ),
    )
    .await;
    assert_eq!(t3["text"], lib3.0.as_str());
    assert_eq!(unb64(t3["audio"].as_str().unwrap()), lib3.1);
    assert_eq!(
        unb64(t3["artifacts"][0]["payload"].as_str().unwrap()),
        lib3.2.payload
    );

    // A user message both spoken and typed, an empty one, an assistant turn with neither reply.
    let both = json!([{"role": "user", "content": [
        {"type": "text", "text": "hi"},
        {"type": "input_audio", "input_audio": {"data": b64(&question(0)), "format": "wav"}}]}]);
    assert!(expect_error(
        c.post(&u).json(&chat(both)).send().await.unwrap(),
        400,
        "invalid_request_error"
    )
    .await
    .contains("not both"));
    let empty = json!([{"role": "user", "content": "  "}]);
    assert!(expect_error(
        c.post(&u).json(&chat(empty)).send().await.unwrap(),
        400,
        "invalid_request_error"
    )
    .await
    .contains("empty"));
    let bare = json!([user(0), {"role": "assistant"}, user(1)]);
    assert!(expect_error(
        c.post(&u).json(&chat(bare)).send().await.unwrap(),
        400,
        "invalid_request_error"
    )
    .await
    .contains("lfm2_audio_reply"));
    srv.shutdown().await.unwrap();
}

/// Tools through chat completions: the tools listed in the system turn, an assistant's
/// `tool_calls` as its reply, the tool's message as the turn asked: the library's bytes for
/// that request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_message_is_answered_with_the_librarys_bytes() {
    use audio_engine::lfm2_audio::tools::{tool_system_prompt, write_calls, ToolCall};
    use audio_engine::lfm2_audio::S2sOptions;
    const MAX: usize = 24;
    const SEED: u64 = 9;
    let srv = server().await;
    let c = reqwest::Client::new();
    let tool = json!({"type": "function", "function": {"name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}});
    let body = json!({"model": "lfm2-audio-s2s", "modalities": ["text", "audio"],
        "max_completion_tokens": MAX, "seed": SEED, "tools": [tool], "tool_choice": "auto",
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
                "type": "function", "function": {"name": "get_weather",
                "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\": 21}"}]});
    let r = post_json(&c, &url(&srv, "/v1/chat/completions"), &body).await;
    let mut tool_turn = typed_artifact(QUESTION_ID, "{\"temperature\": 21}");
    tool_turn.meta.insert("role".into(), json!("tool"));
    let calls = write_calls(&[ToolCall {
        name: "get_weather".into(),
        arguments: json!({"city": "Paris"}).as_object().unwrap().clone(),
    }]);
    let history = vec![
        typed_artifact(QUESTION_ID, "Weather in Paris?"),
        typed_artifact(REPLY_ID, &calls),
        tool_turn,
    ];
    let system = tool_system_prompt(&S2sOptions::default().system_prompt, &[tool]);
    let lib = tokio::task::spawn_blocking(move || {
        let req = Request {
            history,
            system_prompt: Some(system),
            ..Request::new(Task::S2s)
        }
        .option("max_tokens", json!(MAX))
        .option("seed", json!(SEED))
        .option("return_codes", json!(true));
        let job = req.resolve(&RequestContext::new("en", 60.0)).unwrap().job;
        let o = model().run(&job, &mut |_| true).unwrap();
        (o.text, reference_wav(&o.audio), o.artifact.unwrap())
    })
    .await
    .unwrap();
    assert_library_reply(&r["choices"][0]["message"], &lib, "tool turn");
    // Bad tool bodies are 400s.
    for bad in [
        json!({"model": "lfm2-audio-s2s", "tools": [{"type": "function", "function": {}}],
               "messages": [{"role": "user", "content": "hi"}]}),
        json!({"model": "lfm2-audio-s2s", "tool_choice": 3,
               "messages": [{"role": "user", "content": "hi"}]}),
        json!({"model": "lfm2-audio-s2s", "messages": [{"role": "tool", "content": "x"}]}),
    ] {
        let resp = c
            .post(url(&srv, "/v1/chat/completions"))
            .json(&bad)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{bad}");
    }
    srv.shutdown().await.unwrap();
}
