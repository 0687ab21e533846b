//! The request handle: everything a caller sets, copied, checked against a task only when it
//! runs (a request is not tied to a family or a task).

use std::collections::BTreeMap;

use audio_engine::lfm2_audio::limits;

use crate::status::{AbiError, AbiResult};

/// Most samples (all channels together) one PCM argument may carry: 1 073 741 760, 18.6 hours
/// of 16 kHz mono: what a 32-bit float WAV holds (its RIFF and data chunk sizes are 32-bit
/// fields; 256 bytes are left for the header). A question travels back into later turns as a
/// WAV artifact, so audio over this could never be part of a conversation; it is refused
/// before its samples are copied.
pub const MAX_AUDIO_SAMPLES: usize = (u32::MAX as usize - 256) / std::mem::size_of::<f32>();

/// Interleaved float PCM.
#[derive(Debug, Clone, PartialEq)]
pub struct Pcm {
    /// Interleaved samples (`frames * channels`).
    pub samples: Vec<f32>,
    /// Hz, > 0.
    pub rate: u32,
    /// > 0.
    pub channels: u32,
}

impl Pcm {
    /// Frames (samples per channel).
    pub fn frames(&self) -> usize {
        self.samples.len() / self.channels as usize
    }

    /// Duration in seconds.
    pub fn seconds(&self) -> f64 {
        self.frames() as f64 / f64::from(self.rate)
    }
}

/// Checks a PCM description before its samples are read: rate and channels positive, and
/// `frames * channels` representable and at most [`MAX_AUDIO_SAMPLES`]. Returns the sample
/// count.
pub fn pcm_len(frames: usize, rate: i32, channels: i32, what: &str) -> AbiResult<usize> {
    if rate <= 0 {
        return Err(AbiError::invalid(format!(
            "{what}: sample_rate must be > 0, got {rate}"
        )));
    }
    if channels <= 0 {
        return Err(AbiError::invalid(format!(
            "{what}: channels must be > 0, got {channels}"
        )));
    }
    let samples = frames.checked_mul(channels as usize).ok_or_else(|| {
        AbiError::invalid(format!(
            "{what}: frames ({frames}) x channels ({channels}) overflows"
        ))
    })?;
    if samples > MAX_AUDIO_SAMPLES {
        return Err(AbiError::invalid(format!(
            "{what}: {frames} frames x {channels} channels are {samples} samples, over the \
             limit of {MAX_AUDIO_SAMPLES} (MAX_AUDIO_SAMPLES: what a WAV holds, its sizes are \
             32-bit); nothing was copied"
        )));
    }
    Ok(samples)
}

/// An input artifact as the caller added it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InArtifact {
    /// `audiocpp_artifact_kind` value (checked when added).
    pub kind: i32,
    /// Its id.
    pub id: String,
    /// Its bytes.
    pub payload: Vec<u8>,
    /// Meta in the order first set (a later value for a key replaces the earlier one).
    pub meta: Vec<(String, String)>,
}

/// The names of `audiocpp_artifact_kind`, by value.
pub const ARTIFACT_KINDS: [&str; 9] = [
    "SPEAKER_EMBEDDING",
    "STYLE_EMBEDDING",
    "PROMPT_EMBEDDING",
    "ACOUSTIC_TOKENS",
    "MIDI",
    "TRANSCRIPT_ALIGNMENT",
    "DIARIZATION_STATE",
    "VAD_STATE",
    "CUSTOM",
];
/// `AUDIOCPP_ARTIFACT_ACOUSTIC_TOKENS`.
pub const KIND_ACOUSTIC_TOKENS: i32 = 3;
/// `AUDIOCPP_ARTIFACT_CUSTOM`.
pub const KIND_CUSTOM: i32 = 8;

/// `audiocpp_request`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    /// The text (tts).
    pub text: Option<String>,
    /// The text's language ("" when not given).
    pub text_language: String,
    /// The audio (asr input, s2s question).
    pub audio: Option<Pcm>,
    /// A speaker reference.
    pub voice_audio: Option<Pcm>,
    /// A cached voice id.
    pub voice_id: Option<String>,
    /// Style conditioning.
    pub style_language: Option<String>,
    /// Style conditioning.
    pub emotion: Option<String>,
    /// Style conditioning.
    pub speaking_rate: Option<f32>,
    /// Style conditioning.
    pub pitch_shift: Option<f32>,
    /// Style conditioning.
    pub energy_scale: Option<f32>,
    /// Style conditioning.
    pub style_tags: BTreeMap<String, String>,
    /// Scalar options.
    pub options: BTreeMap<String, String>,
    /// List options.
    pub option_arrays: BTreeMap<String, Vec<String>>,
    /// Input artifacts, in order.
    pub artifacts: Vec<InArtifact>,
}

impl Request {
    /// `audiocpp_request_set_text`.
    pub fn set_text(&mut self, text: &str, language: Option<&str>) {
        self.text = Some(text.to_owned());
        self.text_language = language.unwrap_or("").to_owned();
        if let Some(l) = language.filter(|l| !l.is_empty()) {
            self.options.insert("language".to_owned(), l.to_owned());
        }
    }

    /// `audiocpp_request_set_text_language`.
    pub fn set_text_language(&mut self, language: &str) {
        self.text.get_or_insert_with(String::new);
        self.text_language = language.to_owned();
    }

