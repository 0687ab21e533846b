//! The LFM2-Audio engine on a device (`ModelOptions::device`: `vulkan:0` in a `vulkan` build,
//! `cuda:0` in a `cuda` one, or the device `LFM2E_TEST_DEVICE` names) against the same jobs on
//! the CPU: ASR, TTS and a two-turn speech-to-speech conversation with history on the tiny
//! packages (F32 and Q4_0).
//!
//! On the device, the weights live in device buffers, the decode caches and the depthformer's
//! frame state in device memory, and every graph runs through ggml's backend scheduler with the
//! CPU as fallback. The device's kernels sum in another order than the CPU's, so the bits
//! differ; what is compared:
//! - teacher-forced, on the same inputs: the backbone's logits and hidden states over a prefill
//!   and single-position steps, and the detokenizer's audio for the same codes, within stated
//!   tolerances (the errors are printed);
//! - ASR's greedy tokens and TTS's greedy codes: identical to the CPU's for these lengths (the
//!   tiny model's 32-step TTS reply is too short to give audio, so its audio check compares none);
//! - speech-to-speech: the tiny package's random weights give near-ties between logits, which
//!   the small differences flip; the replies agree up to the printed step (at least the first
//!   few), and the audio of the frames they agree on (all but the last, whose samples overlap
//!   the next frame's) is within the audio tolerance of the CPU's;
//! - on the device, a session that keeps prefill blocks and encoder outputs gives the same
//!   bytes as one that keeps nothing;
//! - the report of which graph ops ran on the CPU fallback, per component, printed, with every
//!   component's graphs placed mostly on the device.
//!
//! Vulkan runs on Mesa's lavapipe, which ggml lists only when `GGML_VK_VISIBLE_DEVICES` names it
//! (set to `0` here when unset). Without the device each test prints why and passes. The
//! tolerances below were measured on lavapipe; another device may need its own.
#![cfg(any(feature = "vulkan", feature = "cuda", feature = "metal"))]

mod common;

use std::collections::BTreeMap;

use audio_engine::ggml::{self, Backend, Device, DeviceError, GgmlError};
use audio_engine::lfm2_audio::conversation::artifact::ReplyStep;
use audio_engine::lfm2_audio::conversation::{Artifact, ArtifactKind, QUESTION_ID};
use audio_engine::lfm2_audio::internals::backbone::{Backbone, Position, Rows};
use audio_engine::lfm2_audio::internals::detokenizer::Detokenizer;
use audio_engine::lfm2_audio::internals::package::{ModelPackage, Quant};
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{
    AsrOptions, Lfm2Audio, ModelOptions, S2sOptions, S2sRequest, SamplerConfig, Session,
    SessionOptions, TtsOptions, Voice,
};

use common::package::{package, rel};
use common::wav::mono_i16;

/// The device under test: `LFM2E_TEST_DEVICE`, else the first this build has.
fn device() -> Device {
    match std::env::var("LFM2E_TEST_DEVICE") {
        Ok(s) => s.parse().expect("LFM2E_TEST_DEVICE"),
        Err(_) if cfg!(feature = "vulkan") => Device::Vulkan(0),
        Err(_) if cfg!(feature = "cuda") => Device::Cuda(0),
        Err(_) => Device::Metal,
    }
}

/// Whether the device under test is there (printing why not when it is not).
fn have_device() -> bool {
    static HAVE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAVE.get_or_init(|| {
        if std::env::var_os("GGML_VK_VISIBLE_DEVICES").is_none() {
            // why: ggml's Vulkan backend skips CPU-type devices (lavapipe) unless listed here.
            // The OnceLock holds every other test until this returns, so no other thread is
            // inside ggml yet.
            std::env::set_var("GGML_VK_VISIBLE_DEVICES", "0");
        }
        match Backend::for_device(&device()) {
            Ok(b) => {
                let desc = b.device().map(|d| d.description).unwrap_or_default();
                println!("device_engine: device {} ({desc})", b.name());
                true
            }
            Err(GgmlError::Device(e @ DeviceError::NotFound { .. })) => {
                common::skip_without_device(&format!(
                    "device_engine: skipped, no such device: {e}"
                ));
                false
            }
            Err(e) => panic!("{} is listed but does not start: {e}", device()),
        }
    })
}

