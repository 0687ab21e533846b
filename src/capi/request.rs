//! Requests: everything is copied at the call.

use std::ffi::{c_char, c_int, c_void};

use super::{audiocpp_artifact_kind, audiocpp_request, audiocpp_status};
use crate::ptr;
use crate::request::{pcm_len, Pcm, Request};
use crate::status::{guard, guard_value, AbiResult, Status};

/// Runs `f` on the request behind `request` (INVALID_ARGUMENT for NULL).
///
/// # Safety
/// `request` is NULL or a live request handle used by this thread alone.
unsafe fn with_request(
    request: *mut audiocpp_request,
    f: impl FnOnce(&mut Request) -> AbiResult<()>,
) -> audiocpp_status {
    guard(Status::Runtime, || {
        // SAFETY: forwarded contract.
        f(unsafe { ptr::handle_mut(request, "request") }?)
    })
}

/// Copies interleaved PCM after checking its description.
///
/// # Safety
/// `samples` is NULL or holds `frames * channels` floats.
unsafe fn read_pcm(
    samples: *const f32,
    frames: usize,
    sample_rate: c_int,
    channels: c_int,
    what: &str,
) -> AbiResult<Pcm> {
    let n = pcm_len(frames, sample_rate, channels, what)?;
    // SAFETY: forwarded contract; `n` is `frames * channels` without overflow.
    let samples = unsafe { ptr::copy_slice(samples, n, what) }?;
    Ok(Pcm {
        samples,
        rate: sample_rate as u32,
        channels: channels as u32,
    })
}

/// A new, empty request.
#[no_mangle]
pub extern "C" fn audiocpp_request_create() -> *mut audiocpp_request {
    guard_value(std::ptr::null_mut(), || ptr::into_raw(Request::default()))
}

/// Frees a request (NULL: nothing).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_request_free(request: *mut audiocpp_request) {
    // SAFETY: a handle from audiocpp_request_create (or NULL), freed once.
    guard_value((), || unsafe { ptr::free(request) })
}

/// Sets the text and its language (also the `language` option when non-empty).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_request_set_text(
    request: *mut audiocpp_request,
    text: *const c_char,
    language: *const c_char,
) -> audiocpp_status {
    // SAFETY: a live request handle (or NULL); C strings (or NULL).
    unsafe {
        with_request(request, |r| {
            let t = ptr::str_arg(text, "text")?;
            let l = ptr::opt_str_arg(language, "language")?;
            r.set_text(t, l);
            Ok(())
        })
    }
}

/// Sets the text's language.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_request_set_text_language(
    request: *mut audiocpp_request,
    language: *const c_char,
) -> audiocpp_status {
    // SAFETY: a live request handle (or NULL); a C string (or NULL).
    unsafe {
        with_request(request, |r| {
            r.set_text_language(ptr::str_arg(language, "language")?);
            Ok(())
        })
    }
}

/// Sets the audio. A description the engine could never read (see `crate::request::pcm_len`:
/// more than `MAX_AUDIO_SAMPLES` samples) is INVALID_ARGUMENT before any sample is read.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_request_set_audio(
    request: *mut audiocpp_request,
    samples: *const f32,
    frames: usize,
    sample_rate: c_int,
    channels: c_int,
) -> audiocpp_status {
    // SAFETY: a live request handle (or NULL); `samples` holds frames * channels floats.
    unsafe {
        with_request(request, |r| {
            r.audio = Some(read_pcm(samples, frames, sample_rate, channels, "audio")?);
            Ok(())
        })
    }
}

/// Sets a speaker reference (refused by lfm2_audio at run).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_request_set_voice_audio(
    request: *mut audiocpp_request,
    samples: *const f32,
    frames: usize,
    sample_rate: c_int,
    channels: c_int,
) -> audiocpp_status {
    // SAFETY: a live request handle (or NULL); `samples` holds frames * channels floats.
    unsafe {
        with_request(request, |r| {
            r.voice_audio = Some(read_pcm(
                samples,
                frames,
                sample_rate,
                channels,
                "voice audio",
            )?);
            Ok(())
        })
    }
}

/// Sets the TTS voice.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_request_set_voice_id(
    request: *mut audiocpp_request,
    cached_voice_id: *const c_char,
) -> audiocpp_status {
    // SAFETY: a live request handle (or NULL); a C string (or NULL).
    unsafe {
        with_request(request, |r| {
            r.voice_id = Some(ptr::str_arg(cached_voice_id, "cached_voice_id")?.to_owned());
            Ok(())
        })
    }
}

/// Sets a style language (refused by lfm2_audio at run).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_request_set_style_language(
    request: *mut audiocpp_request,
    language: *const c_char,
) -> audiocpp_status {
    // SAFETY: a live request handle (or NULL); a C string (or NULL).
    unsafe {
        with_request(request, |r| {
            r.style_language = Some(ptr::str_arg(language, "language")?.to_owned());
            Ok(())
        })
    }
}

