//! What a finished job reports: the result JSON, one stream event's JSON, and the figures it
//! adds to the metrics.

use std::time::Duration;

use serde_json::{json, Value};

use audio_engine::lfm2_audio::ReplyEvent;

use crate::audio_io::{b64, wav16};
use crate::work::Finished;
use crate::{AppState, Entry};

use super::artifacts::artifact_json;

/// The result JSON.
pub fn result_json(entry: &Entry, o: &Finished, wall: Duration, ttft: Option<Duration>) -> Value {
    let audio_ms = o.audio.len() as f64 / 24.0;
    let wall_ms = wall.as_secs_f64() * 1e3;
    let basis = if entry.cfg.task == "asr" {
        o.input_seconds * 1e3
    } else {
        audio_ms
    };
    let mut timing = json!({
        "wall_ms": wall_ms,
        "audio_duration_ms": basis,
        "rtf": if basis > 0.0 { wall_ms / basis } else { 0.0 },
    });
    if let Some(t) = ttft {
        timing["ttft_ms"] = json!(t.as_secs_f64() * 1e3);
    }
    let mut v = json!({"text": o.text, "language": entry.language, "timing": timing});
    if entry.cfg.task != "asr" {
        v["audio"] = json!(b64(&wav16(&o.audio, 24_000)));
        v["sample_rate"] = json!(24_000);
        v["channels"] = json!(1);
    }
    if let Some(a) = &o.artifact {
        v["artifacts"] = json!([artifact_json(a)]);
    }
    v["lfm2_audio"] = json!({
        "resumed_prefill_positions": o.resumed_prefill_positions,
        "reused_questions": o.reused_questions,
        "prompt_positions": o.prompt_positions,
        "steps": o.steps,
        "ended": o.ended,
        "session_slot": o.slot,
        "affinity": o.affine,
    });
    v
}

/// One stream event.
pub fn event_json(ev: &ReplyEvent, language: &str) -> Value {
    match ev {
        ReplyEvent::Text(t) => {
            json!({"partial_text": {"text": t, "language": language}, "is_final": false})
        }
        ReplyEvent::Audio(s) => json!({"audio": b64(&wav16(s, 24_000)), "is_final": false}),
    }
}

/// Records a finished job's figures.
pub fn record(state: &AppState, o: &Finished) {
    use std::sync::atomic::Ordering::Relaxed;
    state
        .metrics
        .resumed_positions
        .fetch_add(o.resumed_prefill_positions as u64, Relaxed);
    state
        .metrics
        .reused_questions
        .fetch_add(o.reused_questions as u64, Relaxed);
    if !o.audio.is_empty() {
        let secs = o.audio.len() as f64 / 24_000.0;
        state
            .metrics
            .real_time_factor
            .observe(o.engine_time.as_secs_f64() / secs);
    }
}
