//! Audio and bytes in requests and responses: base64 (plain or `data:` URI), server-side paths
//! inside the allowed directory only, and 16-bit PCM out.

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use crate::error::ApiError;

/// Standard base64 of `bytes`.
pub fn b64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Decodes standard base64, with or without a `data:...;base64,` prefix.
pub fn unb64(s: &str) -> Option<Vec<u8>> {
    let s = match s.strip_prefix("data:") {
        Some(rest) => rest.split_once(";base64,")?.1,
        None => s,
    };
    STANDARD.decode(s.trim()).ok()
}

/// Reads `path` if it lies inside `allowed` (both canonicalized: no `..` or symlink escapes).
pub fn read_allowed(path: &str, allowed: Option<&Path>, what: &str) -> Result<Vec<u8>, ApiError> {
    let Some(dir) = allowed else {
        return Err(ApiError::invalid(format!(
            "{what} is not base64 WAV data, and server-side paths are disabled (start the \
             server with --audio-dir DIR to allow files under DIR)"
        )));
    };
    let p = PathBuf::from(path);
    let p = if p.is_absolute() { p } else { dir.join(p) };
    let canon = p
        .canonicalize()
        .map_err(|e| ApiError::invalid(format!("{what}: cannot open {path}: {e}")))?;
    if !canon.starts_with(dir) {
        return Err(ApiError::invalid(format!(
            "{what}: {path} is outside the allowed audio directory"
        )));
    }
    std::fs::read(&canon).map_err(|e| ApiError::invalid(format!("{what}: reading {path}: {e}")))
}

/// WAV bytes from a request string: base64 WAV (`RIFF` inside), else a path under `allowed`.
pub fn wav_from(s: &str, allowed: Option<&Path>, what: &str) -> Result<Vec<u8>, ApiError> {
    match unb64(s) {
        Some(b) if b.starts_with(b"RIFF") => Ok(b),
        Some(_) if s.len() > 256 => Err(ApiError::invalid(format!(
            "{what}: the base64 data is not a WAV file (no RIFF header)"
        ))),
        _ => read_allowed(s, allowed, what),
    }
}

/// Samples as signed 16-bit (rounded, clipped).
pub fn to_i16(samples: &[f32]) -> Vec<i16> {
    samples
        .iter()
        .map(|&s| (s.clamp(-1.0, 1.0) * 32767.0).round() as i16)
        .collect()
}

/// Little-endian s16 PCM bytes.
pub fn pcm16(samples: &[f32]) -> Vec<u8> {
    to_i16(samples)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
}

/// A mono 16-bit PCM WAV.
pub fn wav16(samples: &[f32], rate: u32) -> Vec<u8> {
    let pcm = pcm16(samples);
    let mut out = Vec::with_capacity(44 + pcm.len());
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + pcm.len() as u32).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * 2).to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&(pcm.len() as u32).to_le_bytes());
    out.extend_from_slice(&pcm);
    out
}
