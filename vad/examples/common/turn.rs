//! The end-of-turn corpus: espeak-ng questions that pause mid-sentence (a `<break>` of 300 to
//! 900 ms after "and", "because", "the", inside lists and numbers, spoken in one SSML utterance
//! so that the intonation runs on across the pause) and questions that end cleanly. Made in
//! memory at evaluation or test time (deterministic for one espeak-ng version), never stored.
//! Shared by `examples/turn_eval.rs` and `tests/turn.rs` (through `#[path]`).

// why: each includer uses only part of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use voice_activity::Resampler;

/// The rate of the corpus (the models').
pub const RATE: usize = 16_000;
/// Questions with pauses where `|` stands: after "and", "because", "the", in lists, in numbers.
pub const PAUSED: [&str; 12] = [
    "I would like to order a pizza with mushrooms, olives and | extra cheese.",
    "Can you remind me to call my sister because | it is her birthday tomorrow?",
    "What is the | capital of Australia?",
    "My phone number is five five five, | two one three, | four four nine.",
    "Please add eggs, milk, | bread and | butter to my shopping list.",
    "How long does it take to drive from Berlin to the | centre of Munich?",
    "I was wondering if you could tell me about the | history of Rome.",
    "Set an alarm for seven | thirty tomorrow morning.",
    "Turn off the lights in the kitchen and | the living room.",
    "I need a flight to London because | I have a meeting there on Monday.",
    "The code for the door is four, | nine, | two, | seven.",
    "Could you play some music by the | Beatles?",
];
/// Questions without a pause.
pub const CLEAN: [&str; 8] = [
    "What time is it?",
    "Tell me a joke.",
    "How tall is Mount Everest?",
    "Thank you, that is all for now.",
    "Book a table for two at eight o'clock.",
    "What is the weather like in Paris today?",
    "Yes, please.",
    "Can you recommend a good book about space?",
];
/// Voices (language + variant) and speeds, cycled.
pub const VOICES: [&str; 3] = ["en-us", "en-gb+f3", "en-us+m3"];
pub const SPEEDS: [u32; 3] = [160, 175, 190];
/// Pause lengths, cycled over the corpus's pauses.
pub const PAUSES_MS: [u32; 5] = [300, 450, 600, 750, 900];
/// A silence inside a question at least this long is a mid-sentence pause (espeak-ng's own
/// comma pauses are shorter; `<break>`s are longer).
pub const MIN_PAUSE_MS: usize = 250;
/// Silence before each question.
pub const LEAD_MS: usize = 500;
/// Silence after each question: longer than the longest wait of every policy.
pub const TAIL_MS: usize = 3500;
/// Samples quieter than this are silence (espeak-ng's silence is digital zero; the floor skips
/// the resampler's ringing).
const FLOOR: f32 = 1e-3;

/// One question, ready to feed to a detector.
pub struct Item {
    pub voice: String,
    pub text: String,
    /// 16 kHz samples: lead-in silence, the question, the tail silence.
    pub audio: Vec<f32>,
    /// One past the last voiced sample.
    pub speech_end: usize,
    /// The mid-sentence pauses, `[start, end)` in samples.
    pub pauses: Vec<(usize, usize)>,
}

/// Speaks `ssml` with espeak-ng and returns it at 16 kHz, trimmed to its voiced extent.
fn speak(tmp: &Path, voice: &str, speed: u32, ssml: &str) -> Result<Vec<f32>> {
    let path = tmp.join("turn-utterance.wav");
    let status = Command::new("espeak-ng")
        .args(["-m", "-v", voice, "-s", &speed.to_string(), "-w"])
        .arg(&path)
        .arg(ssml)
        .status()
        .context("running espeak-ng (install it: apt-get install espeak-ng)")?;
    if !status.success() {
        bail!("espeak-ng -v {voice} failed: {status}");
    }
    let mut reader = hound::WavReader::open(&path)?;
    let rate = reader.spec().sample_rate;
    let samples: Vec<f32> = reader
        .samples::<i16>()
        .map(|s| s.map(|s| f32::from(s) / 32768.0))
        .collect::<Result<_, _>>()?;
    let mut out = Vec::new();
    let mut resampler = Resampler::new(rate, RATE as u32)?;
    resampler.process(&samples, &mut out);
    resampler.process(&[0.0; 64], &mut out);
    let first = out
        .iter()
        .position(|s| s.abs() > FLOOR)
        .context("no speech")?;
    let last = out.iter().rposition(|s| s.abs() > FLOOR).unwrap_or(first);
    Ok(out[first..=last].to_vec())
}

