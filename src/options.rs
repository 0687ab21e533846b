//! The options of `lfm2_audio` by scope: the table `audiocpp_model_option` lists, and the typed,
//! range-checked reading of the string maps callers pass.

use std::collections::BTreeMap;
use std::path::Path;

use crate::status::{AbiError, AbiResult};
use crate::vocab::{Task, FAMILY};

/// `audiocpp_option_scope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Per request.
    Request = 0,
    /// Per session.
    Session = 1,
    /// At model load.
    Load = 2,
}

impl Scope {
    /// The scope of a C value.
    pub fn from_c(v: i32) -> Option<Scope> {
        match v {
            0 => Some(Scope::Request),
            1 => Some(Scope::Session),
            2 => Some(Scope::Load),
            _ => None,
        }
    }
}

/// A value type and its bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ty {
    /// A decimal integer in `min..=max`.
    Int { min: u64, max: u64 },
    /// A finite decimal number in `min..=max` (`min` excluded when `open_min`).
    Float { min: f64, max: f64, open_min: bool },
    /// `true`/`false` (also `1`/`0`).
    Bool,
    /// One of the listed words.
    Choice(&'static [&'static str]),
    /// Any text.
    Text,
}

/// One option.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spec {
    /// Its key.
    pub name: &'static str,
    /// Its type.
    pub ty: Ty,
    /// Its default, as text ("" when it depends on the model or the task).
    pub default: &'static str,
    /// What it does.
    pub description: &'static str,
    /// The tasks that take it.
    pub tasks: &'static [Task],
}

const ALL_TASKS: &[Task] = &[Task::Asr, Task::Tts, Task::S2s];
const GENERATING: &[Task] = &[Task::Tts, Task::S2s];

/// Reply steps: at least one, at most a whole conversation.
pub const MAX_TOKENS: (u64, u64) = (1, crate::engine::CONVERSATION_LIMIT as u64);
/// Default max_tokens of asr and tts.
pub const MAX_TOKENS_DEFAULT: usize = 512;
/// Default max_tokens of s2s.
pub const MAX_TOKENS_DEFAULT_S2S: usize = 1024;
/// TTS audio sampling defaults (liquid-audio's).
pub const TTS_TEMPERATURE: f32 = 0.8;
/// TTS audio top-k default.
pub const TTS_TOP_K: usize = 64;
/// S2S audio sampling defaults (liquid-audio's).
pub const S2S_TEMPERATURE: f32 = 1.0;
/// S2S audio top-k default.
pub const S2S_TOP_K: usize = 4;
/// Default ASR chunk length when audio is chunked (seconds).
pub const AUDIO_CHUNK_SECONDS: f64 = 30.0;
/// Default TTS text chunk (code points).
pub const TEXT_CHUNK_SIZE: usize = 200;
/// Default session cap on the audio the encoder takes in one pass (seconds).
pub const MAX_PASS_SECONDS: f64 = 120.0;
/// Kept conversations (prefill blocks) by default.
pub const PREFILL_SLOTS: usize = 4;
/// Kept questions (encoder outputs) by default.
pub const KEPT_QUESTIONS: usize = 32;

