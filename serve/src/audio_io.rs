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

/// The base64 text of a request string: after a `data:...;base64,` prefix when there is one,
/// without surrounding whitespace (`None`: a `data:` URI that is not base64).
fn b64_text(s: &str) -> Option<&str> {
    let s = match s.strip_prefix("data:") {
        Some(rest) => rest.split_once(";base64,")?.1,
        None => s,
    };
    Some(s.trim())
}

/// Decodes standard base64, with or without a `data:...;base64,` prefix.
pub fn unb64(s: &str) -> Option<Vec<u8>> {
    STANDARD.decode(b64_text(s)?).ok()
}

/// The bytes [`unb64`] decodes `s` to, from its length alone (nothing is decoded): exact for
/// valid base64, and for invalid base64 (which [`unb64`] refuses) at most `3/4` of its length.
/// Limits on decoded sizes are checked with it before anything is allocated.
pub fn unb64_len(s: &str) -> usize {
    let Some(text) = b64_text(s) else {
        return 0;
    };
    let chars = text.trim_end_matches('=').len();
    // why: each 4 characters are 3 bytes; a last group of 2 or 3 characters is 1 or 2 bytes.
    chars / 4 * 3 + chars % 4 * 3 / 4
}

/// The canonical path of `path` (relative to `allowed`) when it lies inside `allowed` (no
/// `..` or symlink escapes).
fn allowed_path(path: &str, allowed: Option<&Path>, what: &str) -> Result<PathBuf, ApiError> {
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
    Ok(canon)
}

/// Reads `path` if it lies inside `allowed` (both canonicalized: no `..` or symlink escapes).
pub fn read_allowed(path: &str, allowed: Option<&Path>, what: &str) -> Result<Vec<u8>, ApiError> {
    read_allowed_checked(path, allowed, what, |_| Ok(()))
}

/// [`read_allowed`], with the file's length handed to `check` before anything is read (a size
/// limit); at most that many bytes are read, even if the file grows meanwhile.
pub fn read_allowed_checked(
    path: &str,
    allowed: Option<&Path>,
    what: &str,
    check: impl FnOnce(u64) -> Result<(), ApiError>,
) -> Result<Vec<u8>, ApiError> {
    use std::io::Read;
    let canon = allowed_path(path, allowed, what)?;
    let reading = |e: std::io::Error| ApiError::invalid(format!("{what}: reading {path}: {e}"));
    let file = std::fs::File::open(&canon).map_err(reading)?;
    let len = file.metadata().map_err(reading)?.len();
    check(len)?;
    let mut bytes = Vec::new();
    file.take(len).read_to_end(&mut bytes).map_err(reading)?;
    Ok(bytes)
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
    wav_i16(&to_i16(samples), rate)
}

/// A mono 16-bit PCM WAV of samples already in PCM16.
pub fn wav_i16(samples: &[i16], rate: u32) -> Vec<u8> {
    let data = samples.len() as u32 * 2;
    let mut out = Vec::with_capacity(44 + data as usize);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * 2).to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data.to_le_bytes());
    for v in samples {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_decoded_length_is_known_from_the_base64_text_alone() {
        for n in 0..40 {
            let bytes: Vec<u8> = (0..n as u8).collect();
            let text = b64(&bytes);
            for s in [
                text.clone(),
                format!("  {text}\n"),
                format!("data:audio/wav;base64,{text}"),
            ] {
                assert_eq!(unb64(&s).as_deref(), Some(bytes.as_slice()), "{s:?}");
                assert_eq!(unb64_len(&s), n, "{s:?}");
            }
            // Unpadded text decodes to as many bytes as it is said to.
            let unpadded = text.trim_end_matches('=');
            assert_eq!(unb64_len(unpadded), n, "{unpadded:?}");
        }
        // Not base64: never more than 3/4 of the text (and refused when decoded).
        assert_eq!(unb64_len("data:audio/wav,RIFF"), 0);
        assert!(unb64_len("!!!!!") <= 3);
        assert!(unb64("!!!!!").is_none());
    }
}
