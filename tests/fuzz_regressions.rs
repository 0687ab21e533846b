//! Inputs the fuzz targets (`fuzz/`) found to crash the C ABI, replayed through the exported
//! functions as a C caller makes the calls: each must now give its typed status and a message.

mod common;

use std::ffi::{c_int, CString};
use std::ptr::{null, null_mut};

use common::capi::*;

/// Runs `task` on the demo package with `frames` frames of audio at `rate` and `channels`;
/// returns the run's status and message.
fn run_with_audio(task: &str, frames: usize, rate: c_int, channels: c_int) -> (c_int, String) {
    let dir = CString::new(common::demo_package().to_str().unwrap()).unwrap();
    let task = CString::new(task).unwrap();
    let samples = vec![0.1f32; frames * channels as usize];
    // SAFETY: valid C strings, out pointers and a buffer of frames * channels floats; every
    // handle is freed once.
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
            0
        );
        let r = audiocpp_request_create();
        assert_eq!(
            audiocpp_request_set_audio(r, samples.as_ptr(), frames, rate, channels),
            0
        );
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

/// fuzz/ target capi, input `00e6 0700 e607 f8d4 6d61 ff0f 707b f9d4 be7b`: asr on 7 frames
/// at 1 842 673 671 Hz. Encoding that as the engine's WAV overflowed hound's bytes-per-second
/// field (a panic with overflow checks, a wrapped header without).
#[test]
fn a_sample_rate_past_the_wav_header_is_an_invalid_argument() {
    for task in ["asr", "s2s"] {
        let (st, msg) = run_with_audio(task, 7, 1_842_673_671, 1);
        assert_eq!(st, INVALID_ARGUMENT, "{task}: {msg}");
        assert!(msg.contains("sample rate 1842673671 Hz"), "{task}: {msg}");
        assert!(msg.contains("1000..=192000"), "{task}: {msg}");
    }
    let (st, msg) = run_with_audio("asr", 7, 192_001, 1);
    assert_eq!(st, INVALID_ARGUMENT, "{msg}");
}

/// The fuzz target found 16384 channels overflowing the 16-bit bytes-per-frame field of the WAV
/// the ABI wrote for the engine. The ABI now hands the engine the samples as they are (no WAV), so
/// such a request is read like any other: no panic, a typed status either way. Channel counts
/// past 16 bits are refused by name.
#[test]
fn many_channels_are_read_without_a_wav_and_past_16_bits_refused() {
    let (st, msg) = run_with_audio("asr", 1, 16_000, 16_384);
    assert!(st == 0 || st == INVALID_ARGUMENT, "{st}: {msg}");
    let (st, msg) = run_with_audio("asr", 1, 16_000, 65_536);
    assert_eq!(st, INVALID_ARGUMENT, "{msg}");
    assert!(msg.contains("65536 channels; 1..=65535"), "{msg}");
}
