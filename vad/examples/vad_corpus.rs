//! Makes the labelled VAD corpus: espeak-ng speech in several voices, joined with seeded
//! silences, labelled from the clean signal, then mixed with seeded white and pink noise at
//! 20, 10 and 5 dB SNR. Deterministic for one espeak-ng version.
//!
//! `cargo run -p voice-activity --release --example vad_corpus -- <out dir>`
//! (scripts/vad_corpus.sh installs espeak-ng where missing and writes to target/vad-corpus).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use common::{Utterance, LABEL_FRAME, RATE};
use voice_activity::Resampler;

/// espeak-ng voices (language + variant): men, women, a Klatt synthesiser, several accents.
const VOICES: [&str; 6] = [
    "en-us",
    "en-gb+f3",
    "en-us+f2",
    "en-gb-scotland+m3",
    "en-029+klatt4",
    "en-gb-x-rp+f4",
];
/// Words per minute, cycled with the voices.
const SPEEDS: [u32; 3] = [145, 175, 205];
/// What users say to a voice assistant, short answers included (a VAD must not miss "Yes.").
const SENTENCES: [&str; 12] = [
    "What is the weather like in Paris today?",
    "Yes.",
    "Please book a table for two at eight o'clock.",
    "No, thank you.",
    "Can you remind me to call my sister tomorrow morning?",
    "How many kilometres is it from Berlin to Munich?",
    "Stop.",
    "Play something relaxing, maybe a little jazz.",
    "Tell me a short story about a dragon who learns to fly.",
    "Okay, that sounds good.",
    "Set a timer for fifteen minutes.",
    "Why is the sky blue during the day but red at sunset?",
];
/// Silence between utterances, drawn uniformly from this range.
const GAP_MS: (u64, u64) = (300, 2000);
/// Every fourth gap is a long stretch without speech, where false starts show.
const LONG_GAP_MS: u64 = 6000;
/// A 10 ms frame of clean speech is labelled speech above this RMS (espeak-ng's pauses are
/// digital zero, so any level tells; the floor only skips the resampler's ringing).
const LABEL_FLOOR_DBFS: f32 = -70.0;
const SNRS_DB: [u32; 3] = [20, 10, 5];
/// espeak-ng peaks near full scale; at half of it (RMS about -25 dBFS, a close microphone) the
/// noisy mixes do not clip.
const SPEECH_GAIN: f32 = 0.5;
const SEED: u64 = 0x5eed_0f5b_eec4;

/// splitmix64: a small seeded generator, so the corpus does not depend on a crate's algorithm.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-300);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// One utterance from espeak-ng, resampled to 16 kHz.
fn speak(tmp: &Path, voice: &str, speed: u32, text: &str) -> Result<Vec<f32>> {
    let path = tmp.join("utterance.wav");
    let status = Command::new("espeak-ng")
        .args(["-v", voice, "-s", &speed.to_string(), "-w"])
        .arg(&path)
        .arg(text)
        .status()
        .context("running espeak-ng (install it: apt-get install espeak-ng)")?;
    if !status.success() {
        bail!("espeak-ng -v {voice} failed: {status}");
    }
    let (samples, rate) = common::read_wav(&path)?;
    let mut out = Vec::new();
    let mut resampler = Resampler::new(rate, RATE)?;
    resampler.process(&samples, &mut out);
    // Flush the filter's look-ahead (the tail is espeak's silence anyway).
    resampler.process(&[0.0; 64], &mut out);
    Ok(out)
}

fn frame_is_speech(frame: &[f32]) -> bool {
    let power = frame.iter().map(|s| s * s).sum::<f32>() / frame.len() as f32;
    10.0 * (power + 1e-20).log10() > LABEL_FLOOR_DBFS
}

/// Noise of unit power: white (Gaussian) or pink (Paul Kellet's three-pole filter, -3 dB per
/// octave over the speech band).
fn noise(kind: &str, n: usize, rng: &mut Rng) -> Vec<f32> {
    let white: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
    let shaped: Vec<f64> = match kind {
        "white" => white,
        "pink" => {
            let (mut b0, mut b1, mut b2) = (0.0, 0.0, 0.0);
            white
                .iter()
                .map(|w| {
                    b0 = 0.99765 * b0 + w * 0.0990460;
                    b1 = 0.96300 * b1 + w * 0.2965164;
                    b2 = 0.57000 * b2 + w * 1.0526913;
                    b0 + b1 + b2 + w * 0.1848
                })
                .collect()
        }
        other => unreachable!("noise kind {other}"),
    };
    let power = shaped.iter().map(|s| s * s).sum::<f64>() / n as f64;
    shaped.iter().map(|s| (s / power.sqrt()) as f32).collect()
}

