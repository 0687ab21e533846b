//! Artifacts in and out: the request's artifacts checked against the engine's limits and
//! decoded for it, and an output artifact as audio.cpp's JSON.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use audio_engine::lfm2_audio::conversation::{meta_from_json, meta_to_text, REPLY_ID};
use audio_engine::lfm2_audio::{Artifact, ArtifactKind};

use crate::artifact_limits::ArtifactTally;
use crate::audio_io::{b64, read_allowed_checked, unb64, unb64_len};
use crate::error::ApiError;

use super::body::ArtifactIn;

/// Reply meta as sent, read by the engine's one meta codec.
fn typed_meta(meta: &BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    meta.iter()
        .map(|(k, v)| (k.clone(), meta_from_json(k, v)))
        .collect()
}

/// Meta as audio.cpp returns it: every value a string.
pub fn string_meta(meta: &BTreeMap<String, Value>) -> Value {
    Value::Object(
        meta.iter()
            .map(|(k, v)| (k.clone(), Value::String(meta_to_text(v))))
            .collect(),
    )
}

/// An output artifact as JSON.
pub fn artifact_json(a: &Artifact) -> Value {
    json!({"id": a.id, "kind": a.kind.name(), "payload": b64(&a.payload), "meta": string_meta(&a.meta)})
}

/// The count and decoded payload bytes `list` declares, from the JSON alone (a server-side
/// file counts when it is opened).
pub fn declared_artifacts(list: &[ArtifactIn]) -> ArtifactTally {
    let mut t = ArtifactTally::default();
    for a in list {
        t.add(a.payload.as_deref().map_or(0, unb64_len));
    }
    t
}

/// Converts the request's artifacts for the engine, after checking their count and decoded
/// sizes against the engine's limits (see [`crate::artifact_limits`]) before any is decoded.
pub fn artifacts_in(
    list: &[ArtifactIn],
    audio_dir: Option<&std::path::Path>,
) -> Result<Vec<Artifact>, ApiError> {
    let mut tally = declared_artifacts(list);
    tally.check()?;
    list.iter()
        .enumerate()
        .map(|(i, a)| {
            let kind = match a.kind.as_str() {
                "audio" => ArtifactKind::Audio,
                "text" => ArtifactKind::Text,
                "acoustic_tokens" => ArtifactKind::AcousticTokens,
                "custom" => ArtifactKind::Custom,
                other => {
                    return Err(ApiError::invalid(format!(
                        "artifact {i} (`{}`): kind `{other}` is not one lfm2_audio takes \
                         (audio, text, acoustic_tokens, custom)",
                        a.id
                    )))
                }
            };
            let what = format!("artifact {i} (`{}`)", a.id);
            let payload = match (&a.payload, &a.path) {
                (Some(p), None) => unb64(p)
                    .ok_or_else(|| ApiError::invalid(format!("{what}: payload is not base64")))?,
                (None, Some(p)) => {
                    let bytes =
                        read_allowed_checked(p, audio_dir, &what, |len| tally.check_file(len))?;
                    tally.bytes = tally.bytes.saturating_add(bytes.len());
                    bytes
                }
                _ => {
                    return Err(ApiError::invalid(format!(
                        "{what}: give exactly one of `payload` (base64) and `path`"
                    )))
                }
            };
            let meta = if a.id == REPLY_ID {
                typed_meta(&a.meta)
            } else {
                a.meta.clone()
            };
            Ok(Artifact {
                id: a.id.clone(),
                kind,
                payload,
                meta,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use audio_engine::lfm2_audio::limits::MAX_ARTIFACT_BYTES;
    use audio_engine::lfm2_audio::QUESTION_ID;

    fn artifact(payload: Option<&str>, path: Option<&str>) -> ArtifactIn {
        ArtifactIn {
            id: QUESTION_ID.into(),
            kind: "custom".into(),
            payload: payload.map(str::to_owned),
            path: path.map(str::to_owned),
            meta: BTreeMap::new(),
        }
    }

    #[test]
    fn a_server_side_artifact_past_the_byte_limit_is_refused_before_it_is_read() {
        let dir = std::env::temp_dir().join(format!("serve-artifact-limit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dir = dir.canonicalize().unwrap();
        // why: a sparse file, so one past the limit costs no disk and reading it would show as
        // a 256 MiB allocation instead of the refusal.
        let big = dir.join("big.bin");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_ARTIFACT_BYTES as u64 + 1)
            .unwrap();
        std::fs::write(dir.join("small.bin"), [1u8, 2, 3]).unwrap();

        let e = artifacts_in(&[artifact(None, Some("big.bin"))], Some(&dir)).unwrap_err();
        assert_eq!(e.status.as_u16(), 400);
        assert!(e.message.contains("MAX_ARTIFACT_BYTES"), "{}", e.message);

        // The files count with the base64 payloads before them.
        let payload = b64(&[0u8; 6]);
        let ok = artifacts_in(
            &[
                artifact(Some(&payload), None),
                artifact(None, Some("small.bin")),
            ],
            Some(&dir),
        )
        .unwrap();
        assert_eq!(ok[1].payload, [1, 2, 3]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
