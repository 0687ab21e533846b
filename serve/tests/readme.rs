//! The README's curl examples, taken from the README itself (so it cannot drift from what the
//! server does) and run with curl and jq against a server on the demo package: every route of
//! the README's route table has an example, each example succeeds, and each answer is checked
//! (the transcript and the speech WAV byte for byte against the Rust library). Skips (a marker
//! line; a failure with `CI=true`: ci-skip) when `curl`, `jq` or `base64` is not installed.
//! Also the README's config file example, read as TOML and as JSON, with flags over it; and its
//! OpenAI Python SDK example, run as written (the base URL replaced) with a Python that imports
//! `openai` (`$LFM2E_PYTHON`, else `python3`; skips without one, the same way), its printed
//! transcript and reply and its `hello.wav` checked against the routes' own answers to the same
//! requests.

mod common;

use std::process::Command;

use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{AsrOptions, TtsOptions, Voice};
use serde_json::Value;

use common::*;

/// The base-URL line the README's examples start with (replaced by the test server's).
const BASE_LINE: &str = "S=http://127.0.0.1:8080";

/// The first fenced ```` ```lang ```` block after `marker` in the README.
fn fenced_block(readme: &str, marker: &str, lang: &str) -> String {
    let at = readme
        .find(marker)
        .unwrap_or_else(|| panic!("the README has no {marker:?}"));
    let rest = &readme[at..];
    let fence = format!("```{lang}\n");
    let open = rest
        .find(&fence)
        .unwrap_or_else(|| panic!("no ```{lang} block after {marker:?}"))
        + fence.len();
    let close = rest[open..].find("\n```").expect("the block ends") + open;
    rest[open..close].to_owned()
}

/// The shell block under "Examples per route".
fn examples_block(readme: &str) -> String {
    fenced_block(readme, "Examples per route", "sh")
}

/// The block's commands: comment lines dropped, lines joined while a single-quoted string is
/// open or a line ends in `\`.
fn commands(block: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in block.lines() {
        if cur.is_empty() && (line.trim().is_empty() || line.trim_start().starts_with('#')) {
            continue;
        }
        if !cur.is_empty() {
            cur.push('\n');
        }
        cur.push_str(line);
        let open_quote = cur.matches('\'').count() % 2 == 1;
        if !open_quote && !line.ends_with('\\') {
            out.push(std::mem::take(&mut cur));
        }
    }
    assert!(cur.is_empty(), "an unterminated command: {cur}");
    out
}

