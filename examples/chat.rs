//! Multi-turn speech-to-speech with LFM2-Audio: the questions are one conversation, whose
//! history travels with each request as artifacts (each earlier question's WAV and the reply
//! artifact its turn returned), as a client of a server would carry it.
//!
//! ```text
//! cargo run --release --example chat -- [--model DIR | --hf REPO[:QUANT] [--offline]] [--out DIR]
//!                                       [--max-tokens N] [--seed S]
//!                                       [question1.wav question2.wav ...]
//! ```
//! Without `--model` it runs on the built-in demo package (random tiny weights: its speech and
//! text are noise) and, without questions, on three synthetic ones, so the whole path runs on a
//! fresh machine. Per turn it writes `turnN.wav` (24 kHz), `turnN.txt` and the reply artifact
//! (`turnN.reply.bin` payload + `turnN.reply.json` meta) and prints the time to first audio,
//! the prefill positions restored from the previous turn and the questions whose encoder output
//! was reused.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use audio_engine::lfm2_audio::{
    write_wav_f32, write_wav_file_24k, Artifact, ArtifactKind, Job, ReplyEvent, S2sOptions,
    S2sRequest, SamplerConfig, Session, SessionOptions, INPUT_SAMPLE_RATE, OUTPUT_SAMPLE_RATE,
    QUESTION_ID,
};
use clap::Parser;

mod common;
use common::hub::open_model_or_hub;
use common::{model_options, printable};

/// Multi-turn speech-to-speech: each question is one turn of the same conversation.
#[derive(Parser)]
struct Args {
    /// Model directory with the four GGUF files (default: the built-in demo package).
    #[arg(long, value_name = "DIR", conflicts_with = "hf")]
    model: Option<PathBuf>,
    #[command(flatten)]
    hub: common::hub::HubArgs,
    /// CPU threads [default: all cores].
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Device: cpu, vulkan:N, cuda:N or metal (the build needs its feature) [default: the
    /// best this build has: CUDA or Metal when built in, otherwise the CPU].
    #[arg(long, value_name = "DEVICE")]
    device: Option<audio_engine::ggml::Device>,
    /// Where each turn's WAV, text and reply artifact go.
    #[arg(long, value_name = "DIR", default_value = "chat-out")]
    out: PathBuf,
    /// Most steps (text tokens and audio frames) per reply.
    #[arg(long, value_name = "N", default_value_t = 256)]
    max_tokens: usize,
    /// Seed of the audio sampler (default: the model's default sampling, seed 0).
    #[arg(long, value_name = "S")]
    seed: Option<u64>,
    /// Question WAVs, one per turn (any rate and channel count); without them, with the demo
    /// package, three synthetic ones.
    #[arg(value_name = "QUESTION.wav")]
    questions: Vec<PathBuf>,
}

/// A deterministic synthetic question (16 kHz mono WAV bytes) for the demo.
fn synthetic_question(i: usize) -> Vec<u8> {
    let rate = INPUT_SAMPLE_RATE as f32;
    let n = INPUT_SAMPLE_RATE as usize + 4_000 * i;
    let f = 180.0 + 70.0 * i as f32;
    let samples: Vec<f32> = (0..n)
        .map(|t| {
            let x = t as f32 / rate;
            0.3 * (std::f32::consts::TAU * f * x).sin() * (1.0 - x / (n as f32 / rate))
        })
        .collect();
    // why: questions are sent as WAV bytes, as a client would send them.
    let mut out = std::io::Cursor::new(Vec::new());
    write_wav_f32(&mut out, &samples, INPUT_SAMPLE_RATE).expect("in-memory WAV");
    out.into_inner()
}

fn main() -> Result<()> {
    let args = Args::parse();
    let mut s2s = S2sOptions {
        max_new_tokens: args.max_tokens,
        ..Default::default()
    };
    if let Some(seed) = args.seed {
        s2s.audio = SamplerConfig::s2s_audio(seed);
    }
    let demo = args.model.is_none() && !args.hub.is_set();
    let model = open_model_or_hub(
        args.model.as_deref(),
        &args.hub,
        model_options(args.threads, args.device),
        "its text and speech are noise",
    )?;
    let (questions, out) = (args.questions, args.out);
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
        let job = Job::S2s(S2sRequest {
            question: wav.clone().into(),
            history: history.clone(),
            return_codes: true,
            s2s: s2s.clone(),
        });
        print!("turn {} ({name}): ", i + 1);
        let r = session.run(&job, &mut |ev| {
            if let ReplyEvent::Text(t) = ev {
                print!("{}", printable(&t));
                let _ = std::io::stdout().flush();
            }
            true
        })?;
        println!();
        let stem = out.join(format!("turn{}", i + 1));
        write_wav_file_24k(&stem.with_extension("wav"), &r.audio)?;
        std::fs::write(stem.with_extension("txt"), &r.text)?;
        let artifact = r
            .artifact
            .clone()
            .context("return_codes gives an artifact")?;
        std::fs::write(stem.with_extension("reply.bin"), &artifact.payload)?;
        std::fs::write(
            stem.with_extension("reply.json"),
            serde_json::to_string_pretty(&artifact.meta)?,
        )?;
        let first = r.timings.first_audio.map_or("no audio".to_owned(), |d| {
            format!("first audio after {:.0} ms", d.as_secs_f64() * 1e3)
        });
        println!(
            "  {} steps ({}), {:.2} s of audio, {first}, prompt {} positions, \
             resumed {} prefill steps, reused {} questions, total {:.0} ms",
            r.steps,
            if r.ended {
                "ended"
            } else {
                "cut at max tokens"
            },
            r.audio.len() as f64 / f64::from(OUTPUT_SAMPLE_RATE),
            r.prompt_positions,
            session.resumed_prefill_steps(),
            session.reused_questions(),
            r.timings.total.as_secs_f64() * 1e3,
        );
        history.push(Artifact {
            id: QUESTION_ID.to_owned(),
            kind: ArtifactKind::Custom,
            payload: wav.clone(),
            meta: Default::default(),
        });
        history.push(artifact);
    }
    println!("wrote {}", out.display());
    Ok(())
}
