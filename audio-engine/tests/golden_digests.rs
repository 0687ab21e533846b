//! Golden digests of every end-to-end output on the tiny package, F32, Q8_0 and Q4_0: ASR (tokens,
//! text), TTS (text, steps, audio), offline and streamed S2S, a three-turn `Session`
//! conversation (each turn's text, steps, audio, reply artifact payload and meta) and the
//! detokenizer's waveform, each compared with the digests recorded for this CPU variant in
//! `tests/fixtures/golden_digests/<variant>.txt`.
//!
//! The digests were recorded on the engine before its compute state was split from the model,
//! so any refactor that keeps them proves it changed no output bit. On a mismatch the test
//! prints every actual line (copy them into the file only when a change of output is
//! intended), or regenerate the file's lines with
//! `GOLDEN_UPDATE=1 cargo test -p lfm2-audio-engine --test golden_digests`.
//!
//! Inputs are all 16 kHz (no resampling). The digest is documented in the fixture's header.
//!
//! Why per variant: ggml's CPU kernels are compiled per instruction-set level (one chosen at run
//! time) or for the build machine (`GGML_SYS_CPU=native`), and AVX2 and AVX-512 kernels round
//! differently, so the same engine gives other bits on another CPU. The variant is
//! [`cpu_variant`] (architecture + the features of the CPU level in use). On a variant without a
//! recorded file the test says so and checks nothing (record one with `GOLDEN_UPDATE=1` on that
//! machine, from an engine whose outputs are trusted).
//!
//! Every level: these tests run at the best level this CPU has, and
//! `every_lower_cpu_level_matches_its_golden_digests` runs them again in a child process per
//! lower level this CPU runs (`LFM2_CPU_LEVEL=<level>` forces it; add `GOLDEN_UPDATE=1` to
//! record that level's file).

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use audio_engine::ggml::cpu::cpu_level;
use audio_engine::ggml::{cpu_variant, Backend};
use audio_engine::lfm2_audio::conversation::artifact::ReplyStep;
use audio_engine::lfm2_audio::conversation::{Artifact, ArtifactKind, QUESTION_ID};
use audio_engine::lfm2_audio::internals::detokenizer::{Detokenizer, DetokenizerOptions};
use audio_engine::lfm2_audio::internals::package::ModelPackage;
use audio_engine::lfm2_audio::internals::package::Quant;
use audio_engine::lfm2_audio::internals::sampling::SamplerConfig;
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{
    AsrOptions, ReplyEvent, ReplyResult, S2sOptions, S2sRequest, Session, SessionOptions,
    TtsOptions, Voice,
};

use common::lfm2_tiny::{input_signal, reference};
use common::package::{engine, package};
use common::wav::question;

/// 64-bit FNV-1a (offset basis 0xcbf29ce484222325, prime 0x100000001b3) over `bytes`.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// What one output is digested as, so that every kind has one byte encoding.
fn hex(bytes: &[u8]) -> String {
    format!("{:016x} {}", fnv1a(bytes), bytes.len())
}

fn u32s(v: &[u32]) -> String {
    hex(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>())
}

fn f32s(v: &[f32]) -> String {
    hex(&v
        .iter()
        .flat_map(|x| x.to_bits().to_le_bytes())
        .collect::<Vec<_>>())
}

fn text(s: &str) -> String {
    hex(s.as_bytes())
}

/// Steps as a reply artifact's payload holds them: a text step is its id, a frame is -1 and
/// then its codes, each a little-endian i32.
fn steps(v: &[ReplyStep]) -> String {
    let mut out = Vec::new();
    for s in v {
        match s {
            ReplyStep::Text(t) => out.extend((*t as i32).to_le_bytes()),
            ReplyStep::Frame(c) => {
                out.extend((-1i32).to_le_bytes());
                for &x in c {
                    out.extend((x as i32).to_le_bytes());
                }
            }
        }
    }
    hex(&out)
}