/// The request options of `lfm2_audio`.
pub const REQUEST: &[Spec] = &[
    Spec {
        name: "language",
        ty: Ty::Text,
        default: "",
        description: "language of the text and speech; must be the checkpoint's (en; ja for the \
                      JP checkpoint); tasks: asr, tts, s2s",
        tasks: ALL_TASKS,
    },
    Spec {
        name: "max_tokens",
        ty: Ty::Int {
            min: MAX_TOKENS.0,
            max: MAX_TOKENS.1,
        },
        default: "512",
        description: "most steps generated (text tokens and audio frames; tts: per text chunk); \
                      default 512, 1024 for s2s; tasks: asr, tts, s2s",
        tasks: ALL_TASKS,
    },
    Spec {
        name: "temperature",
        ty: Ty::Float {
            min: 0.0,
            max: 100.0,
            open_min: false,
        },
        default: "0.8",
        description: "audio sampling temperature (0: greedy); default 0.8, 1.0 for s2s; text is \
                      greedy; tasks: tts, s2s",
        tasks: GENERATING,
    },
    Spec {
        name: "top_k",
        ty: Ty::Int { min: 0, max: 2049 },
        default: "64",
        description: "audio codes kept when sampling (0: all, 1: greedy); default 64, 4 for s2s; \
                      tasks: tts, s2s",
        tasks: GENERATING,
    },
    Spec {
        name: "seed",
        ty: Ty::Int {
            min: 0,
            max: u64::MAX,
        },
        default: "0",
        description: "audio sampling seed (tts text chunk i uses seed + i); tasks: tts, s2s",
        tasks: GENERATING,
    },
    Spec {
        name: "audio_chunk_mode",
        ty: Ty::Choice(&["auto", "vad", "fixed", "none"]),
        default: "auto",
        description: "how long audio is split for the encoder: auto (fixed chunks when longer \
                      than lfm2_audio.max_pass_seconds), fixed (always), none (never; longer \
                      audio is refused); vad needs a voice-activity model, which this build does \
                      not have; tasks: asr",
        tasks: &[Task::Asr],
    },
    Spec {
        name: "audio_chunk_seconds",
        ty: Ty::Float {
            min: 0.0,
            max: crate::engine::ENGINE_MAX_SECONDS,
            open_min: true,
        },
        default: "30",
        description: "chunk length in seconds when audio is chunked; tasks: asr",
        tasks: &[Task::Asr],
    },
    Spec {
        name: "text_chunk_mode",
        ty: Ty::Choice(&["auto", "sentence", "none"]),
        default: "auto",
        description: "how long text is split: auto or sentence (whole sentences packed up to \
                      text_chunk_size code points, longer ones at spaces), none (one chunk); \
                      tasks: tts",
        tasks: &[Task::Tts],
    },
    Spec {
        name: "text_chunk_size",
        ty: Ty::Int {
            min: 1,
            max: 100_000,
        },
        default: "200",
        description: "longest text chunk in code points; tasks: tts",
        tasks: &[Task::Tts],
    },
    Spec {
        name: "stream_frames_per_event",
        ty: Ty::Int { min: 1, max: 1024 },
        default: "1",
        description: "audio frames (80 ms each) per streamed event; tasks: tts, s2s",
        tasks: GENERATING,
    },
    Spec {
        name: "return_codes",
        ty: Ty::Bool,
        default: "true",
        description: "whether the result carries the reply artifact (lfm2_audio.reply) to send \
                      back with the next turn; tasks: s2s",
        tasks: &[Task::S2s],
    },
];

/// The four file options of a session (role, key).
pub const FILE_OPTIONS: [(&str, &str); 4] = [
    ("model_gguf", "lfm2_audio.model_gguf"),
    ("mmproj_gguf", "lfm2_audio.mmproj_gguf"),
    ("vocoder_gguf", "lfm2_audio.vocoder_gguf"),
    ("detokenizer_gguf", "lfm2_audio.detokenizer_gguf"),
];

/// The session options of `lfm2_audio` (besides the four file options).
pub const SESSION: &[Spec] = &[
    Spec {
        name: "lfm2_audio.max_pass_seconds",
        ty: Ty::Float {
            min: 0.0,
            max: crate::engine::ENGINE_MAX_SECONDS,
            open_min: true,
        },
        default: "120",
        description: "longest audio the encoder takes in one pass, in seconds (asr chunks longer \
                      audio, see audio_chunk_mode; a longer s2s question is refused)",
        tasks: ALL_TASKS,
    },
    Spec {
        name: "lfm2_audio.prefill_slots",
        ty: Ty::Int { min: 0, max: 64 },
        default: "4",
        description: "conversations whose prefill blocks the session keeps (0: none); never \
                      changes an output byte; s2s",
        tasks: ALL_TASKS,
    },
    Spec {
        name: "lfm2_audio.kept_questions",
        ty: Ty::Int { min: 0, max: 1024 },
        default: "32",
        description: "questions whose encoder output the session keeps (0: none); never changes \
                      an output byte; s2s",
        tasks: ALL_TASKS,
    },
];

