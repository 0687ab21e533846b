//! Result and event handles: what a run produced, laid out for the read-only accessors (C
//! strings made once, so the pointers handed out stay put until the handle is freed).

use std::ffi::{c_int, CString};

use crate::engine::{Blob, Output, OUTPUT_RATE};
use crate::request::{KIND_ACOUSTIC_TOKENS, KIND_CUSTOM};
use crate::status::c_string;

/// Audio of a result.
#[derive(Debug, Clone, PartialEq)]
pub struct AudioOut {
    /// Interleaved samples.
    pub samples: Vec<f32>,
    /// Hz.
    pub rate: c_int,
    /// Channels.
    pub channels: c_int,
}

/// An output artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactOut {
    /// `audiocpp_artifact_kind`.
    pub kind: c_int,
    /// Its id.
    pub id: CString,
    /// Its bytes.
    pub payload: Vec<u8>,
    /// Meta pairs.
    pub meta: Vec<(CString, CString)>,
}

/// `audiocpp_result`: an owned result, or the view of an event.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultData {
    /// A view inside an event (`audiocpp_result_free` leaves it alone).
    pub view: bool,
    /// The audio, when there is some.
    pub audio: Option<AudioOut>,
    /// The text and its language, when there is a text.
    pub text: Option<(CString, CString)>,
    /// Output artifacts, in order.
    pub artifacts: Vec<ArtifactOut>,
}

fn mono(samples: Vec<f32>) -> AudioOut {
    AudioOut {
        samples,
        rate: OUTPUT_RATE as c_int,
        channels: 1,
    }
}

fn artifact(b: Blob) -> ArtifactOut {
    ArtifactOut {
        kind: if b.acoustic_tokens {
            KIND_ACOUSTIC_TOKENS
        } else {
            KIND_CUSTOM
        },
        id: c_string(&b.id),
        payload: b.payload,
        meta: b
            .meta
            .iter()
            .map(|(k, v)| (c_string(k), c_string(v)))
            .collect(),
    }
}

impl ResultData {
    /// A run's result on a model of `language`.
    pub fn of_output(out: Output, language: &str) -> ResultData {
        ResultData {
            view: false,
            audio: out.audio.map(mono),
            text: out.text.map(|t| (c_string(&t), c_string(language))),
            artifacts: out.artifact.into_iter().map(artifact).collect(),
        }
    }

    /// An event's view: its audio when it has samples, its text when it has some.
    pub fn of_piece(text: String, audio: Vec<f32>, language: &str) -> ResultData {
        ResultData {
            view: true,
            audio: (!audio.is_empty()).then(|| mono(audio)),
            text: (!text.is_empty()).then(|| (c_string(&text), c_string(language))),
            artifacts: Vec::new(),
        }
    }
}

/// `audiocpp_event`.
#[derive(Debug, Clone, PartialEq)]
pub struct EventData {
    /// What the event carries, read through the result accessors.
    pub result: ResultData,
    /// Whether it is a final event.
    pub is_final: bool,
}
