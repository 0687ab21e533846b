//! Shared by the server tests: the demo package loaded once per test binary, a server on an
//! ephemeral loopback port, synthetic questions and an SSE reader.
#![allow(dead_code)]

use std::sync::OnceLock;

use audio_engine::lfm2_audio::{default_demo_dir, load_demo, Lfm2Audio, ModelOptions};
use base64::Engine as _;
use serde_json::Value;
use serve::config::{entries_for, Settings};
use serve::Running;

/// The demo package, one compute thread (the CI machines have two cores).
pub fn model() -> Lfm2Audio {
    static M: OnceLock<Lfm2Audio> = OnceLock::new();
    M.get_or_init(|| {
        load_demo(
            &default_demo_dir(),
            ModelOptions {
                n_threads: 1,
                ..ModelOptions::default()
            },
        )
        .expect("loading the demo package")
    })
    .clone()
}

/// Test settings: loopback, any port, the three demo entries.
pub fn settings() -> Settings {
    Settings {
        host: "127.0.0.1".into(),
        port: 0,
        threads: 1,
        models: entries_for("lfm2-audio", None),
        ..Settings::default()
    }
}

/// A server over the shared demo model with `settings`.
pub async fn server_with(s: Settings) -> Running {
    let m = tokio::task::spawn_blocking(model).await.unwrap();
    serve::start(s, Some(m)).await.expect("starting the server")
}

/// A server with the test settings.
pub async fn server() -> Running {
    server_with(settings()).await
}

/// The base URL.
pub fn url(r: &Running, path: &str) -> String {
    format!("http://{}{path}", r.addr)
}

/// A deterministic 16 kHz question, different per `i` (1.5 s + 0.5 s per i).
pub fn question(i: usize) -> Vec<u8> {
    let n = 24_000 + 8_000 * i;
    let mut out = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
    for t in 0..n {
        let v = ((t * (7 + 3 * i)) % 400) as i32 - 200;
        w.write_sample((v * 60) as i16).unwrap();
    }
    w.finalize().unwrap();
    out.into_inner()
}

pub fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

pub fn unb64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

/// The `data:` payloads of an SSE body, in order (`[DONE]` kept as a string value).
pub fn sse_events(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|frame| frame.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap_or(Value::String(d.to_owned())))
        .collect()
}

/// Samples of a 16-bit PCM WAV.
pub fn wav_i16(wav: &[u8]) -> Vec<i16> {
    let r = hound::WavReader::new(std::io::Cursor::new(wav)).unwrap();
    assert_eq!(r.spec().bits_per_sample, 16);
    r.into_samples::<i16>().map(|s| s.unwrap()).collect()
}

/// Samples as the server writes them.
pub fn to_i16(samples: &[f32]) -> Vec<i16> {
    serve::audio_io::to_i16(samples)
}

/// Asserts the error envelope with `status` and `kind`; returns the message.
pub async fn expect_error(resp: reqwest::Response, status: u16, kind: &str) -> String {
    assert_eq!(resp.status().as_u16(), status);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], kind, "{v}");
    v["error"]["message"].as_str().unwrap().to_owned()
}
