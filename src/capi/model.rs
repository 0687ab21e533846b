//! Model loading and introspection.

use std::ffi::{c_char, c_int};
use std::sync::Arc;

use super::{
    audiocpp_model, audiocpp_model_config, audiocpp_option_scope, audiocpp_options,
    audiocpp_registry, audiocpp_status, static_str,
};
use crate::model::{ModelConfig, ModelHandle, ModelInner};
use crate::options::Scope;
use crate::ptr;
use crate::status::{guard, guard_value, AbiError, AbiResult, Status};

/// Reads the optional config struct.
///
/// # Safety
/// `config` is NULL or points to a readable struct whose strings are NULL or C strings.
unsafe fn read_config(config: *const audiocpp_model_config) -> AbiResult<ModelConfig> {
    // SAFETY: forwarded contract.
    let Some(c) = (unsafe { ptr::opt_handle(config) }) else {
        return Ok(ModelConfig::default());
    };
    let s = |p: *const c_char, what: &str| -> AbiResult<Option<String>> {
        // SAFETY: forwarded contract for each field.
        Ok(unsafe { ptr::opt_str_arg(p, what) }?.map(str::to_owned))
    };
    Ok(ModelConfig {
        family_hint: s(c.family_hint, "config->family_hint")?,
        config_id: s(c.config_id, "config->config_id")?,
        weight_id: s(c.weight_id, "config->weight_id")?,
        model_spec_override: s(c.model_spec_override, "config->model_spec_override")?,
    })
}

/// Loads the package directory `model_path`.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_model_load(
    registry: *mut audiocpp_registry,
    model_path: *const c_char,
    config: *const audiocpp_model_config,
    load_options: *const audiocpp_options,
    out_model: *mut *mut audiocpp_model,
) -> audiocpp_status {
    guard(Status::LoadFailed, || {
        ptr::required(out_model, "out_model")?;
        // SAFETY: out_model is non-NULL and writable; the rest follow the pointer contract.
        let (r, path, cfg, opts) = unsafe {
            ptr::write(out_model, std::ptr::null_mut());
            (
                ptr::handle(registry, "registry")?,
                ptr::str_arg(model_path, "model_path")?,
                read_config(config)?,
                ptr::opt_handle(load_options),
            )
        };
        let empty = Default::default();
        let opts = opts.map_or(&empty, |o| &o.0);
        let m = ModelInner::load(r.0.clone(), path, &cfg, opts)?;
        let h = ptr::into_raw(ModelHandle(Arc::new(m)));
        // SAFETY: checked non-NULL above.
        unsafe { ptr::write(out_model, h) };
        Ok(())
    })
}

/// Frees a model handle (sessions keep the model alive).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_model_free(model: *mut audiocpp_model) {
    // SAFETY: a handle from audiocpp_model_load (or NULL), freed once.
    guard_value((), || unsafe { ptr::free(model) })
}

/// Runs `f` on the model, or gives `fallback` for NULL.
///
/// # Safety
/// `model` is NULL or a live model handle.
unsafe fn with_model<T>(
    model: *const audiocpp_model,
    fallback: T,
    f: impl FnOnce(&ModelInner) -> T,
) -> T {
    // SAFETY: forwarded contract.
    match unsafe { ptr::opt_handle(model) } {
        Some(m) => f(&m.0),
        None => fallback,
    }
}

/// The family name ("" for NULL).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_model_family(model: *const audiocpp_model) -> *const c_char {
    let empty = static_str(b"\0");
    // SAFETY: a live model handle or NULL.
    guard_value(empty, || unsafe {
        with_model(model, empty, |m| m.family.as_ptr())
    })
}

/// The description ("" for NULL).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_model_description(model: *const audiocpp_model) -> *const c_char {
    let empty = static_str(b"\0");
    // SAFETY: a live model handle or NULL.
    guard_value(empty, || unsafe {
        with_model(model, empty, |m| m.description.as_ptr())
    })
}

