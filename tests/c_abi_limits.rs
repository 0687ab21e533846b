//! The engine's request-size limits (`audio_engine::lfm2_audio::limits`) reached through the C
//! ABI: a request past one is INVALID_ARGUMENT, and the message names the limit. Artifacts and
//! audio are refused when they are added, from their lengths, before the caller's buffer is
//! read; the rest when the request runs.

mod common;

use std::ffi::{c_int, CString};
use std::ptr::{null, null_mut};

use audio_engine::lfm2_audio::limits::{MAX_ARTIFACTS, MAX_ARTIFACT_BYTES, MAX_TTS_TEXT_BYTES};

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

/// Adds an artifact of `payload_bytes` bytes read from `payload`; returns the status, the
/// message and the index written (`usize::MAX` when none was).
///
/// # Safety
/// `r` is a live request; `payload` holds `payload_bytes` bytes unless the call is refused
/// from the length alone.
unsafe fn add(r: *mut Opaque, payload: *const u8, payload_bytes: usize) -> (c_int, String, usize) {
    let mut index = usize::MAX;
    // SAFETY: forwarded contract; a C string id and a writable index.
    let st = unsafe {
        audiocpp_request_add_artifact(
            r,
            ARTIFACT_CUSTOM,
            c"lfm2_audio.question".as_ptr(),
            payload.cast(),
            payload_bytes,
            &mut index,
        )
    };
    (st, last_error(), index)
}

#[test]
fn the_4097th_artifact_is_refused_when_added_and_the_request_still_runs() {
    let question = vec![0.1f32; 8_000];
    let (st, msg) = run("s2s", |r| {
        // SAFETY: a live request and 8000 frames of mono samples.
        let st = unsafe { audiocpp_request_set_audio(r, question.as_ptr(), 8_000, 16_000, 1) };
        assert_eq!(st, 0, "{}", last_error());
        for i in 0..MAX_ARTIFACTS {
            // SAFETY: a live request and an empty payload.
            let (st, msg, index) = unsafe { add(r, null(), 0) };
            assert_eq!((st, index), (0, i), "{msg}");
        }
        // SAFETY: as above.
        let (st, msg, index) = unsafe { add(r, null(), 0) };
        assert_eq!(st, INVALID_ARGUMENT, "{msg}");
        assert!(
            msg.contains("MAX_ARTIFACTS") && msg.contains("4096"),
            "{msg}"
        );
        assert_eq!(
            index,
            usize::MAX,
            "no index is written for a refused artifact"
        );
    });
    // At the limit the run is not refused by it (the empty questions fail for their own
    // reason).
    assert!(!msg.contains("MAX_ARTIFACTS"), "{st}: {msg}");
}

#[test]
fn an_artifact_length_past_the_limit_is_refused_without_reading_the_buffer() {
    // why: one byte behind a length of hundreds of MiB; a copy would read far past it (a crash
    // or an ASan report), so passing proves the length was checked first.
    let tiny = [7u8; 8];
    // SAFETY: a fresh request, freed once; every accepted call's buffer holds its length.
    unsafe {
        let r = audiocpp_request_create();
        for len in [MAX_ARTIFACT_BYTES + 1, usize::MAX] {
            let (st, msg, index) = add(r, tiny.as_ptr(), len);
            assert_eq!(st, INVALID_ARGUMENT, "{len}: {msg}");
            assert!(msg.contains("MAX_ARTIFACT_BYTES"), "{len}: {msg}");
            assert_eq!(index, usize::MAX);
        }
        // The limit is on all of a request's payloads together.
        let (st, msg, index) = add(r, tiny.as_ptr(), tiny.len());
        assert_eq!((st, index), (0, 0), "{msg}");
        let (st, msg, _) = add(r, tiny.as_ptr(), MAX_ARTIFACT_BYTES - tiny.len() + 1);
        assert_eq!(st, INVALID_ARGUMENT, "{msg}");
        assert!(
            msg.contains(&format!("{} payload bytes", MAX_ARTIFACT_BYTES + 1)),
            "{msg}"
        );
        // Nothing was added by the refused calls: the next artifact is the second.
        let (st, msg, index) = add(r, tiny.as_ptr(), tiny.len());
        assert_eq!((st, index), (0, 1), "{msg}");
        audiocpp_request_free(r);
    }
}

#[test]
fn audio_longer_than_a_wav_holds_is_refused_without_reading_the_samples() {
    let tiny = [0.25f32; 4];
    // SAFETY: a fresh request, freed once; the accepted call's buffer holds its frames.
    unsafe {
        let r = audiocpp_request_create();
        let st = audiocpp_request_set_audio(r, tiny.as_ptr(), (1 << 30) + 1, 16_000, 1);
        let msg = last_error();
        assert_eq!(st, INVALID_ARGUMENT, "{msg}");
        assert!(msg.contains("MAX_AUDIO_SAMPLES"), "{msg}");
        let st = audiocpp_request_set_audio(r, tiny.as_ptr(), 1 << 29, 16_000, 2);
        assert_eq!(st, INVALID_ARGUMENT, "{}", last_error());
        assert!(
            last_error().contains("MAX_AUDIO_SAMPLES"),
            "{}",
            last_error()
        );
        assert_eq!(
            audiocpp_request_set_audio(r, tiny.as_ptr(), 4, 16_000, 1),
            0
        );
        audiocpp_request_free(r);
    }
}