/// One row of `audiocpp_model_option`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Key.
    pub name: String,
    /// Value type.
    pub value_name: String,
    /// Description.
    pub description: String,
    /// Default.
    pub default: String,
    /// Minimum ("" if none).
    pub min: String,
    /// Maximum ("" if none).
    pub max: String,
    /// Whether it must be given.
    pub required: bool,
}

fn number(v: f64) -> String {
    format!("{v}")
}

fn row(spec: &Spec) -> Row {
    let (value_name, min, max) = match spec.ty {
        Ty::Int { min, max } => ("INT".to_owned(), min.to_string(), max.to_string()),
        Ty::Float { min, max, .. } => ("FLOAT".to_owned(), number(min), number(max)),
        Ty::Bool => ("BOOL".to_owned(), String::new(), String::new()),
        Ty::Choice(words) => (words.join("|"), String::new(), String::new()),
        Ty::Text => ("STRING".to_owned(), String::new(), String::new()),
    };
    let description = match spec.ty {
        Ty::Float { open_min: true, .. } => format!("{} (above the minimum)", spec.description),
        _ => spec.description.to_owned(),
    };
    Row {
        name: spec.name.to_owned(),
        value_name,
        description,
        default: spec.default.to_owned(),
        min,
        max,
        required: false,
    }
}

/// The rows of a scope for a model of `language` whose files are `files` (role, path).
pub fn rows(scope: Scope, language: &str, files: &[(&str, &Path)]) -> Vec<Row> {
    match scope {
        Scope::Request => REQUEST
            .iter()
            .map(|s| {
                let mut r = row(s);
                if s.name == "language" {
                    r.default = language.to_owned();
                }
                r
            })
            .collect(),
        Scope::Session => {
            let mut out: Vec<Row> = FILE_OPTIONS
                .iter()
                .map(|(role, key)| {
                    let path = files
                        .iter()
                        .find(|(r, _)| r == role)
                        .map(|(_, p)| p.display().to_string())
                        .unwrap_or_default();
                    Row {
                        name: (*key).to_owned(),
                        value_name: "PATH".to_owned(),
                        description: format!(
                            "the {} file; the model loaded it at audiocpp_model_load, so the \
                             value must name that file",
                            role.trim_end_matches("_gguf")
                        ),
                        default: path,
                        min: String::new(),
                        max: String::new(),
                        required: false,
                    }
                })
                .collect();
            out.extend(SESSION.iter().map(row));
            out
        }
        Scope::Load => Vec::new(),
    }
}

/// A value read with its spec's type.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Int(u64),
    Float(f64),
    Bool(bool),
    Text(String),
}

fn parse(kind: &str, spec: &Spec, value: &str) -> AbiResult<Value> {
    let bad = |what: &str| {
        AbiError::invalid(format!(
            "{kind} option `{}` = \"{value}\" is not {what}",
            spec.name
        ))
    };
    match spec.ty {
        Ty::Int { min, max } => {
            let n: u64 = value.parse().map_err(|_| bad("a non-negative integer"))?;
            if !(min..=max).contains(&n) {
                return Err(AbiError::invalid(format!(
                    "{kind} option `{}` = {n} is outside {min}..={max}",
                    spec.name
                )));
            }
            Ok(Value::Int(n))
        }
        Ty::Float { min, max, open_min } => {
            let x: f64 = value.parse().map_err(|_| bad("a number"))?;
            let low_ok = if open_min { x > min } else { x >= min };
            if !x.is_finite() || !low_ok || x > max {
                let range = if open_min {
                    format!("above {min} and at most {max}")
                } else {
                    format!("within {min}..={max}")
                };
                return Err(AbiError::invalid(format!(
                    "{kind} option `{}` = {value} is not {range}",
                    spec.name
                )));
            }
            Ok(Value::Float(x))
        }
        Ty::Bool => match value {
            "true" | "1" => Ok(Value::Bool(true)),
            "false" | "0" => Ok(Value::Bool(false)),
            _ => Err(bad("true or false")),
        },
        Ty::Choice(words) => {
            if words.contains(&value) {
                Ok(Value::Text(value.to_owned()))
            } else {
                Err(bad(&format!("one of {}", words.join(", "))))
            }
        }
        Ty::Text => Ok(Value::Text(value.to_owned())),
    }
}

