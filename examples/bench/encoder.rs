//! The encoder figure of issue #12: one question of `seconds` (10 s in the issue) through
//! `Lfm2Audio::encode_audio` (log-mel features, FastConformer, adapter), repeated.

use std::time::Instant;

use anyhow::{ensure, Result};
use audio_engine::lfm2_audio::{load_wav_bytes_16k, Lfm2Audio, ReadOptions};

/// Medians over the repetitions, in seconds.
#[derive(Debug, Clone, Copy)]
pub struct EncoderFigures {
    /// Seconds of audio encoded.
    pub audio_s: f64,
    /// Encoder output frames (embeddings the backbone reads).
    pub frames: usize,
    /// Features, encoder and adapter (`Lfm2Audio::encode_audio`).
    pub total_s: f64,
    /// Repetitions the medians are over.
    pub reps: usize,
    /// FNV-1a of the output's bits, so that runs (and builds) can be compared.
    pub digest: u64,
}

/// Encodes the 16 kHz question `wav` `reps` times (after one untimed warm-up run that pays the
/// first touch of the weights and the graph allocator's growth).
pub fn measure(model: &Lfm2Audio, wav: &[u8], reps: usize) -> Result<EncoderFigures> {
    ensure!(reps > 0, "at least one repetition");
    let samples = load_wav_bytes_16k(wav, &ReadOptions { max_seconds: 60.0 })?;
    let (frames, first) = model.encode_audio(&samples)?;
    let mut total = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        let (_, out) = model.encode_audio(&samples)?;
        total.push(t.elapsed().as_secs_f64());
        // An engine invariant, checked here so a benchmark never times a changed computation.
        ensure!(
            out == first,
            "the encoder's output changed between repetitions"
        );
    }
    Ok(EncoderFigures {
        audio_s: samples.len() as f64 / 16_000.0,
        frames,
        total_s: super::median(&total).unwrap_or(f64::NAN),
        reps,
        digest: {
            let mut h = 0xcbf2_9ce4_8422_2325;
            for v in &first {
                super::fnv(&mut h, &v.to_bits().to_le_bytes());
            }
            h
        },
    })
}

/// Prints the figures as a small table; `reference_s` is liquid-audio's figure the issue
/// quotes for 10 s on this machine kind (not measured in this run: said so in the output).
pub fn print(f: &EncoderFigures, reference_s: f64) {
    println!(
        "encoder: {:.1} s of audio -> {} frames (medians of {} runs; times in ms); output digest \
         {:016x}",
        f.audio_s, f.frames, f.reps, f.digest
    );
    println!(
        "| features + encoder + adapter | issue's liquid-audio 1.3.0 figure (10 s) | liquid-audio / \
         ours (>= 1.5) |"
    );
    println!("|---:|---:|---:|");
    println!(
        "| {:.1} | {:.0} (quoted, not this run) | {:.2}x |",
        f.total_s * 1e3,
        reference_s * 1e3,
        reference_s / f.total_s
    );
}
