//! The one option table: every option a request (or a session) may carry, with its type, range,
//! default per task and description. The C ABI lists it (`audiocpp_model_option`), the HTTP
//! server takes the same names (as request fields or in `options`), README's option table is
//! generated from it ([`markdown_table`]), and [`resolve`] is the one reader of a request's
//! values: a front end adds no default, range or rule of its own.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::io::audio::DEFAULT_MAX_SECONDS;
use crate::lfm2_audio::limits::CONVERSATION_LIMIT;
use crate::lfm2_audio::session::conversation::Task;

/// A value type and its bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OptionType {
    /// A non-negative integer in `min..=max`.
    Int {
        /// Smallest value taken.
        min: u64,
        /// Largest value taken.
        max: u64,
    },
    /// A finite number in `min..=max` (`min` excluded when `open_min`).
    Float {
        /// Lower bound.
        min: f64,
        /// Largest value taken.
        max: f64,
        /// Whether `min` itself is refused.
        open_min: bool,
    },
    /// `true` or `false` (as text also `1` / `0`).
    Bool,
    /// One of the listed words.
    Choice(&'static [&'static str]),
    /// Any text.
    Text,
}

/// One option of the table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OptionSpec {
    /// Its name, as every front end spells it.
    pub name: &'static str,
    /// Its type and range.
    pub ty: OptionType,
    /// Its default for ASR, TTS and S2S, in that order, as text; `None` where the task does not
    /// take it, `Some("")` where the default is the model's (the language).
    pub defaults: [Option<&'static str>; 3],
    /// What it does.
    pub description: &'static str,
}

fn task_index(task: Task) -> usize {
    match task {
        Task::Asr => 0,
        Task::Tts => 1,
        Task::S2s => 2,
    }
}

impl OptionSpec {
    /// Whether `task` takes the option.
    pub fn takes(&self, task: Task) -> bool {
        self.defaults[task_index(task)].is_some()
    }

    /// The option's default for `task` as text (`None` when the task does not take it).
    pub fn default_for(&self, task: Task) -> Option<&'static str> {
        self.defaults[task_index(task)]
    }

    /// The tasks that take it.
    pub fn tasks(&self) -> Vec<Task> {
        [Task::Asr, Task::Tts, Task::S2s]
            .into_iter()
            .filter(|t| self.takes(*t))
            .collect()
    }
}

/// Default `max_tokens` of ASR and TTS (per text chunk), audio.cpp's.
pub const MAX_TOKENS_DEFAULT: usize = 512;
/// Default `max_tokens` of S2S, audio.cpp's.
pub const MAX_TOKENS_DEFAULT_S2S: usize = 1024;
/// Default `text_chunk_size` of TTS in code points, audio.cpp's.
pub const TEXT_CHUNK_SIZE_DEFAULT: usize = 200;
/// Default `audio_chunk_seconds` of ASR.
pub const AUDIO_CHUNK_SECONDS_DEFAULT: f64 = 30.0;
/// Largest `top_k`: the audio vocabulary (2048 codes and the end-of-audio code).
pub const TOP_K_MAX: u64 = 2049;
/// Largest `temperature`.
pub const TEMPERATURE_MAX: f64 = 100.0;
/// Largest `text_chunk_size`.
pub const TEXT_CHUNK_SIZE_MAX: u64 = 100_000;
/// Largest `stream_frames_per_event`.
pub const FRAMES_PER_EVENT_MAX: u64 = 1024;

/// The `max_tokens` option's name.
pub const MAX_TOKENS: &str = "max_tokens";

