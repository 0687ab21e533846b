//! A bounded load run on the demo package: 8 concurrent clients, each a 5-turn conversation
//! over SSE: 0 errors and every reply byte-identical to the same conversation on a Rust
//! `Session`; then an overload run that gets clean 503s and nothing else. Prints time to first
//! audio (p50/p95) and throughput (see BENCHMARKS.md).

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

const CLIENTS: usize = 8;
const TURNS: usize = 5;
const MAX_TOKENS: usize = 30;

fn q(client: usize, turn: usize) -> Vec<u8> {
    question((client + turn) % 6)
}

/// The conversation offline: per turn (text, 16-bit samples, reply payload).
fn offline(client: usize) -> Vec<(String, Vec<i16>, Vec<u8>)> {
    let mut s = Session::new(model(), SessionOptions::default());
    let mut history: Vec<Artifact> = Vec::new();
    let mut out = Vec::new();
    for t in 0..TURNS {
        let r = s
            .s2s(&S2sRequest {
                question: q(client, t).into(),
                history: history.clone(),
                return_codes: true,
                s2s: S2sOptions {
                    max_new_tokens: MAX_TOKENS,
                    audio: SamplerConfig::s2s_audio(client as u64),
                    ..S2sOptions::default()
                },
            })
            .unwrap();
        let art = r.artifact.unwrap();
        out.push((r.reply.text, to_i16(&r.reply.audio), art.payload.clone()));
        history.push(Artifact {
            id: QUESTION_ID.into(),
            kind: ArtifactKind::Custom,
            payload: q(client, t),
            meta: BTreeMap::new(),
        });
        history.push(art);
    }
    out
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * p).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_clients_five_turns_then_overload() {
    let want: Vec<_> = tokio::task::spawn_blocking(|| (0..CLIENTS).map(offline).collect())
        .await
        .unwrap();
    let mut s = settings();
    s.slots = 2;
    // why: the two slots' replies batch their steps (`--batch 8`; the default runs each alone).
    s.batch = 8;
    let srv = server_on(s, batched_model).await;
    let stream_url = url(&srv, "/v1/tasks/stream");
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let u = stream_url.clone();
        tasks.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            let mut artifacts: Vec<Value> = Vec::new();
            let mut got = Vec::new();
            for t in 0..TURNS {
                let body = json!({"model": "lfm2-audio-s2s", "stream_format": "sse", "request": {
                    "audio": b64(&q(c, t)), "seed": c, "max_tokens": MAX_TOKENS,
                    "options": {"return_codes": true}, "artifacts": artifacts}});
                let start = Instant::now();
                let mut resp = http
                    .post(&u)
                    .header("x-conversation-id", format!("conv-{c}"))
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.status(), 200);
                let mut buf = Vec::new();
                let mut ttfa = None;
                while let Some(chunk) = resp.chunk().await.unwrap() {
                    if ttfa.is_none() && chunk.windows(8).any(|w| w == b"\"audio\":") {
                        ttfa = Some(start.elapsed());
                    }
                    buf.extend_from_slice(&chunk);
                }
                let ev = sse_events(&String::from_utf8(buf).unwrap());
                let done = ev.last().unwrap();
                assert_eq!(done["type"], "task.stream.done", "{done}");
                let r = &done["result"];
                let art = r["artifacts"][0].clone();
                got.push((
                    r["text"].as_str().unwrap().to_owned(),
                    wav_i16(&unb64(r["audio"].as_str().unwrap())),
                    unb64(art["payload"].as_str().unwrap()),
                    ttfa,
                    r["lfm2_audio"]["resumed_prefill_positions"]
                        .as_u64()
                        .unwrap(),
                    r["lfm2_audio"]["affinity"].as_bool().unwrap(),
                ));
                artifacts.push(question_artifact(&q(c, t)));
                artifacts.push(art);
            }
            got
        }));
    }
    let mut ttfa = Vec::new();
    let mut audio_s = 0.0;
    let (mut resumed, mut affine) = (0, 0);
    for (c, task) in tasks.into_iter().enumerate() {
        let got = task.await.unwrap();
        for (t, g) in got.iter().enumerate() {
            assert_eq!(g.0, want[c][t].0, "client {c} turn {t} text");
            assert_eq!(g.1, want[c][t].1, "client {c} turn {t} audio");
            assert_eq!(g.2, want[c][t].2, "client {c} turn {t} codes");
            if let Some(d) = g.3 {
                ttfa.push(d.as_secs_f64() * 1e3);
            }
            audio_s += g.1.len() as f64 / 24_000.0;
            resumed += g.4;
            affine += usize::from(g.5);
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    let turns = CLIENTS * TURNS;
    println!(
        "load: {CLIENTS} clients x {TURNS} turns (max_tokens {MAX_TOKENS}, 2 sessions, 1 thread): \
         0 errors, {turns} replies byte-identical; wall {wall:.2} s, {:.1} turns/s, {:.2} s audio/s; \
         time to first audio p50 {:.1} ms p95 {:.1} ms ({} turns with audio); \
         prefill positions resumed {resumed}, turns on their previous session {affine}",
        turns as f64 / wall,
        audio_s / wall,
        percentile(&mut ttfa.clone(), 0.5),
        percentile(&mut ttfa, 0.95),
        ttfa.len(),
    );
    // The two slots' replies ran their steps in shared ticks (the model's step scheduler).
    let m = get_text(&reqwest::Client::new(), &url(&srv, "/metrics")).await;
    let widest = m
        .lines()
        .find(|l| l.starts_with("serve_step_tick_widest{"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<u64>().ok());
    assert!(
        matches!(widest, Some(2..)),
        "no tick ran two replies' steps:\n{m}"
    );
    srv.shutdown().await.unwrap();

    // Overload: 2 sessions, 2 waiting at most for 50 ms; 16 at once.
    let mut s = settings();
    s.slots = 2;
    s.max_queue = 2;
    s.busy_timeout_ms = 50;
    let srv = server_with(s).await;
    let u = url(&srv, "/v1/tasks/run");
    let mut tasks = Vec::new();
    for i in 0..16 {
        let u = u.clone();
        tasks.push(tokio::spawn(async move {
            let body = json!({"model": "lfm2-audio-s2s", "request": {"audio": b64(&question(i % 6)), "max_tokens": 80}});
            let r = reqwest::Client::new().post(&u).json(&body).send().await.unwrap();
            let status = r.status().as_u16();
            let v: Value = r.json().await.unwrap();
            (status, v)
        }));
    }
    let (mut ok, mut busy) = (0, 0);
    for t in tasks {
        let (status, v) = t.await.unwrap();
        match status {
            200 => ok += 1,
            503 => {
                assert_eq!(v["error"]["type"], "server_busy");
                busy += 1;
            }
            other => panic!("status {other}: {v}"),
        }
    }
    println!("overload: 16 at once on 2 sessions, queue 2, wait 50 ms: {ok} x 200, {busy} x 503 server_busy");
    assert!(busy > 0 && ok >= 2, "{ok} ok, {busy} busy");
    let _ = Duration::ZERO;
    srv.shutdown().await.unwrap();
}
