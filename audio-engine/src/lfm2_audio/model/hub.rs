//! Model packages from the Hugging Face Hub (feature `hub`), kept in the hub's shared cache.
//!
//! A package is named `REPO[:QUANT]` (`LiquidAI/LFM2.5-Audio-1.5B-GGUF:Q4_0`, as llama.cpp's
//! `-hf`); without `:QUANT` it is [`DEFAULT_QUANT`]. [`fetch`] lists the repository, picks the
//! four files of that quantization by their published names (see
//! [`ModelPackage`](crate::lfm2_audio::ModelPackage)) and makes sure each is in the cache,
//! downloading what is missing; [`ModelPackage::from_hub`] then opens them like a model
//! directory.
//!
//! The cache is the one `huggingface_hub` (Python) and the `hf-hub` crate share:
//! `<cache>/models--<org>--<name>/{blobs/<etag>, snapshots/<commit>/<file> -> ../../blobs/<etag>,
//! refs/main}`, so a file downloaded by either is used by the other without a second download.
//! The environment is read as `huggingface_hub` reads it ([`HubOptions::from_vars`], the
//! variables handed in by the binary): `HF_ENDPOINT`,
//! `HF_TOKEN` (else the token file of `hf auth login`), `HF_HUB_OFFLINE`, `HF_HUB_CACHE`,
//! `HF_HOME`, `XDG_CACHE_HOME`.
//!
//! What is checked: the listing (`api/models/<repo>/revision/main?blobs=true`) gives each file's
//! size and, for Git LFS files, its sha256 (which is also the blob's ETag); for any other file
//! its git blob sha1 (`sha1("blob <len>\0" + bytes)`, its ETag). A downloaded file is checked
//! against both before it is used; one that fails is removed from the cache (blob and snapshot
//! link). A transfer cut short is an error that keeps the partial blob (`blobs/<etag>.part`, a
//! name the loader never opens), and the next run resumes it with an HTTP range request.
//!
//! A file already in the cache (from an earlier run, or put there by `huggingface_hub`) is
//! checked the same way before use, against the listing online and, offline or without network,
//! against its blob's name (its ETag: the sha256, or the git sha1); a file that does not link to
//! a blob so named (a copy in the snapshot) is then used as it is. So as not to hash a 1.5 GB
//! package at every start, a file that passed is recorded in a marker,
//! `models--<org>--<name>/`[`VERIFIED_MARKER_DIR`]`/<digest>`, holding the state of the file then
//! (size, mtime and ctime in nanoseconds, inode and device; size and mtime on platforms without
//! the others): while the file keeps that state it is not hashed again. Any write to the file
//! changes its ctime, so an edit in place is caught even when it keeps the size and puts the old
//! mtime back; what is not caught without hashing is a change that leaves size, mtime, ctime and
//! inode alone (a clock set back, the disk written to underneath the file system, or a platform
//! with size and mtime only). A downloaded file gets its marker once it is verified. A wrong
//! cached file is removed from the cache like a wrong download: online it is then downloaded
//! again; offline, or without network, it is an error ([`HubError::Checksum`]) that says to run
//! again online. Where the cache cannot be written (read-only), no marker is kept and the files
//! are hashed at every start.
//!
//! Without network (connection refused, DNS failure) a package whose four files are in the cache
//! at the last known commit (`refs/main`) is used; with `offline` no request is made at all.
//!
//! Here the fetch (listing, download, the cache's layout); the spec in `spec.rs`, the options
//! and the environment in `options.rs`, the errors in `error.rs`, the package's file names in
//! `pick.rs`, and the check of a cached file in `cached.rs`.

use std::fmt;
use std::path::Path;

use hf_hub::api::sync::{ApiBuilder, ApiError};
use hf_hub::api::Progress;

use self::cached::{Checked, Expected, Trust};
use self::pick::{package_files, pick_package};
use super::package::{ModelPackage, PackagePaths, Quant};

mod cached;
mod error;
mod options;
mod pick;
mod spec;

pub use self::error::HubError;
pub use self::options::{default_cache_dir, default_token, hf_home, HubOptions};
pub use self::spec::HubSpec;