fn main() -> Result<()> {
    let out: PathBuf = std::env::args()
        .nth(1)
        .context("usage: vad_corpus <out dir>")?
        .into();
    std::fs::create_dir_all(&out)?;
    let tmp = out.join("tmp");
    std::fs::create_dir_all(&tmp)?;
    let mut rng = Rng(SEED);

    // The clean track: a lead-in, then utterances each followed by its gap.
    let mut clean: Vec<f32> = vec![0.0; RATE as usize];
    let mut utterances = Vec::new();
    let mut n = 0;
    for (v, voice) in VOICES.iter().enumerate() {
        for (s, text) in SENTENCES.iter().enumerate() {
            let speed = SPEEDS[(v + s) % SPEEDS.len()];
            let speech = speak(&tmp, voice, speed, text)?;
            // Trim espeak's own leading and trailing silence, so the gaps are what we chose.
            let first = speech
                .chunks(LABEL_FRAME)
                .position(frame_is_speech)
                .context("no speech")?;
            let last = speech
                .chunks(LABEL_FRAME)
                .rposition(frame_is_speech)
                .unwrap();
            let speech = &speech[first * LABEL_FRAME..((last + 1) * LABEL_FRAME).min(speech.len())];
            // Whole label frames: the utterance starts on the grid.
            let start = clean.len();
            debug_assert_eq!(start % LABEL_FRAME, 0);
            clean.extend(speech.iter().map(|s| s * SPEECH_GAIN));
            clean.resize(clean.len().div_ceil(LABEL_FRAME) * LABEL_FRAME, 0.0);
            n += 1;
            let gap_ms = if n % 4 == 0 {
                LONG_GAP_MS
            } else {
                GAP_MS.0 + (rng.uniform() * (GAP_MS.1 - GAP_MS.0) as f64) as u64
            };
            // Gaps in whole label frames too.
            let gap_ms = gap_ms / 10 * 10;
            utterances.push(Utterance {
                first_frame: start / LABEL_FRAME,
                end_frame: 0, // set from the labels below
                gap_after_ms: 0,
                voice: format!("{voice} {speed}wpm"),
                text: text.to_string(),
            });
            clean.resize(clean.len() + gap_ms as usize * RATE as usize / 1000, 0.0);
        }
    }
    std::fs::remove_dir_all(&tmp).ok();

    let frames: Vec<bool> = clean.chunks(LABEL_FRAME).map(frame_is_speech).collect();
    // Each utterance ends at its last speech frame; the gap runs to the next one's first.
    let total_frames = frames.len();
    for i in 0..utterances.len() {
        let next = utterances
            .get(i + 1)
            .map_or(total_frames, |u| u.first_frame);
        let last = (utterances[i].first_frame..next)
            .rev()
            .find(|&f| frames[f])
            .context("utterance without speech")?;
        utterances[i].end_frame = last + 1;
        utterances[i].gap_after_ms = (next - last - 1) as u64 * 10;
    }
    common::write_labels(&out, &frames, &utterances)?;
    common::write_wav(&out.join("clean.wav"), &clean)?;

    // SNR over the speech frames: noise power = speech power / 10^(snr / 10).
    let speech_power = {
        let (sum, count) = clean
            .chunks(LABEL_FRAME)
            .zip(&frames)
            .filter(|(_, &speech)| speech)
            .fold((0.0f64, 0usize), |(sum, count), (chunk, _)| {
                (
                    sum + chunk.iter().map(|s| f64::from(*s).powi(2)).sum::<f64>(),
                    count + chunk.len(),
                )
            });
        sum / count as f64
    };
    for kind in ["white", "pink"] {
        let unit = noise(kind, clean.len(), &mut rng);
        for snr in SNRS_DB {
            let gain = (speech_power / 10f64.powf(f64::from(snr) / 10.0)).sqrt() as f32;
            let mixed: Vec<f32> = clean.iter().zip(&unit).map(|(s, n)| s + gain * n).collect();
            let clipped = mixed.iter().filter(|s| s.abs() > 1.0).count();
            common::write_wav(&out.join(format!("{kind}_{snr}db.wav")), &mixed)?;
            println!(
                "{kind} noise at {snr} dB SNR: noise RMS {gain:.4}, {clipped} samples clipped"
            );
        }
    }
    let speech_frames = frames.iter().filter(|&&f| f).count();
    println!(
        "{} utterances, {:.1} s of audio, {:.1} s labelled speech, speech RMS {:.4}; written to {}",
        utterances.len(),
        clean.len() as f64 / f64::from(RATE),
        speech_frames as f64 / 100.0,
        speech_power.sqrt(),
        out.display()
    );
    Ok(())
}
