//! Streaming: policy, start, push, pull, finish, reset; events.

use std::ffi::c_int;

use super::{
    audiocpp_event, audiocpp_request, audiocpp_result, audiocpp_session, audiocpp_status,
    audiocpp_stream_input_kind, audiocpp_stream_output_kind, audiocpp_voice_activity_kind,
};
use crate::ptr;
use crate::request::{pcm_len, Pcm, Request};
use crate::session::SessionHandle;
use crate::status::{guard, guard_value, AbiError, AbiResult, Status};

/// Runs `f` on the session behind `session` (INVALID_ARGUMENT for NULL).
///
/// # Safety
/// `session` is NULL or a live session handle.
unsafe fn with_session(
    session: *const audiocpp_session,
    f: impl FnOnce(&SessionHandle) -> AbiResult<()>,
) -> audiocpp_status {
    guard(Status::Runtime, || {
        // SAFETY: forwarded contract.
        f(unsafe { ptr::handle(session, "session") }?)
    })
}

/// How to drive the session's stream.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_stream_policy(
    session: *const audiocpp_session,
    out_input: *mut audiocpp_stream_input_kind,
    out_output: *mut audiocpp_stream_output_kind,
    out_preferred_chunk_samples: *mut i64,
    out_preferred_chunk_seconds: *mut f64,
) -> audiocpp_status {
    // SAFETY: a live session or NULL; out-parameters NULL or writable.
    unsafe {
        with_session(session, |s| {
            let p = s.policy()?;
            ptr::write(out_input, p.input);
            ptr::write(out_output, p.output);
            ptr::write(out_preferred_chunk_samples, p.chunk_samples);
            ptr::write(out_preferred_chunk_seconds, p.chunk_seconds);
            Ok(())
        })
    }
}

/// Starts a stream.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_stream_start(
    session: *mut audiocpp_session,
    request: *const audiocpp_request,
) -> audiocpp_status {
    // SAFETY: live handles or NULL.
    unsafe {
        with_session(session, |s| {
            let empty = Request::default();
            s.stream_start(ptr::opt_handle(request).unwrap_or(&empty))
        })
    }
}

/// Pushes a chunk of the question.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_stream_push(
    session: *mut audiocpp_session,
    samples: *const f32,
    frames: usize,
    sample_rate: c_int,
    channels: c_int,
    start_sample: i64,
    out_event: *mut *mut audiocpp_event,
) -> audiocpp_status {
    // SAFETY: a live session or NULL; `samples` holds frames * channels floats; `out_event`
    // NULL or writable.
    unsafe {
        ptr::write(out_event, std::ptr::null_mut());
        with_session(session, |s| {
            let n = pcm_len(frames, sample_rate, channels, "chunk")?;
            let samples = ptr::copy_slice(samples, n, "samples")?;
            s.stream_push(
                Pcm {
                    samples,
                    rate: sample_rate as u32,
                    channels: channels as u32,
                },
                start_sample,
            )
        })
    }
}

/// The next event, NULL once the reply is over.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_stream_next_event(
    session: *mut audiocpp_session,
    out_event: *mut *mut audiocpp_event,
) -> audiocpp_status {
    guard(Status::Runtime, || {
        ptr::required(out_event, "out_event")?;
        // SAFETY: out_event is non-NULL and writable; a live session or NULL.
        let s = unsafe {
            ptr::write(out_event, std::ptr::null_mut());
            ptr::handle(session, "session")?
        };
        if let Some(ev) = s.stream_next()? {
            // SAFETY: checked non-NULL above.
            unsafe { ptr::write(out_event, ptr::into_raw(ev)) };
        }
        Ok(())
    })
}

/// Ends the stream and returns its result.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_stream_finish(
    session: *mut audiocpp_session,
    out_result: *mut *mut audiocpp_result,
) -> audiocpp_status {
    guard(Status::Runtime, || {
        ptr::required(out_result, "out_result")?;
        // SAFETY: out_result is non-NULL and writable; a live session or NULL.
        let s = unsafe {
            ptr::write(out_result, std::ptr::null_mut());
            ptr::handle(session, "session")?
        };
        let r = s.stream_finish()?;
        // SAFETY: checked non-NULL above.
        unsafe { ptr::write(out_result, ptr::into_raw(r)) };
        Ok(())
    })
}

/// Drops any stream in flight.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_stream_reset(session: *mut audiocpp_session) -> audiocpp_status {
    // SAFETY: a live session or NULL.
    unsafe { with_session(session, SessionHandle::stream_reset) }
}

/// Frees an event (NULL: nothing).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_event_free(event: *mut audiocpp_event) {
    // SAFETY: an event from audiocpp_stream_next_event (or NULL), freed once.
    guard_value((), || unsafe { ptr::free(event) })
}

/// 1 for a final event.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_event_is_final(event: *const audiocpp_event) -> c_int {
    guard_value(0, || {
        // SAFETY: a live event or NULL.
        unsafe { ptr::opt_handle(event) }.map_or(0, |e| c_int::from(e.is_final))
    })
}

/// The event's borrowed result view, NULL for NULL.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_event_as_result(
    event: *const audiocpp_event,
) -> *const audiocpp_result {
    guard_value(std::ptr::null(), || {
        // SAFETY: a live event or NULL; the view lives as long as the event.
        unsafe { ptr::opt_handle(event) }.map_or(std::ptr::null(), |e| &e.result as *const _)
    })
}

/// 0: lfm2_audio events carry no voice activity.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_event_voice_activity_count(
    _event: *const audiocpp_event,
) -> usize {
    0
}

/// Voice activity `index` (there is none).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_event_voice_activity(
    event: *const audiocpp_event,
    index: usize,
    _out_kind: *mut audiocpp_voice_activity_kind,
    _out_sample: *mut i64,
    _out_probability: *mut f32,
) -> audiocpp_status {
    guard(Status::Runtime, || {
        // SAFETY: a live event or NULL.
        unsafe { ptr::handle(event, "event") }?;
        Err(AbiError::out_of_range("voice activity", index, 0))
    })
}