/// The request options.
pub const REQUEST_OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "language",
        ty: OptionType::Text,
        defaults: [Some(""), Some(""), Some("")],
        description: "language of the text and speech; must be the checkpoint's (en; ja for the \
                      JP checkpoint)",
    },
    OptionSpec {
        name: MAX_TOKENS,
        ty: OptionType::Int {
            min: 1,
            max: CONVERSATION_LIMIT as u64,
        },
        defaults: [Some("512"), Some("512"), Some("1024")],
        description: "most steps generated (text tokens and audio frames; tts: per text chunk); \
                      a server may set a lower limit",
    },
    OptionSpec {
        name: "temperature",
        ty: OptionType::Float {
            min: 0.0,
            max: TEMPERATURE_MAX,
            open_min: false,
        },
        defaults: [None, Some("0.8"), Some("1")],
        description: "audio sampling temperature (0: greedy; the text's is text_temperature)",
    },
    OptionSpec {
        name: "top_k",
        ty: OptionType::Int {
            min: 0,
            max: TOP_K_MAX,
        },
        defaults: [None, Some("64"), Some("4")],
        description: "audio codes kept when sampling (0: all, 1: greedy)",
    },
    OptionSpec {
        name: "text_temperature",
        ty: OptionType::Float {
            min: 0.0,
            max: TEMPERATURE_MAX,
            open_min: false,
        },
        defaults: [None, None, Some("0")],
        description: "text sampling temperature of the spoken reply (0: greedy, as liquid-audio's \
                      default; above 0 samples all text tokens with the request's seed)",
    },
    OptionSpec {
        name: "seed",
        ty: OptionType::Int {
            min: 0,
            max: u64::MAX,
        },
        defaults: [None, Some("0"), Some("0")],
        description: "audio sampling seed (tts text chunk i uses seed + i)",
    },
    OptionSpec {
        name: "audio_chunk_mode",
        ty: OptionType::Choice(&["auto", "vad", "fixed", "none"]),
        defaults: [Some("auto"), None, None],
        description: "how long audio is split for the encoder: auto (fixed chunks when longer \
                      than the one-pass limit), fixed (always), none (never; longer audio is \
                      refused); vad needs a voice-activity model, which this build does not have",
    },
    OptionSpec {
        name: "audio_chunk_seconds",
        ty: OptionType::Float {
            min: 0.0,
            max: DEFAULT_MAX_SECONDS,
            open_min: true,
        },
        defaults: [Some("30"), None, None],
        description: "chunk length in seconds when audio is chunked (at most the one-pass limit)",
    },
    OptionSpec {
        name: "text_chunk_mode",
        ty: OptionType::Choice(&["auto", "sentence", "none"]),
        defaults: [None, Some("auto"), None],
        description: "how long text is split: auto or sentence (whole sentences packed up to \
                      text_chunk_size code points, longer ones at spaces), none (one chunk)",
    },
    OptionSpec {
        name: "text_chunk_size",
        ty: OptionType::Int {
            min: 1,
            max: TEXT_CHUNK_SIZE_MAX,
        },
        defaults: [None, Some("200"), None],
        description: "longest text chunk in code points",
    },
    OptionSpec {
        name: "stream_frames_per_event",
        ty: OptionType::Int {
            min: 1,
            max: FRAMES_PER_EVENT_MAX,
        },
        defaults: [None, Some("1"), Some("1")],
        description: "audio frames (80 ms each) per streamed event",
    },
    OptionSpec {
        name: super::super::session::conversation::RETURN_CODES,
        ty: OptionType::Bool,
        defaults: [None, None, Some("true")],
        description: "whether the result carries the reply artifact (lfm2_audio.reply) to send \
                      back with the next turn",
    },
];

