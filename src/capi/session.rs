//! Sessions: creation, offline runs.

use std::ffi::c_char;

use super::{
    audiocpp_backend_config, audiocpp_model, audiocpp_options, audiocpp_request, audiocpp_result,
    audiocpp_session, audiocpp_status, static_str,
};
use crate::options;
use crate::ptr;
use crate::request::Request;
use crate::session::SessionHandle;
use crate::status::{guard, guard_value, AbiError, AbiResult, Status};
use crate::vocab::{is_task_token, Mode, Task, FAMILY};

/// Most compute threads a session takes.
const MAX_THREADS: i32 = 1024;

/// Backends of other builds of audio.cpp, which this one does not have.
const OTHER_BACKENDS: [&str; 5] = ["cuda", "hip", "rocm", "vulkan", "metal"];

/// Reads the backend config: the thread count of a CPU session.
///
/// # Safety
/// `backend` is NULL or points to a readable struct whose name is NULL or a C string.
unsafe fn threads_of(backend: *const audiocpp_backend_config) -> AbiResult<usize> {
    // SAFETY: forwarded contract.
    let Some(b) = (unsafe { ptr::opt_handle(backend) }) else {
        return Ok(1);
    };
    // SAFETY: forwarded contract for the name.
    let name = unsafe { ptr::opt_str_arg(b.backend, "backend->backend") }?.unwrap_or("cpu");
    match name {
        "cpu" | "best" => {}
        n if OTHER_BACKENDS.contains(&n) => {
            return Err(AbiError::not_available(format!(
                "backend `{n}` is not in this build (it runs on the CPU: backend \"cpu\")"
            )))
        }
        n => {
            return Err(AbiError::invalid(format!(
                "unknown backend `{n}` (cpu, best; cuda, hip, rocm, vulkan, metal in other builds)"
            )))
        }
    }
    if b.device != 0 {
        return Err(AbiError::invalid(format!(
            "backend->device is {}: the CPU backend has one device, 0",
            b.device
        )));
    }
    if b.threads <= 0 || b.threads > MAX_THREADS {
        return Err(AbiError::invalid(format!(
            "backend->threads must be within 1..={MAX_THREADS}, got {}",
            b.threads
        )));
    }
    Ok(b.threads as usize)
}

/// Creates a session.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_session_create(
    model: *const audiocpp_model,
    task: *const c_char,
    mode: *const c_char,
    backend: *const audiocpp_backend_config,
    session_options: *const audiocpp_options,
    out_session: *mut *mut audiocpp_session,
) -> audiocpp_status {
    guard(Status::Runtime, || {
        ptr::required(out_session, "out_session")?;
        // SAFETY: out_session is non-NULL and writable; the rest follow the pointer contract.
        let (m, task, mode, threads, opts) = unsafe {
            ptr::write(out_session, std::ptr::null_mut());
            (
                ptr::handle(model, "model")?,
                ptr::str_arg(task, "task")?,
                ptr::str_arg(mode, "mode")?,
                threads_of(backend)?,
                ptr::opt_handle(session_options),
            )
        };
        let t = match Task::from_token(task) {
            Some(t) => t,
            None if is_task_token(task) => {
                return Err(AbiError::not_available(format!(
                    "{FAMILY} has no `{task}` task (it has asr, tts, s2s)"
                )))
            }
            None => {
                return Err(AbiError::invalid(format!(
                    "unknown task `{task}` (see audiocpp_task_name)"
                )))
            }
        };
        let md = Mode::from_token(mode).ok_or_else(|| {
            AbiError::invalid(format!("unknown mode `{mode}` (offline, streaming)"))
        })?;
        if !t.supports(md) {
            return Err(AbiError::not_available(format!(
                "{FAMILY} {task} has no {mode} mode"
            )));
        }
        let empty = Default::default();
        let settings = options::session_options(opts.map_or(&empty, |o| &o.0), &m.0.files())?;
        let s = SessionHandle::new(m.0.clone(), t, md, threads, settings)?;
        let h = ptr::into_raw(s);
        // SAFETY: checked non-NULL above.
        unsafe { ptr::write(out_session, h) };
        Ok(())
    })
}

/// Frees a session (a stream in flight is stopped first).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_session_free(session: *mut audiocpp_session) {
    // SAFETY: a handle from audiocpp_session_create (or NULL), freed once.
    guard_value((), || unsafe { ptr::free(session) })
}

/// The session's family ("" for NULL).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_session_family(
    session: *const audiocpp_session,
) -> *const c_char {
    let empty = static_str(b"\0");
    guard_value(empty, || {
        // SAFETY: a live session handle or NULL.
        unsafe { ptr::opt_handle(session) }.map_or(empty, |s| s.model.family.as_ptr())
    })
}

/// Checks a request ahead of a run.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_session_prepare(
    session: *mut audiocpp_session,
    request: *const audiocpp_request,
) -> audiocpp_status {
    guard(Status::Runtime, || {
        // SAFETY: live handles (or NULL).
        let (s, r) = unsafe { (ptr::handle(session, "session")?, ptr::opt_handle(request)) };
        s.prepare(r)
    })
}

/// Runs a request on an offline session.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_session_run(
    session: *mut audiocpp_session,
    request: *const audiocpp_request,
    out_result: *mut *mut audiocpp_result,
) -> audiocpp_status {
    guard(Status::Runtime, || {
        ptr::required(out_result, "out_result")?;
        // SAFETY: out_result is non-NULL and writable; live handles (or NULL).
        let (s, r) = unsafe {
            ptr::write(out_result, std::ptr::null_mut());
            (ptr::handle(session, "session")?, ptr::opt_handle(request))
        };
        let empty = Request::default();
        let res = s.run(r.unwrap_or(&empty))?;
        let h = ptr::into_raw(res);
        // SAFETY: checked non-NULL above.
        unsafe { ptr::write(out_result, h) };
        Ok(())
    })
}
