//! Shared by the server tests: the demo package loaded once per test binary (and a damaged copy
//! of it), servers in process and as child processes, HTTP helpers, synthetic questions, the
//! SSE reader, metrics lines and the tools some tests need from the system.
#![allow(dead_code)]

pub mod realtime;
pub mod webdriver;

use std::io::BufRead;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use audio_engine::lfm2_audio::{Lfm2Audio, ModelOptions};
use audio_tooling::{default_demo_dir, load_demo};
use base64::Engine as _;
use serde_json::{json, Value};
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

/// The demo package loaded once more, batching its replies' steps from two replies on
/// (`max_batch` 8, `batch_from` 2: what `--batch 8 --batch-from 2` gives a server that loads
/// its model itself).
pub fn batched_model() -> Lfm2Audio {
    static M: OnceLock<Lfm2Audio> = OnceLock::new();
    M.get_or_init(|| {
        load_demo(
            &default_demo_dir(),
            ModelOptions {
                n_threads: 1,
                max_batch: 8,
                batch_from: 2,
                ..ModelOptions::default()
            },
        )
        .expect("loading the demo package")
    })
    .clone()
}

/// A copy of the demo package whose audio-code embedding table (in the mmproj file) is all NaN.
///
/// It loads, and everything before the first audio frame is fed back runs as on the demo
/// package (the encoder, the prompt, the text steps and the first frame), so a reply starts
/// normally; fed back, that frame makes the backbone's hidden state NaN, which the depthformer
/// refuses for the next frame. A real failure in the middle of a generation, the same every run.
pub fn poisoned_model() -> Lfm2Audio {
    use audio_engine::ggml::gguf::GgufFile;
    use audio_engine::ggml::GgmlType;
    use audio_engine::lfm2_audio::internals::engine::AUDIO_CODE_TABLE;
    use std::io::{Seek, SeekFrom, Write};

    static M: OnceLock<Lfm2Audio> = OnceLock::new();
    M.get_or_init(|| {
        model(); // makes sure the demo package exists
        let dir = scratch("poisoned-package");
        let mut mmproj = None;
        for e in std::fs::read_dir(default_demo_dir()).unwrap() {
            let e = e.unwrap();
            let to = dir.join(e.file_name());
            std::fs::copy(e.path(), &to).unwrap();
            if e.file_name().to_string_lossy().starts_with("mmproj-") {
                mmproj = Some(to);
            }
        }
        let mmproj = mmproj.expect("the demo package has an mmproj file");
        let (offset, n) = {
            let g = GgufFile::open(&mmproj).unwrap();
            let t = g.require_tensor(AUDIO_CODE_TABLE).unwrap();
            assert_eq!(t.ggml_type(), GgmlType::F32, "the demo package is F32");
            (t.file_offset(), t.n_bytes())
        };
        let nan: Vec<u8> = (0..n / 4).flat_map(|_| f32::NAN.to_le_bytes()).collect();
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&mmproj)
            .unwrap();
        f.seek(SeekFrom::Start(offset)).unwrap();
        f.write_all(&nan).unwrap();
        drop(f);
        Lfm2Audio::load(
            &dir,
            ModelOptions {
                n_threads: 1,
                ..ModelOptions::default()
            },
        )
        .expect("the damaged package still loads")
    })
    .clone()
}

/// A scratch directory private to this test binary, emptied when a test asks for it.
///
/// Named after the test binary rather than the process, so that runs reuse it: one named by
/// process id per run left ~100 MB behind each time.
pub fn scratch(name: &str) -> PathBuf {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "unknown".into());
    let d = std::env::temp_dir()
        .join(format!("serve-tests-{binary}"))
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
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

/// A server over `m` with `settings`.
pub async fn server_on(s: Settings, m: fn() -> Lfm2Audio) -> Running {
    let m = tokio::task::spawn_blocking(m).await.unwrap();
    serve::start(s, Some(m)).await.expect("starting the server")
}

/// A server over the shared demo model with `settings`.
pub async fn server_with(s: Settings) -> Running {
    server_on(s, model).await
}

/// A server with the test settings.
pub async fn server() -> Running {
    server_with(settings()).await
}

/// The base URL.
pub fn url(r: &Running, path: &str) -> String {
    format!("http://{}{path}", r.addr)
}

/// A task route body: `{"model", "request"}`.
pub fn task(model: &str, request: Value) -> Value {
    json!({"model": model, "request": request})
}