/// The session options (set once per session, for every request it runs).
pub const SESSION_OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "lfm2_audio.max_pass_seconds",
        ty: OptionType::Float {
            min: 0.0,
            max: DEFAULT_MAX_SECONDS,
            open_min: true,
        },
        defaults: [Some("120"), Some("120"), Some("120")],
        description: "longest audio the encoder takes in one pass, in seconds (asr chunks longer \
                      audio, see audio_chunk_mode; a longer s2s question is refused)",
    },
    OptionSpec {
        name: "lfm2_audio.prefill_slots",
        ty: OptionType::Int { min: 0, max: 64 },
        defaults: [Some("4"), Some("4"), Some("4")],
        description: "conversations whose prefill blocks the session keeps (0: none); never \
                      changes an output byte; s2s",
    },
    OptionSpec {
        name: "lfm2_audio.kept_questions",
        ty: OptionType::Int { min: 0, max: 1024 },
        defaults: [Some("32"), Some("32"), Some("32")],
        description: "questions whose encoder output the session keeps (0: none); never changes \
                      an output byte; s2s",
    },
];

/// The session options, typed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionSettings {
    /// `lfm2_audio.max_pass_seconds`.
    pub max_pass_seconds: f64,
    /// `lfm2_audio.prefill_slots`.
    pub prefill_slots: usize,
    /// `lfm2_audio.kept_questions`.
    pub kept_questions: usize,
}

impl Default for SessionSettings {
    fn default() -> Self {
        resolve_session(&OptionMap::new()).expect("the table's defaults read")
    }
}

