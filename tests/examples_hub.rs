//! The example binaries with `--hf REPO:QUANT` against a stand-in hub on loopback (audio-engine's
//! `tests/hub_server`) serving the demo package: `asr` and `tts` print and write exactly what
//! they do with `--model DIR` on the same files, and with the hub gone, `--offline` (and the
//! unreachable hub without it) still runs from the cache. The examples are built by
//! `cargo test` (the dev build has the `hub` feature); the environment is the child's, so the
//! test changes none of its own.

mod common;
#[path = "../audio-engine/tests/hub_server/mod.rs"]
mod hub_server;

use std::path::{Path, PathBuf};
use std::process::Command;

use audio_tooling::demo::ensure_demo_package;

use hub_server::{File, HubServer};

/// `target/<profile>/examples/NAME`, next to this test's `deps/`.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().join("examples");
    let path = dir.join(name);
    assert!(path.is_file(), "{} is not built", path.display());
    path
}

/// Runs an example with `args` against the hub at `endpoint` and the cache `cache`; its stdout.
fn run(name: &str, args: &[&str], endpoint: &str, cache: &Path) -> String {
    let out = Command::new(example(name))
        .args(args)
        .env("HF_ENDPOINT", endpoint)
        .env("HF_HUB_CACHE", cache)
        .env_remove("HF_HUB_OFFLINE")
        .env_remove("HF_TOKEN")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{name} {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_examples_fetch_with_hf_and_match_the_same_files_by_directory() {
    let demo = common::demo_package();
    let paths = ensure_demo_package(demo).unwrap();
    let mut srv = HubServer::start();
    srv.add_repo("test-org/Demo-GGUF", &"d".repeat(40), File::package(&paths));
    let endpoint = srv.endpoint();
    let scratch = std::env::temp_dir().join(format!("examples-hub-{}", std::process::id()));
    let cache = scratch.join("hub");
    std::fs::create_dir_all(&scratch).unwrap();
    let dir = demo.to_str().unwrap();
    let hf = "test-org/Demo-GGUF:F32";

    // TTS by directory and by hub: the same WAV bytes.
    let (by_dir, by_hub) = (scratch.join("dir.wav"), scratch.join("hub.wav"));
    let tts = |model: &[&str], out: &Path| {
        let mut args = model.to_vec();
        args.extend(["--threads", "1", "--max-tokens", "64", "--out"]);
        args.push(out.to_str().unwrap());
        args.push("Hello there.");
        run("tts", &args, &endpoint, &cache)
    };
    tts(&["--model", dir], &by_dir);
    let first = tts(&["--hf", hf], &by_hub);
    assert!(first.contains("4 downloaded"), "{first}");
    assert_eq!(
        std::fs::read(&by_dir).unwrap(),
        std::fs::read(&by_hub).unwrap()
    );

    // ASR of a 2 s test signal by directory and by hub: the same transcript line.
    let wav = scratch.join("signal.wav");
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(&wav, spec).unwrap();
    for t in 0..32_000i32 {
        w.write_sample((((t * 13) % 400 - 200) * 50) as i16)
            .unwrap();
    }
    w.finalize().unwrap();
    let input = wav.to_str().unwrap();
    let asr = |model: &[&str]| {
        let mut args = model.to_vec();
        args.extend(["--threads", "1", "--max-tokens", "16", input]);
        run("asr", &args, &endpoint, &cache)
    };
    let want = asr(&["--model", dir]);
    let got = asr(&["--hf", hf]);
    assert_eq!(got.lines().last(), want.lines().last(), "{got}");
    assert!(
        got.contains("0 downloaded"),
        "the second fetch is from the cache: {got}"
    );

    // The hub gone: --offline runs from the cache, and so does a run that finds it unreachable.
    srv.stop();
    let offline = asr(&["--hf", hf, "--offline"]);
    assert_eq!(offline.lines().last(), want.lines().last(), "{offline}");
    let unreachable = asr(&["--hf", hf]);
    assert_eq!(unreachable.lines().last(), want.lines().last());
    let _ = std::fs::remove_dir_all(&scratch);
}
