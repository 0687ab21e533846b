//! The engine's artifact limits (`MAX_ARTIFACTS`, `MAX_ARTIFACT_BYTES`) through both routes
//! that take artifacts, on a server whose body limit would let far more through: a request
//! past the count is 400 naming the limit before any payload is decoded (every payload here is
//! invalid base64, so a check that ran after decoding would answer "not base64" instead), and
//! one at the count gets past it to the payloads.

mod common;

use audio_engine::lfm2_audio::limits::MAX_ARTIFACTS;
use serde_json::{json, Value};

use common::*;

/// Not base64: decoding any payload fails on it.
const BAD: &str = "!!!!";

/// A server that takes bodies up to 1 GiB, so only the artifact checks stand in the way.
async fn open_server() -> serve::Running {
    let mut s = settings();
    s.max_body_bytes = 1 << 30;
    server_with(s).await
}

async fn post(c: &reqwest::Client, url: &str, body: &Value) -> (u16, Value) {
    let r = c.post(url).json(body).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

fn message(v: &Value) -> &str {
    v["error"]["message"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_route_refuses_artifacts_past_the_count_before_decoding_any() {
    let srv = open_server().await;
    let c = reqwest::Client::new();
    let run = url(&srv, "/v1/tasks/run");
    let body = |n: usize| {
        let artifacts: Vec<Value> = (0..n)
            .map(|_| json!({"id": "lfm2_audio.question", "kind": "custom", "payload": BAD}))
            .collect();
        task(
            "lfm2-audio-s2s",
            json!({"audio": b64(&question(0)), "artifacts": artifacts}),
        )
    };
    let (st, v) = post(&c, &run, &body(MAX_ARTIFACTS + 1)).await;
    assert_eq!(st, 400, "{v}");
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    assert!(
        message(&v).contains("MAX_ARTIFACTS") && message(&v).contains("4097 artifacts"),
        "{v}"
    );

    let (st, v) = post(&c, &run, &body(MAX_ARTIFACTS)).await;
    assert_eq!(st, 400, "{v}");
    assert!(message(&v).contains("payload is not base64"), "{v}");
    assert!(!message(&v).contains("MAX_ARTIFACTS"), "{v}");
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completions_refuse_history_past_the_count_before_decoding_any_turn() {
    let srv = open_server().await;
    let c = reqwest::Client::new();
    let chat = url(&srv, "/v1/chat/completions");
    let user = json!({"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": BAD, "format": "wav"}}
    ]});
    let assistant = json!({"role": "assistant", "content": "hi",
        "lfm2_audio_reply": {"id": "lfm2_audio.reply", "kind": "custom", "payload": BAD}});
    // Each earlier turn is two artifacts: its question and its reply.
    let body = |turns: usize| {
        let mut messages = Vec::new();
        for _ in 0..turns {
            messages.push(user.clone());
            messages.push(assistant.clone());
        }
        messages.push(user.clone());
        json!({"model": "lfm2-audio-s2s", "messages": messages, "max_completion_tokens": 4})
    };
    let (st, v) = post(&c, &chat, &body(MAX_ARTIFACTS / 2 + 1)).await;
    assert_eq!(st, 400, "{v}");
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    assert!(
        message(&v).contains("MAX_ARTIFACTS") && message(&v).contains("4098 artifacts"),
        "{v}"
    );

    let (st, v) = post(&c, &chat, &body(MAX_ARTIFACTS / 2)).await;
    assert_eq!(st, 400, "{v}");
    assert!(message(&v).contains("not a base64 WAV"), "{v}");
    srv.shutdown().await.unwrap();
}
