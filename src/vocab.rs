//! The task and mode vocabulary of the ABI, and the tasks and modes of the `lfm2_audio` family.

/// The family this library implements.
pub const FAMILY: &str = "lfm2_audio";

/// Every task token of the ABI, in its order (NUL-terminated for C).
pub const TASK_TOKENS: [&[u8]; 14] = [
    b"vad\0", b"asr\0", b"diar\0", b"sep\0", b"gen\0", b"tts\0", b"clon\0", b"vc\0", b"s2s\0",
    b"align\0", b"vdes\0", b"spk\0", b"svc\0", b"midi\0",
];

/// Model-spec spellings of tasks that differ from the token.
const SPEC_ALIASES: [(&str, &[u8]); 7] = [
    ("music", b"gen\0"),
    ("sfx", b"gen\0"),
    ("edit", b"gen\0"),
    ("audio_generation", b"gen\0"),
    ("clone", b"clon\0"),
    ("design", b"vdes\0"),
    ("speaker", b"spk\0"),
];

/// A task token without its NUL.
pub fn token_str(t: &[u8]) -> &str {
    std::str::from_utf8(&t[..t.len() - 1]).expect("tokens are ASCII")
}

/// The token (NUL-terminated) of a model-spec task name, if any.
pub fn task_from_spec(name: &str) -> Option<&'static [u8]> {
    TASK_TOKENS
        .iter()
        .copied()
        .find(|t| token_str(t) == name)
        .or_else(|| {
            SPEC_ALIASES
                .iter()
                .find(|(alias, _)| *alias == name)
                .map(|(_, t)| *t)
        })
}

/// Whether `name` is one of the ABI's task tokens.
pub fn is_task_token(name: &str) -> bool {
    TASK_TOKENS.iter().any(|t| token_str(t) == name)
}

/// The tasks of `lfm2_audio`: the engine's own.
pub use audio_engine::lfm2_audio::Task;

/// The task of a token, for this family.
pub fn task_from_token(name: &str) -> Option<Task> {
    Task::from_name(name)
}

/// Whether `task` runs in `mode`.
pub fn supports(task: Task, mode: Mode) -> bool {
    match mode {
        Mode::Offline => true,
        Mode::Streaming => matches!(task, Task::Tts | Task::S2s),
    }
}

/// How a session runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// `session_run`.
    Offline,
    /// `stream_*`.
    Streaming,
}

impl Mode {
    /// The mode of a token.
    pub fn from_token(name: &str) -> Option<Mode> {
        match name {
            "offline" => Some(Mode::Offline),
            "streaming" => Some(Mode::Streaming),
            _ => None,
        }
    }
}
