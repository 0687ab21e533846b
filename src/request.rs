//! The request handle: everything a caller sets, copied, checked against a task only when it
//! runs (a request is not tied to a family or a task).

use std::collections::BTreeMap;

use crate::status::{AbiError, AbiResult};

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
/// `frames * channels` representable. Returns the sample count.
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
    frames.checked_mul(channels as usize).ok_or_else(|| {
        AbiError::invalid(format!(
            "{what}: frames ({frames}) x channels ({channels}) overflows"
        ))
    })
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

    /// `audiocpp_request_add_artifact`; returns the index.
    pub fn add_artifact(&mut self, kind: i32, id: &str, payload: Vec<u8>) -> AbiResult<usize> {
        if !(0..ARTIFACT_KINDS.len() as i32).contains(&kind) {
            return Err(AbiError::invalid(format!(
                "artifact kind {kind} is not an audiocpp_artifact_kind (0..=8)"
            )));
        }
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
