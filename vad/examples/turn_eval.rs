//! End of turn on the espeak-ng turn corpus (examples/common/turn.rs: questions with 300-900 ms
//! mid-sentence pauses and clean ones): per `semantic_vad` eagerness (smart-turn v3.2 at a short
//! pause, a longest wait otherwise) and for `server_vad`-style silence timers of 200 and 500 ms,
//! the delay from the last voiced sample to the end of the turn (p50/p95), the share of
//! mid-sentence pauses at which the turn ended (false end of turn), and CPU time per second of
//! audio (this thread's user+system time, one stream).
//!
//! `cargo run -p voice-activity --release --example turn_eval`
//! (needs espeak-ng and the smart-turn weights: scripts/smart_turn_weights.sh)

#[path = "common/turn.rs"]
mod turn;

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use turn::{Item, Outcome};
use voice_activity::{
    Check, Eagerness, EndOfTurnPolicy, Segmenter, SmartTurn, TurnDetector, VadConfig, VadEvent,
};

/// This thread's CPU time in ms (user + system, from /proc; 10 ms ticks).
fn thread_cpu_ms() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // USER_HZ is 100 on Linux.
    Some((utime + stime) * 10.0)
}

/// Feeds each item 10 ms at a time to a fresh detector made by `make`; the stops' times.
fn run<D>(
    items: &[Item],
    mut make: impl FnMut() -> Result<D>,
    mut push: impl FnMut(&mut D, &[f32]) -> Vec<VadEvent>,
) -> Result<(Vec<Outcome>, f64, f64)> {
    let cpu0 = thread_cpu_ms();
    let wall = Instant::now();
    let mut outcomes = Vec::new();
    for item in items {
        let mut d = make()?;
        let mut stops_ms = Vec::new();
        let mut fed = 0usize;
        for chunk in item.audio.chunks(turn::RATE / 100) {
            fed += chunk.len();
            for e in push(&mut d, chunk) {
                if let VadEvent::SpeechStopped { .. } = e {
                    stops_ms.push((fed * 1000 / turn::RATE) as u64);
                }
            }
        }
        outcomes.push(Outcome { stops_ms });
    }
    let audio_s = items.iter().map(|i| i.audio.len()).sum::<usize>() as f64 / turn::RATE as f64;
    let cpu = match (cpu0, thread_cpu_ms()) {
        (Some(a), Some(b)) => (b - a) / audio_s,
        _ => f64::NAN,
    };
    Ok((
        outcomes,
        cpu,
        wall.elapsed().as_secs_f64() * 1000.0 / audio_s,
    ))
}

fn row(name: &str, items: &[Item], outcomes: &[Outcome], cpu: f64, wall: f64) -> String {
    let s = turn::score(items, outcomes);
    let fmt = |v: Option<i64>| v.map_or("-".into(), |v| v.to_string());
    format!(
        "| {name} | {} | {} | {}/{} ({:.1} %) | {} | {} | {cpu:.1} | {wall:.1} |",
        fmt(turn::percentile(&s.delays, 50.0)),
        fmt(turn::percentile(&s.delays, 95.0)),
        s.false_ends,
        s.pauses,
        100.0 * s.false_ends as f64 / s.pauses.max(1) as f64,
        s.early_other,
        s.no_end,
    )
}

