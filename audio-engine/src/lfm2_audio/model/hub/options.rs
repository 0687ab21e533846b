//! Where and how packages are fetched: the hub's endpoint, the cache, the token and offline, read
//! from the environment's variables as `huggingface_hub` reads them (handed in by the binary).

use std::fmt;
use std::path::PathBuf;

use super::DEFAULT_ENDPOINT;

/// Where and how packages are fetched.
#[derive(Clone, PartialEq, Eq)]
pub struct HubOptions {
    /// The hub's base URL (`https://huggingface.co`).
    pub endpoint: String,
    /// The hub cache directory (the one holding `models--…` folders).
    pub cache_dir: PathBuf,
    /// The access token sent as `Authorization: Bearer …`.
    pub token: Option<String>,
    /// Make no request: use the cache only.
    pub offline: bool,
    /// Draw a progress bar per downloaded file on stderr (when it is a terminal).
    pub progress: bool,
    /// How often a failed transfer is resumed within one call before it is an error.
    pub retries: usize,
}

impl fmt::Debug for HubOptions {
    // why: the token is a secret; never print it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HubOptions")
            .field("endpoint", &self.endpoint)
            .field("cache_dir", &self.cache_dir)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("offline", &self.offline)
            .field("progress", &self.progress)
            .field("retries", &self.retries)
            .finish()
    }
}

/// A variable as `var` gives it, when it holds more than blanks.
fn nonempty(var: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    var(name).filter(|v| !v.trim().is_empty())
}

/// `huggingface_hub`'s truthy spellings (`1`, `ON`, `YES`, `TRUE`, any case).
fn flag(var: &dyn Fn(&str) -> Option<String>, name: &str) -> bool {
    nonempty(var, name).is_some_and(|v| {
        ["1", "on", "yes", "true"]
            .iter()
            .any(|t| v.trim().eq_ignore_ascii_case(t))
    })
}

/// `huggingface_hub`'s home: `$HF_HOME`, else `$XDG_CACHE_HOME/huggingface`, else
/// `~/.cache/huggingface` (the temporary directory when there is no home), the variables as
/// `var` gives them (a binary passes `|name| std::env::var(name).ok()`).
pub fn hf_home(var: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(h) = nonempty(var, "HF_HOME") {
        return PathBuf::from(h);
    }
    let base = nonempty(var, "XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| nonempty(var, "HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("huggingface")
}

/// The hub cache directory: `$HF_HUB_CACHE`, else `<hf_home>/hub` (see [`hf_home`]).
pub fn default_cache_dir(var: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    nonempty(var, "HF_HUB_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| hf_home(var).join("hub"))
}

/// The token: `$HF_TOKEN`, else the file `$HF_TOKEN_PATH` or `<hf_home>/token`.
pub fn default_token(var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if let Some(t) = nonempty(var, "HF_TOKEN") {
        return Some(t.trim().to_owned());
    }
    let path = nonempty(var, "HF_TOKEN_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| hf_home(var).join("token"));
    std::fs::read_to_string(path)
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
}

impl HubOptions {
    /// The options the environment gives (see the module documentation), its variables as
    /// `var` gives them (a binary passes `|name| std::env::var(name).ok()`; the library reads
    /// no environment itself), with progress bars and two retries.
    pub fn from_vars(var: &dyn Fn(&str) -> Option<String>) -> HubOptions {
        HubOptions {
            endpoint: nonempty(var, "HF_ENDPOINT")
                .map(|e| e.trim_end_matches('/').to_owned())
                .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned()),
            cache_dir: default_cache_dir(var),
            token: default_token(var),
            offline: flag(var, "HF_HUB_OFFLINE"),
            progress: true,
            retries: 2,
        }
    }
}
