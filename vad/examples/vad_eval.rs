//! Compares the VAD candidates on the labelled corpus (`vad_corpus`): per condition, the frame
//! precision and recall of each classifier at threshold 0.5, and what the `Segmenter` with the
//! default `server_vad` settings makes of it: end-of-speech delay, missed utterances, false
//! starts.
//!
//! `cargo run -p voice-activity --release --example vad_eval -- <corpus dir>`

mod common;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use common::{Utterance, LABEL_FRAME, RATE};
use voice_activity::{
    Classifier, EarshotClassifier, EnergyClassifier, Segmenter, SileroClassifier, SileroWeights,
    VadConfig, VadEvent,
};

const CONDITIONS: [&str; 7] = [
    "clean",
    "white_20db",
    "white_10db",
    "white_5db",
    "pink_20db",
    "pink_10db",
    "pink_5db",
];
/// End-of-speech delays are measured after utterances followed by at least this much silence
/// (shorter gaps are under `silence_duration_ms` plus the detectors' lag: no stop is due).
const MIN_GAP_FOR_STOP_MS: u64 = 1000;

/// WebRTC's VAD (libfvad) gives yes or no; `VadConfig::threshold` picks its aggressiveness:
/// `[0, 0.25)` Quality, `[0.25, 0.5)` LowBitrate, `[0.5, 0.75)` Aggressive, `[0.75, 1]`
/// VeryAggressive (a higher threshold asks for more certainty, as with a probability).
struct WebrtcClassifier {
    vad: webrtc_vad::Vad,
    mode: u8,
    frame_len: usize,
    pcm: Vec<i16>,
}

impl WebrtcClassifier {
    fn for_threshold(threshold: f32, frame_ms: usize) -> WebrtcClassifier {
        let mode = ((threshold * 4.0) as u8).min(3);
        WebrtcClassifier::with_mode(mode, frame_ms)
    }

    fn with_mode(mode: u8, frame_ms: usize) -> WebrtcClassifier {
        let vad_mode = match mode {
            0 => webrtc_vad::VadMode::Quality,
            1 => webrtc_vad::VadMode::LowBitrate,
            2 => webrtc_vad::VadMode::Aggressive,
            _ => webrtc_vad::VadMode::VeryAggressive,
        };
        let vad =
            webrtc_vad::Vad::new_with_rate_and_mode(webrtc_vad::SampleRate::Rate16kHz, vad_mode);
        WebrtcClassifier {
            vad,
            mode,
            frame_len: frame_ms * 16,
            pcm: Vec::new(),
        }
    }
}

impl Classifier for WebrtcClassifier {
    fn name(&self) -> &'static str {
        "webrtc"
    }
    fn frame_len(&self) -> usize {
        self.frame_len
    }
    fn speech_probability(&mut self, frame: &[f32]) -> f32 {
        self.pcm.clear();
        self.pcm
            .extend(frame.iter().map(|s| (s * 32767.0).round() as i16));
        // 10, 20 or 30 ms at 16 kHz: never the length error.
        match self.vad.is_voice_segment(&self.pcm) {
            Ok(true) => 1.0,
            _ => 0.0,
        }
    }
    fn reset(&mut self) {
        self.vad.reset();
        // why: reset() puts libfvad back to its default mode.
        *self = WebrtcClassifier::with_mode(self.mode, self.frame_len / 16);
    }
}

/// One turn the segmenter reported.
struct Turn {
    onset: u64,
    end: u64,
    stop_emitted: Option<u64>,
}

/// What one candidate did on one condition.
struct Scores {
    precision: f64,
    recall: f64,
    /// ms from the labelled end of an utterance to the `SpeechStopped` for it.
    delays: Vec<i64>,
    /// Utterances followed by a long gap whose turn had no `SpeechStopped` before the next one.
    no_stop: usize,
    stops_due: usize,
    /// Utterances that no turn overlaps.
    missed: usize,
    /// Turns without any labelled speech in them.
    false_starts: usize,
    /// The segmenter's time (resampling and classifier included) per second of audio: one
    /// stream's cost.
    ms_per_audio_s: f64,
}

fn percentile(sorted: &[i64], p: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p / 100.0 * (sorted.len() - 1) as f64).round() as usize;
    Some(sorted[rank])
}

/// The corpus audio as the segmenter gets it: the 16 kHz original or a copy resampled to the
/// Realtime API's 24 kHz, with its rate.
type Mic<'a> = (&'a [f32], u32);

