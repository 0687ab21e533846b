//! The check of a file in the cache, hashed once per state of its blob.
//!
//! A file is hashed against what it must be ([`Expected`]); when it matches, a marker
//! `models--<org>--<name>/.lfm2-verified/<digest>` (see [`super::VERIFIED_MARKER_DIR`]) records
//! the state of the file at that time: its size, mtime and ctime in nanoseconds, inode and device
//! (size and mtime alone where the platform offers no more). A later check of a file in the same
//! state takes the marker's word; any other state, or no marker, hashes it again.
//!
//! why there: `huggingface_hub` reads only `blobs/`, `snapshots/` and `refs/` of a repository's
//! folder (and deletes the folder whole), the loader opens only snapshot paths, and the markers
//! go with the repository's folder.

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha1::Sha1;
use sha2::{Digest, Sha256};

use super::{DigestKind, VERIFIED_MARKER_DIR};

/// What a file must hash to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Expected {
    /// The hash function.
    pub kind: DigestKind,
    /// Its digest, lower-case hex.
    pub hex: String,
}

impl Expected {
    /// `hex` as a digest of `kind`, if it has that kind's length and only hex digits.
    pub fn new(kind: DigestKind, hex: &str) -> Option<Expected> {
        let len = match kind {
            DigestKind::Sha256 => 64,
            DigestKind::GitSha1 => 40,
        };
        (hex.len() == len && hex.chars().all(|c| c.is_ascii_hexdigit())).then(|| Expected {
            kind,
            hex: hex.to_ascii_lowercase(),
        })
    }

    /// What a blob named `name` must hash to: the hub's ETag is a file's sha256 for a Git LFS
    /// file (64 hex digits) and git's blob sha1 for any other (40); `None` for another name.
    pub fn from_blob_name(name: &str) -> Option<Expected> {
        Expected::new(DigestKind::Sha256, name).or_else(|| Expected::new(DigestKind::GitSha1, name))
    }
}

/// The digest of `kind` of the file at `path`, lower-case hex.
pub(super) fn digest_file(path: &Path, kind: DigestKind) -> io::Result<String> {
    let mut f = File::open(path)?;
    match kind {
        DigestKind::Sha256 => hash_stream(&mut f, Sha256::new()),
        DigestKind::GitSha1 => {
            let len = f.metadata()?.len();
            let mut h = Sha1::new();
            // why: git names a blob by the sha1 of a header and its bytes.
            h.update(format!("blob {len}\0").as_bytes());
            hash_stream(&mut f, h)
        }
    }
}

fn hash_stream<D: Digest>(r: &mut impl Read, mut h: D) -> io::Result<String> {
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// What identifies a file's contents without reading them: its size, mtime and ctime (ns),
/// inode and device. why ctime: no program can set it, so an edit that puts the old mtime back
/// still shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FileState(String);

impl FileState {
    /// The state `m` describes.
    #[cfg(unix)]
    pub fn of(m: &Metadata) -> Option<FileState> {
        use std::os::unix::fs::MetadataExt;
        Some(FileState(format!(
            "size {} mtime {}.{:09} ctime {}.{:09} ino {} dev {}",
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
            m.ino(),
            m.dev()
        )))
    }

    /// The state `m` describes (`None` where the platform has no mtime: never trusted then).
    #[cfg(not(unix))]
    pub fn of(m: &Metadata) -> Option<FileState> {
        let mtime = m
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        Some(FileState(format!(
            "size {} mtime {}.{:09}",
            m.len(),
            mtime.as_secs(),
            mtime.subsec_nanos()
        )))
    }
}

/// The marker of the file that must hash to `e`.
pub(super) fn marker_path(repo_dir: &Path, e: &Expected) -> PathBuf {
    repo_dir.join(VERIFIED_MARKER_DIR).join(&e.hex)
}

fn marker_text(e: &Expected, state: &FileState) -> String {
    format!("lfm2-verified 1\n{} {}\n{}\n", e.kind, e.hex, state.0)
}

fn is_marked(repo_dir: &Path, e: &Expected, state: &FileState) -> bool {
    std::fs::read_to_string(marker_path(repo_dir, e)).is_ok_and(|t| t == marker_text(e, state))
}

/// Records that the file in `state` hashes to `e`.
fn mark(repo_dir: &Path, e: &Expected, state: &FileState) -> io::Result<()> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let path = marker_path(repo_dir, e);
    let dir = repo_dir.join(VERIFIED_MARKER_DIR);
    std::fs::create_dir_all(&dir)?;
    // why: written whole then renamed, so a reader sees the old marker or the new one, never
    // half of one; the sequence number keeps threads of one process apart.
    let tmp = dir.join(format!(
        ".{}.tmp-{}-{}",
        e.hex,
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let written =
        std::fs::write(&tmp, marker_text(e, state)).and_then(|()| std::fs::rename(&tmp, &path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// The entry of `blobs/` the snapshot path `target` links to (its link's first hop), if it
/// links there. why the first hop: `huggingface_hub` may link a repository's blob on into a
/// store it shares between repositories, named by another hash.
fn blob_entry(repo_dir: &Path, target: &Path) -> Option<PathBuf> {
    let link = std::fs::read_link(target).ok()?;
    let entry = target.parent()?.join(link);
    let in_blobs = std::fs::canonicalize(entry.parent()?).ok()?
        == std::fs::canonicalize(repo_dir.join("blobs")).ok()?;
    in_blobs.then_some(entry)
}

/// The name of the blob the snapshot path `target` links to (its ETag), if it links into
/// `blobs/`.
pub(super) fn blob_name(repo_dir: &Path, target: &Path) -> Option<String> {
    blob_entry(repo_dir, target)?
        .file_name()?
        .to_str()
        .map(str::to_owned)
}

/// Removes a wrong file from the cache: its snapshot path, the blob it links to and that blob's
/// marker (what cannot be removed, as in a read-only cache, stays).
pub(super) fn remove(repo_dir: &Path, target: &Path, expected: Option<&Expected>) {
    let blob = blob_entry(repo_dir, target);
    // why this order (as `huggingface_hub`'s): no link is left pointing at a removed blob.
    let _ = std::fs::remove_file(target);
    if let Some(blob) = blob {
        let _ = std::fs::remove_file(blob);
    }
    if let Some(e) = expected {
        let _ = std::fs::remove_file(marker_path(repo_dir, e));
    }
}

/// What a file fails on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Mismatch {
    /// Its size is not the listed one.
    Size { expected: u64, found: u64 },
    /// Its digest is not the expected one.
    Digest { expected: Expected, found: String },
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::Size { expected, found } => write!(f, "{found} bytes, not {expected}"),
            Mismatch::Digest { expected, found } => {
                write!(f, "{} {found}, not {}", expected.kind, expected.hex)
            }
        }
    }
}

/// How a file in the cache fared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Checked {
    /// Not there (nothing, or a link to nothing).
    Missing,
    /// Right; `hashed` says whether it was read to know (else its marker vouched for it, or
    /// there was no digest to check).
    Good { hashed: bool },
    /// Wrong; it was removed (see [`remove`]).
    Bad(Mismatch),
}

/// When a marker may stand in for hashing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Trust {
    /// A marker for the file's current state.
    Marker,
    /// Never: the file was just written (it is hashed, then marked).
    Nothing,
}