/// POSTs `body` as JSON and reads the answer as JSON (whatever the status).
pub async fn post_json(c: &reqwest::Client, url: &str, body: &Value) -> Value {
    c.post(url)
        .json(body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// GETs `url` as JSON.
pub async fn get_json(c: &reqwest::Client, url: &str) -> Value {
    c.get(url).send().await.unwrap().json().await.unwrap()
}

/// GETs `url` as text.
pub async fn get_text(c: &reqwest::Client, url: &str) -> String {
    c.get(url).send().await.unwrap().text().await.unwrap()
}

/// The sum of the values of the metrics lines whose name (and labels) start with `prefix`.
pub fn metric_sum(metrics: &str, prefix: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(prefix) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A deterministic 16 kHz mono 16-bit WAV of `n` samples: sample `t` is
/// `((t * step) % period - period / 2) * scale`.
pub fn saw_wav(n: usize, step: usize, period: usize, scale: i32) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
    let half = (period / 2) as i32;
    for t in 0..n {
        let v = ((t * step) % period) as i32 - half;
        w.write_sample((v * scale) as i16).unwrap();
    }
    w.finalize().unwrap();
    out.into_inner()
}

/// A deterministic 16 kHz question, different per `i` (1.5 s + 0.5 s per i).
pub fn question(i: usize) -> Vec<u8> {
    saw_wav(24_000 + 8_000 * i, 7 + 3 * i, 400, 60)
}

/// The question artifact of an earlier turn, as a task request carries it.
pub fn question_artifact(wav: &[u8]) -> Value {
    json!({"id": "lfm2_audio.question", "kind": "custom", "payload": b64(wav)})
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

/// Reads a streamed body chunk by chunk to its end. Panics if the connection breaks before
/// the body is complete (a dropped connection, not an answer).
pub async fn read_to_end(mut resp: reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(c)) => body.extend_from_slice(&c),
            Ok(None) => return body,
            Err(e) => panic!(
                "the body broke off after {} bytes: {e}\n{}",
                body.len(),
                String::from_utf8_lossy(&body)
            ),
        }
    }
}

/// One SSE turn on `/v1/tasks/stream`: checks the status, the content type and that the
/// stream is events then `task.stream.done`; returns the events' `event` objects and the
/// result.
pub async fn sse_task(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (Vec<Value>, Value) {
    let mut req = client.post(url).json(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let events = sse_events(&String::from_utf8(read_to_end(resp).await).unwrap());
    let (last, rest) = events.split_last().expect("an SSE event");
    assert_eq!(last["type"], "task.stream.done", "{last}");
    for e in rest {
        assert_eq!(e["type"], "task.stream.event", "{e}");
    }
    (
        rest.iter().map(|e| e["event"].clone()).collect(),
        last["result"].clone(),
    )
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

/// The path of `bin` on `PATH` (or, for system daemons, in `/usr/sbin`), if installed.
pub fn installed(bin: &str) -> Option<String> {
    let out = Command::new("sh")
        .args([
            "-c",
            &format!("command -v {bin} || ls /usr/sbin/{bin} 2>/dev/null"),
        ])
        .output()
        .ok()?;
    let p = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()?
        .trim()
        .to_owned();
    (out.status.success() && !p.is_empty()).then_some(p)
}

/// A free loopback port (for programs that take a port, not a listener).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed on drop.
pub struct Kill(pub Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the serve binary with `args` (on the demo package unless they name a model or a
/// config) and waits for its "listening" line; returns it and its base URL.
///
/// why `--model`: the product binary has no demo package built in (feature `demo`, off by
/// default), so the tests name the directory this binary's tooling wrote it to.
pub fn spawn_serve(args: &[&str]) -> (Kill, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_serve"));
    if !args.iter().any(|a| *a == "--model" || *a == "--config") {
        model(); // makes sure the demo package exists
        cmd.arg("--model").arg(default_demo_dir());
    }
    let mut child = cmd
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let base = listening(&mut child);
    (Kill(child), base)
}

/// Waits for a spawned serve's "listening" line on its piped stdout; returns its base URL.
pub fn listening(child: &mut Child) -> String {
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("serve's stdout is piped"))
        .read_line(&mut line)
        .unwrap();
    line.trim()
        .strip_prefix("serve: listening on ")
        .unwrap_or_else(|| panic!("serve printed {line:?}"))
        .to_owned()
}

/// The repository's README.
pub fn readme() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}
