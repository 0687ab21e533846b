//! Why a package could not be fetched, each error naming the file it concerns.

use std::path::PathBuf;

use hf_hub::api::sync::ApiError;

use super::super::load_error::LoadError;
use super::super::package::Quant;
use super::DigestKind;

/// Why a package could not be fetched. Every variant that concerns one file names it.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The spec is not `OWNER/NAME[:QUANT]`.
    #[error("bad hub spec '{spec}': {reason}")]
    Spec {
        /// The spec as given.
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// The repository has no complete package of the quantization.
    #[error(
        "{repo} has no complete {quant} package (<model>-{quant}.gguf with its mmproj-, vocoder- \
         and tokenizer- files){}; the repository has: {}",
        if packages.is_empty() { String::new() } else { format!(" (its packages: {})", packages.join(", ")) },
        if files.is_empty() { "no files".to_owned() } else { files.join(", ") }
    )]
    NoPackage {
        /// The repository.
        repo: String,
        /// The quantization asked for.
        quant: Quant,
        /// The complete packages it has, `<model>-<q>`.
        packages: Vec<String>,
        /// Every file it has.
        files: Vec<String>,
    },
    /// Several models of the quantization are in the repository.
    #[error("{repo} has several {quant} packages: {}", models.join(", "))]
    AmbiguousPackage {
        /// The repository.
        repo: String,
        /// The quantization asked for.
        quant: Quant,
        /// Their model names.
        models: Vec<String>,
    },
    /// The hub answers 404 for the repository.
    #[error("repository {repo} not found on {endpoint}")]
    RepoNotFound {
        /// The repository.
        repo: String,
        /// The hub.
        endpoint: String,
    },
    /// The hub answers 404 for a file.
    #[error("{file} not found in {repo} on {endpoint}")]
    FileNotFound {
        /// The repository.
        repo: String,
        /// The file.
        file: String,
        /// The hub.
        endpoint: String,
    },
    /// The hub answers 401 or 403.
    #[error(
        "{} of {repo}: HTTP {status} ({})",
        file.as_deref().unwrap_or("the file list"),
        if *token_sent { "the token (HF_TOKEN) was refused" } else { "the repository is private or gated: set HF_TOKEN" }
    )]
    Unauthorized {
        /// The repository.
        repo: String,
        /// The file, `None` for the listing.
        file: Option<String>,
        /// 401 or 403.
        status: u16,
        /// Whether a token was sent.
        token_sent: bool,
    },
    /// Another HTTP error status.
    #[error("{} of {repo}: HTTP {status}", file.as_deref().unwrap_or("the file list"))]
    Http {
        /// The repository.
        repo: String,
        /// The file, `None` for the listing.
        file: Option<String>,
        /// The status.
        status: u16,
    },
    /// The hub cannot be reached, and the cache does not hold the package.
    #[error("{} of {repo}: cannot reach {endpoint}", file.as_deref().unwrap_or("the file list"))]
    Network {
        /// The repository.
        repo: String,
        /// The file, `None` for the listing.
        file: Option<String>,
        /// The hub.
        endpoint: String,
        /// The transport error.
        #[source]
        source: Box<ureq::Error>,
    },
    /// The transfer of a file ended early; the part kept in the cache is resumed next time.
    #[error("{file} of {repo}: the transfer was cut short (run again to resume it)")]
    Interrupted {
        /// The repository.
        repo: String,
        /// The file.
        file: String,
        /// What the connection reported.
        #[source]
        source: std::io::Error,
    },
    /// The cache cannot be written or read (a full disk, permissions).
    #[error("{file} of {repo}: cache {}", path.display())]
    Io {
        /// The repository.
        repo: String,
        /// The file.
        file: String,
        /// The cache path concerned.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A downloaded file has another size than the hub lists; it was removed from the cache.
    #[error("{file} of {repo}: downloaded {found} bytes, the hub lists {expected} (removed)")]
    SizeMismatch {
        /// The repository.
        repo: String,
        /// The file.
        file: String,
        /// The listed size.
        expected: u64,
        /// The downloaded size.
        found: u64,
    },
    /// A file's digest is not what it must be; it was removed from the cache (blob and
    /// snapshot link). Either it was just downloaded (checked against the hub's listing), or it
    /// was in the cache and the hub could not be asked for it again (offline, or no network;
    /// checked against its blob's name).
    #[error("{file} of {repo}: {}", if *cached {
        format!("the cached copy has {kind} {found}, not {expected} (removed from the cache: run \
                 again online to download it)")
    } else {
        format!("downloaded {kind} {found}, the hub lists {expected} (removed)")
    })]
    Checksum {
        /// The repository.
        repo: String,
        /// The file.
        file: String,
        /// The hash.
        kind: DigestKind,
        /// The digest it must have (hex).
        expected: String,
        /// The file's (hex).
        found: String,
        /// Whether the file was in the cache (else it was just downloaded).
        cached: bool,
    },
    /// The hub's answer is not what its protocol says (a listing without `sha`, a redirect
    /// without `X-Repo-Commit`, a commit that changed during the download).
    #[error("{} of {repo}: unexpected answer from the hub: {reason}", file.as_deref().unwrap_or("the file list"))]
    Protocol {
        /// The repository.
        repo: String,
        /// The file, `None` for the listing.
        file: Option<String>,
        /// What is wrong.
        reason: String,
        /// The client's error, when it came from there.
        #[source]
        source: Option<ApiError>,
    },
    /// Offline (asked for, or the hub unreachable) and the cache lacks the package.
    #[error("{repo}:{quant} is not in the cache {} ({reason}){}", cache_dir.display(),
        if *offline { "; run once without --offline / HF_HUB_OFFLINE to download it" } else { "" })]
    NotCached {
        /// The repository.
        repo: String,
        /// The quantization.
        quant: Quant,
        /// The cache directory.
        cache_dir: PathBuf,
        /// What is missing.
        reason: String,
        /// Whether offline was asked for (else the hub could not be reached).
        offline: bool,
    },
    /// The files are there but are not a valid package.
    #[error(transparent)]
    Load(#[from] LoadError),
}
