//! Sessions: creation, offline runs.

use std::ffi::c_char;

use audio_engine::ggml::Device;

use super::{
    audiocpp_backend_config, audiocpp_model, audiocpp_options, audiocpp_request, audiocpp_result,
    audiocpp_session, audiocpp_status, static_str,
};
use crate::options;
use crate::ptr;
use crate::request::Request;
use crate::session::SessionHandle;
use crate::status::{guard, guard_value, AbiError, AbiResult, Status};
use crate::vocab::{is_task_token, Mode, FAMILY};

/// Most compute threads a session takes.
const MAX_THREADS: i32 = 1024;

/// Backends audio.cpp has that no build of this library has.
const NEVER_BACKENDS: [&str; 2] = ["hip", "rocm"];

/// The device a session's backend config names: `cpu` and `best` the CPU (device 0), `vulkan`,
/// `cuda` and `metal` their device `backend->device` where this build has their feature.
fn device_of(name: &str, index: i32) -> AbiResult<Device> {
    let device = match name {
        "cpu" | "best" => {
            if index != 0 {
                return Err(AbiError::invalid(format!(
                    "backend->device is {index}: the CPU backend has one device, 0"
                )));
            }
            return Ok(Device::Cpu);
        }
        "vulkan" | "cuda" | "metal" => {
            let n = usize::try_from(index).map_err(|_| {
                AbiError::invalid(format!(
                    "backend->device is {index}: a device index is >= 0"
                ))
            })?;
            match name {
                "vulkan" => Device::Vulkan(n),
                "cuda" => Device::Cuda(n),
                _ if n == 0 => Device::Metal,
                _ => {
                    return Err(AbiError::invalid(format!(
                        "backend->device is {n}: Metal has one device, 0"
                    )))
                }
            }
        }
        n if NEVER_BACKENDS.contains(&n) => {
            return Err(AbiError::not_available(format!(
                "backend `{n}` is not in this library (cpu; vulkan, cuda, metal by feature)"
            )));
        }
        n => {
            return Err(AbiError::invalid(format!(
                "unknown backend `{n}` (cpu, best, vulkan, cuda, metal; hip, rocm in audio.cpp)"
            )))
        }
    };
    if !device.is_compiled_in() {
        return Err(AbiError::not_available(format!(
            "backend `{name}` is not in this build (feature `{}`; it runs on the CPU: backend \
             \"cpu\")",
            device.feature().unwrap_or_default()
        )));
    }
    Ok(device)
}

/// Reads the backend config: the device and thread count of a session.
///
/// # Safety
/// `backend` is NULL or points to a readable struct whose name is NULL or a C string.
unsafe fn backend_of(backend: *const audiocpp_backend_config) -> AbiResult<(Device, usize)> {
    // SAFETY: forwarded contract.
    let Some(b) = (unsafe { ptr::opt_handle(backend) }) else {
        return Ok((Device::Cpu, 1));
    };
    // SAFETY: forwarded contract for the name.
    let name = unsafe { ptr::opt_str_arg(b.backend, "backend->backend") }?.unwrap_or("cpu");
    let device = device_of(name, b.device)?;
    if b.threads <= 0 || b.threads > MAX_THREADS {
        return Err(AbiError::invalid(format!(
            "backend->threads must be within 1..={MAX_THREADS}, got {}",
            b.threads
        )));
    }
    Ok((device, b.threads as usize))
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
        let (m, task, mode, (device, threads), opts) = unsafe {
            ptr::write(out_session, std::ptr::null_mut());
            (
                ptr::handle(model, "model")?,
                ptr::str_arg(task, "task")?,
                ptr::str_arg(mode, "mode")?,
                backend_of(backend)?,
                ptr::opt_handle(session_options),
            )
        };
        let t = match crate::vocab::task_from_token(task) {
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
        if !crate::vocab::supports(t, md) {
            return Err(AbiError::not_available(format!(
                "{FAMILY} {task} has no {mode} mode"
            )));
        }
        let empty = Default::default();
        let settings = options::session_options(opts.map_or(&empty, |o| &o.0), &m.0.files())?;
        let s = SessionHandle::new(m.0.clone(), t, md, (device, threads), settings)?;
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