/// The public hub.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
/// The quantization taken when a spec names none.
pub const DEFAULT_QUANT: Quant = Quant::Q4_0;
/// The revision packages are taken from.
pub const REVISION: &str = "main";
/// The prefix that makes a model path a hub spec (`hf:LiquidAI/LFM2.5-Audio-1.5B-GGUF:Q4_0`).
pub const MODEL_PATH_PREFIX: &str = "hf:";
/// The folder, inside a repository's cache folder (`models--<org>--<name>/`), of the markers
/// recording which files were verified and in what state (see the module documentation).
/// `huggingface_hub` reads only `blobs/`, `snapshots/` and `refs/` there; removing the folder
/// makes the next start hash every file again.
pub const VERIFIED_MARKER_DIR: &str = ".lfm2-verified";

/// A hash a file is checked with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestKind {
    /// The sha256 of its bytes (a Git LFS file's oid, and its ETag on the hub).
    Sha256,
    /// Git's blob hash, `sha1("blob <len>\0" + bytes)` (the ETag of a file outside Git LFS).
    GitSha1,
}

impl fmt::Display for DigestKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DigestKind::Sha256 => "sha256",
            DigestKind::GitSha1 => "git blob sha1",
        })
    }
}

/// A fetched package: its four files in the cache's snapshot directory.
#[derive(Debug, Clone)]
pub struct HubPackage {
    /// The four files (in `<cache>/models--…/snapshots/<commit>/`).
    pub paths: PackagePaths,
    /// The commit they are from.
    pub commit: String,
    /// The files downloaded by this call (the others were in the cache).
    pub downloaded: Vec<String>,
    /// The files this call read to check their digest: those it downloaded, and those in the
    /// cache that had no marker for their current state (see the module documentation).
    pub hashed: Vec<String>,
    /// Whether the hub could not be reached and the cache was used instead.
    pub offline_fallback: bool,
}

/// One file of the listing.
#[derive(Debug, Clone)]
struct RemoteFile {
    name: String,
    size: Option<u64>,
    /// Its sha256 for a Git LFS file, else its git blob sha1, when listed.
    digest: Option<Expected>,
}

struct Listing {
    commit: String,
    files: Vec<RemoteFile>,
}

/// A name the hub could plausibly give as a commit or blob id, safe as one path component.
fn is_id(s: &str) -> bool {
    !s.is_empty() && s.len() <= 128 && s.chars().all(|c| c.is_ascii_alphanumeric())
}

/// Fetches the package `spec` names into the cache (downloading only what is missing) and
/// returns its paths there. See the module documentation for what is checked.
pub fn fetch(spec: &HubSpec, opts: &HubOptions) -> Result<HubPackage, HubError> {
    let quant = spec.quant_or_default();
    let repo_dir = opts.cache_dir.join(spec.cache_folder());
    if opts.offline {
        return from_cache(spec, quant, opts, &repo_dir, true);
    }
    let api = ApiBuilder::new()
        .with_endpoint(opts.endpoint.clone())
        .with_cache_dir(opts.cache_dir.clone())
        .with_token(opts.token.clone())
        .with_retries(opts.retries)
        .with_progress(false)
        .with_user_agent("lfm2-engine", env!("CARGO_PKG_VERSION"))
        .build()
        .map_err(|e| HubError::Protocol {
            repo: spec.repo.clone(),
            file: None,
            reason: "cannot set up the HTTP client".into(),
            source: Some(e),
        })?;
    let api = api.repo(spec.hf_repo());
    let listing = match list(spec, opts, &api) {
        Ok(l) => l,
        Err(HubError::Network { .. }) if cached_package(spec, quant, &repo_dir).is_ok() => {
            // why: as huggingface_hub does, a missing network falls back to what the cache
            // holds at the last commit seen.
            tracing::warn!(
                "{} cannot be reached: using {spec} from the cache",
                opts.endpoint
            );
            return from_cache(spec, quant, opts, &repo_dir, false);
        }
        Err(e) => return Err(e),
    };
    let names: Vec<String> = listing.files.iter().map(|f| f.name.clone()).collect();
    let model = pick_package(&spec.repo, quant, &names)?;
    let snapshot = repo_dir.join("snapshots").join(&listing.commit);
    let (mut downloaded, mut hashed) = (Vec::new(), Vec::new());
    for name in package_files(&model, quant) {
        let remote = listing
            .files
            .iter()
            .find(|f| f.name == name)
            .cloned()
            .unwrap_or(RemoteFile {
                name: name.clone(),
                size: None,
                digest: None,
            });
        let target = snapshot.join(&name);
        match ensure_file(
            spec,
            opts,
            &api,
            &repo_dir,
            &listing.commit,
            &remote,
            &target,
        )? {
            Got::Cached { hashed: false } => {}
            Got::Cached { hashed: true } => hashed.push(name),
            Got::Downloaded => {
                downloaded.push(name.clone());
                hashed.push(name);
            }
        }
    }
    write_ref(spec, &repo_dir, &listing.commit)?;
    Ok(HubPackage {
        paths: PackagePaths::new(&snapshot, &model, quant),
        commit: listing.commit,
        downloaded,
        hashed,
        offline_fallback: false,
    })
}

