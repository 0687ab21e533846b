//! Read-only memory maps of model files, for the readers outside this module (which forbid
//! `unsafe`), and for weights used in place ([`WeightStore::load`](super::WeightStore::load)).
//!
//! # Truncation (`SIGBUS`) policy
//!
//! A mapping reads the file's pages on demand. If another process truncates the file while it
//! is mapped, touching a page past the new end raises `SIGBUS`, which kills the process; there
//! is no way to turn that into an error after the fact (a signal handler cannot resume safely
//! into ggml's kernels). This crate's policy:
//!
//! * the contract, as for every model-file reader (llama.cpp included), is that model files are
//!   not modified or truncated while a model using them is loaded; replace a file by writing a
//!   new one and renaming it over the old (the mapping keeps the old inode alive);
//! * every check that can catch a violation early does: [`GgufFile::open`](super::gguf::GgufFile)
//!   checks that every tensor lies inside the file as it is when mapped;
//!   [`MappedFile::check_unchanged`] (called before weights are loaded from the mapping) fails
//!   with a typed error if the file has shrunk since, so a file truncated between open and load
//!   is an error, not a crash; and [`Backend::compute`](super::Backend::compute) checks the
//!   files of the mapped weights a graph uses before every compute (one `fstat` each), so a
//!   file truncated after load fails the next compute with
//!   [`GgmlError::FileChanged`](super::GgmlError::FileChanged) instead of crashing it;
//! * a truncation *during* a compute (after its check) remains a `SIGBUS`, never a wrong result
//!   or a write: the mapping is read-only and private;
//! * a file removed (or renamed over) after it was opened is no violation: the mapping keeps the
//!   old inode's bytes, and everything keeps working on them.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A read-only, private mapping of a whole file, read as a byte slice.
///
/// As with any mapping (and as every model-file reader assumes), the file must not be truncated
/// or modified by another process while the map lives: that would surface as a `SIGBUS` or as
/// changing bytes, never as a write through this value (see the [module docs](self)).
pub struct MappedFile {
    map: memmap2::Mmap,
    /// The mapped file, kept open to check its size later (`fstat` follows the inode, even if the
    /// path is renamed or removed).
    file: File,
    /// Where the file was opened from, for errors (`None` when the caller did not say).
    path: Option<PathBuf>,
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile")
            .field("len", &self.map.len())
            .field("path", &self.path)
            .finish()
    }
}

impl MappedFile {
    /// Maps `file` read-only.
    pub fn map(file: &File) -> std::io::Result<MappedFile> {
        // SAFETY: the map is read-only and owned by this value; the documented contract is that
        // the file is not modified meanwhile.
        let map = unsafe { memmap2::Mmap::map(file)? };
        Ok(MappedFile {
            map,
            file: file.try_clone()?,
            path: None,
        })
    }

    /// The same mapping, reporting `path` as the file's name in errors.
    pub fn with_path(mut self, path: &Path) -> MappedFile {
        self.path = Some(path.to_path_buf());
        self
    }

    /// The path the file was opened from, if the mapping was given it.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Maps `file` read-only, shared by `Arc` (as weights used in place need it).
    pub fn map_shared(file: &File) -> std::io::Result<Arc<MappedFile>> {
        MappedFile::map(file).map(Arc::new)
    }

    /// Bytes mapped (the file's length when it was mapped).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the mapping is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Fails if the file is now shorter than the mapping (see the [module docs](self)): the
    /// error's message names both lengths.
    pub fn check_unchanged(&self) -> std::io::Result<()> {
        let now = self.file.metadata()?.len();
        if now < self.map.len() as u64 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "the file was truncated after it was mapped: {now} bytes, {} mapped",
                    self.map.len()
                ),
            ));
        }
        Ok(())
    }

    /// Whether `bytes` lies inside this mapping; then its offset from the mapping's start.
    pub fn offset_of(&self, bytes: &[u8]) -> Option<usize> {
        let start = self.map.as_ptr() as usize;
        let p = bytes.as_ptr() as usize;
        let off = p.checked_sub(start)?;
        (off.checked_add(bytes.len())? <= self.map.len()).then_some(off)
    }

    /// Drops this process's page-table entries for the pages wholly inside
    /// `offset..offset + len` (`MADV_DONTNEED`), so bytes that were copied elsewhere (repacked
    /// weights) stop counting in the resident set. The bytes stay readable: touching them again
    /// reads them from the file (the page cache). Best effort: errors are ignored.
    pub fn release(&self, offset: usize, len: usize) {
        // SAFETY: `sysconf` has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page = usize::try_from(page).unwrap_or(4096).max(1);
        let start = offset.div_ceil(page) * page;
        let end = (offset.saturating_add(len).min(self.map.len()) / page) * page;
        if end <= start {
            return;
        }
        // SAFETY: `MADV_DONTNEED` on a private, read-only file mapping that is never written
        // only discards page-table entries: the pages' contents are those of the file and are
        // read back from it on the next access, so every `&[u8]` into the map keeps reading the
        // same bytes. The range lies inside the map.
        let _ = unsafe {
            self.map
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
        };
    }
}

impl std::ops::Deref for MappedFile {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.map
    }
}