/// The paths of the README's route table (`GET /health`, `POST /v1/tasks/run`, ...).
fn table_routes(readme: &str) -> Vec<String> {
    let at = readme.find("| route | what |").expect("the route table");
    readme[at..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .flat_map(|l| {
            let first = l.split('|').nth(1).unwrap_or("").to_owned();
            first
                .split('`')
                .skip(1)
                .step_by(2)
                .filter_map(|m| m.split_whitespace().nth(1))
                .map(|p| p.split(['[', '?']).next().unwrap().to_owned())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The JSON values a command printed (jq prints one per line or spread over lines).
fn json_values(out: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(out)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_curl_examples_work_against_a_server() {
    for bin in ["curl", "jq", "base64"] {
        if installed(bin).is_none() {
            ci_skip::skip(
                "the_readme_curl_examples_work_against_a_server",
                &format!("`{bin}` is not installed (apt-get install curl jq)"),
            );
            return;
        }
    }
    let readme = readme();
    let block = examples_block(&readme);
    let cmds = commands(&block);
    assert_eq!(cmds.first().map(String::as_str), Some(BASE_LINE), "{block}");
    assert!(cmds.iter().any(|c| c.starts_with("A=$(base64 -w0 q.wav)")));
    // A curl example for every route of the table.
    let routes = table_routes(&readme);
    assert!(routes.len() >= 8, "{routes:?}");
    for r in &routes {
        assert!(
            cmds.iter()
                .any(|c| c.starts_with("curl") && c.contains(&format!("$S{r}"))),
            "no curl example for {r}"
        );
    }

    let srv = server().await;
    let dir = scratch("readme");
    let q = question(0);
    std::fs::write(dir.join("q.wav"), &q).unwrap();
    // The README's own assignments (A=..., the question's base64), with S pointing at this
    // server instead of port 8080.
    let base = url(&srv, "");
    let assignments: Vec<&str> = cmds
        .iter()
        .filter(|c| !c.starts_with("curl") && c.as_str() != BASE_LINE)
        .map(String::as_str)
        .collect();
    assert!(
        assignments.iter().all(|a| a.starts_with("A=")),
        "{assignments:?}"
    );
    let prelude = format!("set -o pipefail\nS={base}\n{}\n", assignments.join("\n"));
    let mut outputs = Vec::new();
    for (i, cmd) in cmds.iter().enumerate() {
        if cmd.starts_with("curl") {
            // Each example after the assignments, as a bash script would run it, with
            // pipefail so a failing curl is not hidden by jq or grep.
            let script = format!("{prelude}{cmd}\n");
            let o = tokio::task::spawn_blocking({
                let dir = dir.clone();
                move || {
                    Command::new("bash")
                        .arg("-c")
                        .arg(script)
                        .current_dir(dir)
                        .output()
                        .unwrap()
                }
            })
            .await
            .unwrap();
            let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
            assert!(
                o.status.success(),
                "example {i} failed ({:?}):\n{cmd}\n{stdout}\n{}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            );
            println!("example {i}: {} bytes out", stdout.len());
            outputs.push((cmd.clone(), stdout));
        }
    }

    let mut checked = Vec::new();
    for (cmd, out) in &outputs {
        let route = cmd
            .split("$S")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap()
            .to_owned();
        match route.as_str() {
            "/health" => assert_eq!(json_values(out)[0]["status"], "ok", "{out}"),
            "/health/ready" => assert_eq!(json_values(out)[0]["status"], "ready", "{out}"),
            "/v1/realtime/client_secrets" => assert_eq!(out.trim(), "lfm2-audio-s2s", "{out}"),
            "/v1/models" => {
                let ids: Vec<_> = json_values(out)[0]["data"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m["id"].as_str().unwrap().to_owned())
                    .collect();
                assert_eq!(ids, ["lfm2-audio-s2s", "lfm2-audio-asr", "lfm2-audio-tts"]);
            }
            "/metrics" => {
                assert!(!out.is_empty());
                assert!(out.contains("serve_requests_total{route=\"/health\",status=\"200\"}"));
                for l in out.lines() {
                    assert!(
                        l.starts_with("serve_requests_total") || l.starts_with('#'),
                        "{l}"
                    );
                }
            }
            "/v1/tasks/run" if cmd.contains("lfm2-audio-tts") => {
                assert_eq!(json_values(out), [Value::from(24_000)], "{out}");
            }
            "/v1/tasks/run" => {
                // `.text, .lfm2_audio`: the reply's text, then the cache figures.
                let v = json_values(out);
                assert_eq!(v.len(), 2, "{out}");
                assert!(v[0].is_string(), "{out}");
                assert!(v[1]["resumed_prefill_positions"].is_u64(), "{out}");
                assert!(v[1]["prompt_positions"].as_u64().unwrap() > 0, "{out}");
            }
            "/v1/tasks/stream" => {
                let ev = sse_events(out);
                let (last, rest) = ev.split_last().unwrap();
                assert_eq!(last["type"], "task.stream.done", "{last}");
                assert!(rest.iter().all(|e| e["type"] == "task.stream.event"));
            }
            "/v1/audio/transcriptions" => {
                // response_format=text: the transcript itself, as the library gives it for
                // the same file with the default options.
                let want = tokio::task::spawn_blocking({
                    let q = q.clone();
                    move || model().asr_wav(&q, &AsrOptions::default()).unwrap().text
                })
                .await
                .unwrap();
                assert_eq!(out, &want);
            }
            "/v1/audio/speech" => {
                // `-o hello.wav`: the WAV of the library's TTS for the same request.
                assert!(out.is_empty());
                assert!(cmd.contains("\"input\":\"Hello there.\",\"voice\":\"us-female\""));
                let got = std::fs::read(dir.join("hello.wav")).unwrap();
                let want = tokio::task::spawn_blocking(|| {
                    let opts = TtsOptions {
                        voice: Voice::UsFemale,
                        ..TtsOptions::default()
                    };
                    model().tts("Hello there.", &opts).unwrap().audio
                })
                .await
                .unwrap();
                assert_eq!(&got[..4], b"RIFF");
                assert_eq!(wav_i16(&got), to_i16(&want), "hello.wav samples");
                assert_eq!(got.len(), 44 + 2 * want.len());
            }
            "/v1/chat/completions" => {
                let v = json_values(out);
                assert_eq!(v.len(), 1, "{out}");
                assert!(v[0].is_string(), "{out}");
            }
            other => panic!("an example for a route this test does not know: {other}"),
        }
        checked.push(route);
    }
    for r in &routes {
        assert!(checked.contains(r), "{r} was not checked");
    }
    println!("{} README examples checked: {checked:?}", checked.len());
    srv.shutdown().await.unwrap();
}

/// The README's config file example (the ```toml block of its "Config file" paragraph).
fn config_block(readme: &str) -> String {
    fenced_block(readme, "Config file (`--config`", "toml")
}

#[test]
fn the_readme_config_file_reads_as_toml_and_json_and_flags_override_it() {
    use clap::Parser as _;
    use serve::config::{Cli, Settings};

    let toml_text = config_block(&readme());
    let dir = scratch("readme-config");
    let toml_path = dir.join("server.toml");
    std::fs::write(&toml_path, &toml_text).unwrap();
    // The same settings as JSON (the `.json` name selects the JSON reader).
    let as_json: Value = toml::from_str(&toml_text).unwrap();
    let json_path = dir.join("server.json");
    std::fs::write(&json_path, serde_json::to_string(&as_json).unwrap()).unwrap();
    for path in [&toml_path, &json_path] {
        let p = path.to_str().unwrap();
        let s = Settings::resolve(&Cli::parse_from(["serve", "--config", p])).unwrap();
        assert_eq!(s.host, "0.0.0.0");
        assert_eq!(s.port, 8080);
        assert_eq!(s.threads, 2);
        assert_eq!(s.slots, 2);
        assert_eq!(s.busy_timeout_ms, 300_000);
        assert_eq!(s.max_queue, 64);
        assert_eq!(s.max_body_bytes, 67_108_864);
        assert_eq!(s.max_audio_seconds, 60.0);
        assert_eq!(s.max_tokens, 4096);
        assert_eq!(s.max_streams, 64);
        assert!(s.cors_origins.is_empty());
        assert_eq!(s.api_key, None);
        assert_eq!(s.shutdown_timeout_ms, 10_000);
        assert_eq!(s.prefill_slots, 4);
        assert_eq!(s.kept_questions, 32);
        assert_eq!(s.models.len(), 1);
        let m = &s.models[0];
        assert_eq!(m.id, "lfm2-audio-s2s");
        assert_eq!(
            m.path.as_deref(),
            Some(std::path::Path::new("models/LFM2.5-Audio-1.5B-GGUF"))
        );
        assert_eq!((m.task.as_str(), m.family.as_str()), ("s2s", "lfm2_audio"));
        // Flags override the file.
        let cli = Cli::parse_from([
            "serve",
            "--config",
            p,
            "--port",
            "9000",
            "--slots",
            "3",
            "--max-tokens",
            "100",
        ]);
        let s = Settings::resolve(&cli).unwrap();
        assert_eq!((s.port, s.slots, s.max_tokens), (9000, 3, 100));
        assert_eq!(s.host, "0.0.0.0");
    }
    // A key the file format does not have is refused by name.
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, format!("threds = 3\n{toml_text}")).unwrap();
    let cli = Cli::parse_from(["serve", "--config", bad.to_str().unwrap()]);
    let err = Settings::resolve(&cli).unwrap_err().to_string();
    assert!(err.contains("threds"), "{err}");
}

/// The base URL of the README's Python example (replaced by the test server's).
const SDK_BASE_URL: &str = "base_url=\"http://127.0.0.1:8080/v1\"";

/// The ```python block of the README's OpenAI SDK paragraph.
fn python_block(readme: &str) -> String {
    fenced_block(readme, "With the official OpenAI Python SDK", "python")
}

/// A Python interpreter that imports `openai`: `$LFM2E_PYTHON`, else `python3`; Err says why
/// there is none.
fn python_with_openai() -> Result<String, String> {
    let py = std::env::var("LFM2E_PYTHON").unwrap_or_else(|_| "python3".into());
    match Command::new(&py).args(["-c", "import openai"]).output() {
        Ok(o) if o.status.success() => Ok(py),
        Ok(o) => Err(format!(
            "`{py} -c 'import openai'` failed ({}): pip install openai, or set LFM2E_PYTHON \
             to a Python that has it",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
        )),
        Err(e) => Err(format!("`{py}` cannot run ({e})")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_python_sdk_example_works_against_a_server() {
    let py = match python_with_openai() {
        Ok(py) => py,
        Err(why) => {
            ci_skip::skip("the_readme_python_sdk_example_works_against_a_server", &why);
            return;
        }
    };
    let snippet = python_block(&readme());
    assert_eq!(snippet.matches(SDK_BASE_URL).count(), 1, "{snippet}");
    for file in ["\"q.wav\"", "\"hello.wav\""] {
        assert!(
            snippet.contains(file),
            "{file} not in the snippet:\n{snippet}"
        );
    }

    let srv = server().await;
    let dir = scratch("readme-python");
    let q = question(0);
    // The snippet's files are relative to the directory it runs in: q.wav there, hello.wav
    // written there.
    std::fs::write(dir.join("q.wav"), &q).unwrap();
    let script = snippet.replace(SDK_BASE_URL, &format!("base_url=\"{}\"", url(&srv, "/v1")));
    std::fs::write(dir.join("example.py"), &script).unwrap();
    let o = tokio::task::spawn_blocking({
        let dir = dir.clone();
        move || {
            Command::new(py)
                .arg("example.py")
                .current_dir(dir)
                .env("PYTHONIOENCODING", "utf-8")
                // why: the SDK's HTTP client honours proxy variables; loopback goes direct.
                .env("NO_PROXY", "127.0.0.1,localhost")
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8(o.stdout).expect("UTF-8 output");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "the README's Python example failed ({:?}):\n{script}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        o.status
    );
    println!("the example printed:\n{stdout}");
    if !stderr.is_empty() {
        println!("the example's stderr:\n{stderr}");
    }

    // What the server answers the same requests with, not through the SDK.
    let c = reqwest::Client::new();
    let form = reqwest::multipart::Form::new()
        .part(
            "file",
            reqwest::multipart::Part::bytes(q.clone())
                .file_name("q.wav")
                .mime_str("audio/wav")
                .unwrap(),
        )
        .text("model", "lfm2-audio-asr");
    let transcript: Value = c
        .post(url(&srv, "/v1/audio/transcriptions"))
        .multipart(form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let transcript = transcript["text"]
        .as_str()
        .expect("a transcript")
        .to_owned();
    let speech = c
        .post(url(&srv, "/v1/audio/speech"))
        .json(
            &serde_json::json!({"model": "lfm2-audio-tts", "voice": "us-female",
                                  "input": "Hello there."}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(speech.status(), 200);
    let speech = speech.bytes().await.unwrap();
    let chat: Value = c
        .post(url(&srv, "/v1/chat/completions"))
        .json(&serde_json::json!({
            "model": "lfm2-audio-s2s", "modalities": ["text", "audio"],
            "audio": {"voice": "default", "format": "wav"},
            "messages": [{"role": "user", "content": [
                {"type": "input_audio", "input_audio": {"data": b64(&q), "format": "wav"}}]}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let reply = chat["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("no reply content: {chat}"))
        .to_owned();
    assert!(!reply.is_empty(), "an empty reply: {chat}");

    // The example prints the transcript, then the reply's text.
    assert_eq!(stdout, format!("{transcript}\n{reply}\n"), "{script}");
    // hello.wav: a 24 kHz mono 16-bit WAV, the bytes /v1/audio/speech gives for the request.
    let hello = std::fs::read(dir.join("hello.wav")).expect("the example wrote hello.wav");
    let spec = hound::WavReader::new(std::io::Cursor::new(&hello))
        .expect("hello.wav is a WAV")
        .spec();
    assert_eq!(
        (spec.sample_rate, spec.channels, spec.bits_per_sample),
        (24_000, 1, 16)
    );
    assert!(hello.len() > 44, "hello.wav has no samples");
    assert!(
        hello == speech,
        "hello.wav differs from /v1/audio/speech's answer"
    );
    srv.shutdown().await.unwrap();
}