impl ModelPackage {
    /// Fetches the package `spec` names (see [`fetch`]) and opens it.
    pub fn from_hub(spec: &HubSpec, opts: &HubOptions) -> Result<ModelPackage, HubError> {
        let fetched = fetch(spec, opts)?;
        Ok(ModelPackage::open_paths(fetched.paths)?)
    }
}

/// `GET api/models/<repo>/revision/main?blobs=true`: the commit and every file with its size
/// and digest (the LFS sha256, else the git blob sha1).
fn list(
    spec: &HubSpec,
    opts: &HubOptions,
    api: &hf_hub::api::sync::ApiRepo,
) -> Result<Listing, HubError> {
    let protocol = |reason: String| HubError::Protocol {
        repo: spec.repo.clone(),
        file: None,
        reason,
        source: None,
    };
    let resp = api
        .info_request()
        .query("blobs", "true")
        .call()
        .map_err(|e| request_error(spec, opts, None, e))?;
    let json: serde_json::Value = resp
        .into_json()
        .map_err(|e| protocol(format!("the file list is not JSON: {e}")))?;
    let commit = json
        .get("sha")
        .and_then(|v| v.as_str())
        .filter(|s| is_id(s))
        .ok_or_else(|| protocol("the file list has no commit ('sha')".into()))?
        .to_owned();
    let siblings = json
        .get("siblings")
        .and_then(|v| v.as_array())
        .ok_or_else(|| protocol("the file list has no 'siblings'".into()))?;
    let files = siblings
        .iter()
        .filter_map(|s| {
            let name = s.get("rfilename")?.as_str()?.to_owned();
            let lfs = s.get("lfs");
            let size = lfs
                .and_then(|l| l.get("size"))
                .or_else(|| s.get("size"))
                .and_then(|v| v.as_u64());
            let digest = match lfs {
                Some(l) => l
                    .get("sha256")
                    .and_then(|v| v.as_str())
                    .and_then(|h| Expected::new(DigestKind::Sha256, h)),
                // why only outside LFS: an LFS file's `blobId` is its pointer's, not its own.
                None => s
                    .get("blobId")
                    .and_then(|v| v.as_str())
                    .and_then(|h| Expected::new(DigestKind::GitSha1, h)),
            };
            Some(RemoteFile { name, size, digest })
        })
        .collect();
    Ok(Listing { commit, files })
}

fn request_error(
    spec: &HubSpec,
    opts: &HubOptions,
    file: Option<&str>,
    e: ureq::Error,
) -> HubError {
    let file_owned = file.map(str::to_owned);
    match e {
        ureq::Error::Status(401 | 403, ref r) => HubError::Unauthorized {
            repo: spec.repo.clone(),
            file: file_owned,
            status: r.status(),
            token_sent: opts.token.is_some(),
        },
        ureq::Error::Status(404, _) => match file {
            // why: the hub answers 401 for a repository that does not exist when no token is
            // sent (so as not to tell private ones apart); 404 is either.
            None => HubError::RepoNotFound {
                repo: spec.repo.clone(),
                endpoint: opts.endpoint.clone(),
            },
            Some(f) => HubError::FileNotFound {
                repo: spec.repo.clone(),
                file: f.to_owned(),
                endpoint: opts.endpoint.clone(),
            },
        },
        ureq::Error::Status(status, _) => HubError::Http {
            repo: spec.repo.clone(),
            file: file_owned,
            status,
        },
        e @ ureq::Error::Transport(_) => HubError::Network {
            repo: spec.repo.clone(),
            file: file_owned,
            endpoint: opts.endpoint.clone(),
            source: Box::new(e),
        },
    }
}

