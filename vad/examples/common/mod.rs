//! The labelled corpus's files, shared by `vad_corpus` (writes) and `vad_eval` (reads).
//!
//! A corpus directory holds one 16 kHz mono WAV per condition (`clean.wav`, `white_20db.wav`,
//! ...: the same speech, different noise), `frames.txt` (one character per 10 ms frame of the
//! clean speech: `1` speech, `0` not) and `utterances.tsv` (one line per utterance: first and
//! one past the last speech frame, the silence after it in ms, voice, text).

// why: each example includes this module and uses only its half of it.
#![allow(dead_code)]

use std::path::Path;

use anyhow::{bail, Context, Result};

/// The corpus's rate (the classifiers').
pub const RATE: u32 = 16_000;
/// The label grid: 10 ms.
pub const LABEL_FRAME: usize = 160;

/// Where one utterance's speech lies, in label frames.
#[derive(Debug, Clone)]
pub struct Utterance {
    pub first_frame: usize,
    pub end_frame: usize,
    /// Silence (or noise only) after the utterance before the next one or the end of the file.
    pub gap_after_ms: u64,
    pub voice: String,
    pub text: String,
}

impl Utterance {
    pub fn start_ms(&self) -> u64 {
        self.first_frame as u64 * 10
    }
    pub fn end_ms(&self) -> u64 {
        self.end_frame as u64 * 10
    }
}

pub fn write_wav(path: &Path, samples: &[f32]) -> Result<()> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: RATE,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut writer = hound::WavWriter::create(path, spec)
        .with_context(|| format!("creating {}", path.display()))?;
    for s in samples {
        writer.write_sample((s.clamp(-1.0, 1.0) * 32767.0).round() as i16)?;
    }
    writer.finalize()?;
    Ok(())
}

/// Reads a mono WAV of 16-bit samples as floats in [-1, 1], with its rate.
pub fn read_wav(path: &Path) -> Result<(Vec<f32>, u32)> {
    let mut reader =
        hound::WavReader::open(path).with_context(|| format!("opening {}", path.display()))?;
    let spec = reader.spec();
    if spec.channels != 1
        || spec.bits_per_sample != 16
        || spec.sample_format != hound::SampleFormat::Int
    {
        bail!("{}: expected mono 16-bit PCM, got {spec:?}", path.display());
    }
    let samples = reader
        .samples::<i16>()
        .map(|s| s.map(|s| f32::from(s) / 32768.0))
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("reading {}", path.display()))?;
    Ok((samples, spec.sample_rate))
}

pub fn write_labels(dir: &Path, frames: &[bool], utterances: &[Utterance]) -> Result<()> {
    let line: String = frames.iter().map(|&f| if f { '1' } else { '0' }).collect();
    std::fs::write(dir.join("frames.txt"), line + "\n")?;
    let mut tsv = String::from("first_frame\tend_frame\tgap_after_ms\tvoice\ttext\n");
    for u in utterances {
        tsv += &format!(
            "{}\t{}\t{}\t{}\t{}\n",
            u.first_frame, u.end_frame, u.gap_after_ms, u.voice, u.text
        );
    }
    std::fs::write(dir.join("utterances.tsv"), tsv)?;
    Ok(())
}

pub fn read_labels(dir: &Path) -> Result<(Vec<bool>, Vec<Utterance>)> {
    let frames_path = dir.join("frames.txt");
    let frames = std::fs::read_to_string(&frames_path)
        .with_context(|| format!("reading {}", frames_path.display()))?
        .trim()
        .chars()
        .map(|c| match c {
            '1' => Ok(true),
            '0' => Ok(false),
            other => bail!("{}: unexpected {other:?}", frames_path.display()),
        })
        .collect::<Result<Vec<_>>>()?;
    let tsv_path = dir.join("utterances.tsv");
    let tsv = std::fs::read_to_string(&tsv_path)
        .with_context(|| format!("reading {}", tsv_path.display()))?;
    let mut utterances = Vec::new();
    for (n, line) in tsv.lines().enumerate().skip(1) {
        let fields: Vec<&str> = line.splitn(5, '\t').collect();
        let [first, end, gap, voice, text] = fields[..] else {
            bail!("{}:{}: expected 5 fields", tsv_path.display(), n + 1);
        };
        let parse = |s: &str| {
            s.parse::<u64>()
                .with_context(|| format!("{}:{}: {s:?}", tsv_path.display(), n + 1))
        };
        utterances.push(Utterance {
            first_frame: parse(first)? as usize,
            end_frame: parse(end)? as usize,
            gap_after_ms: parse(gap)?,
            voice: voice.to_string(),
            text: text.to_string(),
        });
    }
    Ok((frames, utterances))
}
