//! Read-only result accessors (also used on the view of an event).

use std::ffi::{c_char, c_int, c_void};

use super::{audiocpp_artifact_kind, audiocpp_result, audiocpp_status};
use crate::ptr;
use crate::result::ResultData;
use crate::status::{guard, guard_value, AbiError, AbiResult, Status};

/// Runs `f` on the result behind `result` (INVALID_ARGUMENT for NULL).
///
/// # Safety
/// `result` is NULL or a live result (or event view).
unsafe fn with_result(
    result: *const audiocpp_result,
    f: impl FnOnce(&ResultData) -> AbiResult<()>,
) -> audiocpp_status {
    guard(Status::Runtime, || {
        // SAFETY: forwarded contract.
        f(unsafe { ptr::handle(result, "result") }?)
    })
}

/// A count of the result behind `result` (0 for NULL).
///
/// # Safety
/// As [`with_result`].
unsafe fn count(result: *const audiocpp_result, f: impl FnOnce(&ResultData) -> usize) -> usize {
    // SAFETY: forwarded contract.
    guard_value(0, || unsafe { ptr::opt_handle(result) }.map_or(0, f))
}

/// Frees a result; the view of an event is left alone.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_result_free(result: *mut audiocpp_result) {
    guard_value((), || {
        // SAFETY: a live result (or event view) or NULL.
        let Some(r) = (unsafe { ptr::opt_handle(result.cast_const()) }) else {
            return;
        };
        if !r.view {
            // SAFETY: an owned result comes from `ptr::into_raw` and is freed once.
            unsafe { ptr::free(result) };
        }
    })
}

/// The result's audio.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_result_audio(
    result: *const audiocpp_result,
    out_samples: *mut *const f32,
    out_frames: *mut usize,
    out_sample_rate: *mut c_int,
    out_channels: *mut c_int,
) -> audiocpp_status {
    // SAFETY: a live result or NULL; out-parameters NULL or writable.
    unsafe {
        with_result(result, |r| {
            let a = r
                .audio
                .as_ref()
                .ok_or_else(|| AbiError::not_available("the result has no audio"))?;
            ptr::write(out_samples, a.samples.as_ptr());
            ptr::write(out_frames, a.samples.len() / a.channels.max(1) as usize);
            ptr::write(out_sample_rate, a.rate);
            ptr::write(out_channels, a.channels);
            Ok(())
        })
    }
}

/// The result's text and language.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_result_text(
    result: *const audiocpp_result,
    out_text: *mut *const c_char,
    out_language: *mut *const c_char,
) -> audiocpp_status {
    // SAFETY: a live result or NULL; out-parameters NULL or writable.
    unsafe {
        with_result(result, |r| {
            let (t, l) = r
                .text
                .as_ref()
                .ok_or_else(|| AbiError::not_available("the result has no text"))?;
            ptr::write(out_text, t.as_ptr());
            ptr::write(out_language, l.as_ptr());
            Ok(())
        })
    }
}

fn none(what: &str, index: usize) -> AbiResult<()> {
    Err(AbiError::out_of_range(what, index, 0))
}

/// 0: lfm2_audio results have no timed segments.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_result_segment_count(result: *const audiocpp_result) -> usize {
    // SAFETY: a live result or NULL.
    unsafe { count(result, |_| 0) }
}

/// Segment `index` (there are none).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_result_segment(
    result: *const audiocpp_result,
    index: usize,
    _out_start_sample: *mut i64,
    _out_end_sample: *mut i64,
    _out_confidence: *mut f32,
    _out_text: *mut *const c_char,
) -> audiocpp_status {
    // SAFETY: a live result or NULL.
    unsafe { with_result(result, |_| none("segment", index)) }
}

/// 0: lfm2_audio results have no speaker turns.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_result_speaker_turn_count(
    result: *const audiocpp_result,
) -> usize {
    // SAFETY: a live result or NULL.
    unsafe { count(result, |_| 0) }
}