/// 1 if the model runs `task` in `mode`.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_model_supports(
    model: *const audiocpp_model,
    task: *const c_char,
    mode: *const c_char,
) -> c_int {
    guard_value(0, || {
        // SAFETY: a live model handle or NULL; C strings or NULL.
        let (t, md) = unsafe {
            (
                ptr::opt_str_arg(task, "task"),
                ptr::opt_str_arg(mode, "mode"),
            )
        };
        let (Ok(Some(t)), Ok(Some(md))) = (t, md) else {
            return 0;
        };
        // SAFETY: a live model handle or NULL.
        unsafe { with_model(model, 0, |m| c_int::from(m.supports(t, md))) }
    })
}

/// 0: lfm2_audio gives no timestamps.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_model_supports_timestamps(
    _model: *const audiocpp_model,
) -> c_int {
    0
}

/// 0: lfm2_audio takes no speaker reference.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_model_supports_speaker_reference(
    _model: *const audiocpp_model,
) -> c_int {
    0
}

/// 0: lfm2_audio takes no style condition.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_model_supports_style_condition(
    _model: *const audiocpp_model,
) -> c_int {
    0
}

/// The number of languages (0 for NULL).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_model_language_count(model: *const audiocpp_model) -> usize {
    // SAFETY: a live model handle or NULL.
    guard_value(0, || unsafe { with_model(model, 0, |m| m.languages.len()) })
}

/// Language `index`.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_model_language(
    model: *const audiocpp_model,
    index: usize,
    out_language: *mut *const c_char,
) -> audiocpp_status {
    guard(Status::Runtime, || {
        // SAFETY: a live model handle or NULL.
        let m = unsafe { ptr::handle(model, "model") }?;
        ptr::required(out_language, "out_language")?;
        let l =
            m.0.languages
                .get(index)
                .ok_or_else(|| AbiError::out_of_range("language", index, m.0.languages.len()))?;
        // SAFETY: checked non-NULL; the string lives as long as the model.
        unsafe { ptr::write(out_language, l.as_ptr()) };
        Ok(())
    })
}

/// The number of options in `scope` (0 for NULL or a bad scope).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_model_option_count(
    model: *const audiocpp_model,
    scope: audiocpp_option_scope,
) -> usize {
    guard_value(0, || {
        let Some(scope) = Scope::from_c(scope) else {
            return 0;
        };
        // SAFETY: a live model handle or NULL.
        unsafe { with_model(model, 0, |m| m.rows(scope).len()) }
    })
}

/// Option `index` of `scope`.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn audiocpp_model_option(
    model: *const audiocpp_model,
    scope: audiocpp_option_scope,
    index: usize,
    out_name: *mut *const c_char,
    out_value_name: *mut *const c_char,
    out_description: *mut *const c_char,
    out_default_value: *mut *const c_char,
    out_min_value: *mut *const c_char,
    out_max_value: *mut *const c_char,
    out_required: *mut c_int,
) -> audiocpp_status {
    guard(Status::Runtime, || {
        // SAFETY: a live model handle or NULL.
        let m = unsafe { ptr::handle(model, "model") }?;
        let s = Scope::from_c(scope).ok_or_else(|| {
            AbiError::invalid(format!(
                "option scope {scope} is not an audiocpp_option_scope (0..=2)"
            ))
        })?;
        let rows = m.0.rows(s);
        let r = rows
            .get(index)
            .ok_or_else(|| AbiError::out_of_range("option", index, rows.len()))?;
        // SAFETY: each out-parameter is NULL or writable; the strings live as long as the
        // model.
        unsafe {
            ptr::write(out_name, r.name.as_ptr());
            ptr::write(out_value_name, r.value_name.as_ptr());
            ptr::write(out_description, r.description.as_ptr());
            ptr::write(out_default_value, r.default.as_ptr());
            ptr::write(out_min_value, r.min.as_ptr());
            ptr::write(out_max_value, r.max.as_ptr());
            ptr::write(out_required, c_int::from(r.required));
        }
        Ok(())
    })
}
