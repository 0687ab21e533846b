//! The socket's session settings and `session.update`: both the GA shape (`session.audio.input
//! .format`, `.turn_detection`, `session.audio.output.voice`, `max_output_tokens`) and the beta
//! one (`input_audio_format: "pcm16"`, top-level `turn_detection` and `voice`,
//! `max_response_output_tokens`) are read; an update is checked whole before any of it applies.
//!
//! Every field the OpenAI Realtime API defines is accepted. What it means here:
//! - used: `instructions`, `output_modalities`/`modalities`, the input format, `turn_detection`
//!   (`server_vad`, `semantic_vad`, null), `max_output_tokens`/`max_response_output_tokens`,
//!   `transcription`/`input_audio_transcription` (any `model` taken and echoed as given: the
//!   loaded model's own ASR transcribes, see [`super::transcription`]);
//! - `tools` (function tools) and `tool_choice`: the tools go into the system turn in LFM2's
//!   tool format unless `tool_choice` is `"none"` ([`prompt_tools`]); the model decides
//!   whether to call one (`"required"` or a named function cannot force it); `mcp` tools are
//!   echoed, not offered (this server runs no MCP client);
//! - kept and echoed as given: `voice`, `parallel_tool_calls`, `tracing`, `truncation`;
//! - checked, and echoed as what the server does: `noise_reduction` (echoed `null`: not
//!   done), `speed` (echoed 1.0: the model speaks at its own
//!   pace), `prompt`, `include`, `reasoning` (echoed `null`: no stored prompts, no
//!   logprobs, no reasoning), `model` (echoed as the served model), `temperature` (checked,
//!   not echoed: replies use the engine's sampling).
//!
//! A well-formed value of any of them is never an error; a malformed one is (with the field in
//! `param`), and then nothing of the update applies.

use serde_json::{json, Map, Value};

use super::error::EventError;
use super::turns::{Eagerness, SemanticSettings, TurnDetection, VadSettings};

/// Input sample rates a client may stream (PCM16 mono).
pub const INPUT_RATES: [u32; 2] = [24_000, 16_000];
/// The output: PCM16 mono at 24 kHz, the model's rate.
pub const OUTPUT_RATE: u32 = 24_000;

/// What a response sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Modality {
    /// Audio with its transcript (`["audio"]`, or the beta's `["audio", "text"]`).
    Audio,
    /// Text only (`["text"]`): the reply is generated as usual and only its text is sent.
    Text,
}

impl Modality {
    /// The GA `output_modalities` value.
    pub fn json(self) -> Value {
        match self {
            Modality::Audio => json!(["audio"]),
            Modality::Text => json!(["text"]),
        }
    }

    /// The beta `modalities` value.
    pub fn beta_json(self) -> Value {
        match self {
            Modality::Audio => json!(["audio", "text"]),
            Modality::Text => json!(["text"]),
        }
    }
}

/// What a socket's responses use.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionConfig {
    /// The system prompt (`instructions`); `None`: the engine's default.
    pub instructions: Option<String>,
    /// The voice the client asked for (a name, or `{"id": ...}`). LFM2-Audio's replies speak
    /// in the model's own voice, so it is only echoed back.
    pub voice: Value,
    /// The input audio's sample rate.
    pub input_rate: u32,
    /// Turn detection, or `None` for manual commits.
    pub turn_detection: Option<TurnDetection>,
    /// Most reply steps (text tokens and audio frames) a response may take; `None`: the
    /// server's default.
    pub max_output_tokens: Option<usize>,
    /// What responses send.
    pub output: Modality,
    /// The tools (kept and echoed; not yet given to the model).
    pub tools: Value,
    /// `tool_choice` (kept and echoed).
    pub tool_choice: Value,
    /// `parallel_tool_calls` (kept and echoed; `null` when never set).
    pub parallel_tool_calls: Value,
    /// `tracing` (kept and echoed).
    pub tracing: Value,
    /// `truncation` (kept and echoed).
    pub truncation: Value,
    /// Input transcription as the client asked for it (echoed as given); `None`: off.
    pub transcription: Option<Value>,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            instructions: None,
            voice: json!("default"),
            input_rate: 24_000,
            turn_detection: None,
            max_output_tokens: None,
            output: Modality::Audio,
            tools: json!([]),
            tool_choice: json!("auto"),
            parallel_tool_calls: Value::Null,
            tracing: Value::Null,
            truncation: json!("auto"),
            transcription: None,
        }
    }
}

