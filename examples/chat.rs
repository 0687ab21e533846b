//! Multi-turn speech-to-speech with LFM2-Audio: the questions are one conversation, whose
//! history travels with each request as artifacts (each earlier question's WAV and the reply
//! artifact its turn returned), as a client of a server would carry it.
//!
//! ```text
//! cargo run --release --example chat -- [--model DIR] [--out DIR] [--max-tokens N] [--seed S]
//!                                       [question1.wav question2.wav ...]
//! ```
//! Without `--model` it runs on the built-in demo package (random tiny weights: its speech and
//! text are noise) and, without questions, on three synthetic ones, so the whole path runs on a
//! fresh machine. Per turn it writes `turnN.wav` (24 kHz), `turnN.txt` and the reply artifact
//! (`turnN.reply.bin` payload + `turnN.reply.json` meta) and prints the time to first audio,
//! the prefill positions restored from the previous turn and the questions whose encoder output
//! was reused.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use audio_engine::lfm2_audio::audio::write_wav_file_24k;
use audio_engine::lfm2_audio::conversation::{Artifact, ArtifactKind, QUESTION_ID};
use audio_engine::lfm2_audio::demo::{default_demo_dir, ensure_demo_package};
use audio_engine::lfm2_audio::package::ModelPackage;
use audio_engine::lfm2_audio::sampling::SamplerConfig;
use audio_engine::lfm2_audio::{
    Lfm2Audio, ModelOptions, ReplyEvent, S2sOptions, S2sRequest, Session, SessionOptions,
};

/// A deterministic synthetic question (16 kHz mono WAV bytes) for the demo.
fn synthetic_question(i: usize) -> Vec<u8> {
    let n = 16_000 + 4_000 * i;
    let f = 180.0 + 70.0 * i as f32;
    let samples: Vec<f32> = (0..n)
        .map(|t| {
            let x = t as f32 / 16_000.0;
            0.3 * (std::f32::consts::TAU * f * x).sin() * (1.0 - x / (n as f32 / 16_000.0))
        })
        .collect();
    // why: questions are sent as WAV bytes, as a client would; 24 kHz-rate writing is not
    // what a 16 kHz question needs, so write it with hound directly.
    let mut out = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::new(&mut out, spec).expect("in-memory WAV");
    for s in samples {
        w.write_sample((s * 32767.0) as i16).expect("in-memory WAV");
    }
    w.finalize().expect("in-memory WAV");
    out.into_inner()
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut model_dir: Option<PathBuf> = None;
    let mut out = PathBuf::from("chat-out");
    let mut s2s = S2sOptions {
        max_new_tokens: 256,
        ..Default::default()
    };
    let mut questions: Vec<PathBuf> = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--model" => model_dir = Some(args.next().context("--model needs DIR")?.into()),
            "--out" => out = args.next().context("--out needs DIR")?.into(),
            "--max-tokens" => s2s.max_new_tokens = args.next().context("needs N")?.parse()?,
            "--seed" => {
                s2s.audio = SamplerConfig::s2s_audio(args.next().context("needs S")?.parse()?)
            }
            "-h" | "--help" => {
                println!("usage: chat [--model DIR] [--out DIR] [--max-tokens N] [--seed S] [q1.wav ...]");
                return Ok(());
            }
            _ if a.starts_with("--") => bail!("unknown option {a}"),
            _ => questions.push(a.into()),
        }
    }
    let demo = model_dir.is_none();
    let model = match &model_dir {
        Some(dir) => Lfm2Audio::load(dir, ModelOptions::default())
            .with_context(|| format!("loading {}", dir.display()))?,
        None => {
            let dir = default_demo_dir();
            println!(
                "no --model given: running the built-in demo package in {} \
                 (random tiny weights: its text and speech are noise, not answers)",
                dir.display()
            );
            let paths = ensure_demo_package(&dir)?;
            Lfm2Audio::from_package(ModelPackage::open_paths(paths)?, ModelOptions::default())?
        }
    };
    let wavs: Vec<(String, Vec<u8>)> = if questions.is_empty() {
        if !demo {
            bail!("give at least one question WAV");
        }
        println!("no questions given: using three synthetic ones");
        (0..3)
            .map(|i| {
                (
                    format!("synthetic question {}", i + 1),
                    synthetic_question(i),
                )
            })
            .collect()
    } else {
        questions
            .iter()
            .map(|p| {
                std::fs::read(p)
                    .map(|b| (p.display().to_string(), b))
                    .with_context(|| format!("reading {}", p.display()))
            })
            .collect::<Result<_>>()?
    };
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;

    let mut session = Session::new(model.clone(), SessionOptions::default());
    let mut history: Vec<Artifact> = Vec::new();
    for (i, (name, wav)) in wavs.iter().enumerate() {
        let mut options = BTreeMap::new();
        options.insert("return_codes".to_owned(), serde_json::Value::Bool(true));
        let request = S2sRequest {
            question: wav.clone(),
            history: history.clone(),
            options,
            s2s: s2s.clone(),
        };
        print!("turn {} ({name}): ", i + 1);
        let turn = session.s2s_with(&request, &mut |ev| {
            if let ReplyEvent::Text(t) = ev {
                print!("{t}");
            }
            true
        })?;
        println!();
        let r = &turn.reply;
        let stem = out.join(format!("turn{}", i + 1));
        write_wav_file_24k(&stem.with_extension("wav"), &r.audio)?;
        std::fs::write(stem.with_extension("txt"), &r.text)?;
        let artifact = turn
            .artifact
            .clone()
            .context("return_codes gives an artifact")?;
        std::fs::write(stem.with_extension("reply.bin"), &artifact.payload)?;
        std::fs::write(
            stem.with_extension("reply.json"),
            serde_json::to_string_pretty(&artifact.meta)?,
        )?;
        let first = r.timings.first_audio.map_or("no audio".to_owned(), |d| {
            format!("{:.0} ms", d.as_secs_f64() * 1e3)
        });
        println!(
            "  {} steps ({}), {:.2} s of audio, first audio after {first}, prompt {} positions, \
             resumed {} prefill steps, reused {} questions, total {:.0} ms",
            r.steps.len(),
            if r.ended {
                "ended"
            } else {
                "cut at max tokens"
            },
            r.audio.len() as f64 / 24_000.0,
            r.prompt_positions,
            session.resumed_prefill_steps(),
            session.reused_questions(),
            r.timings.total.as_secs_f64() * 1e3,
        );
        history.push(Artifact {
            id: QUESTION_ID.to_owned(),
            kind: ArtifactKind::Custom,
            payload: wav.clone(),
            meta: BTreeMap::new(),
        });
        history.push(artifact);
    }
    println!("wrote {}", out.display());
    Ok(())
}
