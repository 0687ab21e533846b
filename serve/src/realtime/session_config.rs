//! The socket's session settings and `session.update`: both the GA shape (`session.audio.input
//! .format`, `.turn_detection`, `session.audio.output.voice`, `max_output_tokens`) and the beta
//! one (`input_audio_format: "pcm16"`, top-level `turn_detection` and `voice`,
//! `max_response_output_tokens`) are read; an update is checked whole before any of it applies.

use serde_json::{json, Map, Value};

use super::error::EventError;
use super::turns::VadSettings;

/// Input sample rates a client may stream (PCM16 mono).
pub const INPUT_RATES: [u32; 2] = [24_000, 16_000];
/// The output: PCM16 mono at 24 kHz, the model's rate.
pub const OUTPUT_RATE: u32 = 24_000;

/// What a socket's responses use.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionConfig {
    /// The system prompt (`instructions`); `None`: the engine's default.
    pub instructions: Option<String>,
    /// The voice the client asked for. LFM2-Audio's replies speak in the model's own voice,
    /// so it is only echoed back.
    pub voice: String,
    /// The input audio's sample rate.
    pub input_rate: u32,
    /// Server VAD, or `None` for manual commits.
    pub turn_detection: Option<VadSettings>,
    /// Most reply steps (text tokens and audio frames) a response may take; `None`: the
    /// server's default.
    pub max_output_tokens: Option<usize>,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            instructions: None,
            voice: "default".into(),
            input_rate: 24_000,
            turn_detection: None,
            max_output_tokens: None,
        }
    }
}

/// `max_output_tokens`: a positive integer or `"inf"` (the server's limit).
pub fn parse_max_tokens(v: &Value, param: &str) -> Result<Option<usize>, EventError> {
    match v {
        Value::String(s) if s == "inf" => Ok(None),
        Value::Number(n) => match n.as_u64() {
            Some(k) if k > 0 => Ok(Some(k as usize)),
            _ => Err(EventError::invalid(
                "invalid_value",
                format!("{param} must be a positive integer or \"inf\", not {n}"),
            )
            .at(param)),
        },
        Value::Null => Ok(None),
        other => Err(EventError::invalid(
            "invalid_value",
            format!("{param} must be a positive integer or \"inf\", not {other}"),
        )
        .at(param)),
    }
}

/// An audio format object (`{"type": "audio/pcm", "rate": R}`) or the beta's `"pcm16"`; the
/// rate it names.
fn parse_format(v: &Value, param: &str, rates: &[u32]) -> Result<u32, EventError> {
    let bad = |what: String| EventError::invalid("invalid_value", what).at(param);
    match v {
        Value::String(s) if s == "pcm16" => Ok(24_000),
        Value::Object(o) => {
            match o.get("type").and_then(Value::as_str) {
                Some("audio/pcm") | None => {}
                Some(t) => {
                    return Err(bad(format!(
                        "audio format `{t}` is not supported: only audio/pcm (PCM16 mono)"
                    )))
                }
            }
            match o.get("rate") {
                None | Some(Value::Null) => Ok(24_000),
                Some(r) => match r.as_u64().and_then(|r| u32::try_from(r).ok()) {
                    Some(r) if rates.contains(&r) => Ok(r),
                    _ => Err(bad(format!("rate {r} is not supported here: use one of {rates:?}"))),
                },
            }
        }
        other => Err(bad(format!(
            "audio format {other} is not supported: use {{\"type\": \"audio/pcm\", \"rate\": 24000}} or \"pcm16\""
        ))),
    }
}