/// An `invalid_value` error at `param`.
fn bad(param: &str, message: impl Into<String>) -> EventError {
    EventError::invalid("invalid_value", message).at(param)
}

/// `max_output_tokens`: a positive integer or `"inf"` (the server's limit).
pub fn parse_max_tokens(v: &Value, param: &str) -> Result<Option<usize>, EventError> {
    match v {
        Value::String(s) if s == "inf" => Ok(None),
        Value::Number(n) => match n.as_u64() {
            Some(k) if k > 0 => Ok(Some(k as usize)),
            _ => Err(bad(
                param,
                format!("{param} must be a positive integer or \"inf\", not {n}"),
            )),
        },
        Value::Null => Ok(None),
        other => Err(bad(
            param,
            format!("{param} must be a positive integer or \"inf\", not {other}"),
        )),
    }
}

/// An audio format object (`{"type": "audio/pcm", "rate": R}`) or the beta's `"pcm16"`; the
/// rate it names.
pub fn parse_format(v: &Value, param: &str, rates: &[u32]) -> Result<u32, EventError> {
    match v {
        Value::String(s) if s == "pcm16" => Ok(24_000),
        Value::Object(o) => {
            match o.get("type").and_then(Value::as_str) {
                Some("audio/pcm") | None => {}
                Some(t) => {
                    return Err(bad(
                        param,
                        format!("audio format `{t}` is not supported: only audio/pcm (PCM16 mono)"),
                    ))
                }
            }
            match o.get("rate") {
                None | Some(Value::Null) => Ok(24_000),
                Some(r) => match r.as_u64().and_then(|r| u32::try_from(r).ok()) {
                    Some(r) if rates.contains(&r) => Ok(r),
                    _ => Err(bad(
                        param,
                        format!("rate {r} is not supported here: use one of {rates:?}"),
                    )),
                },
            }
        }
        other => Err(bad(
            param,
            format!(
                "audio format {other} is not supported: use {{\"type\": \"audio/pcm\", \"rate\": 24000}} or \"pcm16\""
            ),
        )),
    }
}

/// `output_modalities` / `modalities`: a non-empty list of `"audio"` and `"text"`.
pub fn parse_modalities(v: &Value, param: &str) -> Result<Modality, EventError> {
    let list = v.as_array().filter(|a| !a.is_empty()).ok_or_else(|| {
        bad(
            param,
            format!("{param} must be a non-empty list of \"audio\" and \"text\", not {v}"),
        )
    })?;
    let mut audio = false;
    for m in list {
        match m.as_str() {
            Some("audio") => audio = true,
            Some("text") => {}
            _ => {
                return Err(bad(
                    param,
                    format!("{param} holds {m}: only \"audio\" and \"text\" are modalities"),
                ))
            }
        }
    }
    Ok(if audio {
        Modality::Audio
    } else {
        Modality::Text
    })
}

/// A voice: a name of at most 64 bytes, or `{"id": NAME}` (a custom voice).
pub fn parse_voice(v: &Value, param: &str) -> Result<Value, EventError> {
    let ok = |s: &str| !s.is_empty() && s.len() <= 64;
    match v {
        Value::String(s) if ok(s) => Ok(v.clone()),
        Value::Object(o) if o.get("id").and_then(Value::as_str).is_some_and(ok) => Ok(v.clone()),
        other => Err(bad(
            param,
            format!("voice must be a name of at most 64 bytes or {{\"id\": NAME}}, not {other}"),
        )),
    }
}

