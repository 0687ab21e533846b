//! The options of `lfm2_audio` as the C ABI shows and takes them: the rows
//! `audiocpp_model_option` lists, drawn from the engine's one option table
//! (`audio_engine::lfm2_audio::options`), and the session's string map read by it. Only the
//! four file options are the ABI's own (audio.cpp names the files per session; this library
//! loads them once per model).

use std::collections::BTreeMap;
use std::path::Path;

pub use audio_engine::lfm2_audio::options::SessionSettings;
use audio_engine::lfm2_audio::options::{
    resolve_session, OptionMap, OptionSpec, OptionType, OptionValue, REQUEST_OPTIONS,
    SESSION_OPTIONS,
};

use crate::status::{AbiError, AbiResult};
use crate::vocab::FAMILY;

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

/// The four file options of a session (role, key).
pub const FILE_OPTIONS: [(&str, &str); 4] = [
    ("model_gguf", "lfm2_audio.model_gguf"),
    ("mmproj_gguf", "lfm2_audio.mmproj_gguf"),
    ("vocoder_gguf", "lfm2_audio.vocoder_gguf"),
    ("detokenizer_gguf", "lfm2_audio.detokenizer_gguf"),
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

/// A request option's row: its default is the table's for the first task that takes it, and
/// the description names each task's default where they differ.
fn row(spec: &OptionSpec, language: &str) -> Row {
    let (value_name, min, max) = match spec.ty {
        OptionType::Int { min, max } => ("INT".to_owned(), min.to_string(), max.to_string()),
        OptionType::Float { min, max, .. } => {
            ("FLOAT".to_owned(), min.to_string(), max.to_string())
        }
        OptionType::Bool => ("BOOL".to_owned(), String::new(), String::new()),
        OptionType::Choice(words) => (words.join("|"), String::new(), String::new()),
        OptionType::Text => ("STRING".to_owned(), String::new(), String::new()),
    };
    let tasks = spec.tasks();
    let defaults: Vec<&str> = tasks.iter().filter_map(|t| spec.default_for(*t)).collect();
    let mut description = spec
        .description
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if defaults.windows(2).any(|w| w[0] != w[1]) {
        let each: Vec<String> = tasks
            .iter()
            .map(|t| format!("{} {}", t.name(), spec.default_for(*t).unwrap_or_default()))
            .collect();
        description.push_str(&format!("; default {}", each.join(", ")));
    }
    let names: Vec<&str> = tasks.iter().map(|t| t.name()).collect();
    description.push_str(&format!("; tasks: {}", names.join(", ")));
    if let OptionType::Float { open_min: true, .. } = spec.ty {
        description.push_str(" (above the minimum)");
    }
    let default = match defaults.first() {
        Some(&"") => language.to_owned(),
        Some(d) => (*d).to_owned(),
        None => String::new(),
    };
    Row {
        name: spec.name.to_owned(),
        value_name,
        description,
        default,
        min,
        max,
        required: false,
    }
}

/// The rows of a scope for a model of `language` whose files are `files` (role, path).
pub fn rows(scope: Scope, language: &str, files: &[(&str, &Path)]) -> Vec<Row> {
    match scope {
        Scope::Request => REQUEST_OPTIONS.iter().map(|s| row(s, language)).collect(),
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
            out.extend(SESSION_OPTIONS.iter().map(|s| {
                let mut r = row(s, language);
                // why: session options are not per task; the row says so without a task list.
                if let Some(cut) = r.description.find("; tasks:") {
                    r.description.truncate(cut);
                }
                r
            }));
            out
        }
        Scope::Load => Vec::new(),
    }
}

/// A request's string options as the engine's option map.
pub fn option_map(scalars: &BTreeMap<String, String>) -> OptionMap {
    scalars
        .iter()
        .map(|(k, v)| (k.clone(), OptionValue::Text(v.clone())))
        .collect()
}

/// Reads a session's options; the file options must name the files the model loaded
/// (`files`: role, path); the others are the engine's session options.
pub fn session_options(
    map: &BTreeMap<String, String>,
    files: &[(&str, &Path)],
) -> AbiResult<SessionSettings> {
    let mut engine = OptionMap::new();
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
        if !SESSION_OPTIONS.iter().any(|s| s.name == key) {
            let mut all: Vec<&str> = FILE_OPTIONS.iter().map(|(_, k)| *k).collect();
            all.extend(SESSION_OPTIONS.iter().map(|s| s.name));
            return Err(AbiError::invalid(format!(
                "unknown session option `{key}`: {FAMILY} takes {}",
                all.join(", ")
            )));
        }
        engine.insert(key.clone(), OptionValue::Text(value.clone()));
    }
    resolve_session(&engine).map_err(|e| AbiError::invalid(e.to_string()))
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
