//! Read-only memory maps of model files, for the readers outside this module (which forbid
//! `unsafe`).

use std::fs::File;

/// A read-only, private mapping of a whole file, read as a byte slice.
///
/// As with any mapping (and as every model-file reader assumes), the file must not be truncated
/// or modified by another process while the map lives: that would surface as a `SIGBUS` or as
/// changing bytes, never as a write through this value.
pub struct MappedFile(memmap2::Mmap);

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile")
            .field("len", &self.0.len())
            .finish()
    }
}

impl MappedFile {
    /// Maps `file` read-only.
    pub fn map(file: &File) -> std::io::Result<MappedFile> {
        // SAFETY: the map is read-only and owned by this value; the documented contract is that
        // the file is not modified meanwhile.
        Ok(MappedFile(unsafe { memmap2::Mmap::map(file)? }))
    }
}

impl std::ops::Deref for MappedFile {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}