/// Turns hf-hub's error for `file` into ours.
fn classify(spec: &HubSpec, opts: &HubOptions, file: &str, e: ApiError) -> HubError {
    match e {
        ApiError::RequestError(e) => request_error(spec, opts, Some(file), *e),
        ApiError::TooManyRetries(inner) => classify(spec, opts, file, *inner),
        ApiError::IoError(source) => {
            use std::io::ErrorKind as K;
            match source.kind() {
                K::UnexpectedEof
                | K::ConnectionReset
                | K::ConnectionAborted
                | K::BrokenPipe
                | K::TimedOut => HubError::Interrupted {
                    repo: spec.repo.clone(),
                    file: file.to_owned(),
                    source,
                },
                _ => HubError::Io {
                    repo: spec.repo.clone(),
                    file: file.to_owned(),
                    path: opts.cache_dir.join(spec.cache_folder()),
                    source,
                },
            }
        }
        other => HubError::Protocol {
            repo: spec.repo.clone(),
            file: Some(file.to_owned()),
            reason: other.to_string(),
            source: Some(other),
        },
    }
}

/// How one file of a package came to be in the cache, checked.
enum Got {
    /// It was there; `hashed`: it was read to check it (no marker vouched for it).
    Cached { hashed: bool },
    /// It was downloaded (and hashed).
    Downloaded,
}

/// Makes sure `remote` is in the cache at the snapshot path `target`, right: a cached copy is
/// checked (see the module documentation), and one that is missing or wrong is downloaded and
/// checked.
fn ensure_file(
    spec: &HubSpec,
    opts: &HubOptions,
    api: &hf_hub::api::sync::ApiRepo,
    repo_dir: &Path,
    commit: &str,
    remote: &RemoteFile,
    target: &Path,
) -> Result<Got, HubError> {
    match check_file(spec, repo_dir, remote, target, Trust::Marker)? {
        Checked::Good { hashed } => return Ok(Got::Cached { hashed }),
        Checked::Missing => {}
        Checked::Bad(m) => tracing::warn!(
            "{} of {}: the cached copy has {m}: removed, downloading it again",
            remote.name,
            spec.repo
        ),
    }
    // why: hf-hub keeps a snapshot link that is there, even one to a blob that is gone, and
    // then fails to make its own.
    if target.is_symlink() && !target.exists() {
        let _ = std::fs::remove_file(target);
    }
    let mut bar = Bar::new(opts.progress);
    let got = api
        .download_with_progress(&remote.name, &mut bar)
        .map_err(|e| classify(spec, opts, &remote.name, e))?;
    if got != target {
        // hf-hub put it under the commit of the file's own redirect (`X-Repo-Commit`).
        return Err(HubError::Protocol {
            repo: spec.repo.clone(),
            file: Some(remote.name.clone()),
            reason: format!(
                "the file came from another commit than the listing's {commit} (the repository \
                 changed meanwhile: run again)"
            ),
            source: None,
        });
    }
    match check_file(spec, repo_dir, remote, target, Trust::Nothing)? {
        Checked::Good { .. } => Ok(Got::Downloaded),
        Checked::Bad(m) => Err(mismatch_error(spec, &remote.name, m, false)),
        Checked::Missing => Err(HubError::Io {
            repo: spec.repo.clone(),
            file: remote.name.clone(),
            path: target.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the downloaded file is not there",
            ),
        }),
    }
}

/// [`cached::check`] of `remote` at the snapshot path `target`, its errors ours.
fn check_file(
    spec: &HubSpec,
    repo_dir: &Path,
    remote: &RemoteFile,
    target: &Path,
    trust: Trust,
) -> Result<Checked, HubError> {
    cached::check(repo_dir, target, remote.size, remote.digest.as_ref(), trust).map_err(|source| {
        HubError::Io {
            repo: spec.repo.clone(),
            file: remote.name.clone(),
            path: target.to_path_buf(),
            source,
        }
    })
}

/// The error for `file` failing its check; `cached`: it was in the cache (else downloaded).
fn mismatch_error(spec: &HubSpec, file: &str, m: cached::Mismatch, cached: bool) -> HubError {
    match m {
        cached::Mismatch::Size { expected, found } => HubError::SizeMismatch {
            repo: spec.repo.clone(),
            file: file.to_owned(),
            expected,
            found,
        },
        cached::Mismatch::Digest { expected, found } => HubError::Checksum {
            repo: spec.repo.clone(),
            file: file.to_owned(),
            kind: expected.kind,
            expected: expected.hex,
            found,
            cached,
        },
    }
}