/// `turn_detection`: null (manual commits) or `{"type": "server_vad", ...}`.
fn parse_turn_detection(v: &Value, param: &str) -> Result<Option<VadSettings>, EventError> {
    let o = match v {
        Value::Null => return Ok(None),
        Value::Object(o) => o,
        other => {
            return Err(EventError::invalid(
                "invalid_value",
                format!("turn_detection must be an object or null, not {other}"),
            )
            .at(param))
        }
    };
    match o.get("type").and_then(Value::as_str) {
        Some("server_vad") => {}
        t => {
            return Err(EventError::invalid(
                "invalid_value",
                format!(
                    "turn_detection type {} is not supported: use \"server_vad\" or null",
                    t.unwrap_or("(none)")
                ),
            )
            .at(format!("{param}.type")))
        }
    }
    let mut s = VadSettings::default();
    if let Some(t) = o.get("threshold").filter(|v| !v.is_null()) {
        match t.as_f64() {
            Some(t) if (0.0..=1.0).contains(&t) => s.threshold = t as f32,
            _ => {
                return Err(EventError::invalid(
                    "invalid_value",
                    format!("threshold {t} must be a number from 0 to 1"),
                )
                .at(format!("{param}.threshold")))
            }
        }
    }
    for (key, slot) in [
        ("prefix_padding_ms", &mut s.prefix_padding_ms),
        ("silence_duration_ms", &mut s.silence_duration_ms),
    ] {
        if let Some(v) = o.get(key).filter(|v| !v.is_null()) {
            match v.as_u64().and_then(|v| u32::try_from(v).ok()) {
                Some(ms) if ms <= 10_000 => *slot = ms,
                _ => {
                    return Err(EventError::invalid(
                        "invalid_value",
                        format!("{key} {v} must be an integer from 0 to 10000"),
                    )
                    .at(format!("{param}.{key}")))
                }
            }
        }
    }
    if let Some(v) = o.get("create_response").filter(|v| !v.is_null()) {
        s.create_response = v.as_bool().ok_or_else(|| {
            EventError::invalid("invalid_value", "create_response must be true or false")
                .at(format!("{param}.create_response"))
        })?;
    }
    if let Some(v) = o.get("interrupt_response").filter(|v| !v.is_null()) {
        s.interrupt_response = v.as_bool().ok_or_else(|| {
            EventError::invalid("invalid_value", "interrupt_response must be true or false")
                .at(format!("{param}.interrupt_response"))
        })?;
    }
    Ok(Some(s))
}

