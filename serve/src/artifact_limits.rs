//! The engine's artifact limits ([`MAX_ARTIFACTS`], [`MAX_ARTIFACT_BYTES`] in
//! `audio_engine::lfm2_audio::limits`) applied to a request's JSON before any payload is
//! decoded or read: the count from the list's length, the bytes from the base64 texts' lengths
//! (a server-side file's from its size, when it is opened). So what one request makes the
//! server allocate for artifacts is bounded by the engine's limits whatever `--max-body-bytes`
//! allows; past one, the answer is 400 `invalid_request_error` naming the limit.

use audio_engine::lfm2_audio::limits::{check_artifact_bytes, check_artifact_count};

#[cfg(doc)]
use audio_engine::lfm2_audio::limits::{MAX_ARTIFACTS, MAX_ARTIFACT_BYTES};

use crate::error::ApiError;

/// The artifacts a request declares, counted before any is decoded.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactTally {
    /// Artifacts.
    pub count: usize,
    /// Payload bytes they decode to, together (saturating).
    pub bytes: usize,
}

impl ArtifactTally {
    /// Counts one more artifact of `bytes` payload bytes.
    pub fn add(&mut self, bytes: usize) {
        self.count = self.count.saturating_add(1);
        self.bytes = self.bytes.saturating_add(bytes);
    }

    /// Refuses the tally when it is past [`MAX_ARTIFACTS`] or [`MAX_ARTIFACT_BYTES`] (the
    /// count checked first), as 400 naming the limit.
    pub fn check(&self) -> Result<(), ApiError> {
        check_artifact_count(self.count)?;
        check_artifact_bytes(self.bytes)?;
        Ok(())
    }

    /// Refuses a server-side file of `len` bytes that would take the tally past
    /// [`MAX_ARTIFACT_BYTES`] (called with the file's size, before it is read).
    pub fn check_file(&self, len: u64) -> Result<(), ApiError> {
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        check_artifact_bytes(self.bytes.saturating_add(len))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use audio_engine::lfm2_audio::limits::{MAX_ARTIFACTS, MAX_ARTIFACT_BYTES};

    #[test]
    fn tallies_at_the_limits_pass_and_one_past_is_400_naming_the_limit() {
        let mut t = ArtifactTally::default();
        for _ in 0..MAX_ARTIFACTS {
            t.add(0);
        }
        t.check().unwrap();
        t.add(0);
        let e = t.check().unwrap_err();
        assert_eq!((e.status.as_u16(), e.kind), (400, "invalid_request_error"));
        assert!(e.message.contains("MAX_ARTIFACTS"), "{}", e.message);

        let at = ArtifactTally {
            count: 2,
            bytes: MAX_ARTIFACT_BYTES,
        };
        at.check().unwrap();
        let e = at.check_file(1).unwrap_err();
        assert!(e.message.contains("MAX_ARTIFACT_BYTES"), "{}", e.message);
        let past = ArtifactTally {
            count: 2,
            bytes: MAX_ARTIFACT_BYTES + 1,
        };
        let e = past.check().unwrap_err();
        assert_eq!(e.status.as_u16(), 400);
        assert!(e.message.contains("MAX_ARTIFACT_BYTES"), "{}", e.message);
        assert!(ArtifactTally::default().check_file(u64::MAX).is_err());
    }
}