fn write_ref(spec: &HubSpec, repo_dir: &Path, commit: &str) -> Result<(), HubError> {
    let refs = repo_dir.join("refs");
    let path = refs.join(REVISION);
    let io = |source| HubError::Io {
        repo: spec.repo.clone(),
        file: format!("refs/{REVISION}"),
        path: path.clone(),
        source,
    };
    if std::fs::read_to_string(&path).is_ok_and(|c| c.trim() == commit) {
        return Ok(());
    }
    std::fs::create_dir_all(&refs).map_err(io)?;
    // why: written whole then renamed, so a reader never sees half a commit id.
    let tmp = refs.join(format!(".{REVISION}.tmp-{}", std::process::id()));
    std::fs::write(&tmp, commit).map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)
}

/// The package at the cache's last known commit, if complete: (commit, model).
fn cached_package(
    spec: &HubSpec,
    quant: Quant,
    repo_dir: &Path,
) -> Result<(String, String), String> {
    let ref_path = repo_dir.join("refs").join(REVISION);
    let commit = std::fs::read_to_string(&ref_path)
        .map_err(|_| format!("no {}", ref_path.display()))?
        .trim()
        .to_owned();
    if !is_id(&commit) {
        return Err(format!("{} holds no commit id", ref_path.display()));
    }
    let snapshot = repo_dir.join("snapshots").join(&commit);
    let names: Vec<String> = std::fs::read_dir(&snapshot)
        .map_err(|_| format!("no {}", snapshot.display()))?
        .flatten()
        // why: `is_file` follows the snapshot's links: a dangling one is not a cached file.
        .filter(|e| e.path().is_file())
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .collect();
    let model = pick_package(&spec.repo, quant, &names).map_err(|e| e.to_string())?;
    Ok((commit, model))
}

fn from_cache(
    spec: &HubSpec,
    quant: Quant,
    opts: &HubOptions,
    repo_dir: &Path,
    offline: bool,
) -> Result<HubPackage, HubError> {
    let not_cached = |reason| HubError::NotCached {
        repo: spec.repo.clone(),
        quant,
        cache_dir: opts.cache_dir.clone(),
        reason,
        offline,
    };
    let (commit, model) = cached_package(spec, quant, repo_dir).map_err(not_cached)?;
    let snapshot = repo_dir.join("snapshots").join(&commit);
    let mut hashed = Vec::new();
    for name in package_files(&model, quant) {
        let target = snapshot.join(&name);
        match check_by_blob_name(spec, repo_dir, &name, &target)? {
            Checked::Good { hashed: false } => {}
            Checked::Good { hashed: true } => hashed.push(name),
            Checked::Bad(m) => return Err(mismatch_error(spec, &name, m, true)),
            Checked::Missing => {
                let gone = format!("{name} is gone from {}", snapshot.display());
                return Err(not_cached(gone));
            }
        }
    }
    Ok(HubPackage {
        paths: PackagePaths::new(&snapshot, &model, quant),
        commit,
        downloaded: Vec::new(),
        hashed,
        offline_fallback: !offline,
    })
}

/// Checks the cached file `name` at the snapshot path `target` against the name of the blob it
/// links to (its ETag): without the listing, that is what says what the file must be.
fn check_by_blob_name(
    spec: &HubSpec,
    repo_dir: &Path,
    name: &str,
    target: &Path,
) -> Result<Checked, HubError> {
    let remote = RemoteFile {
        name: name.to_owned(),
        size: None,
        digest: cached::blob_name(repo_dir, target).and_then(|b| Expected::from_blob_name(&b)),
    };
    check_file(spec, repo_dir, &remote, target, Trust::Marker)
}

/// A progress bar per file (hidden when disabled or stderr is not a terminal).
struct Bar {
    enabled: bool,
    bar: Option<indicatif::ProgressBar>,
}

impl Bar {
    fn new(enabled: bool) -> Bar {
        Bar { enabled, bar: None }
    }
}