/// Silences of at least `MIN_PAUSE_MS` inside `speech` (which starts and ends voiced).
fn pauses(speech: &[f32]) -> Vec<(usize, usize)> {
    let min = MIN_PAUSE_MS * RATE / 1000;
    let mut found = Vec::new();
    let mut run_start = None;
    for (i, s) in speech.iter().enumerate() {
        match (s.abs() > FLOOR, run_start) {
            (false, None) => run_start = Some(i),
            (true, Some(start)) => {
                if i - start >= min {
                    found.push((start, i));
                }
                run_start = None;
            }
            _ => {}
        }
    }
    found
}

/// The corpus: every paused question, then every clean one, each in `voices` voices (cycled
/// from `VOICES`); `paused` and `clean` limit how many of each (a test takes a few).
pub fn corpus(paused: usize, clean: usize, voices: usize) -> Result<Vec<Item>> {
    let tmp = std::env::temp_dir().join(format!("turn-corpus-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let mut items = Vec::new();
    let mut pause_n = 0;
    let texts = PAUSED
        .iter()
        .take(paused)
        .chain(CLEAN.iter().take(clean))
        .enumerate();
    for (t, text) in texts {
        for v in 0..voices {
            let voice = VOICES[(t + v) % VOICES.len()];
            let speed = SPEEDS[(t + 2 * v) % SPEEDS.len()];
            let mut ssml = String::from("<speak>");
            for (i, part) in text.split('|').enumerate() {
                if i > 0 {
                    let ms = PAUSES_MS[pause_n % PAUSES_MS.len()];
                    pause_n += 1;
                    ssml += &format!("<break time=\"{ms}ms\"/>");
                }
                ssml += part.trim();
                ssml += " ";
            }
            ssml += "</speak>";
            let speech = speak(&tmp, voice, speed, &ssml)?;
            let lead = LEAD_MS * RATE / 1000;
            let breaks = text.matches('|').count();
            let found: Vec<(usize, usize)> = pauses(&speech)
                .into_iter()
                .map(|(a, b)| (lead + a, lead + b))
                .collect();
            if found.len() < breaks {
                bail!("{voice}: {} pauses found in {text:?}", found.len());
            }
            let mut audio = vec![0.0; lead];
            audio.extend(&speech);
            let speech_end = audio.len();
            audio.resize(audio.len() + TAIL_MS * RATE / 1000, 0.0);
            items.push(Item {
                voice: format!("{voice} {speed}wpm"),
                text: text.replace("| ", ""),
                audio,
                speech_end,
                pauses: found,
            });
        }
    }
    std::fs::remove_dir_all(&tmp).ok();
    Ok(items)
}

/// What a detector did with one item: when each `SpeechStopped` came out (ms since the item
/// began; the time of the 10 ms chunk that completed it).
pub struct Outcome {
    pub stops_ms: Vec<u64>,
}

/// Scores over a corpus.
pub struct Scores {
    /// ms from the last voiced sample to the first `SpeechStopped` after it, per item that had one.
    pub delays: Vec<i64>,
    /// Items that never ended.
    pub no_end: usize,
    /// Mid-sentence pauses in which a turn ended, and all mid-sentence pauses.
    pub false_ends: usize,
    pub pauses: usize,
    /// Clean questions ended before their end (should be 0: espeak-ng's comma pauses).
    pub early_other: usize,
}

pub fn percentile(sorted: &[i64], p: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p / 100.0 * (sorted.len() - 1) as f64).round() as usize;
    Some(sorted[rank])
}

pub fn score(items: &[Item], outcomes: &[Outcome]) -> Scores {
    let ms = |samples: usize| (samples * 1000 / RATE) as u64;
    let mut s = Scores {
        delays: Vec::new(),
        no_end: 0,
        false_ends: 0,
        pauses: 0,
        early_other: 0,
    };
    for (item, out) in items.iter().zip(outcomes) {
        let end = ms(item.speech_end);
        for &(a, b) in &item.pauses {
            s.pauses += 1;
            // A stop that came out during the pause (or within 100 ms of speech resuming, the
            // detectors' frame lag) ended the turn there.
            let (a, b) = (ms(a), ms(b) + 100);
            if out.stops_ms.iter().any(|&t| t > a && t <= b) {
                s.false_ends += 1;
            }
        }
        let early = out
            .stops_ms
            .iter()
            .filter(|&&t| {
                t <= end
                    && !item
                        .pauses
                        .iter()
                        .any(|&(a, b)| t > ms(a) && t <= ms(b) + 100)
            })
            .count();
        s.early_other += early;
        match out.stops_ms.iter().find(|&&t| t > end) {
            Some(&t) => s.delays.push(t as i64 - end as i64),
            None => s.no_end += 1,
        }
    }
    s.delays.sort_unstable();
    s
}