fn evaluate<C: Classifier>(
    mut make: impl FnMut() -> C,
    config: VadConfig,
    audio: &[f32],
    mic: Mic,
    frames: &[bool],
    utterances: &[Utterance],
) -> Result<Scores> {
    // Frame decisions on the 10 ms label grid: a grid frame takes the decision of the
    // classifier frame holding its midpoint.
    let threshold = config.threshold;
    let mut classifier = make();
    let len = classifier.frame_len();
    let decisions: Vec<bool> = audio
        .chunks_exact(len)
        .map(|f| classifier.speech_probability(f) >= threshold)
        .collect();
    let (mut tp, mut fp, mut fn_) = (0usize, 0usize, 0usize);
    for (j, &label) in frames.iter().enumerate() {
        let mid = j * LABEL_FRAME + LABEL_FRAME / 2;
        let predicted = decisions.get(mid / len).copied().unwrap_or(false);
        match (predicted, label) {
            (true, true) => tp += 1,
            (true, false) => fp += 1,
            (false, true) => fn_ += 1,
            (false, false) => {}
        }
    }

    // The segmenter, fed 10 ms at a time as a microphone would; each event with the time it
    // came out (the end of the chunk that completed it).
    let (mic_audio, mic_rate) = mic;
    let started = Instant::now();
    let mut segmenter = Segmenter::with_classifier(config, mic_rate, make())?;
    let mut events = Vec::new();
    for chunk in mic_audio.chunks(mic_rate as usize / 100) {
        for event in segmenter.push(chunk) {
            events.push((segmenter.samples_seen() * 1000 / u64::from(mic_rate), event));
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let total_ms = audio.len() as u64 * 1000 / u64::from(RATE);

    // Turns: onset and end in ms on the audio's timeline, and when the stop came out; a turn
    // still open at the end runs to the end of the audio.
    let mut turns: Vec<Turn> = Vec::new();
    for (emitted, event) in &events {
        match *event {
            VadEvent::SpeechStarted { audio_start_ms } => turns.push(Turn {
                onset: audio_start_ms + u64::from(config.prefix_padding_ms),
                end: total_ms,
                stop_emitted: None,
            }),
            VadEvent::SpeechStopped { audio_end_ms } => {
                let turn = turns.last_mut().context("a stop without a start")?;
                anyhow::ensure!(turn.stop_emitted.is_none(), "two stops in a row");
                turn.end = audio_end_ms;
                turn.stop_emitted = Some(*emitted);
            }
            // Pause events are off (`set_pause_ms` is not called).
            VadEvent::Paused { .. } | VadEvent::Resumed => {}
        }
    }
    let speech_in = |from_ms: u64, to_ms: u64| {
        let (a, b) = (
            (from_ms / 10) as usize,
            (to_ms.div_ceil(10) as usize).min(frames.len()),
        );
        a < b && frames[a..b].iter().any(|&f| f)
    };
    let false_starts = turns.iter().filter(|t| !speech_in(t.onset, t.end)).count();
    let overlaps = |t: &Turn, u: &Utterance| t.onset < u.end_ms() && t.end > u.start_ms();
    let missed = utterances
        .iter()
        .filter(|u| !turns.iter().any(|t| overlaps(t, u)))
        .count();

    let (mut delays, mut no_stop, mut stops_due) = (Vec::new(), 0, 0);
    for (i, u) in utterances.iter().enumerate() {
        if u.gap_after_ms < MIN_GAP_FOR_STOP_MS {
            continue;
        }
        // The turn that holds the utterance's end: the last one begun before it, if it reaches
        // into the utterance (else the utterance was missed, counted above).
        let Some(turn) = turns
            .iter()
            .rfind(|t| t.onset < u.end_ms())
            .filter(|t| overlaps(t, u))
        else {
            continue;
        };
        stops_due += 1;
        let next_start = utterances.get(i + 1).map_or(total_ms, |n| n.start_ms());
        match turn.stop_emitted {
            // Negative when the detector gave up before the labelled end.
            Some(emitted) if emitted <= next_start => {
                delays.push(emitted as i64 - u.end_ms() as i64)
            }
            _ => no_stop += 1,
        }
    }
    delays.sort_unstable();
    Ok(Scores {
        precision: tp as f64 / (tp + fp).max(1) as f64,
        recall: tp as f64 / (tp + fn_).max(1) as f64,
        delays,
        no_stop,
        stops_due,
        missed,
        false_starts,
        ms_per_audio_s: elapsed * 1000.0 / (total_ms as f64 / 1000.0),
    })
}

fn row(condition: &str, name: &str, s: &Scores, nonspeech_min: f64) -> String {
    let fmt = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
    let f1 = 2.0 * s.precision * s.recall / (s.precision + s.recall).max(1e-9);
    format!(
        "| {condition} | {name} | {:.3} | {:.3} | {:.3} | {} | {} | {}/{} | {} | {} ({:.1}/min) | {:.2} |",
        s.precision,
        s.recall,
        f1,
        fmt(percentile(&s.delays, 50.0)),
        fmt(percentile(&s.delays, 95.0)),
        s.no_stop,
        s.stops_due,
        s.missed,
        s.false_starts,
        s.false_starts as f64 / nonspeech_min,
        s.ms_per_audio_s,
    )
}

const HEADER: &str = "| condition | candidate | precision | recall | F1 | EoS delay p50 ms | EoS delay p95 ms | no stop | missed utterances | false starts | ms per s of audio |\n|---|---|---|---|---|---|---|---|---|---|---|";

fn main() -> Result<()> {
    let dir: PathBuf = std::env::args()
        .nth(1)
        .context("usage: vad_eval <corpus dir> (made by vad_corpus)")?
        .into();
    let (frames, utterances) = common::read_labels(&dir)?;
    let nonspeech_min = frames.iter().filter(|&&f| !f).count() as f64 / 100.0 / 60.0;
    let default = VadConfig::default();
    println!(
        "{} utterances, {:.1} min of audio ({:.1} min without speech); segmenter: {default:?}, MIN_SPEECH_MS {}",
        utterances.len(),
        frames.len() as f64 / 100.0 / 60.0,
        nonspeech_min,
        voice_activity::MIN_SPEECH_MS,
    );
    let silero_weights = SileroWeights::bundled();
    let silero = || SileroClassifier::new(silero_weights.clone());
    let (mut main_rows, mut webrtc_rows, mut threshold_rows) = (Vec::new(), Vec::new(), Vec::new());
    for condition in CONDITIONS {
        let (audio, rate) = common::read_wav(&dir.join(format!("{condition}.wav")))?;
        anyhow::ensure!(rate == RATE, "{condition}.wav: {rate} Hz, expected {RATE}");
        let mic: Mic = (&audio, RATE);
        let run = |rows: &mut Vec<String>, name: &str, scores: Result<Scores>| -> Result<()> {
            rows.push(row(condition, name, &scores?, nonspeech_min));
            Ok(())
        };
        run(
            &mut main_rows,
            "energy",
            evaluate(
                || EnergyClassifier,
                default,
                &audio,
                mic,
                &frames,
                &utterances,
            ),
        )?;
        let webrtc = || WebrtcClassifier::for_threshold(default.threshold, 10);
        run(
            &mut main_rows,
            "webrtc (mode 2, 10 ms)",
            evaluate(webrtc, default, &audio, mic, &frames, &utterances),
        )?;
        run(
            &mut main_rows,
            "earshot",
            evaluate(
                EarshotClassifier::new,
                default,
                &audio,
                mic,
                &frames,
                &utterances,
            ),
        )?;
        run(
            &mut main_rows,
            "silero",
            evaluate(silero, default, &audio, mic, &frames, &utterances),
        )?;
        // The Realtime API's rate: the segmenter resamples 24 kHz back to 16 kHz.
        let mut audio_24k = Vec::new();
        voice_activity::Resampler::new(RATE, 24_000)?.process(&audio, &mut audio_24k);
        let at_24k = evaluate(
            silero,
            default,
            &audio,
            (&audio_24k, 24_000),
            &frames,
            &utterances,
        );
        run(&mut main_rows, "silero, 24 kHz input", at_24k)?;
        for mode in 0u8..4 {
            for frame_ms in [10, 30] {
                let make = || WebrtcClassifier::with_mode(mode, frame_ms);
                let name = format!("webrtc mode {mode}, {frame_ms} ms");
                run(
                    &mut webrtc_rows,
                    &name,
                    evaluate(make, default, &audio, mic, &frames, &utterances),
                )?;
            }
        }
        for threshold in [0.3, 0.7, 0.85] {
            let config = VadConfig {
                threshold,
                ..default
            };
            let name = format!("earshot, threshold {threshold}");
            run(
                &mut threshold_rows,
                &name,
                evaluate(
                    EarshotClassifier::new,
                    config,
                    &audio,
                    mic,
                    &frames,
                    &utterances,
                ),
            )?;
            let name = format!("silero, threshold {threshold}");
            run(
                &mut threshold_rows,
                &name,
                evaluate(silero, config, &audio, mic, &frames, &utterances),
            )?;
        }
    }
    for (title, rows) in [
        ("The candidates with the default settings", main_rows),
        ("WebRTC's modes and frame lengths", webrtc_rows),
        ("earshot and silero at other thresholds", threshold_rows),
    ] {
        println!("\n{title}:\n\n{HEADER}");
        for line in rows {
            println!("{line}");
        }
    }
    Ok(())
}
