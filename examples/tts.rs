//! Text to speech with LFM2-Audio: text in, 24 kHz WAV out, in one of the four voices.
//!
//! ```text
//! cargo run --release --example tts -- [--model DIR | --hf REPO[:QUANT] [--offline]]
//!                                      [--voice us_male|us_female|uk_male|uk_female] [--stream] [--out FILE] [--max-tokens N] [--seed S] [TEXT...]
//! ```
//! Without `--model` it runs on the built-in demo package (random tiny weights: its speech is
//! noise); `-` reads the text from standard input, and so does no text when standard input is
//! not a terminal; with no text at all it says a demo sentence. With `--stream` it prints each audio chunk as it arrives and writes the same WAV
//! as without (the chunks put together are the offline result, sample for sample).

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use audio_engine::lfm2_audio::{
    write_wav_file_24k, Job, Outcome, ReplyEvent, SamplerConfig, TtsJob, TtsOptions, Voice,
    OUTPUT_SAMPLE_RATE,
};
use clap::Parser;

mod common;
use common::hub::open_model_or_hub;
use common::{model_options, printable};

/// Text to speech: writes the spoken text as a 24 kHz WAV file.
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
    /// The voice: us_male, us_female, uk_male or uk_female [default: us_male, audio.cpp's;
    /// for the demo sentence us_female].
    #[arg(long)]
    voice: Option<Voice>,
    /// Print each audio chunk as it arrives (the WAV is the same).
    #[arg(long)]
    stream: bool,
    /// The WAV file to write.
    #[arg(long, value_name = "FILE", default_value = "tts.wav")]
    out: PathBuf,
    /// Most steps (text tokens and audio frames) per chunk of text [default: 2048, with the
    /// demo package 256].
    #[arg(long, value_name = "N")]
    max_tokens: Option<usize>,
    /// Seed of the audio sampler.
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// The text (words are joined with spaces). `-` reads standard input; so does no text when
    /// standard input is not a terminal; with no text at all, a demo sentence is spoken.
    #[arg(value_name = "TEXT")]
    text: Vec<String>,
}

/// The sentence said when no text is given, and its voice. why: the demo package's random
/// model starts audio (`<|audio_start|>`) only for some texts and voices; with this voice it
/// does for this text after 20 text tokens (tests/reference/make_reference.py, TTS_TEXT), while
/// with the default voice (us_male) it never did for the sentences tried.
const DEMO_TEXT: &str = "The train, numbers 2024 and voices.";
const DEMO_VOICE: Voice = Voice::UsFemale;

/// The demo package's step limit: its random model rarely ends audio on its own.
const DEMO_MAX_TOKENS: usize = 256;

/// The text to speak and whether it is the demo sentence.
fn read_text(words: &[String]) -> Result<(String, bool)> {
    let stdin = std::io::stdin();
    let explicit = matches!(words, [w] if w == "-");
    let mut text = String::new();
    if explicit || (words.is_empty() && !stdin.is_terminal()) {
        stdin
            .lock()
            .read_to_string(&mut text)
            .context("reading the text from standard input")?;
    } else {
        text = words.join(" ");
    }
    if text.trim().is_empty() {
        ensure!(words.is_empty(), "the text is empty");
        println!("no text given: saying {DEMO_TEXT:?}");
        return Ok((DEMO_TEXT.to_owned(), true));
    }
    Ok((text, false))
}

fn seconds(samples: usize) -> f64 {
    samples as f64 / f64::from(OUTPUT_SAMPLE_RATE)
}

fn main() -> Result<()> {
    let args = Args::parse();
    let (text, demo) = read_text(&args.text)?;
    let model = open_model_or_hub(
        args.model.as_deref(),
        &args.hub,
        model_options(args.threads, args.device),
        "its speech is noise",
    )?;
    let opts = TtsOptions {
        voice: args
            .voice
            .unwrap_or(if demo { DEMO_VOICE } else { Voice::default() }),
        max_new_tokens: args
            .max_tokens
            .unwrap_or(if args.model.is_none() && !args.hub.is_set() {
                DEMO_MAX_TOKENS
            } else {
                TtsOptions::default().max_new_tokens
            }),
        audio: SamplerConfig::tts_audio(args.seed),
        ..Default::default()
    };
    let start = Instant::now();
    let job = Job::Tts(TtsJob {
        text,
        options: opts,
    });
    let result: Outcome = if args.stream {
        let (mut chunks, mut samples, mut mid_line) = (0usize, Vec::new(), false);
        let result = model.run(&job, &mut |event| {
            match event {
                ReplyEvent::Text(t) => {
                    print!("{}", printable(&t));
                    let _ = std::io::stdout().flush();
                    mid_line = true;
                }
                ReplyEvent::Audio(a) => {
                    chunks += 1;
                    if std::mem::take(&mut mid_line) {
                        println!();
                    }
                    println!(
                        "[chunk {chunks}: {} samples ({:.3} s) at {:.0} ms, {:.2} s so far]",
                        a.len(),
                        seconds(a.len()),
                        start.elapsed().as_secs_f64() * 1e3,
                        seconds(samples.len() + a.len()),
                    );
                    samples.extend_from_slice(&a);
                }
            }
            true
        })?;
        if mid_line {
            println!();
        }
        // why: the streamed chunks are the reply's samples as they became final, so what a
        // player would have heard is the file written below.
        ensure!(
            samples == result.audio,
            "the streamed chunks differ from the reply's audio"
        );
        result
    } else {
        let result = model.run(&job, &mut |_| true)?;
        if !result.text.is_empty() {
            println!("text: {}", printable(&result.text));
        }
        result
    };
    write_wav_file_24k(&args.out, &result.audio)
        .with_context(|| format!("writing {}", args.out.display()))?;
    let first = result
        .timings
        .first_audio
        .map_or("no audio".to_owned(), |d| {
            format!("first audio after {:.0} ms", d.as_secs_f64() * 1e3)
        });
    println!(
        "wrote {} ({:.2} s of audio, {} steps, {}); {first}, total {:.0} ms",
        args.out.display(),
        seconds(result.audio.len()),
        result.steps,
        if result.ended {
            "ended"
        } else {
            "cut at max tokens"
        },
        result.timings.total.as_secs_f64() * 1e3,
    );
    Ok(())
}
