//! The OpenAI-compatible routes: response shapes field by field; chat multi-turn through the
//! `lfm2_audio_reply` extension gives the same bytes as the task route; streamed chat and
//! speech add up to their offline responses.

mod common;

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
    let jb: Value = c
        .post(&u)
        .json(&json!({"model": "lfm2-audio-asr", "audio": b64(&question(0)), "max_tokens": 12}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
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
    let j: Value = c
        .post(&s)
        .json(&body(json!({"response_format": "json"})))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
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
        let r: Value = c
            .post(&u)
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
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
        let t: Value = c.post(url(&srv, "/v1/tasks/run")).json(&json!({"model": "lfm2-audio-s2s", "request": {
            "audio": b64(&question(turn)), "max_tokens": 60, "seed": 9, "options": {"return_codes": true}, "artifacts": artifacts}}))
            .send().await.unwrap().json().await.unwrap();
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
        artifacts.push(
            json!({"id": "lfm2_audio.question", "kind": "custom", "payload": b64(&question(turn))}),
        );
        artifacts.push(reply);
    }
    // Errors: an assistant turn without its reply artifact, text parts, a bad modality.
    let no_reply = json!({"messages": [user(0), {"role": "assistant", "content": "hi"}, user(1)]});
    assert!(expect_error(
        c.post(&u).json(&no_reply).send().await.unwrap(),
        400,
        "invalid_request_error"
    )
    .await
    .contains("lfm2_audio_reply"));
    let text_part =
        json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]});
    assert!(expect_error(
        c.post(&u).json(&text_part).send().await.unwrap(),
        400,
        "invalid_request_error"
    )
    .await
    .contains("text parts"));
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