    /// Checks an artifact of `kind` with `payload_bytes` bytes against the request before its
    /// payload is copied: a known kind, and the request within the engine's
    /// [`MAX_ARTIFACTS`](limits::MAX_ARTIFACTS) and [`MAX_ARTIFACT_BYTES`](limits::MAX_ARTIFACT_BYTES)
    /// once it is added. Reads only lengths.
    pub fn admit_artifact(&self, kind: i32, payload_bytes: usize) -> AbiResult<()> {
        if !(0..ARTIFACT_KINDS.len() as i32).contains(&kind) {
            return Err(AbiError::invalid(format!(
                "artifact kind {kind} is not an audiocpp_artifact_kind (0..=8)"
            )));
        }
        let refused = |e: audio_engine::lfm2_audio::EngineError| {
            AbiError::invalid(format!("{e}; the artifact was not added"))
        };
        limits::check_artifact_count(self.artifacts.len().saturating_add(1)).map_err(refused)?;
        let held = self
            .artifacts
            .iter()
            .fold(0usize, |n, a| n.saturating_add(a.payload.len()));
        limits::check_artifact_bytes(held.saturating_add(payload_bytes)).map_err(refused)
    }

    /// `audiocpp_request_add_artifact`; returns the index. Checked as
    /// [`Request::admit_artifact`] (the C entry point checks before copying the payload).
    pub fn add_artifact(&mut self, kind: i32, id: &str, payload: Vec<u8>) -> AbiResult<usize> {
        self.admit_artifact(kind, payload.len())?;
        self.artifacts
            .try_reserve(1)
            .map_err(|_| AbiError::out_of_memory("an artifact"))?;
        self.artifacts.push(InArtifact {
            kind,
            id: id.to_owned(),
            payload,
            meta: Vec::new(),
        });
        Ok(self.artifacts.len() - 1)
    }

    /// `audiocpp_request_set_artifact_meta`.
    pub fn set_artifact_meta(&mut self, index: usize, key: &str, value: &str) -> AbiResult<()> {
        let count = self.artifacts.len();
        let a = self
            .artifacts
            .get_mut(index)
            .ok_or_else(|| AbiError::out_of_range("artifact", index, count))?;
        match a.meta.iter_mut().find(|(k, _)| k == key) {
            Some(kv) => kv.1 = value.to_owned(),
            None => a.meta.push((key.to_owned(), value.to_owned())),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use audio_engine::lfm2_audio::limits::{MAX_ARTIFACTS, MAX_ARTIFACT_BYTES};

    #[test]
    fn artifacts_are_admitted_up_to_the_engine_limits_and_refused_past_them() {
        let mut r = Request::default();
        assert!(r.admit_artifact(KIND_CUSTOM, MAX_ARTIFACT_BYTES).is_ok());
        let e = r
            .admit_artifact(KIND_CUSTOM, MAX_ARTIFACT_BYTES + 1)
            .unwrap_err();
        assert_eq!(e.status, crate::status::Status::InvalidArgument);
        assert!(e.message.contains("MAX_ARTIFACT_BYTES"), "{}", e.message);
        assert!(r.admit_artifact(KIND_CUSTOM, usize::MAX).is_err());

        // The total counts what the request already holds.
        r.add_artifact(KIND_CUSTOM, "a", vec![1; 8]).unwrap();
        assert!(r
            .admit_artifact(KIND_CUSTOM, MAX_ARTIFACT_BYTES - 8)
            .is_ok());
        let e = r
            .admit_artifact(KIND_CUSTOM, MAX_ARTIFACT_BYTES - 7)
            .unwrap_err();
        assert!(e.message.contains("MAX_ARTIFACT_BYTES"), "{}", e.message);

        while r.artifacts.len() < MAX_ARTIFACTS {
            r.add_artifact(KIND_CUSTOM, "a", Vec::new()).unwrap();
        }
        let before = r.clone();
        let e = r.add_artifact(KIND_CUSTOM, "a", Vec::new()).unwrap_err();
        assert!(e.message.contains("MAX_ARTIFACTS"), "{}", e.message);
        assert_eq!(r, before, "a refused artifact leaves the request unchanged");

        let e = Request::default().admit_artifact(9, 0).unwrap_err();
        assert!(e.message.contains("artifact kind 9"), "{}", e.message);
    }

    #[test]
    fn pcm_descriptions_past_the_wav_limit_are_refused_from_their_lengths() {
        assert_eq!(
            pcm_len(MAX_AUDIO_SAMPLES, 16_000, 1, "audio").unwrap(),
            MAX_AUDIO_SAMPLES
        );
        let e = pcm_len(MAX_AUDIO_SAMPLES + 1, 16_000, 1, "audio").unwrap_err();
        assert!(e.message.contains("MAX_AUDIO_SAMPLES"), "{}", e.message);
        let e = pcm_len(MAX_AUDIO_SAMPLES / 2 + 1, 16_000, 2, "audio").unwrap_err();
        assert!(e.message.contains("MAX_AUDIO_SAMPLES"), "{}", e.message);
        // The largest audio is still a WAV with 32-bit sizes.
        let wav_bytes = MAX_AUDIO_SAMPLES * 4 + 256;
        assert!(u32::try_from(wav_bytes).is_ok());
    }
}
