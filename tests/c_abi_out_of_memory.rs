//! Out of memory through the C ABI: an ASR run whose decode cache cannot be mapped returns
//! AUDIOCPP_ERR_OUT_OF_MEMORY with `audiocpp_last_error` naming the cache and its size, and the
//! session runs the next request as before (the same transcript).
//!
//! As `audio-engine/tests/out_of_memory.rs` does for the Rust API, a child process (this test
//! binary again) lowers its own address-space limit (`RLIMIT_AS`) once the model is loaded and
//! a first run has warmed its allocator, to what it uses plus [`MARGIN`]: less than the 8 MiB
//! cache of a run with the context's whole budget (8192 positions of 1 KiB on the demo
//! package), more than what else a run allocates. A crash in the child fails the parent.

mod common;

use std::ffi::{c_int, CStr, CString};
use std::process::Command;
use std::ptr::{null, null_mut};

use common::capi::*;

/// Set in the child's environment.
const CHILD_ENV: &str = "LFM2_C_OOM_CHILD";

/// Address space the child may take beyond what it holds after its first run.
const MARGIN: u64 = 4 << 20;

fn address_space_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("reading /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .expect("a VmSize line in kB")
        * 1024
}

/// Sets the soft address-space limit to `soft` (at most the hard limit); returns the old one.
fn set_address_space_limit(soft: libc::rlim_t) -> libc::rlim_t {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into the valid, writable `lim`.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) }, 0);
    let old = lim.rlim_cur;
    lim.rlim_cur = soft.min(lim.rlim_max);
    // SAFETY: setrlimit reads one valid `rlimit`; the soft limit stays within the hard one.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) }, 0);
    old
}

/// One ASR run of half a second of audio with `max_tokens`: the status and the transcript, or
/// the message when it failed.
///
/// # Safety
/// `session` is a live offline ASR session.
unsafe fn asr(session: *mut Opaque, max_tokens: usize) -> (c_int, String) {
    let samples: Vec<f32> = (0..8_000).map(|i| (i as f32 * 0.05).sin() * 0.3).collect();
    let value = CString::new(max_tokens.to_string()).unwrap();
    // SAFETY: a fresh request, freed once; live handles, C strings and 8000 mono frames.
    unsafe {
        let r = audiocpp_request_create();
        assert_eq!(
            audiocpp_request_set_audio(r, samples.as_ptr(), 8_000, 16_000, 1),
            0
        );
        assert_eq!(
            audiocpp_request_set_option(r, c"max_tokens".as_ptr(), value.as_ptr()),
            0,
            "{}",
            last_error()
        );
        let mut res = null_mut();
        let st = audiocpp_session_run(session, r, &mut res);
        let mut msg = last_error();
        if st == 0 {
            let (mut text, mut language) = (null(), null());
            assert_eq!(audiocpp_result_text(res, &mut text, &mut language), 0);
            msg = CStr::from_ptr(text).to_string_lossy().into_owned();
            audiocpp_result_free(res);
        }
        audiocpp_request_free(r);
        (st, msg)
    }
}

/// The child: prints `@@ ` lines for the parent, exits 0 only when every expectation held.
#[test]
fn c_out_of_memory_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let dir = CString::new(common::demo_package().to_str().unwrap()).unwrap();
    // SAFETY: valid C strings and out pointers; every handle is freed once.
    unsafe {
        let (mut reg, mut model, mut session) = (null_mut(), null_mut(), null_mut());
        assert_eq!(audiocpp_registry_create(null(), &mut reg), 0);
        assert_eq!(
            audiocpp_model_load(reg, dir.as_ptr(), null(), null(), &mut model),
            0,
            "{}",
            last_error()
        );
        let (task, mode) = (c"asr".as_ptr(), c"offline".as_ptr());
        assert_eq!(
            audiocpp_session_create(model, task, mode, null(), null(), &mut session),
            0,
            "{}",
            last_error()
        );
        // A first run sizes what every run allocates besides the cache.
        let (st, reference) = asr(session, 4);
        assert_eq!(st, 0, "{reference}");

        let used = address_space_bytes();
        let original = set_address_space_limit(used + MARGIN);
        println!("@@ limited to {} MiB", (used + MARGIN) >> 20);
        let (st, msg) = asr(session, 8_000);
        println!("@@ refused: {st} {msg}");
        assert_eq!(st, OUT_OF_MEMORY, "{msg}");
        assert!(
            msg.contains("decode cache") && msg.contains("bytes") && msg.contains("positions"),
            "{msg}"
        );
        // The session answers as before the failure: under the limit, and once it is lifted.
        let (st, text) = asr(session, 4);
        assert_eq!(st, 0, "a small run under the limit: {text}");
        assert_eq!(text, reference);
        println!("@@ under the limit: ok");
        set_address_space_limit(original);
        let (st, text) = asr(session, 4);
        assert_eq!(st, 0, "a run after the limit is lifted: {text}");
        assert_eq!(text, reference);
        println!("@@ lifted: ok");

        audiocpp_session_free(session);
        audiocpp_model_free(model);
        audiocpp_registry_free(reg);
    }
}

#[test]
fn a_run_whose_decode_cache_cannot_be_mapped_is_out_of_memory_and_the_session_stays_usable() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "c_out_of_memory_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .expect("running the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = format!(
        "child {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{report}");
    let refused = stdout
        .lines()
        .find_map(|l| l.split_once("@@ refused: ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no refusal reported: {report}"));
    assert!(
        refused.starts_with(&format!("{OUT_OF_MEMORY} ")) && refused.contains("out of memory"),
        "{report}"
    );
    assert!(stdout.contains("@@ lifted: ok"), "{report}");
}
