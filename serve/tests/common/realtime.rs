//! Shared by the `/v1/realtime` tests: the socket helpers (connect, send, the next event, events
//! up to a type) and 24 kHz PCM16 audio (espeak-ng speech, silence, WAV, wire bytes).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

/// A client socket to the server.
pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The demo package's S2S entry, the model the sockets ask for.
pub const MODEL: &str = "lfm2-audio-s2s";

/// Opens `/v1/realtime?model=MODEL{query}` and takes its `session.created`.
pub async fn connect(srv: &serve::Running, query: &str) -> Ws {
    let url = format!("ws://{}/v1/realtime?model={MODEL}{query}", srv.addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let hello = next(&mut ws).await;
    assert_eq!(hello["type"], "session.created", "{hello}");
    ws
}

/// Sends one client event.
pub async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::text(v.to_string())).await.unwrap();
}

/// The next server event (within 60 s).
pub async fn next(ws: &mut Ws) -> Value {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(60), ws.next())
            .await
            .expect("a server event within 60 s")
            .expect("the socket is open")
            .unwrap();
        if let Message::Text(t) = m {
            return serde_json::from_str(t.as_str()).unwrap();
        }
    }
}

/// Events up to and including the first of type `kind`.
pub async fn until(ws: &mut Ws, kind: &str) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let e = next(ws).await;
        let done = e["type"] == kind;
        out.push(e);
        if done {
            return out;
        }
    }
}

/// Speech by espeak-ng (`espeak-ng ARGS -w WAV TEXT`; `-m` makes TEXT SSML) resampled to 24 kHz
/// PCM16, written through `wav`; `None` when espeak-ng is missing or fails (the caller decides
/// whether that skips or fails).
pub fn espeak_24k(wav: &Path, args: &[&str], text: &str) -> Option<Vec<i16>> {
    let ok = Command::new("espeak-ng")
        .args(args)
        .arg("-w")
        .arg(wav)
        .arg(text)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return None;
    }
    let mut r = hound::WavReader::open(wav).unwrap();
    let rate = r.spec().sample_rate;
    let x: Vec<f32> = r
        .samples::<i16>()
        .map(|s| f32::from(s.unwrap()) / 32768.0)
        .collect();
    let mut y = Vec::new();
    voice_activity::Resampler::new(rate, 24_000)
        .unwrap()
        .process(&x, &mut y);
    Some(
        y.iter()
            .map(|v| (v.clamp(-1.0, 1.0) * 32767.0) as i16)
            .collect(),
    )
}

/// Silence, `ms` long at 24 kHz.
pub fn silence(ms: usize) -> Vec<i16> {
    vec![0; ms * 24]
}

/// PCM16 samples as the little-endian bytes `input_audio_buffer.append` carries.
pub fn pcm_bytes(s: &[i16]) -> Vec<u8> {
    s.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// 24 kHz PCM16 as a WAV, written here with hound (not the server's writer).
pub fn wav_24k(s: &[i16]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 24_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
    for &v in s {
        w.write_sample(v).unwrap();
    }
    w.finalize().unwrap();
    out.into_inner()
}
