//! The environment variables audio.cpp's binaries document (README, "Environment"), parsed
//! from what a binary read: the library itself reads no environment. A binary (the examples,
//! `serve`, the C library's load entry points) passes its reader, `|name|
//! std::env::var(name).ok()`; a test passes a table.

use crate::ggml::LogLevel;
use crate::lfm2_audio::engine::ModelOptions;

/// `LFM2_MAX_BATCH`: a positive count for [`ModelOptions::max_batch`].
pub const MAX_BATCH_VAR: &str = "LFM2_MAX_BATCH";
/// `LFM2_BATCH_FROM`: a positive count for [`ModelOptions::batch_from`].
pub const BATCH_FROM_VAR: &str = "LFM2_BATCH_FROM";
/// `LFM2_NO_REPACK`: set (non-empty, not `0`), [`ModelOptions::repack`] off.
pub const NO_REPACK_VAR: &str = "LFM2_NO_REPACK";
/// `LFM2_NO_VNNI_Q4_0`: set (non-empty, not `0`), [`ModelOptions::vnni_q4_0`] off.
pub const NO_VNNI_Q4_0_VAR: &str = "LFM2_NO_VNNI_Q4_0";
/// `LLAMA_LOG`: `debug`, `info`, `warn`, `error` or `none`, the level ggml's and libllama's
/// messages are printed from ([`log_level_from_vars`]).
pub const LOG_VAR: &str = "LLAMA_LOG";

/// A positive count, or `None` for anything else (so a bad value keeps the default).
fn count(var: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<usize> {
    var(name)
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
}

/// Whether a switch variable is set: non-empty and not `0`.
fn switched(var: &dyn Fn(&str) -> Option<String>, name: &str) -> bool {
    var(name).is_some_and(|v| !v.is_empty() && v != "0")
}

impl ModelOptions {
    /// These options with the documented variables applied, as `var` gives them
    /// ([`MAX_BATCH_VAR`], [`BATCH_FROM_VAR`], [`NO_REPACK_VAR`], [`NO_VNNI_Q4_0_VAR`]); a
    /// variable that is unset or holds no valid value leaves its option alone.
    pub fn with_vars(mut self, var: &dyn Fn(&str) -> Option<String>) -> ModelOptions {
        if let Some(n) = count(var, MAX_BATCH_VAR) {
            self.max_batch = n;
        }
        if let Some(n) = count(var, BATCH_FROM_VAR) {
            self.batch_from = n;
        }
        if switched(var, NO_REPACK_VAR) {
            self.repack = false;
        }
        if switched(var, NO_VNNI_Q4_0_VAR) {
            self.vnni_q4_0 = false;
        }
        self
    }
}

/// The log level [`LOG_VAR`] names, for [`crate::ggml::set_log_level`]: `None` for `none`,
/// [`LogLevel::Warn`] (the default) when unset or unknown.
pub fn log_level_from_vars(var: &dyn Fn(&str) -> Option<String>) -> Option<LogLevel> {
    match var(LOG_VAR).as_deref() {
        Some("debug") => Some(LogLevel::Debug),
        Some("info") => Some(LogLevel::Info),
        Some("error") => Some(LogLevel::Error),
        Some("none") => None,
        _ => Some(LogLevel::Warn),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn unset_variables_keep_the_defaults() {
        let o = ModelOptions::default().with_vars(&table(&[]));
        let d = ModelOptions::default();
        assert_eq!(
            (o.max_batch, o.batch_from, o.repack, o.vnni_q4_0),
            (d.max_batch, d.batch_from, d.repack, d.vnni_q4_0)
        );
        assert_eq!(log_level_from_vars(&table(&[])), Some(LogLevel::Warn));
    }

    #[test]
    fn set_variables_change_their_options() {
        let vars = [
            ("LFM2_MAX_BATCH", " 4 "),
            ("LFM2_BATCH_FROM", "2"),
            ("LFM2_NO_REPACK", "1"),
            ("LFM2_NO_VNNI_Q4_0", "yes"),
            ("LLAMA_LOG", "none"),
        ];
        let o = ModelOptions::default().with_vars(&table(&vars));
        assert_eq!((o.max_batch, o.batch_from), (4, 2));
        assert!(!o.repack && !o.vnni_q4_0);
        assert_eq!(log_level_from_vars(&table(&vars)), None);
    }

    #[test]
    fn bad_values_are_ignored() {
        let vars = [
            ("LFM2_MAX_BATCH", "0"),
            ("LFM2_BATCH_FROM", "many"),
            ("LFM2_NO_REPACK", "0"),
            ("LFM2_NO_VNNI_Q4_0", ""),
            ("LLAMA_LOG", "loud"),
        ];
        let o = ModelOptions::default().with_vars(&table(&vars));
        let d = ModelOptions::default();
        assert_eq!(
            (o.max_batch, o.batch_from, o.repack, o.vnni_q4_0),
            (d.max_batch, d.batch_from, d.repack, d.vnni_q4_0)
        );
        assert_eq!(log_level_from_vars(&table(&vars)), Some(LogLevel::Warn));
    }
}