/// `metadata`: null or at most 16 string pairs (keys up to 64 bytes, values up to 512).
pub fn parse_metadata(v: &Value, param: &str) -> Result<Value, EventError> {
    let o = match v {
        Value::Null => return Ok(Value::Null),
        Value::Object(o) => o,
        other => {
            return Err(bad(
                param,
                format!("metadata must be an object, not {other}"),
            ))
        }
    };
    if o.len() > 16 {
        return Err(bad(param, "metadata holds at most 16 pairs"));
    }
    for (k, val) in o {
        match val.as_str() {
            Some(s) if k.len() <= 64 && s.len() <= 512 => {}
            _ => {
                return Err(bad(
                    &format!("{param}.{k}"),
                    "metadata keys are strings of at most 64 bytes, values strings of at most 512",
                ))
            }
        }
    }
    Ok(v.clone())
}

/// `tools`: a list of tool objects (`function` or `mcp`).
pub fn parse_tools(v: &Value, param: &str) -> Result<Value, EventError> {
    let list = match v {
        Value::Null => return Ok(json!([])),
        Value::Array(a) => a,
        other => return Err(bad(param, format!("tools must be a list, not {other}"))),
    };
    for (i, t) in list.iter().enumerate() {
        let at = format!("{param}[{i}]");
        let o = t
            .as_object()
            .ok_or_else(|| bad(&at, format!("a tool is an object, not {t}")))?;
        match o.get("type").filter(|t| !t.is_null()).map(Value::as_str) {
            None | Some(Some("function")) => {
                if let Some(n) = o.get("name").filter(|n| !n.is_null()) {
                    if !n.as_str().is_some_and(|n| !n.is_empty() && n.len() <= 64) {
                        return Err(bad(
                            &format!("{at}.name"),
                            "a function's name is a string of 1 to 64 bytes",
                        ));
                    }
                }
                if let Some(p) = o.get("parameters").filter(|p| !p.is_null()) {
                    if !p.is_object() {
                        return Err(bad(
                            &format!("{at}.parameters"),
                            "a function's parameters are a JSON schema object",
                        ));
                    }
                }
            }
            Some(Some("mcp")) => {
                if !o.get("server_label").is_some_and(Value::is_string) {
                    return Err(bad(
                        &format!("{at}.server_label"),
                        "an mcp tool needs a server_label",
                    ));
                }
            }
            _ => {
                return Err(bad(
                    &format!("{at}.type"),
                    "a tool's type is \"function\" or \"mcp\"",
                ))
            }
        }
    }
    Ok(v.clone())
}

