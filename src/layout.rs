//! The C-visible layout as this side of the boundary sees it: struct sizes and field offsets,
//! enum sizes and values, the ABI version. A test compiles a C program against
//! `include/audiocpp.h` that prints the same names with the C compiler's values, and compares.

use std::mem::{offset_of, size_of};

use crate::capi::{
    audiocpp_artifact_kind, audiocpp_backend_config, audiocpp_model_config, audiocpp_option_scope,
    audiocpp_status, audiocpp_stream_input_kind, audiocpp_stream_output_kind,
    audiocpp_voice_activity_kind,
};
use crate::options::Scope;
use crate::request::ARTIFACT_KINDS;
use crate::session::{INPUT_AUDIO_CHUNKS, INPUT_NONE, OUTPUT_FINAL_RESULT, OUTPUT_PULL_EVENTS};
use crate::status::Status;

/// The names of `audiocpp_status` values, by value.
const STATUS_NAMES: [&str; 8] = [
    "AUDIOCPP_OK",
    "AUDIOCPP_ERR_INVALID_ARGUMENT",
    "AUDIOCPP_ERR_UNSUPPORTED_FAMILY",
    "AUDIOCPP_ERR_LOAD_FAILED",
    "AUDIOCPP_ERR_RUNTIME",
    "AUDIOCPP_ERR_OUT_OF_MEMORY",
    "AUDIOCPP_ERR_OUT_OF_RANGE",
    "AUDIOCPP_ERR_NOT_AVAILABLE",
];

/// `audiocpp_voice_activity_kind` (this family never reports one).
const VOICE_ACTIVITY: [&str; 3] = ["SPEECH_START", "SPEECH_END", "SPEECH_SEGMENT"];

/// `(name, value)` for every size, offset, enum value and version constant of the header, as
/// the Rust side has them. Names are C expressions (`sizeof(T)`, `offsetof(T, f)`, constants).
pub fn c_layout() -> Vec<(String, i64)> {
    let mut v: Vec<(String, i64)> = Vec::new();
    let mut put = |name: &str, value: usize| v.push((name.to_owned(), value as i64));
    put(
        "sizeof(audiocpp_model_config)",
        size_of::<audiocpp_model_config>(),
    );
    put(
        "offsetof(audiocpp_model_config, family_hint)",
        offset_of!(audiocpp_model_config, family_hint),
    );
    put(
        "offsetof(audiocpp_model_config, config_id)",
        offset_of!(audiocpp_model_config, config_id),
    );
    put(
        "offsetof(audiocpp_model_config, weight_id)",
        offset_of!(audiocpp_model_config, weight_id),
    );
    put(
        "offsetof(audiocpp_model_config, model_spec_override)",
        offset_of!(audiocpp_model_config, model_spec_override),
    );
    put(
        "sizeof(audiocpp_backend_config)",
        size_of::<audiocpp_backend_config>(),
    );
    put(
        "offsetof(audiocpp_backend_config, backend)",
        offset_of!(audiocpp_backend_config, backend),
    );
    put(
        "offsetof(audiocpp_backend_config, device)",
        offset_of!(audiocpp_backend_config, device),
    );
    put(
        "offsetof(audiocpp_backend_config, threads)",
        offset_of!(audiocpp_backend_config, threads),
    );
    put("sizeof(audiocpp_status)", size_of::<audiocpp_status>());
    put(
        "sizeof(audiocpp_option_scope)",
        size_of::<audiocpp_option_scope>(),
    );
    put(
        "sizeof(audiocpp_artifact_kind)",
        size_of::<audiocpp_artifact_kind>(),
    );
    put(
        "sizeof(audiocpp_stream_input_kind)",
        size_of::<audiocpp_stream_input_kind>(),
    );
    put(
        "sizeof(audiocpp_stream_output_kind)",
        size_of::<audiocpp_stream_output_kind>(),
    );
    put(
        "sizeof(audiocpp_voice_activity_kind)",
        size_of::<audiocpp_voice_activity_kind>(),
    );
    for s in Status::ALL {
        v.push((STATUS_NAMES[s as usize].to_owned(), i64::from(s.code())));
    }
    for (name, s) in [
        ("REQUEST", Scope::Request),
        ("SESSION", Scope::Session),
        ("LOAD", Scope::Load),
    ] {
        v.push((format!("AUDIOCPP_OPTION_SCOPE_{name}"), s as i64));
    }
    for (i, k) in ARTIFACT_KINDS.iter().enumerate() {
        v.push((format!("AUDIOCPP_ARTIFACT_{k}"), i as i64));
    }
    v.push(("AUDIOCPP_STREAM_INPUT_NONE".into(), i64::from(INPUT_NONE)));
    v.push((
        "AUDIOCPP_STREAM_INPUT_AUDIO_CHUNKS".into(),
        i64::from(INPUT_AUDIO_CHUNKS),
    ));
    v.push((
        "AUDIOCPP_STREAM_OUTPUT_FINAL_RESULT".into(),
        i64::from(OUTPUT_FINAL_RESULT),
    ));
    v.push((
        "AUDIOCPP_STREAM_OUTPUT_PULL_EVENTS".into(),
        i64::from(OUTPUT_PULL_EVENTS),
    ));
    for (i, k) in VOICE_ACTIVITY.iter().enumerate() {
        v.push((format!("AUDIOCPP_VOICE_ACTIVITY_{k}"), i as i64));
    }
    let abi = i64::from(crate::capi::ABI_VERSION);
    v.push(("AUDIOCPP_ABI_VERSION_MAJOR".into(), abi >> 16));
    v.push(("AUDIOCPP_ABI_VERSION_MINOR".into(), (abi >> 8) & 0xff));
    v.push(("AUDIOCPP_ABI_VERSION_PATCH".into(), abi & 0xff));
    v
}