fn main() -> Result<()> {
    let model = Arc::new(SmartTurn::load_default()?);
    let started = Instant::now();
    let items = turn::corpus(turn::PAUSED.len(), turn::CLEAN.len(), turn::VOICES.len())
        .context("making the corpus")?;
    let pauses: usize = items.iter().map(|i| i.pauses.len()).sum();
    let audio_s = items.iter().map(|i| i.audio.len()).sum::<usize>() as f64 / turn::RATE as f64;
    println!(
        "{} questions ({} with mid-sentence pauses, {pauses} pauses of >= {} ms), {audio_s:.0} s of audio, made in {:.1} s",
        items.len(),
        items.iter().filter(|i| !i.pauses.is_empty()).count(),
        turn::MIN_PAUSE_MS,
        started.elapsed().as_secs_f64()
    );
    let vad = VadConfig::default();
    // TURN_EVAL_CURVE=file: P(complete) at every mid-sentence pause and question end after
    // 100, 200, ... 1000 ms of silence (as far as the pause goes), one line per window, to study
    // decision rules offline: `item kind index silence_ms pause_len_ms p`.
    if let Some(path) = std::env::var_os("TURN_EVAL_CURVE") {
        use std::io::Write;
        let mut f = std::fs::File::create(path)?;
        for (n, item) in items.iter().enumerate() {
            let start = item.audio.iter().position(|s| s.abs() > 1e-3).unwrap_or(0);
            let from = start.saturating_sub(vad.prefix_padding_ms as usize * 16);
            let mut windows: Vec<(&str, usize, usize)> = item
                .pauses
                .iter()
                .map(|&(a, b)| ("pause", a, b - a))
                .collect();
            windows.push(("end", item.speech_end, item.audio.len() - item.speech_end));
            for (k, (kind, at, len)) in windows.into_iter().enumerate() {
                for silence in (100..=1000).step_by(100) {
                    let upto = at + silence * turn::RATE / 1000;
                    if upto > at + len {
                        break;
                    }
                    let p = model.probability(&item.audio[from..upto]);
                    writeln!(
                        f,
                        "{n}\t{kind}\t{k}\t{silence}\t{}\t{p}",
                        len * 1000 / turn::RATE
                    )?;
                }
            }
        }
        return Ok(());
    }
    let mut rows = Vec::new();
    for silence in [200u32, 500] {
        let config = VadConfig {
            silence_duration_ms: silence,
            ..vad
        };
        let (out, cpu, wall) = run(
            &items,
            || Ok(Segmenter::new(config, turn::RATE as u32)?),
            |s, c| s.push(c),
        )?;
        rows.push(row(
            &format!("server_vad, {silence} ms silence"),
            &items,
            &out,
            cpu,
            wall,
        ));
    }
    let mut policies: Vec<(String, EndOfTurnPolicy)> =
        [Eagerness::Low, Eagerness::Medium, Eagerness::High]
            .iter()
            .map(|e| {
                let p = e.policy();
                let [a, b] = p.checks;
                (
                    format!(
                        "semantic_vad {} (P >= {} at {} ms, >= {} at {} ms, wait <= {} ms)",
                        e.as_str(),
                        a.threshold,
                        a.silence_ms,
                        b.threshold,
                        b.silence_ms,
                        p.max_silence_ms
                    ),
                    p,
                )
            })
            .collect();
    // Other settings, to show what each knob does: `MS1,P1,MS2,P2,MAX` arguments (then only
    // those run, beside server_vad, and the model-alone sweep is skipped).
    let only_args = std::env::args().len() > 1;
    if only_args {
        policies.clear();
    }
    for v in std::env::args().skip(1).filter_map(|a| {
        let v: Vec<f64> = a.split(',').filter_map(|x| x.parse().ok()).collect();
        (v.len() == 5).then_some(v)
    }) {
        let check = |ms: f64, p: f64| Check {
            silence_ms: ms as u32,
            threshold: p as f32,
        };
        policies.push((
            format!(
                "semantic_vad (P >= {} at {} ms, >= {} at {} ms, wait <= {} ms)",
                v[1], v[0], v[3], v[2], v[4]
            ),
            EndOfTurnPolicy {
                checks: [check(v[0], v[1]), check(v[2], v[3])],
                max_silence_ms: v[4] as u32,
            },
        ));
    }
    for (name, policy) in &policies {
        let (out, cpu, wall) = run(
            &items,
            || {
                Ok(TurnDetector::new(
                    model.clone(),
                    *policy,
                    vad,
                    turn::RATE as u32,
                )?)
            },
            |d, c| d.push(c),
        )?;
        rows.push(row(name, &items, &out, cpu, wall));
    }
    // The model alone: P(complete) at each mid-sentence pause and at each question's end, after
    // `pause` ms of silence, and what each threshold would make of them.
    // TURN_EVAL_DUMP=dir writes the 200 ms windows with our probabilities (a check of the model
    // on the same clips with onnxruntime: scripts/smart_turn_check.py).
    let dump = std::env::var_os("TURN_EVAL_DUMP").map(std::path::PathBuf::from);
    let mut sweep = Vec::new();
    let sweep_pauses: &[usize] = if only_args { &[] } else { &[100, 200, 300] };
    for &pause_ms in sweep_pauses {
        let (mut at_pauses, mut at_ends) = (Vec::new(), Vec::new());
        for item in &items {
            let start = item.audio.iter().position(|s| s.abs() > 1e-3).unwrap_or(0);
            let from = start.saturating_sub(vad.prefix_padding_ms as usize * 16);
            let upto = |at: usize| (at + pause_ms * turn::RATE / 1000).min(item.audio.len());
            let mut windows: Vec<(&str, usize)> =
                item.pauses.iter().map(|&(a, _)| ("pause", a)).collect();
            windows.push(("end", item.speech_end));
            for (kind, at) in windows {
                let clip = &item.audio[from..upto(at)];
                let p = model.probability(clip);
                if kind == "pause" {
                    at_pauses.push(p);
                } else {
                    at_ends.push(p);
                }
                if let (Some(dir), 200) = (&dump, pause_ms) {
                    std::fs::create_dir_all(dir)?;
                    let n = at_pauses.len() + at_ends.len();
                    let name = format!("{n:03}_{kind}.wav");
                    let spec = hound::WavSpec {
                        channels: 1,
                        sample_rate: turn::RATE as u32,
                        bits_per_sample: 32,
                        sample_format: hound::SampleFormat::Float,
                    };
                    let mut w = hound::WavWriter::create(dir.join(&name), spec)?;
                    for s in clip {
                        w.write_sample(*s)?;
                    }
                    w.finalize()?;
                    use std::io::Write;
                    let mut list = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(dir.join("ours.tsv"))?;
                    writeln!(list, "{name}\t{kind}\t{p}")?;
                }
            }
        }
        for threshold in [0.5f32, 0.7, 0.8, 0.9, 0.95, 0.98] {
            let share = |v: &[f32]| {
                100.0 * v.iter().filter(|&&p| p >= threshold).count() as f64 / v.len() as f64
            };
            sweep.push(format!(
                "| {pause_ms} | {threshold} | {:.1} % | {:.1} % |",
                share(&at_pauses),
                share(&at_ends)
            ));
        }
    }
    println!(
        "\nsmart-turn alone after a pause of the given length: P(complete) >= threshold\n\n| pause ms | threshold | at mid-sentence pauses | at the ends of questions |\n|---|---|---|---|"
    );
    for r in sweep {
        println!("{r}");
    }
    println!(
        "\n| detector | end-of-turn delay p50 ms | p95 ms | false end of turn (mid-sentence pauses) | other early ends | never ended | CPU ms per s of audio | wall ms per s |\n|---|---|---|---|---|---|---|---|"
    );
    for r in rows {
        println!("{r}");
    }
    Ok(())
}