fn reply(d: &mut Digests, key: &str, r: &ReplyResult) {
    d.put(&format!("{key}.text"), text(&r.text));
    d.put(&format!("{key}.steps"), steps(&r.steps));
    d.put(&format!("{key}.audio"), f32s(&r.audio));
    d.put(&format!("{key}.ended"), r.ended.to_string());
}

/// Digests by key, for one package type.
struct Digests {
    prefix: &'static str,
    map: BTreeMap<String, String>,
}

impl Digests {
    fn put(&mut self, key: &str, value: String) {
        let key = format!("{}.{key}", self.prefix);
        assert!(self.map.insert(key.clone(), value).is_none(), "{key} twice");
    }
}

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden_digests")
}

fn fixture_path() -> PathBuf {
    fixture_dir().join(format!("{}.txt", cpu_variant()))
}

const HEADER: &str = "\
# Golden digests of the end-to-end outputs on the tiny package (tests/golden_digests.rs).
#
# Each line is `<type>.<path> = <digest>`. A digest is the 64-bit FNV-1a hash (offset basis
# 0xcbf29ce484222325, prime 0x100000001b3) of the output's bytes as 16 hex digits, then the
# number of bytes: token ids and codes as little-endian u32 each, audio as the little-endian
# bits of each f32 sample, text as UTF-8, reply steps as a reply artifact's payload (a text step
# its id, a frame -1 then its codes, little-endian i32 each), artifact meta as its JSON text.
# `ended` values are written as they are.
#
# Recorded for the CPU variant the file is named after, with one ggml thread per engine and the
# default weight placement: quantized matrices in the CPU backend's extra buffer types where ggml
# has kernels for them (`CPU_REPACK`: Q4_0 with AVX2; `AMX`: Q4_0 and Q8_0 on CPUs with AMX-INT8,
# which come first), so those lines pin those kernels' bits (`LFM2_NO_REPACK=1` computes the
# plain kernels' other bits; F32 has no such kernel and is the same either way).
# Regenerate (only when an output change is intended, on a machine of that variant) with:
#   GOLDEN_UPDATE=1 cargo test -p lfm2-audio-engine --test golden_digests
";

fn read_fixture() -> BTreeMap<String, String> {
    let Ok(s) = std::fs::read_to_string(fixture_path()) else {
        return BTreeMap::new();
    };
    s.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_once(" = "))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Compares `d` with the fixture's lines of its type, or rewrites them with `GOLDEN_UPDATE=1`.
fn check(d: Digests) {
    // why: the tests of this binary run at once and share the file.
    static FILE: Mutex<()> = Mutex::new(());
    let _guard = FILE.lock().unwrap_or_else(|e| e.into_inner());
    let mut file = read_fixture();
    let prefix = format!("{}.", d.prefix);
    let want: BTreeMap<_, _> = file
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if std::env::var_os("GOLDEN_UPDATE").is_none() && !fixture_path().exists() {
        let known: Vec<String> = std::fs::read_dir(fixture_dir())
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        ci_skip::skip(
            &format!("golden digests {}", d.prefix),
            &format!(
                "no golden digests are recorded for CPU variant {} (recorded: {known:?}); {} \
                 digests computed; record them with GOLDEN_UPDATE=1",
                cpu_variant(),
                d.map.len()
            ),
        );
        return;
    }
    if std::env::var_os("GOLDEN_UPDATE").is_some() {
        file.retain(|k, _| !k.starts_with(&prefix));
        file.extend(d.map);
        let mut out = HEADER.to_owned();
        for (k, v) in &file {
            out.push_str(&format!("{k} = {v}\n"));
        }
        std::fs::write(fixture_path(), out).unwrap();
        println!(
            "rewrote the {} lines of {}",
            d.prefix,
            fixture_path().display()
        );
        return;
    }
    let mut bad = Vec::new();
    for (k, v) in &d.map {
        match want.get(k) {
            Some(w) if w == v => {}
            Some(w) => bad.push(format!("{k}: expected {w}, got {v}")),
            None => bad.push(format!("{k}: not in the fixture, got {v}")),
        }
    }
    for k in want.keys().filter(|k| !d.map.contains_key(*k)) {
        bad.push(format!("{k}: in the fixture, not produced"));
    }
    if !bad.is_empty() {
        println!("actual digests ({} lines):", d.map.len());
        for (k, v) in &d.map {
            println!("{k} = {v}");
        }
        panic!(
            "{} of {} digests differ:\n{}",
            bad.len(),
            d.map.len(),
            bad.join("\n")
        );
    }
    println!("{} digests match", d.map.len());
}

