//! The C ABI (`include/audiocpp.h`) driven by a byte script: a fresh session of the task the
//! first byte picks, then up to 16 request calls (text, language, audio, voice, options, option
//! arrays, artifacts, artifact meta, style setters, prepare) with arbitrary values and NULLs,
//! then a run on the demo package with `max_tokens` forced to 2 so every input stays fast, and
//! every result accessor. Any script must give statuses, never a crash; a panic inside a guard
//! is reported by libfuzzer-sys's panic hook (it aborts), and an "internal error" status too.
//!
//! The functions are called through their C symbols (declared below), as a C caller would.
#![no_main]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr::{null, null_mut};
use std::sync::OnceLock;

use lfm2_engine_fuzz::{demo, tone, wav_bytes, write_seeds_if_asked, Bytes, Script};
use libfuzzer_sys::fuzz_target;

// why: links the library whose `#[no_mangle]` symbols the block below names.
use lfm2_engine as _;

#[repr(C)]
struct Opaque {
    _p: [u8; 0],
}

#[repr(C)]
struct ModelConfig {
    family_hint: *const c_char,
    config_id: *const c_char,
    weight_id: *const c_char,
    model_spec_override: *const c_char,
}

#[repr(C)]
struct BackendConfig {
    backend: *const c_char,
    device: c_int,
    threads: c_int,
}

type Status = c_int;

extern "C" {
    fn audiocpp_last_error() -> *const c_char;
    fn audiocpp_registry_create(config_path: *const c_char, out: *mut *mut Opaque) -> Status;
    fn audiocpp_registry_free(registry: *mut Opaque);
    fn audiocpp_model_load(
        registry: *mut Opaque,
        model_path: *const c_char,
        config: *const ModelConfig,
        load_options: *const Opaque,
        out: *mut *mut Opaque,
    ) -> Status;
    fn audiocpp_session_create(
        model: *const Opaque,
        task: *const c_char,
        mode: *const c_char,
        backend: *const BackendConfig,
        session_options: *const Opaque,
        out: *mut *mut Opaque,
    ) -> Status;
    fn audiocpp_session_free(session: *mut Opaque);
    fn audiocpp_session_prepare(session: *mut Opaque, request: *const Opaque) -> Status;
    fn audiocpp_session_run(
        session: *mut Opaque,
        request: *const Opaque,
        out: *mut *mut Opaque,
    ) -> Status;
    fn audiocpp_request_create() -> *mut Opaque;
    fn audiocpp_request_free(request: *mut Opaque);
    fn audiocpp_request_set_text(
        r: *mut Opaque,
        text: *const c_char,
        lang: *const c_char,
    ) -> Status;
    fn audiocpp_request_set_text_language(r: *mut Opaque, lang: *const c_char) -> Status;
    fn audiocpp_request_set_audio(
        r: *mut Opaque,
        samples: *const f32,
        frames: usize,
        rate: c_int,
        channels: c_int,
    ) -> Status;
    fn audiocpp_request_set_voice_audio(
        r: *mut Opaque,
        samples: *const f32,
        frames: usize,
        rate: c_int,
        channels: c_int,
    ) -> Status;
    fn audiocpp_request_set_voice_id(r: *mut Opaque, id: *const c_char) -> Status;
    fn audiocpp_request_set_emotion(r: *mut Opaque, e: *const c_char) -> Status;
    fn audiocpp_request_set_speaking_rate(r: *mut Opaque, v: f32) -> Status;
    fn audiocpp_request_set_style_tag(r: *mut Opaque, k: *const c_char, v: *const c_char)
        -> Status;
    fn audiocpp_request_set_option(r: *mut Opaque, k: *const c_char, v: *const c_char) -> Status;
    fn audiocpp_request_set_option_array(
        r: *mut Opaque,
        k: *const c_char,
        values: *const *const c_char,
        count: usize,
    ) -> Status;
    fn audiocpp_request_add_artifact(
        r: *mut Opaque,
        kind: c_int,
        id: *const c_char,
        payload: *const c_void,
        bytes: usize,
        out_index: *mut usize,
    ) -> Status;
    fn audiocpp_request_set_artifact_meta(
        r: *mut Opaque,
        index: usize,
        k: *const c_char,
        v: *const c_char,
    ) -> Status;
    fn audiocpp_result_free(result: *mut Opaque);
    fn audiocpp_result_audio(
        r: *const Opaque,
        samples: *mut *const f32,
        frames: *mut usize,
        rate: *mut c_int,
        channels: *mut c_int,
    ) -> Status;
    fn audiocpp_result_text(
        r: *const Opaque,
        text: *mut *const c_char,
        lang: *mut *const c_char,
    ) -> Status;
    fn audiocpp_result_artifact_count(r: *const Opaque) -> usize;
    fn audiocpp_result_artifact(
        r: *const Opaque,
        index: usize,
        kind: *mut c_int,
        id: *mut *const c_char,
        payload: *mut *const c_void,
        bytes: *mut usize,
    ) -> Status;
    fn audiocpp_result_artifact_meta_count(r: *const Opaque, index: usize) -> usize;
    fn audiocpp_result_artifact_meta(
        r: *const Opaque,
        index: usize,
        meta_index: usize,
        k: *mut *const c_char,
        v: *mut *const c_char,
    ) -> Status;
}