fn engine(ty: Quant, device: Device) -> Lfm2Audio {
    let opts = ModelOptions {
        n_threads: 1,
        device: Some(device),
        ..ModelOptions::default()
    };
    Lfm2Audio::from_package(ModelPackage::open_paths(package(ty)).unwrap(), opts).unwrap()
}

fn question(i: usize) -> Vec<u8> {
    let n = 16_000 + 4_000 * i;
    mono_i16(
        16_000,
        (0..n).map(|t| ((((t * (5 + 2 * i)) % 300) as i32 - 150) * 80) as i16),
    )
}

/// What one run of the jobs produced: the texts and steps (compared exactly) and the audio
/// (compared within a tolerance).
#[derive(Debug, Default, PartialEq)]
struct Outputs {
    /// ASR's text, then each S2S turn's.
    texts: Vec<String>,
    /// TTS's steps, then each S2S turn's.
    steps: Vec<Vec<ReplyStep>>,
    /// TTS audio, then each S2S turn's audio.
    audio: Vec<Vec<f32>>,
}

fn run_jobs(model: &Lfm2Audio, cached: bool) -> Outputs {
    let opts = if cached {
        SessionOptions::default()
    } else {
        SessionOptions {
            prefill_slots: 0,
            kept_questions: 0,
            ..SessionOptions::default()
        }
    };
    let mut s = Session::new(model.clone(), opts);
    let mut out = Outputs::default();
    let samples: Vec<f32> = (0..24_000)
        .map(|t| ((t % 200) as f32 - 100.0) / 400.0)
        .collect();
    out.texts
        .push(s.asr(&samples, &AsrOptions::default()).unwrap().text);
    let tts = s
        .tts(
            "Two devices, one model.",
            &TtsOptions {
                max_new_tokens: 32,
                voice: Voice::UkFemale,
                audio: SamplerConfig::GREEDY,
                ..Default::default()
            },
        )
        .unwrap();
    out.steps.push(tts.steps);
    out.audio.push(tts.audio);
    let mut history = Vec::new();
    for i in 0..2 {
        let req = S2sRequest {
            question: question(i).into(),
            history: history.clone(),
            return_codes: true,
            s2s: S2sOptions {
                max_new_tokens: 32,
                text: SamplerConfig::GREEDY,
                audio: SamplerConfig::GREEDY,
                ..Default::default()
            },
        };
        let t = s.s2s(&req).unwrap();
        out.texts.push(t.reply.text.clone());
        out.steps.push(t.reply.steps.clone());
        out.audio.push(t.reply.audio);
        history.push(Artifact {
            id: QUESTION_ID.to_owned(),
            kind: ArtifactKind::Custom,
            payload: question(i),
            meta: BTreeMap::new(),
        });
        history.push(t.artifact.unwrap());
    }
    out
}

/// The largest audio error of `dev` against `cpu` (relative to the CPU's peak), per output.
fn audio_errors(dev: &[Vec<f32>], cpu: &[Vec<f32>]) -> Vec<f32> {
    dev.iter()
        .zip(cpu)
        .map(|(d, c)| {
            assert_eq!(d.len(), c.len(), "audio lengths differ");
            if c.is_empty() {
                0.0
            } else {
                rel(d, c)
            }
        })
        .collect()
}