/// Checks the file at the snapshot path `target` against `size` and `expected` (each when
/// known), hashing it unless `trust` lets a marker for its current state vouch for it. A right
/// file that was hashed is marked; a wrong one is removed.
pub(super) fn check(
    repo_dir: &Path,
    target: &Path,
    size: Option<u64>,
    expected: Option<&Expected>,
    trust: Trust,
) -> io::Result<Checked> {
    let meta = match std::fs::metadata(target) {
        Ok(m) if m.is_file() => m,
        _ => return Ok(Checked::Missing),
    };
    if let Some(listed) = size.filter(|s| *s != meta.len()) {
        remove(repo_dir, target, expected);
        return Ok(Checked::Bad(Mismatch::Size {
            expected: listed,
            found: meta.len(),
        }));
    }
    let Some(expected) = expected else {
        return Ok(Checked::Good { hashed: false });
    };
    let before = FileState::of(&meta);
    let vouched = trust == Trust::Marker
        && before
            .as_ref()
            .is_some_and(|s| is_marked(repo_dir, expected, s));
    if vouched {
        return Ok(Checked::Good { hashed: false });
    }
    let found = digest_file(target, expected.kind)?;
    if found != expected.hex {
        remove(repo_dir, target, Some(expected));
        return Ok(Checked::Bad(Mismatch::Digest {
            expected: expected.clone(),
            found,
        }));
    }
    record(repo_dir, target, expected, before);
    Ok(Checked::Good { hashed: true })
}

/// Marks the file at `target`, hashed in state `before`, as hashing to `expected`, if it is
/// still in that state (else it changed while it was read, and the next check hashes it again).
fn record(repo_dir: &Path, target: &Path, expected: &Expected, before: Option<FileState>) {
    let after = std::fs::metadata(target)
        .ok()
        .and_then(|m| FileState::of(&m));
    let Some(state) = before.filter(|b| Some(b) == after.as_ref()) else {
        return;
    };
    if let Err(e) = mark(repo_dir, expected, &state) {
        // why not an error: the file is right; a cache we cannot write to (read-only, shared)
        // still serves, at the cost of hashing at every start.
        tracing::debug!(
            "cannot record the check of {} ({e}): it is hashed again next time",
            target.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_names_and_git_blob_hashes() {
        let sha = "A".repeat(64);
        assert_eq!(
            Expected::from_blob_name(&sha).unwrap(),
            Expected {
                kind: DigestKind::Sha256,
                hex: "a".repeat(64)
            }
        );
        assert_eq!(
            Expected::from_blob_name(&"0".repeat(40)).unwrap().kind,
            DigestKind::GitSha1
        );
        let (short, not_hex) = ("0".repeat(63), "g".repeat(64));
        for other in ["", "Tiny-Q4_0.gguf", short.as_str(), not_hex.as_str()] {
            assert!(Expected::from_blob_name(other).is_none(), "{other:?}");
        }
        let dir = std::env::temp_dir().join(format!("lfm2-cached-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("x");
        std::fs::write(&f, b"hello\n").unwrap();
        // `printf 'hello\n' | git hash-object --stdin` and `sha256sum`.
        assert_eq!(
            digest_file(&f, DigestKind::GitSha1).unwrap(),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        assert_eq!(
            digest_file(&f, DigestKind::Sha256).unwrap(),
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