/// Sets an emotion (refused by lfm2_audio at run).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_request_set_emotion(
    request: *mut audiocpp_request,
    emotion: *const c_char,
) -> audiocpp_status {
    // SAFETY: a live request handle (or NULL); a C string (or NULL).
    unsafe {
        with_request(request, |r| {
            r.emotion = Some(ptr::str_arg(emotion, "emotion")?.to_owned());
            Ok(())
        })
    }
}

/// Sets a speaking rate (refused by lfm2_audio at run).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_request_set_speaking_rate(
    request: *mut audiocpp_request,
    v: f32,
) -> audiocpp_status {
    // SAFETY: a live request handle (or NULL).
    unsafe {
        with_request(request, |r| {
            r.speaking_rate = Some(v);
            Ok(())
        })
    }
}

/// Sets a pitch shift (refused by lfm2_audio at run).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_request_set_pitch_shift(
    request: *mut audiocpp_request,
    v: f32,
) -> audiocpp_status {
    // SAFETY: a live request handle (or NULL).
    unsafe {
        with_request(request, |r| {
            r.pitch_shift = Some(v);
            Ok(())
        })
    }
}

/// Sets an energy scale (refused by lfm2_audio at run).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_request_set_energy_scale(
    request: *mut audiocpp_request,
    v: f32,
) -> audiocpp_status {
    // SAFETY: a live request handle (or NULL).
    unsafe {
        with_request(request, |r| {
            r.energy_scale = Some(v);
            Ok(())
        })
    }
}

/// Sets a style tag (refused by lfm2_audio at run).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_request_set_style_tag(
    request: *mut audiocpp_request,
    key: *const c_char,
    value: *const c_char,
) -> audiocpp_status {
    // SAFETY: a live request handle (or NULL); C strings (or NULL).
    unsafe {
        with_request(request, |r| {
            let (k, v) = (ptr::str_arg(key, "key")?, ptr::str_arg(value, "value")?);
            r.style_tags.insert(k.to_owned(), v.to_owned());
            Ok(())
        })
    }
}

/// Sets a request option.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_request_set_option(
    request: *mut audiocpp_request,
    key: *const c_char,
    value: *const c_char,
) -> audiocpp_status {
    // SAFETY: a live request handle (or NULL); C strings (or NULL).
    unsafe {
        with_request(request, |r| {
            let (k, v) = (ptr::str_arg(key, "key")?, ptr::str_arg(value, "value")?);
            r.options.insert(k.to_owned(), v.to_owned());
            Ok(())
        })
    }
}

/// Sets a list option (replacing it).
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_request_set_option_array(
    request: *mut audiocpp_request,
    key: *const c_char,
    values: *const *const c_char,
    count: usize,
) -> audiocpp_status {
    // SAFETY: a live request handle (or NULL); a C string; `values` holds `count` pointers.
    unsafe {
        with_request(request, |r| {
            let k = ptr::str_arg(key, "key")?;
            let vs = ptr::str_array(values, count, "values")?;
            r.option_arrays.insert(k.to_owned(), vs);
            Ok(())
        })
    }
}

/// Appends an input artifact. A kind that is not an `audiocpp_artifact_kind`, a 4097th artifact
/// (`MAX_ARTIFACTS`) or payloads over 256 MiB together (`MAX_ARTIFACT_BYTES`) are
/// INVALID_ARGUMENT from the lengths alone: the payload is not read and the request is unchanged.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_request_add_artifact(
    request: *mut audiocpp_request,
    kind: audiocpp_artifact_kind,
    id: *const c_char,
    payload: *const c_void,
    payload_bytes: usize,
    out_index: *mut usize,
) -> audiocpp_status {
    // SAFETY: a live request handle (or NULL); a C string; `payload` holds `payload_bytes`
    // bytes; `out_index` is NULL or writable.
    unsafe {
        with_request(request, |r| {
            let id = ptr::str_arg(id, "id")?;
            // why: the limits are checked from the length alone, so a length past them is
            // refused without reading (or allocating for) the caller's buffer.
            r.admit_artifact(kind, payload_bytes)?;
            let bytes = ptr::copy_bytes(payload, payload_bytes, "payload")?;
            let i = r.add_artifact(kind, id, bytes)?;
            ptr::write(out_index, i);
            Ok(())
        })
    }
}

/// Sets a meta pair of input artifact `index`.
///
/// # Safety
/// See `crate::ptr` for the pointer contract.
#[no_mangle]
pub unsafe extern "C" fn audiocpp_request_set_artifact_meta(
    request: *mut audiocpp_request,
    index: usize,
    key: *const c_char,
    value: *const c_char,
) -> audiocpp_status {
    // SAFETY: a live request handle (or NULL); C strings (or NULL).
    unsafe {
        with_request(request, |r| {
            let (k, v) = (ptr::str_arg(key, "key")?, ptr::str_arg(value, "value")?);
            r.set_artifact_meta(index, k, v)
        })
    }
}
