//! A 3-turn conversation through `POST /v1/tasks/stream` (SSE) equals, byte for byte, the same
//! conversation on a Rust `Session`; affinity sends turns to the session of their previous
//! turn (prefill blocks resumed); a client that goes away mid-stream stops the generation and
//! the session comes back clean.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{
    Artifact, ArtifactKind, S2sOptions, S2sRequest, SamplerConfig, Session, SessionOptions,
    QUESTION_ID,
};
use serde_json::{json, Value};

use common::*;

const MAX_TOKENS: usize = 120;
const SEED: u64 = 11;

fn offline_request(i: usize, history: &[Artifact]) -> S2sRequest {
    S2sRequest {
        question: question(i).into(),
        history: history.to_vec(),
        return_codes: true,
        s2s: S2sOptions {
            max_new_tokens: MAX_TOKENS,
            audio: SamplerConfig::s2s_audio(SEED),
            ..S2sOptions::default()
        },
    }
}

async fn stream_turn(
    client: &reqwest::Client,
    url: &str,
    i: usize,
    artifacts: &[Value],
) -> (Vec<Value>, Value) {
    let body = json!({
        "model": "lfm2-audio-s2s",
        "stream_format": "sse",
        "request": {"audio": b64(&question(i)), "seed": SEED, "max_tokens": MAX_TOKENS,
                    "options": {"return_codes": true}, "artifacts": artifacts},
    });
    sse_task(client, url, &[], &body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_turns_over_sse_equal_the_rust_session() {
    let srv = server().await;
    let url = url(&srv, "/v1/tasks/stream");
    let client = reqwest::Client::new();
    let model = model();
    let offline = tokio::task::spawn_blocking(move || {
        let mut s = Session::new(model, SessionOptions::default());
        let mut history = Vec::new();
        let mut out = Vec::new();
        for i in 0..3 {
            let t = s.s2s(&offline_request(i, &history)).unwrap();
            history.push(Artifact {
                id: QUESTION_ID.into(),
                kind: ArtifactKind::Custom,
                payload: question(i),
                meta: BTreeMap::new(),
            });
            history.push(t.artifact.clone().unwrap());
            out.push(t);
        }
        out
    })
    .await
    .unwrap();

    let mut artifacts: Vec<Value> = Vec::new();
    let mut resumed = Vec::new();
    for (i, want) in offline.iter().enumerate() {
        let (events, result) = stream_turn(&client, &url, i, &artifacts).await;
        // The result: text, audio (16-bit WAV of the same samples), the reply artifact.
        assert_eq!(result["text"], want.reply.text);
        let wav = unb64(result["audio"].as_str().unwrap());
        assert_eq!(wav_i16(&wav), to_i16(&want.reply.audio), "turn {i} audio");
        assert_eq!(result["sample_rate"], 24_000);
        assert_eq!(result["channels"], 1);
        let art = &result["artifacts"][0];
        let want_art = want.artifact.as_ref().unwrap();
        assert_eq!(art["id"], "lfm2_audio.reply");
        assert_eq!(art["kind"], "acoustic_tokens");
        assert_eq!(
            unb64(art["payload"].as_str().unwrap()),
            want_art.payload,
            "turn {i} codes"
        );
        for (k, v) in &want_art.meta {
            let s = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            assert_eq!(art["meta"][k], s, "meta {k}");
        }
        assert_eq!(art["meta"].as_object().unwrap().len(), want_art.meta.len());
        assert!(result["timing"]["ttft_ms"].as_f64().unwrap() > 0.0);
        // The events add up to the result.
        let mut text = String::new();
        let mut audio = Vec::new();
        for e in &events {
            if let Some(t) = e["partial_text"]["text"].as_str() {
                text.push_str(t);
            }
            if let Some(a) = e["audio"].as_str() {
                audio.extend(wav_i16(&unb64(a)));
            }
        }
        assert_eq!(text, want.reply.text);
        assert_eq!(audio, to_i16(&want.reply.audio));
        assert_eq!(events.last().unwrap()["is_final"], true);
        // Affinity: one conversation, one session; its earlier blocks are restored.
        resumed.push(
            result["lfm2_audio"]["resumed_prefill_positions"]
                .as_u64()
                .unwrap(),
        );
        assert_eq!(
            result["lfm2_audio"]["resumed_prefill_positions"]
                .as_u64()
                .unwrap() as usize,
            want.reply.resumed_prefill_steps
        );
        assert_eq!(result["lfm2_audio"]["reused_questions"], i);
        if i > 0 {
            assert_eq!(result["lfm2_audio"]["affinity"], true);
        }
        artifacts.push(question_artifact(&question(i)));
        artifacts.push(art.clone());
    }
    println!("resumed prefill positions per turn: {resumed:?}");
    let metrics = get_text(&client, &crate::url(&srv, "/metrics")).await;
    assert!(
        metrics.contains("serve_requests_total{route=\"/v1/tasks/stream\",status=\"200\"} 3"),
        "{metrics}"
    );
    assert!(
        metrics.contains("serve_time_to_first_audio_seconds_count 3"),
        "{metrics}"
    );
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_going_away_stops_generation_and_frees_the_session() {
    let mut s = settings();
    s.slots = 1;
    let srv = server_with(s).await;
    let client = reqwest::Client::new();
    let body = json!({"model": "lfm2-audio-s2s", "stream_format": "sse",
                      "request": {"audio": b64(&question(0)), "max_tokens": 4000}});
    let mut resp = client
        .post(url(&srv, "/v1/tasks/stream"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let first = resp.chunk().await.unwrap().unwrap();
    assert!(first.starts_with(b"data: "));
    let t = Instant::now();
    drop(resp);
    // The only session is free again long before 4000 steps could have run.
    let pool = srv.state.entries[0].pool.clone();
    while pool.active() > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the session never came back"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!("session back {:?} after the disconnect", t.elapsed());
    // And it serves the next request normally.
    let body = json!({"model": "lfm2-audio-s2s", "request": {"audio": b64(&question(1)), "max_tokens": 30}});
    let r = client
        .post(url(&srv, "/v1/tasks/run"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let m = get_text(&client, &url(&srv, "/metrics")).await;
    assert!(m.contains("serve_client_disconnects_total 1"), "{m}");
    srv.shutdown().await.unwrap();
}