/// How many leading items two sequences share.
fn common_prefix<T: PartialEq>(
    a: impl IntoIterator<Item = T>,
    b: impl IntoIterator<Item = T>,
) -> usize {
    a.into_iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn compare_with_cpu(ty: Quant, tolerance: f32) {
    if !have_device() {
        return;
    }
    let cpu = run_jobs(&engine(ty, Device::Cpu), true);
    ggml::reset_fallbacks();
    let vk = engine(ty, device());
    let dev = run_jobs(&vk, true);
    let fallbacks = ggml::fallbacks();

    // ASR text and TTS steps: identical for F32; for Q4_0 (the device's products are further
    // from the CPU's, see the tolerances) the shared prefix is printed.
    let exact = ty == Quant::F32;
    if exact {
        assert_eq!(dev.texts[0], cpu.texts[0], "{ty:?}: ASR differs");
        assert_eq!(dev.steps[0], cpu.steps[0], "{ty:?}: TTS differs");
        let tts_err = audio_errors(&dev.audio[..1], &cpu.audio[..1])[0];
        println!(
            "{ty:?}: TTS audio error against the CPU (max |d| / peak, {} samples): {tts_err:e}",
            cpu.audio[0].len()
        );
        assert!(
            tts_err <= tolerance,
            "{ty:?}: TTS audio {tts_err} from the CPU's"
        );
    }
    let asr = common_prefix(dev.texts[0].chars(), cpu.texts[0].chars());
    println!(
        "{ty:?}: ASR: the first {asr} of {} characters agree with the CPU's",
        cpu.texts[0].chars().count()
    );
    // S2S: the replies' shared prefix, printed, and the audio of the frames in it, which must
    // agree within the audio tolerance.
    let mut frames_compared = 0;
    for (what, i) in [("TTS", 0), ("S2S turn 1", 1), ("S2S turn 2", 2)] {
        let n = common_prefix(&dev.steps[i], &cpu.steps[i]);
        let frames = |steps: &[ReplyStep]| {
            steps
                .iter()
                .filter(|s| matches!(s, ReplyStep::Frame(_)))
                .count()
        };
        // the last agreed frame's samples also depend on the next frame (the detokenizer's
        // inverse STFT overlaps them): compare the frames before it
        let (agreed, all) = (
            frames(&cpu.steps[i][..n]).saturating_sub(1),
            frames(&cpu.steps[i]),
        );
        let mut audio = String::new();
        if agreed > 0 && !cpu.audio[i].is_empty() {
            let per_frame = cpu.audio[i].len() / all;
            let m = agreed * per_frame;
            assert!(
                dev.audio[i].len() >= m,
                "{ty:?}: {what}: device audio too short"
            );
            let err = rel(&dev.audio[i][..m], &cpu.audio[i][..m]);
            audio = format!(", their {agreed} frames' audio within {err:e} of the CPU's");
            assert!(
                err <= tolerance,
                "{ty:?}: {what}: the agreed frames' audio is {err} from the CPU's"
            );
            frames_compared += agreed;
        }
        println!("{ty:?}: {what}: the first {n} steps agree with the CPU's{audio}");
        if what == "S2S turn 1" && exact {
            assert!(n >= 4, "{ty:?}: S2S turn 1 differs from its first steps");
        }
    }
    println!("{ty:?}: audio compared over {frames_compared} agreed frames");
    assert!(
        cpu.audio.iter().skip(1).all(|a| !a.is_empty()),
        "{ty:?}: the S2S replies speak"
    );

    // Every component ran its graphs through the scheduler, mostly on the device.
    for label in [
        "encoder",
        "backbone",
        "depthformer",
        "detokenizer",
        "detokenizer head",
    ] {
        let f = fallbacks
            .get(label)
            .unwrap_or_else(|| panic!("{ty:?}: no graphs recorded for {label}: {fallbacks:?}"));
        println!(
            "{ty:?} {label}: {} graphs; widest: {}; fewest bytes across in one graph: {}",
            f.graphs, f.widest, f.fewest_bytes
        );
        assert!(f.graphs > 0);
        assert!(
            f.widest.device_nodes > f.widest.cpu_nodes(),
            "{ty:?}: {label} runs mostly on the CPU: {}",
            f.widest
        );
    }

    // On the device, the prefill-block cache and the kept encoder outputs change no byte.
    let uncached = run_jobs(&vk, false);
    let bits = |o: &Outputs| {
        o.audio
            .iter()
            .map(|a| a.iter().map(|v| v.to_bits()).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    };
    assert_eq!(uncached.texts, dev.texts, "{ty:?}: caches change texts");
    assert_eq!(uncached.steps, dev.steps, "{ty:?}: caches change steps");
    assert!(
        bits(&uncached) == bits(&dev),
        "{ty:?}: caches change audio bytes on the device"
    );
}

/// The backbone's logits and hidden states over a 24-position prefill and 16 single-position
/// steps, and the detokenizer's audio for 12 frames of fixed codes, on `backend`.
fn teacher_forced(ty: Quant, backend: &Backend) -> (Vec<Vec<f32>>, Vec<f32>) {
    let pkg = ModelPackage::open_paths(package(ty)).unwrap();
    let vocab = pkg.backbone.config.vocab_size;
    let bb = Backbone::load(pkg.backbone, backend).unwrap();
    let tokens: Vec<u32> = (0..40u32).map(|i| (i * 37 + 11) % vocab).collect();
    let mut cache = bb.new_cache(tokens.len()).unwrap();
    let prefill: Vec<Position<'_>> = tokens[..24].iter().map(|&t| Position::Text(t)).collect();
    let out = bb.forward(&mut cache, &prefill, Rows::All, true).unwrap();
    let mut rows = vec![out.logits.unwrap(), out.hidden];
    for &t in &tokens[24..] {
        let o = bb
            .forward(&mut cache, &[Position::Text(t)], Rows::Last, true)
            .unwrap();
        rows.push(o.logits.unwrap());
        rows.push(o.hidden);
    }
    let pkg = ModelPackage::open_paths(package(ty)).unwrap();
    let det = Detokenizer::load(pkg.detokenizer, &pkg.vocoder, backend).unwrap();
    let frames: Vec<[u32; 8]> = (0..12u32)
        .map(|f| std::array::from_fn(|cb| (f * 977 + cb as u32 * 131 + 7) % 2048))
        .collect();
    (rows, det.decode(&frames).unwrap())
}

fn teacher_forced_match(ty: Quant, tolerance: f32) {
    if !have_device() {
        return;
    }
    let cpu = Backend::cpu().unwrap();
    cpu.set_n_threads(1).unwrap();
    let vk = Backend::for_device(&device()).unwrap();
    let (want_rows, want_audio) = teacher_forced(ty, &cpu);
    let (got_rows, got_audio) = teacher_forced(ty, &vk);
    let backbone = got_rows
        .iter()
        .zip(&want_rows)
        .map(|(g, w)| rel(g, w))
        .fold(0f32, f32::max);
    let audio = rel(&got_audio, &want_audio);
    println!(
        "{ty:?}: teacher-forced error against the CPU (max |d| / peak): backbone logits and \
         hidden {backbone:e}, detokenizer audio {audio:e}"
    );
    assert!(backbone <= tolerance, "{ty:?}: backbone {backbone}");
    assert!(audio <= tolerance, "{ty:?}: detokenizer {audio}");
}

// Tolerances, against errors measured on lavapipe (Mesa 25.0): F32 1.8e-3 for the backbone
// (ggml-vulkan keeps matrix-product operands in F16 where the device has it; 2.3e-4 with
// GGML_VK_DISABLE_F16=1) and 5.4e-4 for the detokenizer; Q4_0 3.8e-2 and 2.2e-2 (the CPU
// multiplies Q4_0 rows by activations quantized to Q8_0, the device by F16/F32 ones).

#[test]
fn f32_components_on_the_device_match_the_cpu() {
    teacher_forced_match(Quant::F32, 5e-3);
}

#[test]
fn q4_0_components_on_the_device_match_the_cpu() {
    teacher_forced_match(Quant::Q4_0, 0.1);
}

#[test]
fn f32_jobs_on_the_device_match_the_cpu() {
    compare_with_cpu(Quant::F32, 5e-3);
}

#[test]
fn q4_0_jobs_on_the_device_match_the_cpu() {
    compare_with_cpu(Quant::Q4_0, 0.1);
}

#[test]
fn a_missing_device_is_named() {
    if !have_device() {
        return;
    }
    let opts = ModelOptions {
        device: Some(match device() {
            Device::Cuda(_) => Device::Cuda(7),
            _ => Device::Vulkan(7),
        }),
        ..ModelOptions::default()
    };
    let err = Lfm2Audio::from_package(ModelPackage::open_paths(package(Quant::F32)).unwrap(), opts)
        .unwrap_err();
    let err = common::error_chain(&err);
    assert!(err.contains(":7"), "{err}");
    assert!(err.contains("no such device"), "{err}");
}
