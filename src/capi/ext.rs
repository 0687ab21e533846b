//! Our extensions (`include/lfm2e.h`).

use std::ffi::c_int;

use super::{audiocpp_model, audiocpp_session, audiocpp_status};
use crate::ptr;
use crate::status::{guard, guard_value, Status};

/// Asks the session's run in progress to stop (any thread).
///
/// # Safety
/// See `crate::ptr` for the pointer contract; this call may overlap a call on `session` from
/// another thread: it only raises an atomic flag.
#[no_mangle]
pub unsafe extern "C" fn lfm2e_session_cancel(session: *const audiocpp_session) -> audiocpp_status {
    guard(Status::Runtime, || {
        // SAFETY: a live session or NULL; only its atomic cancel flag is touched, so a call
        // running on it from another thread (which holds only shared references) is not
        // disturbed.
        unsafe { ptr::handle(session, "session") }?.cancel();
        Ok(())
    })
}

/// 1 if the session's last run ended because it was cancelled.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn lfm2e_session_was_cancelled(session: *const audiocpp_session) -> c_int {
    guard_value(0, || {
        // SAFETY: a live session or NULL.
        unsafe { ptr::opt_handle(session) }.map_or(0, |s| c_int::from(s.was_cancelled()))
    })
}

/// The cache figures of the session's last s2s run.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn lfm2e_session_cache_figures(
    session: *const audiocpp_session,
    out_resumed_prefill_steps: *mut usize,
    out_reused_questions: *mut usize,
) -> audiocpp_status {
    guard(Status::Runtime, || {
        // SAFETY: a live session or NULL; out-parameters NULL or writable.
        unsafe {
            let (resumed, reused) = ptr::handle(session, "session")?.figures();
            ptr::write(out_resumed_prefill_steps, resumed);
            ptr::write(out_reused_questions, reused);
        }
        Ok(())
    })
}

/// What the model's step scheduler has run: batched step graphs (ticks), the reply steps they
/// ran, and the most steps one tick ran.
///
/// # Safety
/// See `crate::ptr` for the pointer contract; may be called while the model's sessions run.
#[no_mangle]
pub unsafe extern "C" fn lfm2e_model_step_stats(
    model: *const audiocpp_model,
    out_ticks: *mut u64,
    out_steps: *mut u64,
    out_widest: *mut usize,
) -> audiocpp_status {
    guard(Status::Runtime, || {
        // SAFETY: a live model or NULL; out-parameters NULL or writable. The statistics are
        // read under the scheduler's own lock, so sessions running meanwhile are not disturbed.
        unsafe {
            let stats = ptr::handle(model, "model")?.0.step_stats();
            ptr::write(out_ticks, stats.ticks);
            ptr::write(out_steps, stats.steps);
            ptr::write(out_widest, stats.max_width);
        }
        Ok(())
    })
}