/// The fixture's detokenizer frames (`detok_codes`, codebook-major).
fn fixture_frames() -> Vec<[u32; 8]> {
    let r = reference();
    let shape = r.shape("detok_codes");
    let codes = r.i64("detok_codes");
    (0..shape[1])
        .map(|f| std::array::from_fn(|cb| codes[cb * shape[1] + f] as u32))
        .collect()
}

/// `n` pseudo-random frames of valid codes (as the detokenizer test's).
fn random_frames(n: usize, seed: u64) -> Vec<[u32; 8]> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            std::array::from_fn(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 33) % 2048) as u32
            })
        })
        .collect()
}

/// The variable that forces a CPU level in this test process (read here, not by the engine).
const LEVEL_ENV: &str = "LFM2_CPU_LEVEL";

/// Forces the level `LFM2_CPU_LEVEL` names, if set, before anything uses ggml's CPU code.
fn use_the_level_asked_for() {
    if let Some(level) = std::env::var_os(LEVEL_ENV) {
        let level = level.to_str().expect("a level name is ASCII");
        cpu_level::force(level).unwrap_or_else(|e| panic!("{LEVEL_ENV}={level}: {e}"));
    }
}

fn all_outputs(ty: Quant, prefix: &'static str, turns: usize) -> Digests {
    use_the_level_asked_for();
    println!(
        "CPU level {}, variant {}",
        cpu_level::in_use(),
        cpu_variant()
    );
    let mut d = Digests {
        prefix,
        map: BTreeMap::new(),
    };
    let e = engine(ty);

    // ASR, as lfm2_asr's greedy test asks.
    let asr = e
        .asr(
            &input_signal(),
            &AsrOptions {
                max_new_tokens: reference().asr_tokens().len(),
                ..Default::default()
            },
        )
        .unwrap();
    d.put("asr.tokens", u32s(&asr.tokens));
    d.put("asr.text", text(&asr.text));

    // TTS, as lfm2_s2s's voice test asks.
    let tts_opts = TtsOptions {
        max_new_tokens: 48,
        voice: Voice::UkMale,
        audio: SamplerConfig::tts_audio(5),
        ..Default::default()
    };
    let tts = e
        .tts("Hello there, numbers 2024 and voices.", &tts_opts)
        .unwrap();
    reply(&mut d, "tts", &tts);

    // S2S offline and streamed, as lfm2_s2s's streaming test asks.
    let s2s_opts = S2sOptions {
        max_new_tokens: 40,
        audio: SamplerConfig::s2s_audio(1234),
        ..Default::default()
    };
    let offline = e.s2s(&input_signal(), &s2s_opts).unwrap();
    reply(&mut d, "s2s", &offline);
    let mut stream = e.s2s_stream(input_signal(), &s2s_opts).unwrap();
    let (mut t, mut a) = (String::new(), Vec::new());
    while let Some(ev) = stream.next_event() {
        match ev {
            ReplyEvent::Text(x) => t.push_str(&x),
            ReplyEvent::Audio(x) => a.extend(x),
        }
    }
    let streamed = stream.wait().unwrap();
    d.put("s2s_stream.events.text", text(&t));
    d.put("s2s_stream.events.audio", f32s(&a));
    reply(&mut d, "s2s_stream", &streamed);

    // A multi-turn conversation through a Session, as lfm2_chat's asks.
    let mut session = Session::new(e.clone(), SessionOptions::default());
    let mut history: Vec<Artifact> = Vec::new();
    for i in 0..turns {
        let req = S2sRequest {
            question: question(i).into(),
            history: history.clone(),
            return_codes: true,
            s2s: S2sOptions {
                max_new_tokens: 300,
                text: SamplerConfig::GREEDY,
                audio: SamplerConfig::s2s_audio(7),
                ..Default::default()
            },
        };
        let turn = session.s2s(&req).unwrap();
        let key = format!("chat.turn{}", i + 1);
        reply(&mut d, &key, &turn.reply);
        let art = turn.artifact.unwrap();
        d.put(&format!("{key}.artifact.payload"), hex(&art.payload));
        d.put(
            &format!("{key}.artifact.meta"),
            text(&serde_json::to_string(&art.meta).unwrap()),
        );
        history.push(Artifact {
            id: QUESTION_ID.to_owned(),
            kind: ArtifactKind::Custom,
            payload: question(i),
            meta: BTreeMap::new(),
        });
        history.push(art);
    }

    // The detokenizer alone: the fixture's frames, and random frames over several segments.
    let pkg = ModelPackage::open_paths(package(ty)).unwrap();
    let be = Backend::cpu().unwrap();
    be.set_n_threads(1).unwrap();
    let mut det = Detokenizer::load(pkg.detokenizer, &pkg.vocoder, &be).unwrap();
    d.put(
        "detok.fixture",
        f32s(&det.decode(&fixture_frames()).unwrap()),
    );
    let segment = det.warmup_frames() + 3;
    det.set_options(DetokenizerOptions {
        segment_frames: segment,
    })
    .unwrap();
    d.put(
        "detok.segmented",
        f32s(&det.decode(&random_frames(3 * segment + 2, 11)).unwrap()),
    );
    d
}

