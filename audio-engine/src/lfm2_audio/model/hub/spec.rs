//! A package's name on the hub, `REPO[:QUANT]` (or the model path `hf:REPO[:QUANT]`), checked
//! as the hub checks repository ids.

use std::fmt;
use std::str::FromStr;

use hf_hub::{Repo, RepoType};

use super::super::package::Quant;
use super::{HubError, DEFAULT_QUANT, MODEL_PATH_PREFIX, REVISION};

/// A package on the hub: a model repository and, optionally, a quantization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubSpec {
    /// `owner/name`.
    pub repo: String,
    /// The quantization asked for (`None`: [`DEFAULT_QUANT`]).
    pub quant: Option<Quant>,
}

impl HubSpec {
    /// Parses `REPO[:QUANT]` (`LiquidAI/LFM2.5-Audio-1.5B-GGUF:q4_0`; the quantization in any
    /// case). The repository id must be `owner/name` in the hub's characters (letters, digits,
    /// `-`, `_`, `.`; no `--` or `..`, neither `-` nor `.` at either end of a part).
    pub fn parse(spec: &str) -> Result<HubSpec, HubError> {
        let bad = |reason: String| HubError::Spec {
            spec: spec.to_owned(),
            reason,
        };
        let (repo, quant) = match spec.split_once(':') {
            Some((repo, q)) => {
                let quant = Quant::from_str(q).map_err(|e| bad(e.to_string()))?;
                (repo, Some(quant))
            }
            None => (spec, None),
        };
        let parts: Vec<&str> = repo.split('/').collect();
        if parts.len() != 2 {
            return Err(bad("expected OWNER/NAME[:QUANT]".into()));
        }
        for part in parts {
            let chars_ok = part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            let ends_ok = !(part.starts_with(['-', '.']) || part.ends_with(['-', '.']));
            if part.is_empty()
                || part.len() > 96
                || !chars_ok
                || !ends_ok
                || part.contains("--")
                || part.contains("..")
            {
                return Err(bad(format!("'{part}' is not a valid hub name")));
            }
        }
        Ok(HubSpec {
            repo: repo.to_owned(),
            quant,
        })
    }

    /// A model path that names a hub package, `hf:REPO[:QUANT]`: `None` for any other path.
    pub fn from_model_path(path: &str) -> Option<Result<HubSpec, HubError>> {
        path.strip_prefix(MODEL_PATH_PREFIX).map(HubSpec::parse)
    }

    /// The quantization asked for, else [`DEFAULT_QUANT`].
    pub fn quant_or_default(&self) -> Quant {
        self.quant.unwrap_or(DEFAULT_QUANT)
    }

    /// The repository's folder in the cache, `models--<owner>--<name>`.
    pub fn cache_folder(&self) -> String {
        self.hf_repo().folder_name()
    }

    pub(super) fn hf_repo(&self) -> Repo {
        Repo::with_revision(self.repo.clone(), RepoType::Model, REVISION.to_owned())
    }
}

impl FromStr for HubSpec {
    type Err = HubError;
    fn from_str(s: &str) -> Result<HubSpec, HubError> {
        HubSpec::parse(s)
    }
}

impl fmt::Display for HubSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.quant {
            Some(q) => write!(f, "{}:{q}", self.repo),
            None => f.write_str(&self.repo),
        }
    }
}