impl SessionConfig {
    /// The settings after `session` (a `session.update`'s object); unchanged fields keep their
    /// values. Nothing applies when any field is bad.
    pub fn updated(&self, session: &Map<String, Value>) -> Result<SessionConfig, EventError> {
        let mut c = self.clone();
        if let Some(v) = session.get("instructions") {
            c.instructions = match v {
                Value::Null => None,
                Value::String(s) => {
                    audio_engine::lfm2_audio::limits::check_system_prompt(s).map_err(|e| {
                        EventError::invalid("invalid_value", e.to_string())
                            .at("session.instructions")
                    })?;
                    Some(s.clone())
                }
                other => {
                    return Err(EventError::invalid(
                        "invalid_value",
                        format!("instructions must be a string, not {other}"),
                    )
                    .at("session.instructions"))
                }
            };
        }
        let audio = session.get("audio").and_then(Value::as_object);
        let input = audio
            .and_then(|a| a.get("input"))
            .and_then(Value::as_object);
        let output = audio
            .and_then(|a| a.get("output"))
            .and_then(Value::as_object);
        if let Some(f) = input.and_then(|i| i.get("format")) {
            c.input_rate = parse_format(f, "session.audio.input.format", &INPUT_RATES)?;
        }
        if let Some(f) = session.get("input_audio_format") {
            c.input_rate = parse_format(f, "session.input_audio_format", &INPUT_RATES)?;
        }
        if let Some(f) = output.and_then(|o| o.get("format")) {
            parse_format(f, "session.audio.output.format", &[OUTPUT_RATE])?;
        }
        if let Some(f) = session.get("output_audio_format") {
            parse_format(f, "session.output_audio_format", &[OUTPUT_RATE])?;
        }
        if let Some(t) = input.and_then(|i| i.get("turn_detection")) {
            c.turn_detection = parse_turn_detection(t, "session.audio.input.turn_detection")?;
        }
        if let Some(t) = session.get("turn_detection") {
            c.turn_detection = parse_turn_detection(t, "session.turn_detection")?;
        }
        for (v, param) in [
            (
                output.and_then(|o| o.get("voice")),
                "session.audio.output.voice",
            ),
            (session.get("voice"), "session.voice"),
        ] {
            match v {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) if !s.is_empty() && s.len() <= 64 => c.voice = s.clone(),
                Some(other) => {
                    return Err(EventError::invalid(
                        "invalid_value",
                        format!("voice must be a name of at most 64 bytes, not {other}"),
                    )
                    .at(param))
                }
            }
        }
        for key in ["max_output_tokens", "max_response_output_tokens"] {
            if let Some(v) = session.get(key) {
                c.max_output_tokens = parse_max_tokens(v, &format!("session.{key}"))?;
            }
        }
        Ok(c)
    }

    /// The session object of `session.created` / `session.updated`.
    pub fn json(&self, id: &str, model: &str, beta: bool) -> Value {
        let td = self.turn_detection.as_ref().map(VadSettings::json);
        let max: Value = match self.max_output_tokens {
            Some(n) => json!(n),
            None => json!("inf"),
        };
        if beta {
            return json!({
                "id": id, "object": "realtime.session", "model": model,
                "modalities": ["audio", "text"],
                "instructions": self.instructions,
                "voice": self.voice,
                "input_audio_format": if self.input_rate == 24_000 { json!("pcm16") }
                    else { json!({"type": "audio/pcm", "rate": self.input_rate}) },
                "output_audio_format": "pcm16",
                "turn_detection": td,
                "max_response_output_tokens": max,
            });
        }
        json!({
            "type": "realtime", "object": "realtime.session", "id": id, "model": model,
            "output_modalities": ["audio"],
            "instructions": self.instructions,
            "max_output_tokens": max,
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": self.input_rate},
                    "turn_detection": td,
                },
                "output": {
                    "format": {"type": "audio/pcm", "rate": OUTPUT_RATE},
                    "voice": self.voice,
                },
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upd(v: Value) -> Result<SessionConfig, EventError> {
        SessionConfig::default().updated(v.as_object().unwrap())
    }

    #[test]
    fn the_ga_and_the_beta_shapes_both_set_the_input_rate_and_turn_detection() {
        let ga = upd(json!({"type": "realtime", "instructions": "Be brief.",
            "audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000},
                                "turn_detection": {"type": "server_vad", "silence_duration_ms": 300}}}}))
        .unwrap();
        assert_eq!(ga.input_rate, 16_000);
        assert_eq!(ga.instructions.as_deref(), Some("Be brief."));
        assert_eq!(ga.turn_detection.unwrap().silence_duration_ms, 300);
        let beta = upd(
            json!({"input_audio_format": "pcm16", "turn_detection": null,
                              "voice": "alloy", "max_response_output_tokens": 40}),
        )
        .unwrap();
        assert_eq!(beta.input_rate, 24_000);
        assert_eq!(beta.turn_detection, None);
        assert_eq!(beta.voice, "alloy");
        assert_eq!(beta.max_output_tokens, Some(40));
    }

    #[test]
    fn a_bad_field_refuses_the_whole_update() {
        for (bad, param) in [
            (
                json!({"audio": {"input": {"format": {"type": "audio/pcm", "rate": 8000}}}}),
                "session.audio.input.format",
            ),
            (
                json!({"input_audio_format": "g711_ulaw"}),
                "session.input_audio_format",
            ),
            (
                json!({"turn_detection": {"type": "semantic_vad"}}),
                "session.turn_detection.type",
            ),
            (
                json!({"turn_detection": {"type": "server_vad", "threshold": 2}}),
                "session.turn_detection.threshold",
            ),
            (json!({"max_output_tokens": 0}), "session.max_output_tokens"),
            (json!({"instructions": 5}), "session.instructions"),
        ] {
            let mut with_good = bad.as_object().unwrap().clone();
            with_good.insert("voice".into(), json!("ash"));
            let e = SessionConfig::default().updated(&with_good).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{bad}: {e}");
        }
    }
}