const TASKS: [&CStr; 3] = [c"asr", c"tts", c"s2s"];
const OPTIONS: [&str; 12] = [
    "language",
    "max_tokens",
    "temperature",
    "top_k",
    "seed",
    "audio_chunk_mode",
    "audio_chunk_seconds",
    "text_chunk_mode",
    "text_chunk_size",
    "stream_frames_per_event",
    "return_codes",
    "voice",
];
const VALUES: [&str; 12] = [
    "", "0", "1", "2", "-1", "true", "false", "0.5", "nan", "1e400", "auto", "none",
];
const IDS: [&str; 3] = [
    "lfm2_audio.question",
    "lfm2_audio.reply",
    "lfm2_audio.other",
];
const META_KEYS: [&str; 7] = [
    "format",
    "language",
    "codebooks",
    "audio_vocab_size",
    "text_vocab_size",
    "steps",
    "ended",
];
const LANGS: [&str; 3] = ["en", "ja", ""];
const RATES: [c_int; 6] = [16_000, 24_000, 44_100, 8_000, 1_000, 0];

struct Model(*mut Opaque);
// SAFETY: a loaded model is immutable and shared across threads by design (audiocpp.h).
unsafe impl Send for Model {}
unsafe impl Sync for Model {}

fn model() -> *const Opaque {
    static M: OnceLock<Model> = OnceLock::new();
    M.get_or_init(|| {
        let dir = demo().backbone.parent().unwrap().to_owned();
        let dir = CString::new(dir.to_str().unwrap()).unwrap();
        let mut reg = null_mut();
        let mut model = null_mut();
        // SAFETY: valid C strings and out pointers.
        unsafe {
            assert_eq!(audiocpp_registry_create(null(), &mut reg), 0);
            let st = audiocpp_model_load(reg, dir.as_ptr(), null(), null(), &mut model);
            assert_eq!(st, 0, "{:?}", CStr::from_ptr(audiocpp_last_error()));
            // why: a model outlives its registry (audiocpp.h); freeing it here also keeps
            // LeakSanitizer's check at exit clean (the model stays in the static).
            audiocpp_registry_free(reg);
        }
        Model(model)
    })
    .0
}

/// A C string the script chose: NULL, one of `choices`, or fresh text cut at its first NUL (as
/// C would see it).
struct CStrs(Vec<CString>);

impl CStrs {
    fn get(&mut self, b: &mut Bytes, choices: &[&str]) -> *const c_char {
        if b.u8() == 0xff {
            return null();
        }
        let s = b.pick_or_str(choices);
        let s = s.split('\0').next().unwrap_or("").to_owned();
        self.0.push(CString::new(s).unwrap());
        self.0.last().unwrap().as_ptr()
    }
}

/// Samples: a tone, with a non-finite value where the script asks.
fn samples(b: &mut Bytes, n: usize) -> Vec<f32> {
    let mut s = tone(n);
    match b.u8() % 8 {
        0 if n > 0 => s[n / 2] = f32::NAN,
        1 if n > 0 => s[0] = f32::INFINITY,
        2 => s.iter_mut().for_each(|x| *x *= 100.0),
        _ => {}
    }
    s
}

