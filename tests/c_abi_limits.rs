//! The engine's request-size limits (`audio_engine::lfm2_audio::limits`) reached through the C
//! ABI: a request past one is INVALID_ARGUMENT, and the message names the limit.

mod common;

use std::ffi::{c_int, CString};
use std::ptr::{null, null_mut};

use audio_engine::lfm2_audio::limits::{MAX_ARTIFACTS, MAX_TTS_TEXT_BYTES};

use common::capi::*;

/// Runs a `task` session on the demo package with a request `build` fills; returns the run's
/// status and message.
fn run(task: &str, build: impl FnOnce(*mut Opaque)) -> (c_int, String) {
    let dir = CString::new(common::demo_package().to_str().unwrap()).unwrap();
    let task = CString::new(task).unwrap();
    // SAFETY: valid C strings and out pointers; every handle is freed once.
    unsafe {
        let (mut reg, mut model, mut session, mut res) =
            (null_mut(), null_mut(), null_mut(), null_mut());
        assert_eq!(audiocpp_registry_create(null(), &mut reg), 0);
        assert_eq!(
            audiocpp_model_load(reg, dir.as_ptr(), null(), null(), &mut model),
            0,
            "{}",
            last_error()
        );
        let mode = c"offline".as_ptr();
        assert_eq!(
            audiocpp_session_create(model, task.as_ptr(), mode, null(), null(), &mut session),
            0,
            "{}",
            last_error()
        );
        let r = audiocpp_request_create();
        build(r);
        let st = audiocpp_session_run(session, r, &mut res);
        let msg = last_error();
        if st == 0 {
            audiocpp_result_free(res);
        }
        audiocpp_request_free(r);
        audiocpp_session_free(session);
        audiocpp_model_free(model);
        audiocpp_registry_free(reg);
        (st, msg)
    }
}

#[test]
fn a_tts_text_past_the_limit_is_an_invalid_argument_naming_it() {
    let text = CString::new("a".repeat(MAX_TTS_TEXT_BYTES + 1)).unwrap();
    let (st, msg) = run("tts", |r| {
        // SAFETY: a live request and a C string.
        assert_eq!(
            unsafe { audiocpp_request_set_text(r, text.as_ptr(), null()) },
            0
        );
    });
    assert_eq!(st, INVALID_ARGUMENT, "{msg}");
    assert!(msg.contains("MAX_TTS_TEXT_BYTES"), "{msg}");
}

#[test]
fn artifacts_past_the_limit_are_an_invalid_argument_naming_it() {
    let id = CString::new("lfm2_audio.question").unwrap();
    let question = vec![0.1f32; 8_000];
    let (st, msg) = run("s2s", |r| {
        // SAFETY: a live request and 8000 frames of mono samples.
        let st = unsafe { audiocpp_request_set_audio(r, question.as_ptr(), 8_000, 16_000, 1) };
        assert_eq!(st, 0, "{}", last_error());
        for _ in 0..=MAX_ARTIFACTS {
            let mut index = 0usize;
            // SAFETY: a live request, a C string, an empty payload and a writable index.
            let st = unsafe {
                audiocpp_request_add_artifact(
                    r,
                    ARTIFACT_CUSTOM,
                    id.as_ptr(),
                    null(),
                    0,
                    &mut index,
                )
            };
            assert_eq!(st, 0, "{}", last_error());
        }
    });
    assert_eq!(st, INVALID_ARGUMENT, "{msg}");
    assert!(msg.contains("MAX_ARTIFACTS"), "{msg}");
}
