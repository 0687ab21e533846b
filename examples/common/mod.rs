//! Helpers shared by the examples (each includes this with `mod common;` and uses part of it).
#![allow(dead_code)]

pub mod full;
pub mod hub;

use std::borrow::Cow;
use std::path::Path;

use anyhow::{Context, Result};
use audio_engine::ggml::Device;
use audio_engine::lfm2_audio::{vars, Lfm2Audio, ModelOptions};
use audio_tooling::{default_demo_dir, load_demo};

/// An environment variable.
pub fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Model text made safe for a terminal: control characters (the demo's random text has them:
/// escape sequences, backspaces, carriage returns, newlines) and the invisible characters that
/// reorder or hide text are written as `\u{..}` escapes (`\n`, `\r`, `\t` as such); everything
/// else is kept. Borrows when nothing needs escaping.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Control characters (C0, DEL, C1) and the format characters that change how the rest of a
/// line shows: bidirectional overrides and isolates, zero-width ones, line and paragraph
/// separators, the byte-order mark.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        )
}

/// The default model options with the environment's `LFM2_*` variables (README,
/// "Environment") and `--threads` and `--device` applied; sets the log level from `LLAMA_LOG`
/// too (the engine library reads no environment: the examples, as binaries, do).
pub fn model_options(threads: Option<usize>, device: Option<Device>) -> ModelOptions {
    audio_engine::ggml::set_log_level(vars::log_level_from_vars(&env_var));
    let mut options = ModelOptions::default().with_vars(&env_var);
    if let Some(n) = threads {
        options.n_threads = n;
    }
    options.device = device;
    options
}

/// Loads `--model DIR`, or without it the built-in demo package (written to a temporary
/// directory the first time), saying so and what of the output is `noise` (its weights are random).
pub fn open_model(model: Option<&Path>, options: ModelOptions, noise: &str) -> Result<Lfm2Audio> {
    match model {
        Some(dir) => {
            Lfm2Audio::load(dir, options).with_context(|| format!("loading {}", dir.display()))
        }
        None => {
            let dir = default_demo_dir();
            println!(
                "no --model given: using the built-in demo package in {} (random tiny weights: \
                 {noise})",
                dir.display()
            );
            load_demo(&dir, options).context("preparing the demo package")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn escapes_only_what_hides_or_moves_text() {
        assert!(matches!(
            printable("héllo, 世界!"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(printable("a\x1b[2Jb\u{8}c\n"), "a\\u{1b}[2Jb\\u{8}c\\n");
        assert_eq!(
            printable("\u{202e}abc\u{200b}\u{85}"),
            "\\u{202e}abc\\u{200b}\\u{85}"
        );
    }
}