#[test]
fn f32_outputs_match_the_golden_digests() {
    check(all_outputs(Quant::F32, "f32", 3));
}

#[test]
fn q8_0_outputs_match_the_golden_digests() {
    check(all_outputs(Quant::Q8_0, "q8_0", 2));
}

#[test]
fn q4_0_outputs_match_the_golden_digests() {
    check(all_outputs(Quant::Q4_0, "q4_0", 2));
}

/// The three tests above again at every lower level this CPU runs, one child process each (a
/// level is chosen once per process).
#[test]
fn every_lower_cpu_level_matches_its_golden_digests() {
    if std::env::var_os(LEVEL_ENV).is_some() {
        // A child (or a run asked for one level): the tests above check that level.
        return;
    }
    let levels = cpu_level::levels();
    let running: Vec<&str> = levels.iter().filter(|l| l.runs).map(|l| l.name).collect();
    // The highest is the one the tests above run at (nothing forces it in this process).
    let Some((_, lower)) = running.split_last() else {
        panic!("no CPU level runs here: {levels:?}");
    };
    for level in lower {
        let started = std::time::Instant::now();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "f32_outputs_match_the_golden_digests",
                "q8_0_outputs_match_the_golden_digests",
                "q4_0_outputs_match_the_golden_digests",
                "--nocapture",
            ])
            .env(LEVEL_ENV, level)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        // why: the child's lines (a skip's marker among them) belong in this test's output.
        println!("{stdout}");
        assert!(
            out.status.success(),
            "CPU level {level}:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // why: a filter that matched nothing would pass too.
        assert!(
            stdout.contains("test result: ok. 3 passed"),
            "CPU level {level}: {stdout}"
        );
        println!(
            "CPU level {level}: the digests match ({:.0} s)",
            started.elapsed().as_secs_f64()
        );
    }
    println!(
        "levels {running:?}: {} checked in child processes",
        lower.len()
    );
}