/// Reads a session's options ([`SESSION_OPTIONS`]); an unknown one, or a value of the wrong
/// type or out of range, is an [`EngineError::InvalidRequest`] naming it.
pub fn resolve_session(options: &OptionMap) -> Result<SessionSettings, EngineError> {
    let mut typed: BTreeMap<&'static str, Typed> = BTreeMap::new();
    for (key, value) in options {
        let spec = SESSION_OPTIONS
            .iter()
            .find(|s| s.name == key)
            .ok_or_else(|| {
                EngineError::InvalidRequest(format!(
                    "unknown session option `{key}`: the session takes {}",
                    SESSION_OPTIONS
                        .iter()
                        .map(|s| s.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        typed.insert(spec.name, read("session", spec, value)?);
    }
    for spec in SESSION_OPTIONS {
        if !typed.contains_key(spec.name) {
            let d = spec.defaults[0].unwrap_or_default();
            let v = read("session", spec, &OptionValue::Text(d.to_owned()))
                .expect("the table's defaults read as their own type");
            typed.insert(spec.name, v);
        }
    }
    let get = |name: &str| typed.get(name).cloned();
    Ok(SessionSettings {
        max_pass_seconds: match get("lfm2_audio.max_pass_seconds") {
            Some(Typed::Float(x)) => x,
            _ => unreachable!("read as a float"),
        },
        prefill_slots: match get("lfm2_audio.prefill_slots") {
            Some(Typed::Int(n)) => n as usize,
            _ => unreachable!("read as an integer"),
        },
        kept_questions: match get("lfm2_audio.kept_questions") {
            Some(Typed::Int(n)) => n as usize,
            _ => unreachable!("read as an integer"),
        },
    })
}

/// The option named `name`, if the table has it.
pub fn request_option(name: &str) -> Option<&'static OptionSpec> {
    REQUEST_OPTIONS.iter().find(|s| s.name == name)
}

/// An option's value as a front end received it: text (the C ABI's string maps) or JSON (the
/// HTTP routes). Both are read by the same rules ([`resolve`]): a JSON string is read as the
/// text would be, so `"512"` and `512` are the same `max_tokens`.
#[derive(Debug, Clone, PartialEq)]
pub enum OptionValue {
    /// Text, as `audiocpp_request_set_option` takes it.
    Text(String),
    /// A JSON value, as a request body carries it.
    Json(Json),
}

impl OptionValue {
    fn shown(&self) -> String {
        match self {
            OptionValue::Text(t) => format!("\"{t}\""),
            OptionValue::Json(v) => v.to_string(),
        }
    }

    /// The value as text when it is text or a JSON string.
    fn text(&self) -> Option<&str> {
        match self {
            OptionValue::Text(t) => Some(t),
            OptionValue::Json(Json::String(s)) => Some(s),
            OptionValue::Json(_) => None,
        }
    }
}

impl From<&str> for OptionValue {
    fn from(s: &str) -> Self {
        OptionValue::Text(s.to_owned())
    }
}

impl From<Json> for OptionValue {
    fn from(v: Json) -> Self {
        OptionValue::Json(v)
    }
}

/// A request's options by name.
pub type OptionMap = BTreeMap<String, OptionValue>;

/// A value read with its spec's type.
#[derive(Debug, Clone, PartialEq)]
enum Typed {
    Int(u64),
    Float(f64),
    Bool(bool),
    Text(String),
}

/// Reads `value` as `spec`'s type and range; `scope` names the kind of option in messages.
fn read(scope: &str, spec: &OptionSpec, value: &OptionValue) -> Result<Typed, EngineError> {
    let bad = |what: &str| {
        EngineError::InvalidRequest(format!(
            "{scope} option `{}` = {} is not {what}",
            spec.name,
            value.shown()
        ))
    };
    match spec.ty {
        OptionType::Int { min, max } => {
            let n = match value {
                OptionValue::Json(Json::Number(n)) => n.as_u64(),
                v => v.text().and_then(|t| t.parse::<u64>().ok()),
            }
            .ok_or_else(|| bad("a non-negative integer"))?;
            if !(min..=max).contains(&n) {
                return Err(EngineError::InvalidRequest(format!(
                    "{scope} option `{}` = {n} is outside {min}..={max}",
                    spec.name
                )));
            }
            Ok(Typed::Int(n))
        }
        OptionType::Float { min, max, open_min } => {
            let x = match value {
                OptionValue::Json(Json::Number(n)) => n.as_f64(),
                v => v.text().and_then(|t| t.parse::<f64>().ok()),
            }
            .ok_or_else(|| bad("a number"))?;
            let low_ok = if open_min { x > min } else { x >= min };
            if !x.is_finite() || !low_ok || x > max {
                let range = if open_min {
                    format!("above {min} and at most {max}")
                } else {
                    format!("within {min}..={max}")
                };
                return Err(EngineError::InvalidRequest(format!(
                    "{scope} option `{}` = {} is not {range}",
                    spec.name,
                    value.shown()
                )));
            }
            Ok(Typed::Float(x))
        }
        OptionType::Bool => match value {
            OptionValue::Json(Json::Bool(b)) => Ok(Typed::Bool(*b)),
            v => match v.text() {
                Some("true" | "1") => Ok(Typed::Bool(true)),
                Some("false" | "0") => Ok(Typed::Bool(false)),
                _ => Err(bad("true or false")),
            },
        },
        OptionType::Choice(words) => match value.text() {
            Some(t) if words.contains(&t) => Ok(Typed::Text(t.to_owned())),
            _ => Err(bad(&format!("one of {}", words.join(", ")))),
        },
        OptionType::Text => value
            .text()
            .map(|t| Typed::Text(t.to_owned()))
            .ok_or_else(|| bad("text")),
    }
}

/// How ASR splits long audio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AudioChunkMode {
    /// Chunks only when the audio is longer than the one-pass limit.
    Auto,
    /// Voice activity (not in this build: refused).
    Vad,
    /// Always in chunks.
    Fixed,
    /// Never.
    None,
}

/// A request's options for one task, typed: every option the task takes, set or defaulted.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedOptions {
    /// `language`, if given.
    pub language: Option<String>,
    /// `max_tokens`.
    pub max_tokens: usize,
    /// `temperature` (TTS, S2S).
    pub temperature: f32,
    /// `text_temperature` (S2S).
    pub text_temperature: f32,
    /// `top_k` (TTS, S2S).
    pub top_k: usize,
    /// `seed` (TTS, S2S).
    pub seed: u64,
    /// `audio_chunk_mode` (ASR).
    pub audio_chunk_mode: AudioChunkMode,
    /// `audio_chunk_seconds` (ASR).
    pub audio_chunk_seconds: f64,
    /// `text_chunk_mode` is `none` (TTS).
    pub one_text_chunk: bool,
    /// `text_chunk_size` (TTS).
    pub text_chunk_size: usize,
    /// `stream_frames_per_event` (TTS, S2S).
    pub frames_per_event: usize,
    /// `return_codes` (S2S).
    pub return_codes: bool,
}

fn names(task: Task) -> String {
    REQUEST_OPTIONS
        .iter()
        .filter(|s| s.takes(task))
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads `options` for `task`: every option the table does not have, one the task does not
/// take, a value of the wrong type or out of range is an [`EngineError::InvalidRequest`]
/// naming it; the options not given take the table's defaults for the task. `max_tokens_limit`
/// is a front end's own cap (a server's `--max-tokens`): a default above it is lowered to it,
/// a request above it refused.
pub fn resolve(
    task: Task,
    options: &OptionMap,
    max_tokens_limit: Option<usize>,
) -> Result<ResolvedOptions, EngineError> {
    let mut typed: BTreeMap<&'static str, Typed> = BTreeMap::new();
    for (key, value) in options {
        let spec = request_option(key).ok_or_else(|| {
            EngineError::InvalidRequest(format!(
                "unknown request option `{key}`: lfm2_audio {} takes {}",
                task.name(),
                names(task)
            ))
        })?;
        if !spec.takes(task) {
            return Err(EngineError::InvalidRequest(format!(
                "request option `{key}` is not taken by lfm2_audio {} (it takes {})",
                task.name(),
                names(task)
            )));
        }
        typed.insert(spec.name, read("request", spec, value)?);
    }
    let given_max_tokens = typed.contains_key(MAX_TOKENS);
    for spec in REQUEST_OPTIONS.iter().filter(|s| s.takes(task)) {
        if typed.contains_key(spec.name) {
            continue;
        }
        let default = spec.default_for(task).unwrap_or_default();
        if default.is_empty() {
            continue;
        }
        let v = read("request", spec, &OptionValue::Text(default.to_owned()))
            .expect("the table's defaults read as their own type");
        typed.insert(spec.name, v);
    }
    let int = |name: &str, fallback: u64| match typed.get(name) {
        Some(Typed::Int(n)) => *n,
        _ => fallback,
    };
    let float = |name: &str, fallback: f64| match typed.get(name) {
        Some(Typed::Float(x)) => *x,
        _ => fallback,
    };
    let text = |name: &str| match typed.get(name) {
        Some(Typed::Text(t)) => Some(t.clone()),
        _ => None,
    };
    let mut max_tokens = int(MAX_TOKENS, MAX_TOKENS_DEFAULT as u64) as usize;
    if let Some(limit) = max_tokens_limit {
        if max_tokens > limit {
            if given_max_tokens {
                return Err(EngineError::InvalidRequest(format!(
                    "request option `{MAX_TOKENS}` = {max_tokens} is above this server's limit \
                     of {limit}"
                )));
            }
            max_tokens = limit;
        }
    }
    Ok(ResolvedOptions {
        language: text("language"),
        max_tokens,
        temperature: float("temperature", 0.0) as f32,
        text_temperature: float("text_temperature", 0.0) as f32,
        top_k: int("top_k", 0) as usize,
        seed: int("seed", 0),
        audio_chunk_mode: match text("audio_chunk_mode").as_deref() {
            Some("vad") => AudioChunkMode::Vad,
            Some("fixed") => AudioChunkMode::Fixed,
            Some("none") => AudioChunkMode::None,
            _ => AudioChunkMode::Auto,
        },
        audio_chunk_seconds: float("audio_chunk_seconds", AUDIO_CHUNK_SECONDS_DEFAULT),
        one_text_chunk: text("text_chunk_mode").as_deref() == Some("none"),
        text_chunk_size: int("text_chunk_size", TEXT_CHUNK_SIZE_DEFAULT as u64) as usize,
        frames_per_event: int("stream_frames_per_event", 1) as usize,
        return_codes: matches!(typed.get("return_codes"), Some(Typed::Bool(true))),
    })
}

/// README's request-option table, generated from [`REQUEST_OPTIONS`] (a test checks that the
/// README holds exactly this text).
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| option | type | range | asr | tts | s2s | what it does |\n|---|---|---|---|---|---|---|\n",
    );
    for s in REQUEST_OPTIONS {
        let (ty, range) = match s.ty {
            OptionType::Int { min, max } => ("integer", format!("{min}..={max}")),
            OptionType::Float { min, max, open_min } => (
                "number",
                if open_min {
                    format!("> {min}, <= {max}")
                } else {
                    format!("{min}..={max}")
                },
            ),
            OptionType::Bool => ("boolean", String::new()),
            OptionType::Choice(words) => ("choice", words.join(" \\| ")),
            OptionType::Text => ("text", String::new()),
        };
        let cell = |t: Task| match s.default_for(t) {
            None => "–".to_owned(),
            Some("") => "the model's".to_owned(),
            Some(d) => format!("`{d}`"),
        };
        out.push_str(&format!(
            "| `{}` | {ty} | {range} | {} | {} | {} | {} |\n",
            s.name,
            cell(Task::Asr),
            cell(Task::Tts),
            cell(Task::S2s),
            s.description
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_reads_as_its_own_type_and_range() {
        for s in REQUEST_OPTIONS {
            for t in s.tasks() {
                let d = s.default_for(t).unwrap();
                if !d.is_empty() {
                    read("request", s, &OptionValue::Text(d.to_owned()))
                        .unwrap_or_else(|e| panic!("{} default for {}: {e}", s.name, t.name()));
                }
            }
        }
    }

    #[test]
    fn text_and_json_read_alike() {
        let spec = request_option(MAX_TOKENS).unwrap();
        let a = read("request", spec, &"300".into()).unwrap();
        let b = read("request", spec, &Json::from(300).into()).unwrap();
        let c = read("request", spec, &Json::from("300").into()).unwrap();
        assert_eq!(a, b);
        assert_eq!(a, c);
        assert!(read("request", spec, &Json::from(300.5).into()).is_err());
        assert!(read("request", spec, &Json::Bool(true).into()).is_err());
    }

    #[test]
    fn the_task_structs_default_to_the_table() {
        use crate::lfm2_audio::{AsrOptions, S2sOptions, SamplerConfig, TtsOptions};
        let none = OptionMap::new();
        let sampler = |o: &ResolvedOptions| SamplerConfig {
            temperature: o.temperature,
            top_k: o.top_k,
            seed: o.seed,
        };
        let t = resolve(Task::Tts, &none, None).unwrap();
        let d = TtsOptions::default();
        assert_eq!(
            (d.max_new_tokens, d.chunk_chars, d.audio),
            (t.max_tokens, t.text_chunk_size, sampler(&t))
        );
        let s = resolve(Task::S2s, &none, None).unwrap();
        let d = S2sOptions::default();
        assert_eq!((d.max_new_tokens, d.audio), (s.max_tokens, sampler(&s)));
        let a = resolve(Task::Asr, &none, None).unwrap();
        assert_eq!(AsrOptions::default().max_new_tokens, a.max_tokens);
    }

    #[test]
    fn a_limit_lowers_the_default_and_refuses_more() {
        let none = OptionMap::new();
        let o = resolve(Task::S2s, &none, Some(100)).unwrap();
        assert_eq!(o.max_tokens, 100);
        let mut m = OptionMap::new();
        m.insert(MAX_TOKENS.into(), "101".into());
        assert!(resolve(Task::S2s, &m, Some(100)).is_err());
        let o = resolve(Task::S2s, &none, None).unwrap();
        assert_eq!(o.max_tokens, MAX_TOKENS_DEFAULT_S2S);
        assert!(o.return_codes);
    }
}
