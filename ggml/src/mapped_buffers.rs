//! The file mappings that live buffers lie over, so that a compute can check first that none
//! of its files has shrunk (reading a mapping past its file's end raises `SIGBUS`).
//!
//! why its own file: buffers register here and backends and schedulers check here; in
//! `buffer.rs` the checking files imported the buffers above them.

use std::sync::{Arc, RwLock};

use ggml_sys as sys;

use super::error::{GgmlError, Result};
use super::mapped_file::MappedFile;

/// The file mappings that hold tensors in place, by the address of the live ggml buffer over
/// each ([`BackendBuffer::from_mapped_file`](super::BackendBuffer::from_mapped_file)), so that
/// a compute can check the files its tensors live in ([`check_mapped_files`]).
static MAPPED: RwLock<Vec<(usize, Arc<MappedFile>)>> = RwLock::new(Vec::new());

/// Fails with [`GgmlError::FileChanged`] if one of `buffers` lies over a file mapping whose file
/// has shrunk since it was mapped (reading it would raise `SIGBUS`). One `fstat` per such
/// buffer; nothing when no tensor lives in a mapping.
pub(crate) fn check_mapped_files(buffers: &[*mut sys::ggml_backend_buffer]) -> Result<()> {
    let mapped = MAPPED.read().unwrap_or_else(|e| e.into_inner());
    for (addr, map) in mapped.iter() {
        if !buffers.iter().any(|&b| b as usize == *addr) {
            continue;
        }
        map.check_unchanged().map_err(|e| GgmlError::FileChanged {
            file: map.path().map_or_else(
                || "<unnamed mapping>".to_owned(),
                |p| p.display().to_string(),
            ),
            detail: e.to_string(),
        })?;
    }
    Ok(())
}

/// Registers the buffer at `addr` as lying over `map`.
pub(crate) fn register(addr: usize, map: Arc<MappedFile>) {
    MAPPED
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .push((addr, map));
}

/// Unregisters the buffer at `addr`, before it is freed, so that a later buffer at the same
/// address is not checked against this file.
pub(crate) fn unregister(addr: usize) {
    let mut mapped = MAPPED.write().unwrap_or_else(|e| e.into_inner());
    mapped.retain(|(a, _)| *a != addr);
}