fn names(specs: &[&Spec]) -> String {
    specs.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
}

/// How ASR splits long audio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AudioChunkMode {
    /// Chunks only when the audio is longer than the session's one-pass limit.
    Auto,
    /// Voice activity (not in this build).
    Vad,
    /// Always in chunks.
    Fixed,
    /// Never.
    None,
}

/// The request options, typed (unset ones hold the task's defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct RequestOptions {
    /// `language`, if given.
    pub language: Option<String>,
    /// `max_tokens`.
    pub max_tokens: usize,
    /// `temperature`.
    pub temperature: f32,
    /// `top_k`.
    pub top_k: usize,
    /// `seed`.
    pub seed: u64,
    /// `audio_chunk_mode`.
    pub audio_chunk_mode: AudioChunkMode,
    /// `audio_chunk_seconds`.
    pub audio_chunk_seconds: f64,
    /// `text_chunk_mode` is `none`.
    pub one_text_chunk: bool,
    /// `text_chunk_size`.
    pub text_chunk_size: usize,
    /// `stream_frames_per_event`.
    pub frames_per_event: usize,
    /// `return_codes`.
    pub return_codes: bool,
}

impl RequestOptions {
    /// The defaults of `task`.
    pub fn defaults(task: Task) -> RequestOptions {
        let s2s = task == Task::S2s;
        RequestOptions {
            language: None,
            max_tokens: if s2s {
                MAX_TOKENS_DEFAULT_S2S
            } else {
                MAX_TOKENS_DEFAULT
            },
            temperature: if s2s {
                S2S_TEMPERATURE
            } else {
                TTS_TEMPERATURE
            },
            top_k: if s2s { S2S_TOP_K } else { TTS_TOP_K },
            seed: 0,
            audio_chunk_mode: AudioChunkMode::Auto,
            audio_chunk_seconds: AUDIO_CHUNK_SECONDS,
            one_text_chunk: false,
            text_chunk_size: TEXT_CHUNK_SIZE,
            frames_per_event: 1,
            return_codes: true,
        }
    }
}

/// Reads a request's options for `task`: an unknown option, one the task does not take, a
/// mistyped or out-of-range value, or any list option is an INVALID_ARGUMENT naming it.
pub fn request_options(
    task: Task,
    scalars: &BTreeMap<String, String>,
    arrays: &BTreeMap<String, Vec<String>>,
) -> AbiResult<RequestOptions> {
    let taken: Vec<&Spec> = REQUEST.iter().filter(|s| s.tasks.contains(&task)).collect();
    if let Some(key) = arrays.keys().next() {
        return Err(AbiError::invalid(format!(
            "request option `{key}` is a list; {FAMILY} takes no list options ({} takes: {})",
            task.name(),
            names(&taken)
        )));
    }
    let mut o = RequestOptions::defaults(task);
    for (key, value) in scalars {
        let Some(spec) = REQUEST.iter().find(|s| s.name == key) else {
            return Err(AbiError::invalid(format!(
                "unknown request option `{key}`: {FAMILY} {} takes {}",
                task.name(),
                names(&taken)
            )));
        };
        if !spec.tasks.contains(&task) {
            return Err(AbiError::invalid(format!(
                "request option `{key}` is not taken by {FAMILY} {} (it takes {})",
                task.name(),
                names(&taken)
            )));
        }
        let v = parse("request", spec, value)?;
        match (spec.name, v) {
            ("language", Value::Text(t)) => o.language = Some(t),
            ("max_tokens", Value::Int(n)) => o.max_tokens = n as usize,
            ("temperature", Value::Float(x)) => o.temperature = x as f32,
            ("top_k", Value::Int(n)) => o.top_k = n as usize,
            ("seed", Value::Int(n)) => o.seed = n,
            ("audio_chunk_mode", Value::Text(t)) => {
                o.audio_chunk_mode = match t.as_str() {
                    "vad" => AudioChunkMode::Vad,
                    "fixed" => AudioChunkMode::Fixed,
                    "none" => AudioChunkMode::None,
                    _ => AudioChunkMode::Auto,
                }
            }
            ("audio_chunk_seconds", Value::Float(x)) => o.audio_chunk_seconds = x,
            ("text_chunk_mode", Value::Text(t)) => o.one_text_chunk = t == "none",
            ("text_chunk_size", Value::Int(n)) => o.text_chunk_size = n as usize,
            ("stream_frames_per_event", Value::Int(n)) => o.frames_per_event = n as usize,
            ("return_codes", Value::Bool(b)) => o.return_codes = b,
            (name, v) => unreachable!("option {name} parsed as {v:?}"),
        }
    }
    Ok(o)
}