/// Checks that a status is not the guard's panic fallback.
fn check(status: Status) {
    if status != 0 {
        // SAFETY: the library's last-error string of this thread, never NULL.
        let e = unsafe { CStr::from_ptr(audiocpp_last_error()) };
        let e = e.to_string_lossy();
        assert!(!e.starts_with("internal error"), "status {status}: {e}");
    }
}

/// # Safety
/// `r` is a live request handle.
unsafe fn step(r: *mut Opaque, session: *mut Opaque, b: &mut Bytes, keep: &mut CStrs) {
    let op = b.u8() % 12;
    // SAFETY (all calls): pointers are NULL or point at live data of the stated lengths.
    let st = unsafe {
        match op {
            0 => {
                let t = keep.get(b, &["Hello there.", ""]);
                let l = keep.get(b, &LANGS);
                audiocpp_request_set_text(r, t, l)
            }
            1 => audiocpp_request_set_text_language(r, keep.get(b, &LANGS)),
            2 | 3 => {
                let frames = usize::from(b.u16() % 4000);
                let rate = match b.u8() {
                    x if usize::from(x) < RATES.len() * 32 => RATES[usize::from(x) % RATES.len()],
                    _ => b.u32() as c_int,
                };
                let channels = c_int::from(b.u8() % 4);
                let s = samples(b, frames * channels.max(0) as usize);
                let p = if frames == 0 && b.u8() & 1 == 0 {
                    null()
                } else {
                    s.as_ptr()
                };
                if op == 2 {
                    audiocpp_request_set_audio(r, p, frames, rate, channels)
                } else {
                    audiocpp_request_set_voice_audio(r, p, frames, rate, channels)
                }
            }
            4 => audiocpp_request_set_voice_id(
                r,
                keep.get(b, &["us_male", "us_female", "uk_male", "uk_female"]),
            ),
            5 | 6 => {
                let k = keep.get(b, &OPTIONS);
                let v = keep.get(b, &VALUES);
                audiocpp_request_set_option(r, k, v)
            }
            7 => {
                let k = keep.get(b, &OPTIONS);
                let n = usize::from(b.u8() % 4);
                let vals: Vec<*const c_char> = (0..n).map(|_| keep.get(b, &VALUES)).collect();
                let p = if n == 0 && b.u8() & 1 == 0 {
                    null()
                } else {
                    vals.as_ptr()
                };
                audiocpp_request_set_option_array(r, k, p, n)
            }
            8 => {
                let kind = c_int::from(b.u8()) - 8;
                let id = keep.get(b, &IDS);
                let payload = b.long_bytes();
                let p = if payload.is_empty() && b.u8() & 1 == 0 {
                    null()
                } else {
                    payload.as_ptr().cast()
                };
                let mut index = 0usize;
                audiocpp_request_add_artifact(r, kind, id, p, payload.len(), &mut index)
            }
            9 => {
                let index = usize::from(b.u8() % 10);
                let k = keep.get(b, &META_KEYS);
                let v = keep.get(b, &VALUES);
                audiocpp_request_set_artifact_meta(r, index, k, v)
            }
            10 => match b.u8() % 3 {
                0 => audiocpp_request_set_emotion(r, keep.get(b, &["happy"])),
                1 => audiocpp_request_set_speaking_rate(r, f32::from_bits(b.u32())),
                _ => {
                    let k = keep.get(b, &["tag"]);
                    let v = keep.get(b, &["v"]);
                    audiocpp_request_set_style_tag(r, k, v)
                }
            },
            _ => audiocpp_session_prepare(session, r),
        }
    };
    check(st);
}

