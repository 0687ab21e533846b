//! Versions, status strings, the last error, option maps, the registry and the task vocabulary.

use std::ffi::c_char;

use super::{audiocpp_options, audiocpp_registry, audiocpp_status, static_str, OptionsHandle};
use crate::model::{Registry, RegistryHandle};
use crate::ptr;
use crate::status::{guard, guard_value, last_error_ptr, AbiError, Status};
use crate::vocab::{task_from_spec, TASK_TOKENS};

/// `(major << 16) | (minor << 8) | patch` of ABI 0.2.0.
pub const ABI_VERSION: u32 = 2 << 8;

/// This library's version string.
const BUILD_VERSION: &[u8] = concat!("lfm2-engine ", env!("CARGO_PKG_VERSION"), "\0").as_bytes();

/// The ABI version.
#[no_mangle]
pub extern "C" fn audiocpp_abi_version() -> u32 {
    ABI_VERSION
}

/// This library's version (static).
#[no_mangle]
pub extern "C" fn audiocpp_build_version() -> *const c_char {
    static_str(BUILD_VERSION)
}

/// This thread's last error (never NULL).
#[no_mangle]
pub extern "C" fn audiocpp_last_error() -> *const c_char {
    guard_value(static_str(b"\0"), last_error_ptr)
}

/// The static text of a status.
#[no_mangle]
pub extern "C" fn audiocpp_status_string(status: audiocpp_status) -> *const c_char {
    static_str(Status::text(status))
}

/// A new, empty option map.
#[no_mangle]
pub extern "C" fn audiocpp_options_create() -> *mut audiocpp_options {
    guard_value(std::ptr::null_mut(), || {
        ptr::into_raw(OptionsHandle(Default::default()))
    })
}

/// Sets `key` = `value`.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_options_set(
    options: *mut audiocpp_options,
    key: *const c_char,
    value: *const c_char,
) -> audiocpp_status {
    guard(Status::Runtime, || {
        // SAFETY: the caller passes a live options handle (or NULL) and C strings (or NULL).
        let (o, k, v) = unsafe {
            (
                ptr::handle_mut(options, "options")?,
                ptr::str_arg(key, "key")?,
                ptr::str_arg(value, "value")?,
            )
        };
        o.0.insert(k.to_owned(), v.to_owned());
        Ok(())
    })
}

/// Frees an option map (NULL: nothing).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_options_free(options: *mut audiocpp_options) {
    // SAFETY: the caller passes a handle from audiocpp_options_create (or NULL), freed once.
    guard_value((), || unsafe { ptr::free(options) })
}

/// Creates the registry.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_registry_create(
    config_path: *const c_char,
    out_registry: *mut *mut audiocpp_registry,
) -> audiocpp_status {
    guard(Status::Runtime, || {
        ptr::required(out_registry, "out_registry")?;
        // SAFETY: out_registry is non-NULL and writable; config_path is a C string or NULL.
        let path = unsafe {
            ptr::write(out_registry, std::ptr::null_mut());
            ptr::opt_str_arg(config_path, "config_path")?
        };
        if let Some(p) = path.filter(|p| !p.is_empty()) {
            return Err(AbiError::not_available(format!(
                "registry configuration `{p}`: this build has no loader configuration files; \
                 pass NULL for the built-in lfm2_audio family"
            )));
        }
        let r = ptr::into_raw(RegistryHandle(std::sync::Arc::new(Registry::builtin())));
        // SAFETY: checked non-NULL above.
        unsafe { ptr::write(out_registry, r) };
        Ok(())
    })
}

/// Frees a registry handle (NULL: nothing).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_registry_free(registry: *mut audiocpp_registry) {
    // SAFETY: the caller passes a handle from audiocpp_registry_create (or NULL), freed once.
    guard_value((), || unsafe { ptr::free(registry) })
}

/// The number of families.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_registry_family_count(
    registry: *const audiocpp_registry,
) -> usize {
    guard_value(0, || {
        // SAFETY: a live registry handle or NULL.
        unsafe { ptr::opt_handle(registry) }.map_or(0, |r| r.0.families.len())
    })
}

/// Family `index`.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_registry_family(
    registry: *const audiocpp_registry,
    index: usize,
    out_family: *mut *const c_char,
) -> audiocpp_status {
    guard(Status::Runtime, || {
        // SAFETY: a live registry handle or NULL.
        let r = unsafe { ptr::handle(registry, "registry") }?;
        ptr::required(out_family, "out_family")?;
        let f =
            r.0.families
                .get(index)
                .ok_or_else(|| AbiError::out_of_range("family", index, r.0.families.len()))?;
        // SAFETY: checked non-NULL; the string lives as long as the registry.
        unsafe { ptr::write(out_family, f.as_ptr()) };
        Ok(())
    })
}

/// The number of task tokens.
#[no_mangle]
pub extern "C" fn audiocpp_task_count() -> usize {
    TASK_TOKENS.len()
}

/// Task token `index` (static), NULL past the end.
#[no_mangle]
pub extern "C" fn audiocpp_task_name(index: usize) -> *const c_char {
    TASK_TOKENS
        .get(index)
        .map_or(std::ptr::null(), |t| static_str(t))
}

/// The token of a model-spec task name (static), NULL if unknown.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_task_from_spec_name(spec_task: *const c_char) -> *const c_char {
    guard_value(std::ptr::null(), || {
        // SAFETY: a C string or NULL.
        match unsafe { ptr::opt_str_arg(spec_task, "spec_task") } {
            Ok(Some(name)) => task_from_spec(name).map_or(std::ptr::null(), static_str),
            _ => std::ptr::null(),
        }
    })
}