/// Speaker turn `index` (there are none).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_result_speaker_turn(
    result: *const audiocpp_result,
    index: usize,
    _out_start_sample: *mut i64,
    _out_end_sample: *mut i64,
    _out_speaker_id: *mut *const c_char,
    _out_confidence: *mut f32,
    _out_text: *mut *const c_char,
) -> audiocpp_status {
    // SAFETY: a live result or NULL.
    unsafe { with_result(result, |_| none("speaker turn", index)) }
}

/// 0: lfm2_audio results have no word timings.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_result_word_count(result: *const audiocpp_result) -> usize {
    // SAFETY: a live result or NULL.
    unsafe { count(result, |_| 0) }
}

/// Word `index` (there are none).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_result_word(
    result: *const audiocpp_result,
    index: usize,
    _out_word: *mut *const c_char,
    _out_start_sample: *mut i64,
    _out_end_sample: *mut i64,
    _out_confidence: *mut f32,
) -> audiocpp_status {
    // SAFETY: a live result or NULL.
    unsafe { with_result(result, |_| none("word", index)) }
}

/// 0: lfm2_audio results have no named audio.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_result_named_audio_count(
    result: *const audiocpp_result,
) -> usize {
    // SAFETY: a live result or NULL.
    unsafe { count(result, |_| 0) }
}

/// Named audio `index` (there is none).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_result_named_audio(
    result: *const audiocpp_result,
    index: usize,
    _out_id: *mut *const c_char,
    _out_samples: *mut *const f32,
    _out_frames: *mut usize,
    _out_sample_rate: *mut c_int,
    _out_channels: *mut c_int,
) -> audiocpp_status {
    // SAFETY: a live result or NULL.
    unsafe { with_result(result, |_| none("named audio", index)) }
}

/// The number of output artifacts.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_result_artifact_count(result: *const audiocpp_result) -> usize {
    // SAFETY: a live result or NULL.
    unsafe { count(result, |r| r.artifacts.len()) }
}

/// Output artifact `index` (payload borrowed).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_result_artifact(
    result: *const audiocpp_result,
    index: usize,
    out_kind: *mut audiocpp_artifact_kind,
    out_id: *mut *const c_char,
    out_payload: *mut *const c_void,
    out_payload_bytes: *mut usize,
) -> audiocpp_status {
    // SAFETY: a live result or NULL; out-parameters NULL or writable.
    unsafe {
        with_result(result, |r| {
            let a = r
                .artifacts
                .get(index)
                .ok_or_else(|| AbiError::out_of_range("artifact", index, r.artifacts.len()))?;
            ptr::write(out_kind, a.kind);
            ptr::write(out_id, a.id.as_ptr());
            ptr::write(out_payload, a.payload.as_ptr().cast());
            ptr::write(out_payload_bytes, a.payload.len());
            Ok(())
        })
    }
}

/// The number of meta pairs of output artifact `index` (0 for a bad index).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_result_artifact_meta_count(
    result: *const audiocpp_result,
    index: usize,
) -> usize {
    // SAFETY: a live result or NULL.
    unsafe {
        count(result, |r| {
            r.artifacts.get(index).map_or(0, |a| a.meta.len())
        })
    }
}

/// Meta pair `meta_index` of output artifact `index`.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_result_artifact_meta(
    result: *const audiocpp_result,
    index: usize,
    meta_index: usize,
    out_key: *mut *const c_char,
    out_value: *mut *const c_char,
) -> audiocpp_status {
    // SAFETY: a live result or NULL; out-parameters NULL or writable.
    unsafe {
        with_result(result, |r| {
            let a = r
                .artifacts
                .get(index)
                .ok_or_else(|| AbiError::out_of_range("artifact", index, r.artifacts.len()))?;
            let (k, v) = a
                .meta
                .get(meta_index)
                .ok_or_else(|| AbiError::out_of_range("meta", meta_index, a.meta.len()))?;
            ptr::write(out_key, k.as_ptr());
            ptr::write(out_value, v.as_ptr());
            Ok(())
        })
    }
}