/// # Safety
/// `res` is a live result handle.
unsafe fn read_result(res: *const Opaque) {
    // SAFETY: out pointers are valid; returned pointers are read within their stated lengths.
    unsafe {
        let (mut s, mut n, mut rate, mut ch) = (null(), 0usize, 0, 0);
        if audiocpp_result_audio(res, &mut s, &mut n, &mut rate, &mut ch) == 0 && n > 0 {
            let all = std::slice::from_raw_parts(s, n * ch as usize);
            assert!(all.iter().all(|x| x.is_finite()), "non-finite output audio");
        }
        let (mut t, mut l) = (null(), null());
        if audiocpp_result_text(res, &mut t, &mut l) == 0 {
            let _ = CStr::from_ptr(t).to_bytes().len();
        }
        for i in 0..audiocpp_result_artifact_count(res) {
            let (mut kind, mut id, mut p, mut bytes) = (0, null(), null(), 0usize);
            check(audiocpp_result_artifact(
                res, i, &mut kind, &mut id, &mut p, &mut bytes,
            ));
            // why: reading every byte lets the sanitizer check the whole borrowed payload;
            // black_box keeps the read (wrapping: the sum itself means nothing).
            std::hint::black_box(
                std::slice::from_raw_parts(p.cast::<u8>(), bytes)
                    .iter()
                    .fold(0u8, |a, &b| a.wrapping_add(b)),
            );
            for m in 0..audiocpp_result_artifact_meta_count(res, i) {
                let (mut k, mut v) = (null(), null());
                check(audiocpp_result_artifact_meta(res, i, m, &mut k, &mut v));
                let _ = (CStr::from_ptr(k), CStr::from_ptr(v));
            }
        }
    }
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    // A question WAV as an artifact payload: 0.1 s at 16 kHz.
    let wav = wav_bytes(&tone(1600), 16_000, 1, 16, false);
    let audio = |s: &mut Script| {
        s.u8(2).u16(1600).u8(0).u8(1).u8(4);
    };
    let mut asr = Script::default();
    asr.u8(0);
    audio(&mut asr);
    let mut tts = Script::default();
    tts.u8(1)
        .u8(0)
        .u8(0)
        .pick(0)
        .u8(0)
        .pick(0)
        .u8(4)
        .u8(0)
        .pick(2);
    let mut s2s = Script::default();
    s2s.u8(2);
    audio(&mut s2s);
    s2s.u8(5).u8(0).pick(10).u8(0).pick(5);
    s2s.u8(8).u8(8 + 8).u8(0).pick(0).long_bytes(&wav);
    s2s.u8(11);
    let mut bad = Script::default();
    bad.u8(2)
        .u8(5)
        .u8(0)
        .fresh(OPTIONS.len(), "temprature")
        .u8(0)
        .pick(7);
    bad.u8(9).u8(3).u8(0).pick(0).u8(0).fresh(VALUES.len(), "x");
    vec![
        ("asr".into(), asr.bytes()),
        ("tts".into(), tts.bytes()),
        ("s2s_question_artifact".into(), s2s.bytes()),
        ("s2s_bad_option".into(), bad.bytes()),
    ]
}

fuzz_target!(
    init: {
        write_seeds_if_asked(seeds);
        model();
    },
    |data: &[u8]| {
        let mut b = Bytes::new(data);
        let task = TASKS[usize::from(b.u8()) % TASKS.len()];
        let backend = BackendConfig { backend: null(), device: 0, threads: 1 };
        let mut session = null_mut();
        // SAFETY: a live model, valid strings and out pointer.
        let st = unsafe {
            audiocpp_session_create(model(), task.as_ptr(), c"offline".as_ptr(), &backend, null(), &mut session)
        };
        assert_eq!(st, 0, "session_create");
        // SAFETY: handles are live until freed at the end; strings outlive the calls.
        unsafe {
            let r = audiocpp_request_create();
            let mut keep = CStrs(Vec::new());
            for _ in 0..16 {
                if b.is_empty() {
                    break;
                }
                step(r, session, &mut b, &mut keep);
            }
            // why: a tiny step budget keeps every run short; the script's own max_tokens was
            // still parsed and checked above (a later value replaces it).
            check(audiocpp_request_set_option(r, c"max_tokens".as_ptr(), c"2".as_ptr()));
            let mut res = null_mut();
            let st = audiocpp_session_run(session, r, &mut res);
            check(st);
            if st == 0 {
                read_result(res);
                audiocpp_result_free(res);
            }
            audiocpp_request_free(r);
            audiocpp_session_free(session);
        }
    }
);
