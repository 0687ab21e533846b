//! Liquid's dialect of `POST /v1/chat/completions` (issue #39 item 6), with the bodies LiveKit's
//! `livekit-plugins-liquidai` sends (its `stt.py` and `tts.py`: model `LFM2.5-Audio`, `stream`,
//! `max_tokens`, `reset_context: true`, the task in the system prompt): the transcript equals
//! the transcription route's, the float32 `audio_chunk`s equal the speech route's samples, a
//! speech-to-speech turn sends each piece of audio in both shapes, and the dialect's bad bodies
//! get clear 400s.

mod common;

use serde_json::{json, Value};

use common::*;

/// The deltas of a streamed completion (after checking it ends with `[DONE]`).
async fn stream(c: &reqwest::Client, u: &str, body: &Value) -> Vec<Value> {
    let resp = c.post(u).json(body).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let ev = sse_events(&resp.text().await.unwrap());
    assert_eq!(ev.last().unwrap(), "[DONE]");
    ev[..ev.len() - 1].to_vec()
}

/// The text of the deltas' `content`.
fn content(ev: &[Value]) -> String {
    ev.iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect()
}

/// The samples of the deltas' `audio_chunk.data` (base64 little-endian float32).
fn audio_chunks(ev: &[Value]) -> Vec<f32> {
    ev.iter()
        .filter_map(|e| e["choices"][0]["delta"]["audio_chunk"]["data"].as_str())
        .flat_map(|d| {
            unb64(d)
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The bytes of the deltas' OpenAI-shaped `audio.data` (s16le).
fn audio_pcm(ev: &[Value]) -> Vec<u8> {
    ev.iter()
        .filter_map(|e| e["choices"][0]["delta"]["audio"]["data"].as_str())
        .flat_map(unb64)
        .collect()
}

fn le_bytes(s: &[i16]) -> Vec<u8> {
    s.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn livekit_liquidai_stt_and_tts_bodies() {
    let srv = server().await;
    let c = reqwest::Client::new();
    let u = url(&srv, "/v1/chat/completions");

    // STT (stt.py): the transcript streamed as content, no audio; the transcription route's text.
    let wav = question(1);
    let asr = json!({"model": "LFM2.5-Audio", "stream": true, "max_tokens": 512, "reset_context": true,
        "messages": [{"role": "system", "content": "Perform ASR."},
                     {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": b64(&wav), "format": "wav"}}]}]});
    let ev = stream(&c, &u, &asr).await;
    assert!(audio_chunks(&ev).is_empty() && audio_pcm(&ev).is_empty());
    let reference = post_json(
        &c,
        &url(&srv, "/v1/audio/transcriptions"),
        &json!({"model": "lfm2-audio-asr", "audio": b64(&wav), "max_tokens": 512}),
    )
    .await;
    assert!(!reference["text"].as_str().unwrap().is_empty());
    assert_eq!(content(&ev), reference["text"].as_str().unwrap());
    assert_eq!(
        ev.last().unwrap()["choices"][0]["finish_reason"],
        "stop",
        "{:?}",
        ev.last()
    );

    // TTS (tts.py): float32 audio_chunks, the speech route's samples in that voice. why the
    // search: the demo package's random TTS often ends before it speaks (its text is greedy,
    // so the voice and the text decide); the first pair whose speech-route reply has audio is
    // used (deterministic: the same pair every run).
    let voices = [
        ("uk_female", "Perform TTS. Use the UK female voice."),
        ("us_male", "Perform TTS. Use the US male voice."),
        ("us_female", "Perform TTS. Use the US female voice."),
        ("uk_male", "Perform TTS. Use the UK male voice."),
    ];
    let texts = [
        "Hello there, numbers 2024 and voices.",
        "How are you today?",
    ];
    let mut found = None;
    'search: for text in texts {
        for (voice, prompt) in voices {
            let speech = c
                .post(url(&srv, "/v1/audio/speech"))
                .json(
                    &json!({"model": "lfm2-audio-tts", "input": text, "voice": voice,
                              "response_format": "pcm", "max_tokens": 2048, "seed": 11}),
                )
                .send()
                .await
                .unwrap();
            assert_eq!(speech.status(), 200);
            let speech = speech.bytes().await.unwrap().to_vec();
            if !speech.is_empty() {
                found = Some((text, prompt, speech));
                break 'search;
            }
        }
    }
    let (text, prompt, speech) = found.expect("a voice and text whose demo TTS speaks");
    let tts = json!({"model": "LFM2.5-Audio", "stream": true, "max_tokens": 2048, "reset_context": true,
        "seed": 11,
        "messages": [{"role": "system", "content": prompt}, {"role": "user", "content": text}]});
    let ev = stream(&c, &u, &tts).await;
    let samples = audio_chunks(&ev);
    assert_eq!(le_bytes(&to_i16(&samples)), speech);
    // The OpenAI shape beside it carries the same audio.
    assert_eq!(audio_pcm(&ev), speech);
    // Another voice is another prompt: other samples.
    let mut other = tts.clone();
    let another = voices.iter().find(|v| v.1 != prompt).unwrap().1;
    other["messages"][0]["content"] = json!(another);
    assert_ne!(audio_chunks(&stream(&c, &u, &other).await), samples);
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn liquid_speech_to_speech_sends_both_audio_shapes() {
    let srv = server().await;
    let c = reqwest::Client::new();
    let u = url(&srv, "/v1/chat/completions");
    let user = json!({"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": b64(&question(0)), "format": "wav"}}]});
    let body = json!({"model": "LFM2.5-Audio", "stream": true, "max_tokens": 60, "seed": 3,
        "reset_context": true,
        "messages": [{"role": "system", "content": "Respond with interleaved text and audio."}, user]});
    let ev = stream(&c, &u, &body).await;
    let samples = audio_chunks(&ev);
    assert!(!samples.is_empty());
    assert_eq!(le_bytes(&to_i16(&samples)), audio_pcm(&ev));
    // The same turn in OpenAI's dialect: the same text and audio (no audio_chunk).
    let mut openai = body.clone();
    openai.as_object_mut().unwrap().remove("reset_context");
    openai["model"] = json!("lfm2-audio-s2s");
    let ev2 = stream(&c, &u, &openai).await;
    assert!(audio_chunks(&ev2).is_empty());
    assert_eq!(audio_pcm(&ev2), audio_pcm(&ev));
    assert_eq!(content(&ev2), content(&ev));
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn liquid_bodies_that_cannot_be_served_get_clear_errors() {
    let srv = server().await;
    let c = reqwest::Client::new();
    let u = url(&srv, "/v1/chat/completions");
    let spoken = json!({"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": b64(&question(0)), "format": "wav"}}]});
    let typed = json!({"role": "user", "content": "Hello."});
    let body = |system: &str, user: &Value, reset: bool| {
        json!({"model": "LFM2.5-Audio", "reset_context": reset,
               "messages": [{"role": "system", "content": system}, user]})
    };
    let cases = [
        (body("Perform ASR.", &typed, true), "input_audio"),
        (
            body("Perform TTS. Use the UK female voice.", &spoken, true),
            "text content",
        ),
        (
            body("Perform TTS. Use the Scottish voice.", &typed, true),
            "UK female",
        ),
        (body("Perform ASR.", &spoken, false), "reset_context"),
        (
            json!({"model": "LFM2.5-Audio", "reset_context": true, "messages": [
                {"role": "system", "content": "Perform ASR."}, spoken,
                {"role": "assistant", "content": "hi"}, spoken]}),
            "one user message",
        ),
    ];
    for (b, says) in cases {
        let msg = expect_error(
            c.post(&u).json(&b).send().await.unwrap(),
            400,
            "invalid_request_error",
        )
        .await;
        assert!(msg.contains(says), "{says:?} not in {msg:?}");
    }
    // Outside the dialect a model id must be served, as before.
    let openai = json!({"model": "LFM2.5-Audio", "messages": [spoken]});
    assert_eq!(c.post(&u).json(&openai).send().await.unwrap().status(), 404);
    srv.shutdown().await.unwrap();
}