/// The function tools of `tools` (checked by [`parse_tools`]) that go into the prompt under
/// `tool_choice`: none for `"none"`, else every function tool (`mcp` ones are not offered).
pub fn prompt_tools(tools: &Value, tool_choice: &Value) -> Vec<Value> {
    if tool_choice.as_str() == Some("none") {
        return Vec::new();
    }
    tools
        .as_array()
        .map(|list| {
            list.iter()
                .filter(|t| {
                    matches!(
                        t.get("type").and_then(Value::as_str),
                        None | Some("function")
                    )
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// `tool_choice`: `"auto"`, `"none"`, `"required"`, `{"type": "function", "name"}` or
/// `{"type": "mcp", "server_label"}`.
pub fn parse_tool_choice(v: &Value, param: &str) -> Result<Value, EventError> {
    let ok = match v {
        Value::Null => return Ok(json!("auto")),
        Value::String(s) => matches!(s.as_str(), "auto" | "none" | "required"),
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("function") => o.get("name").is_some_and(Value::is_string),
            Some("mcp") => o.get("server_label").is_some_and(Value::is_string),
            _ => false,
        },
        _ => false,
    };
    if ok {
        Ok(v.clone())
    } else {
        Err(bad(
            param,
            format!(
                "tool_choice is \"auto\", \"none\", \"required\", {{\"type\": \"function\", \
                 \"name\": ...}} or {{\"type\": \"mcp\", \"server_label\": ...}}, not {v}"
            ),
        ))
    }
}

/// A value that must be null or an object (for fields checked only for their shape).
fn check_object(v: &Value, param: &str) -> Result<(), EventError> {
    if v.is_null() || v.is_object() {
        Ok(())
    } else {
        Err(bad(
            param,
            format!("{param} must be an object or null, not {v}"),
        ))
    }
}

/// `noise_reduction`: null or `{"type": "near_field" | "far_field"}`.
fn check_noise_reduction(v: &Value, param: &str) -> Result<(), EventError> {
    check_object(v, param)?;
    if let Some(t) = v.get("type").filter(|t| !t.is_null()) {
        if !matches!(t.as_str(), Some("near_field" | "far_field")) {
            return Err(bad(
                &format!("{param}.type"),
                format!("noise reduction is \"near_field\" or \"far_field\", not {t}"),
            ));
        }
    }
    Ok(())
}

/// `transcription`: null or an object whose `model`, `language` and `prompt` are strings.
fn check_transcription(v: &Value, param: &str) -> Result<(), EventError> {
    check_object(v, param)?;
    for key in ["model", "language", "prompt"] {
        if let Some(x) = v.get(key).filter(|x| !x.is_null()) {
            if !x.is_string() {
                return Err(bad(
                    &format!("{param}.{key}"),
                    format!("{key} must be a string, not {x}"),
                ));
            }
        }
    }
    Ok(())
}

/// `tracing`: null, `"auto"` or an object.
fn check_tracing(v: &Value, param: &str) -> Result<(), EventError> {
    match v {
        Value::Null | Value::Object(_) => Ok(()),
        Value::String(s) if s == "auto" => Ok(()),
        other => Err(bad(
            param,
            format!("tracing is \"auto\", an object or null, not {other}"),
        )),
    }
}

/// `truncation`: `"auto"`, `"disabled"` or `{"type": "retention_ratio", "retention_ratio"}`.
fn check_truncation(v: &Value, param: &str) -> Result<(), EventError> {
    let ok = match v {
        Value::String(s) => matches!(s.as_str(), "auto" | "disabled"),
        Value::Object(o) => {
            o.get("type").and_then(Value::as_str) == Some("retention_ratio")
                && o.get("retention_ratio")
                    .and_then(Value::as_f64)
                    .is_some_and(|r| (0.0..=1.0).contains(&r))
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(bad(
            param,
            format!(
                "truncation is \"auto\", \"disabled\" or {{\"type\": \"retention_ratio\", \
                 \"retention_ratio\": 0..1}}, not {v}"
            ),
        ))
    }
}

/// `prompt`: null or `{"id": ...}`.
fn check_prompt(v: &Value, param: &str) -> Result<(), EventError> {
    check_object(v, param)?;
    if v.is_object() && !v.get("id").is_some_and(Value::is_string) {
        return Err(bad(
            &format!("{param}.id"),
            "a prompt reference needs an `id`",
        ));
    }
    Ok(())
}

/// `include`: null or a list of strings.
fn check_include(v: &Value, param: &str) -> Result<(), EventError> {
    match v {
        Value::Null => Ok(()),
        Value::Array(a) if a.iter().all(Value::is_string) => Ok(()),
        other => Err(bad(
            param,
            format!("include must be a list of strings, not {other}"),
        )),
    }
}

/// `speed`: 0.25 to 1.5.
fn check_speed(v: &Value, param: &str) -> Result<(), EventError> {
    match v {
        Value::Null => Ok(()),
        _ if v.as_f64().is_some_and(|s| (0.25..=1.5).contains(&s)) => Ok(()),
        other => Err(bad(
            param,
            format!("speed must be a number from 0.25 to 1.5, not {other}"),
        )),
    }
}

/// `temperature`: 0 to 2.
fn check_temperature(v: &Value, param: &str) -> Result<(), EventError> {
    match v {
        Value::Null => Ok(()),
        _ if v.as_f64().is_some_and(|t| (0.0..=2.0).contains(&t)) => Ok(()),
        other => Err(bad(
            param,
            format!("temperature must be a number from 0 to 2, not {other}"),
        )),
    }
}

/// `parallel_tool_calls` and the like: null or a boolean.
fn check_bool(v: &Value, param: &str) -> Result<(), EventError> {
    if v.is_null() || v.is_boolean() {
        Ok(())
    } else {
        Err(bad(
            param,
            format!("{param} must be true or false, not {v}"),
        ))
    }
}

/// The fields a session and a response share that are checked but change nothing here
/// (`prompt`, `reasoning`, `temperature`, `include`, `parallel_tool_calls`, `model`).
pub fn check_unused(o: &Map<String, Value>, prefix: &str) -> Result<(), EventError> {
    let at = |k: &str| format!("{prefix}.{k}");
    if let Some(v) = o.get("prompt") {
        check_prompt(v, &at("prompt"))?;
    }
    if let Some(v) = o.get("reasoning") {
        check_object(v, &at("reasoning"))?;
    }
    if let Some(v) = o.get("temperature") {
        check_temperature(v, &at("temperature"))?;
    }
    if let Some(v) = o.get("include") {
        check_include(v, &at("include"))?;
    }
    if let Some(v) = o.get("parallel_tool_calls") {
        check_bool(v, &at("parallel_tool_calls"))?;
    }
    if let Some(v) = o.get("model").filter(|v| !v.is_null()) {
        if !v.is_string() {
            return Err(bad(
                &at("model"),
                format!("model must be a string, not {v}"),
            ));
        }
    }
    Ok(())
}

/// An optional boolean of a `turn_detection` object.
fn td_bool(o: &Map<String, Value>, key: &str, param: &str) -> Result<Option<bool>, EventError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(bad(
            &format!("{param}.{key}"),
            format!("{key} must be true or false"),
        )),
    }
}

/// `turn_detection`: null (manual commits), `{"type": "server_vad", ...}` or
/// `{"type": "semantic_vad", "eagerness", ...}`.
fn parse_turn_detection(v: &Value, param: &str) -> Result<Option<TurnDetection>, EventError> {
    let o = match v {
        Value::Null => return Ok(None),
        Value::Object(o) => o,
        other => {
            return Err(bad(
                param,
                format!("turn_detection must be an object or null, not {other}"),
            ))
        }
    };
    let create = td_bool(o, "create_response", param)?;
    let interrupt = td_bool(o, "interrupt_response", param)?;
    match o.get("type").and_then(Value::as_str) {
        Some("server_vad") => {}
        Some("semantic_vad") => {
            let mut s = SemanticSettings::default();
            if let Some(e) = o.get("eagerness").filter(|e| !e.is_null()) {
                s.eagerness = e.as_str().and_then(Eagerness::parse).ok_or_else(|| {
                    bad(
                        &format!("{param}.eagerness"),
                        format!("eagerness is \"low\", \"medium\", \"high\" or \"auto\", not {e}"),
                    )
                })?;
            }
            s.create_response = create.unwrap_or(s.create_response);
            s.interrupt_response = interrupt.unwrap_or(s.interrupt_response);
            return Ok(Some(TurnDetection::Semantic(s)));
        }
        t => {
            return Err(bad(
                &format!("{param}.type"),
                format!(
                    "turn_detection type {} is not known: use \"server_vad\", \"semantic_vad\" \
                     or null",
                    t.unwrap_or("(none)")
                ),
            ))
        }
    }
    let mut s = VadSettings::default();
    if let Some(t) = o.get("threshold").filter(|v| !v.is_null()) {
        match t.as_f64() {
            Some(t) if (0.0..=1.0).contains(&t) => s.threshold = t as f32,
            _ => {
                return Err(bad(
                    &format!("{param}.threshold"),
                    format!("threshold {t} must be a number from 0 to 1"),
                ))
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
                    return Err(bad(
                        &format!("{param}.{key}"),
                        format!("{key} {v} must be an integer from 0 to 10000"),
                    ))
                }
            }
        }
    }
    if let Some(v) = o.get("idle_timeout_ms").filter(|v| !v.is_null()) {
        if v.as_u64().is_none() {
            return Err(bad(
                &format!("{param}.idle_timeout_ms"),
                format!("idle_timeout_ms {v} must be an integer"),
            ));
        }
    }
    s.create_response = create.unwrap_or(s.create_response);
    s.interrupt_response = interrupt.unwrap_or(s.interrupt_response);
    Ok(Some(TurnDetection::Server(s)))
}

impl SessionConfig {
    /// The settings after `session` (a `session.update`'s object); unchanged fields keep their
    /// values. Nothing applies when any field is bad.
    pub fn updated(&self, session: &Map<String, Value>) -> Result<SessionConfig, EventError> {
        let mut c = self.clone();
        match session.get("type") {
            None | Some(Value::Null) => {}
            Some(Value::String(t)) if t == "realtime" => {}
            Some(t) => {
                return Err(bad(
                    "session.type",
                    format!(
                        "session type {t} is not served here: this socket is a \"realtime\" \
                         (speech-to-speech) session"
                    ),
                ))
            }
        }
        if let Some(v) = session.get("instructions") {
            c.instructions = match v {
                Value::Null => None,
                Value::String(s) => {
                    audio_engine::lfm2_audio::limits::check_system_prompt(s)
                        .map_err(|e| bad("session.instructions", e.to_string()))?;
                    Some(s.clone())
                }
                other => {
                    return Err(bad(
                        "session.instructions",
                        format!("instructions must be a string, not {other}"),
                    ))
                }
            };
        }
        for key in ["output_modalities", "modalities"] {
            if let Some(v) = session.get(key).filter(|v| !v.is_null()) {
                c.output = parse_modalities(v, &format!("session.{key}"))?;
            }
        }
        let section =
            |v: Option<&Value>, param: &str| -> Result<Option<Map<String, Value>>, EventError> {
                match v {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::Object(o)) => Ok(Some(o.clone())),
                    Some(other) => Err(bad(
                        param,
                        format!("{param} must be an object, not {other}"),
                    )),
                }
            };
        let audio = section(session.get("audio"), "session.audio")?;
        let input = section(
            audio.as_ref().and_then(|a| a.get("input")),
            "session.audio.input",
        )?;
        let output = section(
            audio.as_ref().and_then(|a| a.get("output")),
            "session.audio.output",
        )?;
        let input = input.as_ref();
        let output = output.as_ref();
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
        if let Some(v) = input.and_then(|i| i.get("noise_reduction")) {
            check_noise_reduction(v, "session.audio.input.noise_reduction")?;
        }
        if let Some(v) = session.get("input_audio_noise_reduction") {
            check_noise_reduction(v, "session.input_audio_noise_reduction")?;
        }
        for (v, param) in [
            (
                input.and_then(|i| i.get("transcription")),
                "session.audio.input.transcription",
            ),
            (
                session.get("input_audio_transcription"),
                "session.input_audio_transcription",
            ),
        ] {
            if let Some(v) = v {
                check_transcription(v, param)?;
                c.transcription = Some(v.clone()).filter(|v| !v.is_null());
            }
        }
        for (v, param) in [
            (
                output.and_then(|o| o.get("voice")),
                "session.audio.output.voice",
            ),
            (session.get("voice"), "session.voice"),
        ] {
            if let Some(v) = v.filter(|v| !v.is_null()) {
                c.voice = parse_voice(v, param)?;
            }
        }
        if let Some(v) = output.and_then(|o| o.get("speed")) {
            check_speed(v, "session.audio.output.speed")?;
        }
        if let Some(v) = session.get("speed") {
            check_speed(v, "session.speed")?;
        }
        for key in ["max_output_tokens", "max_response_output_tokens"] {
            if let Some(v) = session.get(key) {
                c.max_output_tokens = parse_max_tokens(v, &format!("session.{key}"))?;
            }
        }
        if let Some(v) = session.get("tools") {
            c.tools = parse_tools(v, "session.tools")?;
        }
        if let Some(v) = session.get("tool_choice") {
            c.tool_choice = parse_tool_choice(v, "session.tool_choice")?;
        }
        if let Some(v) = session.get("parallel_tool_calls") {
            check_bool(v, "session.parallel_tool_calls")?;
            c.parallel_tool_calls = v.clone();
        }
        if let Some(v) = session.get("tracing") {
            check_tracing(v, "session.tracing")?;
            c.tracing = v.clone();
        }
        if let Some(v) = session.get("truncation") {
            check_truncation(v, "session.truncation")?;
            c.truncation = v.clone();
        }
        check_unused(session, "session")?;
        Ok(c)
    }

    /// The session object of `session.created` / `session.updated`.
    pub fn json(&self, id: &str, model: &str, beta: bool) -> Value {
        let td = self.turn_detection.as_ref().map(TurnDetection::json);
        let max: Value = match self.max_output_tokens {
            Some(n) => json!(n),
            None => json!("inf"),
        };
        if beta {
            return json!({
                "id": id, "object": "realtime.session", "model": model,
                "modalities": self.output.beta_json(),
                "instructions": self.instructions,
                "voice": self.voice,
                "input_audio_format": if self.input_rate == 24_000 { json!("pcm16") }
                    else { json!({"type": "audio/pcm", "rate": self.input_rate}) },
                "output_audio_format": "pcm16",
                "input_audio_transcription": self.transcription,
                "input_audio_noise_reduction": null,
                "turn_detection": td,
                "speed": 1.0,
                "tools": self.tools,
                "tool_choice": self.tool_choice,
                "tracing": self.tracing,
                "max_response_output_tokens": max,
            });
        }
        json!({
            "type": "realtime", "object": "realtime.session", "id": id, "model": model,
            "output_modalities": self.output.json(),
            "instructions": self.instructions,
            "max_output_tokens": max,
            "tools": self.tools,
            "tool_choice": self.tool_choice,
            "parallel_tool_calls": self.parallel_tool_calls,
            "tracing": self.tracing,
            "truncation": self.truncation,
            "prompt": null,
            "include": null,
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": self.input_rate},
                    "noise_reduction": null,
                    "transcription": self.transcription,
                    "turn_detection": td,
                },
                "output": {
                    "format": {"type": "audio/pcm", "rate": OUTPUT_RATE},
                    "voice": self.voice,
                    "speed": 1.0,
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
        let Some(TurnDetection::Server(s)) = ga.turn_detection else {
            panic!("server_vad")
        };
        assert_eq!(s.silence_duration_ms, 300);
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

    /// The session the OpenAI Agents SDK sends at its defaults, and LiveKit's (as their code
    /// builds them), each field present.
    #[test]
    fn what_the_agents_sdk_and_livekit_send_is_taken_and_echoed() {
        let agents = json!({
            "type": "realtime", "model": "gpt-realtime-2.1", "output_modalities": ["audio"],
            "audio": {
                "input": {"format": {"type": "audio/pcm", "rate": 24000},
                          "transcription": {"model": "gpt-4o-mini-transcribe"},
                          "turn_detection": {"type": "semantic_vad", "interrupt_response": true}},
                "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "ash"}},
            "tools": [{"type": "function", "name": "get_weather", "description": "Weather.",
                       "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
            "instructions": "You are a helpful assistant.",
            "tracing": "auto", "tool_choice": "auto",
        });
        let c = upd(agents).unwrap();
        let Some(TurnDetection::Semantic(s)) = &c.turn_detection else {
            panic!("semantic_vad")
        };
        assert_eq!(s.eagerness, Eagerness::Auto);
        assert!(s.create_response && s.interrupt_response);
        let j = c.json("sess_1", "lfm2", false);
        assert_eq!(
            j["audio"]["input"]["turn_detection"]["type"],
            "semantic_vad"
        );
        assert_eq!(j["audio"]["input"]["turn_detection"]["eagerness"], "auto");
        // Transcription on, its model echoed as given (the loaded model transcribes).
        assert_eq!(
            j["audio"]["input"]["transcription"],
            json!({"model": "gpt-4o-mini-transcribe"})
        );
        assert_eq!(j["tools"][0]["name"], "get_weather");
        assert_eq!(j["tracing"], "auto");
        assert_eq!(j["audio"]["output"]["voice"], "ash");
        let livekit = json!({
            "type": "realtime", "model": "gpt-realtime", "output_modalities": ["audio"],
            "audio": {
                "input": {"format": {"type": "audio/pcm", "rate": 24000}, "noise_reduction": null,
                          "transcription": {"model": "gpt-4o-mini-transcribe"},
                          "turn_detection": {"type": "semantic_vad", "create_response": true,
                                             "eagerness": "medium", "interrupt_response": true}},
                "output": {"format": {"type": "audio/pcm", "rate": 24000}, "speed": 1.0,
                           "voice": {"id": "voice_123"}}},
            "max_output_tokens": "inf", "tool_choice": "auto", "tracing": null,
            "truncation": {"type": "retention_ratio", "retention_ratio": 0.8},
            "reasoning": {"effort": "low"}, "prompt": {"id": "pmpt_1"},
            "include": ["item.input_audio_transcription.logprobs"], "parallel_tool_calls": true,
        });
        let c = upd(livekit).unwrap();
        let j = c.json("sess_1", "lfm2", false);
        assert_eq!(j["audio"]["output"]["voice"]["id"], "voice_123");
        assert_eq!(j["audio"]["input"]["noise_reduction"], Value::Null);
        assert_eq!(j["audio"]["input"]["turn_detection"]["eagerness"], "medium");
        assert_eq!(j["truncation"]["retention_ratio"], 0.8);
        assert_eq!(j["parallel_tool_calls"], true);
        assert_eq!(j["prompt"], Value::Null);
        // The beta shape's fields.
        let c = upd(
            json!({"modalities": ["text"], "input_audio_transcription": {"model": "whisper-1"},
            "input_audio_noise_reduction": {"type": "near_field"}, "temperature": 0.8,
            "speed": 1.2, "output_audio_format": "pcm16"}),
        )
        .unwrap();
        assert_eq!(c.output, Modality::Text);
        assert_eq!(c.json("s", "m", true)["modalities"], json!(["text"]));
        assert_eq!(
            c.json("s", "m", true)["input_audio_transcription"]["model"],
            "whisper-1"
        );
        // null turns it off again, in either shape.
        let off = c
            .updated(
                json!({"audio": {"input": {"transcription": null}}})
                    .as_object()
                    .unwrap(),
            )
            .unwrap();
        assert_eq!(off.transcription, None);
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
                json!({"turn_detection": {"type": "some_vad"}}),
                "session.turn_detection.type",
            ),
            (
                json!({"turn_detection": {"type": "semantic_vad", "eagerness": "eager"}}),
                "session.turn_detection.eagerness",
            ),
            (
                json!({"turn_detection": {"type": "semantic_vad", "create_response": "yes"}}),
                "session.turn_detection.create_response",
            ),
            (
                json!({"turn_detection": {"type": "server_vad", "threshold": 2}}),
                "session.turn_detection.threshold",
            ),
            (json!({"max_output_tokens": 0}), "session.max_output_tokens"),
            (json!({"instructions": 5}), "session.instructions"),
            (json!({"type": "transcription"}), "session.type"),
            (
                json!({"output_modalities": []}),
                "session.output_modalities",
            ),
            (json!({"modalities": ["video"]}), "session.modalities"),
            (json!({"audio": 3}), "session.audio"),
            (
                json!({"audio": {"input": {"noise_reduction": {"type": "loud"}}}}),
                "session.audio.input.noise_reduction.type",
            ),
            (
                json!({"audio": {"input": {"transcription": {"model": 7}}}}),
                "session.audio.input.transcription.model",
            ),
            (
                json!({"audio": {"output": {"speed": 9}}}),
                "session.audio.output.speed",
            ),
            (
                json!({"audio": {"output": {"voice": {"name": "x"}}}}),
                "session.audio.output.voice",
            ),
            (json!({"tools": {"name": "f"}}), "session.tools"),
            (json!({"tools": [{"type": "web"}]}), "session.tools[0].type"),
            (
                json!({"tools": [{"type": "function", "name": 3}]}),
                "session.tools[0].name",
            ),
            (json!({"tool_choice": "sometimes"}), "session.tool_choice"),
            (json!({"tracing": 1}), "session.tracing"),
            (json!({"truncation": "never"}), "session.truncation"),
            (json!({"prompt": {"version": "1"}}), "session.prompt.id"),
            (json!({"include": "all"}), "session.include"),
            (json!({"temperature": 5}), "session.temperature"),
            (
                json!({"parallel_tool_calls": "yes"}),
                "session.parallel_tool_calls",
            ),
        ] {
            let mut with_good = bad.as_object().unwrap().clone();
            with_good.insert("voice".into(), json!("ash"));
            let e = SessionConfig::default().updated(&with_good).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{bad}: {e}");
        }
    }
}