impl Progress for &mut Bar {
    fn init(&mut self, size: usize, filename: &str) {
        if !self.enabled {
            return;
        }
        let bar = self.bar.get_or_insert_with(|| {
            let b = indicatif::ProgressBar::new(0);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ({eta})",
            ) {
                b.set_style(style.progress_chars("=> "));
            }
            b
        });
        bar.set_message(filename.to_owned());
        bar.set_length(size as u64);
        // why: hf-hub calls `init` again before each (resumed) transfer, then `update` with
        // the bytes already on disk.
        bar.set_position(0);
    }

    fn update(&mut self, size: usize) {
        if let Some(b) = &self.bar {
            b.inc(size as u64);
        }
    }

    fn finish(&mut self) {
        if let Some(b) = &self.bar {
            b.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn specs() {
        let s = HubSpec::parse("LiquidAI/LFM2.5-Audio-1.5B-GGUF:q8_0").unwrap();
        assert_eq!(s.repo, "LiquidAI/LFM2.5-Audio-1.5B-GGUF");
        assert_eq!(s.quant, Some(Quant::Q8_0));
        assert_eq!(s.to_string(), "LiquidAI/LFM2.5-Audio-1.5B-GGUF:Q8_0");
        assert_eq!(s.cache_folder(), "models--LiquidAI--LFM2.5-Audio-1.5B-GGUF");
        let d = HubSpec::parse("a/b").unwrap();
        assert_eq!(d.quant_or_default(), Quant::Q4_0);
        for bad in [
            "", "a", "a/b/c", "/b", "a/", "../b", "a/..", "a/b:Q5_K", "a/-b", "a/b.", "a/b--c",
            "a b/c", "a/b:",
        ] {
            assert!(
                matches!(HubSpec::parse(bad), Err(HubError::Spec { .. })),
                "{bad:?}"
            );
        }
        assert_eq!(
            HubSpec::from_model_path("hf:a/b:F16").unwrap().unwrap(),
            HubSpec {
                repo: "a/b".into(),
                quant: Some(Quant::F16)
            }
        );
        assert!(HubSpec::from_model_path("/models/dir").is_none());
    }

    #[test]
    fn options_from_the_environment() {
        let home = std::env::temp_dir().join(format!("hf-home-{}", std::process::id()));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join("token"), "hf_from_file\n").unwrap();
        let home_s = home.to_string_lossy().into_owned();
        let table = |pairs: Vec<(&'static str, String)>| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.clone())
            }
        };
        let first = table(vec![
            ("HF_HOME", home_s.clone()),
            ("HF_ENDPOINT", "http://mirror.example/".into()),
            ("HF_HUB_OFFLINE", "True".into()),
        ]);
        let o = HubOptions::from_vars(&first);
        assert_eq!(o.cache_dir, home.join("hub"));
        assert_eq!(o.endpoint, "http://mirror.example");
        assert_eq!(o.token.as_deref(), Some("hf_from_file"));
        assert!(o.offline);
        assert!(!format!("{o:?}").contains("hf_from_file"));
        let second = table(vec![
            ("HF_HOME", home_s),
            ("HF_TOKEN", "hf_env".into()),
            ("HF_HUB_CACHE", "/elsewhere".into()),
            ("HF_HUB_OFFLINE", "0".into()),
        ]);
        let o = HubOptions::from_vars(&second);
        assert_eq!(o.token.as_deref(), Some("hf_env"));
        assert_eq!(o.cache_dir, PathBuf::from("/elsewhere"));
        assert!(!o.offline);
        let _ = std::fs::remove_dir_all(&home);
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn picks_the_published_names() {
        let all = names(&[
            "README.md",
            "M-Q4_0.gguf",
            "mmproj-M-Q4_0.gguf",
            "vocoder-M-Q4_0.gguf",
            "tokenizer-M-Q4_0.gguf",
            "M-F16.gguf",
            "mmproj-M-F16.gguf",
            "vocoder-M-F16.gguf",
        ]);
        assert_eq!(pick_package("o/r", Quant::Q4_0, &all).unwrap(), "M");
        // F16 lacks its tokenizer file: not a package, and the error lists what is there.
        let e = pick_package("o/r", Quant::F16, &all).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, HubError::NoPackage { .. }), "{msg}");
        assert!(
            msg.contains("M-Q4_0") && msg.contains("vocoder-M-F16.gguf"),
            "{msg}"
        );
        let two = names(&[
            "A-F32.gguf",
            "mmproj-A-F32.gguf",
            "vocoder-A-F32.gguf",
            "tokenizer-A-F32.gguf",
            "B-F32.gguf",
            "mmproj-B-F32.gguf",
            "vocoder-B-F32.gguf",
            "tokenizer-B-F32.gguf",
        ]);
        assert!(matches!(
            pick_package("o/r", Quant::F32, &two),
            Err(HubError::AmbiguousPackage { .. })
        ));
        // Files in subfolders are not package files.
        let sub = names(&[
            "x/M-F32.gguf",
            "mmproj-x/M-F32.gguf",
            "vocoder-x/M-F32.gguf",
            "tokenizer-x/M-F32.gguf",
        ]);
        assert!(pick_package("o/r", Quant::F32, &sub).is_err());
    }
}