/// The session settings, typed.
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
        SessionSettings {
            max_pass_seconds: MAX_PASS_SECONDS,
            prefill_slots: PREFILL_SLOTS,
            kept_questions: KEPT_QUESTIONS,
        }
    }
}

/// Reads a session's options; the file options must name the files the model loaded
/// (`files`: role, path).
pub fn session_options(
    map: &BTreeMap<String, String>,
    files: &[(&str, &Path)],
) -> AbiResult<SessionSettings> {
    let mut s = SessionSettings::default();
    for (key, value) in map {
        if let Some((role, _)) = FILE_OPTIONS.iter().find(|(_, k)| k == key) {
            let loaded = files
                .iter()
                .find(|(r, _)| r == role)
                .map(|(_, p)| *p)
                .expect("every role has a file");
            if !crate::engine::same_file(Path::new(value), loaded) {
                return Err(AbiError::invalid(format!(
                    "session option `{key}` = \"{value}\" is not the file this model loaded \
                     ({}); {FAMILY} loads its four files at audiocpp_model_load, from the \
                     package directory",
                    loaded.display()
                )));
            }
            continue;
        }
        if key == "lfm2_audio.vad_model_path" {
            return Err(AbiError::invalid(format!(
                "session option `{key}`: this build has no voice-activity model (asr \
                 audio_chunk_mode vad is not available)"
            )));
        }
        let Some(spec) = SESSION.iter().find(|s| s.name == key) else {
            let mut all: Vec<&str> = FILE_OPTIONS.iter().map(|(_, k)| *k).collect();
            all.extend(SESSION.iter().map(|s| s.name));
            return Err(AbiError::invalid(format!(
                "unknown session option `{key}`: {FAMILY} takes {}",
                all.join(", ")
            )));
        };
        match (spec.name, parse("session", spec, value)?) {
            ("lfm2_audio.max_pass_seconds", Value::Float(x)) => s.max_pass_seconds = x,
            ("lfm2_audio.prefill_slots", Value::Int(n)) => s.prefill_slots = n as usize,
            ("lfm2_audio.kept_questions", Value::Int(n)) => s.kept_questions = n as usize,
            (name, v) => unreachable!("option {name} parsed as {v:?}"),
        }
    }
    Ok(s)
}

/// Refuses every load option: `lfm2_audio` has none.
pub fn load_options(map: &BTreeMap<String, String>) -> AbiResult<()> {
    match map.keys().next() {
        None => Ok(()),
        Some(key) => Err(AbiError::invalid(format!(
            "unknown load option `{key}`: {FAMILY} takes no load options (its files are found \
             in the package directory; config weight_id picks the quantization)"
        ))),
    }
}
