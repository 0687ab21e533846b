//! Out of memory: a decode cache whose mapping cannot be made is a typed error naming what
//! could not be had and how much, never a panic or an abort, and the model keeps working.
//!
//! The test provokes it for real: a child process (this test binary again) loads the tiny
//! package with a context of 2^20 positions, where a request's cache is about 1 GiB, then
//! lowers its own address-space limit (`RLIMIT_AS`) to what it uses plus 256 MiB and asks for
//! a transcription whose budget fills the context. Every other allocation of the request fits
//! in the margin (the policy in `lfm2_audio::limits`, "Out of memory"), so the cache's mapping
//! is what fails. A crash in the child would be a failure of the parent test, with the child's
//! reports and standard error.

mod common;

use std::time::Duration;

use audio_engine::lfm2_audio::internals::backbone::BLOCK_POSITIONS;
use audio_engine::lfm2_audio::internals::package::Quant;
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{AsrOptions, ModelOptions};

use common::child::{self, report};
use common::lfm2_tiny::input_signal;
use common::package::engine_with;

/// Positions of the child's context: with the tiny backbone's 1 KiB of K/V per position, a
/// cache that fills it is 1 GiB of address space.
const CONTEXT: usize = 1 << 20;

/// Address space the child may take beyond what it holds once the model is loaded: far less
/// than the full cache, far more than everything else a transcription allocates.
const MARGIN: u64 = 256 << 20;

/// The child's address space in use, from `/proc/self/status` (`VmSize`, in kB).
fn address_space_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("reading /proc/self/status");
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .expect("a VmSize line in kB");
    kb * 1024
}

/// Sets the soft address-space limit (the hard one is left alone, so it can be raised again).
fn set_address_space_limit(soft: libc::rlim_t) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into the valid, writable `lim`.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) }, 0);
    lim.rlim_cur = soft.min(lim.rlim_max);
    // SAFETY: setrlimit reads one valid `rlimit`; lowering or restoring the soft limit up to
    // the hard one needs no privilege.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) }, 0);
}

/// The child: reports each step, exits 0 only when every expectation held.
#[test]
fn out_of_memory_child() {
    if child::child_role().is_none() {
        return;
    }
    let m = engine_with(
        Quant::F32,
        ModelOptions {
            context: CONTEXT,
            ..ModelOptions::default()
        },
    );
    let samples = input_signal();
    let small = AsrOptions {
        max_new_tokens: 8,
        ..AsrOptions::default()
    };
    let reference = m
        .asr(&samples, &small)
        .expect("a transcription without a limit");
    report(&format!("reference {:?}", reference.tokens));

    let mut original = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into the valid, writable `original`.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut original) },
        0
    );
    let used = address_space_bytes();
    set_address_space_limit(used + MARGIN);
    report(&format!("limited to {} MiB", (used + MARGIN) >> 20));

    let full = AsrOptions {
        max_new_tokens: CONTEXT - reference.prompt_positions,
        ..AsrOptions::default()
    };
    let e = m
        .asr(&samples, &full)
        .expect_err("a 1 GiB decode cache under a 256 MiB margin");
    let msg = e.chain();
    report(&format!("refused: {msg}"));
    assert!(e.is_out_of_memory(), "not an out-of-memory error: {e:?}");
    let positions = CONTEXT.div_ceil(BLOCK_POSITIONS) * BLOCK_POSITIONS;
    assert!(
        msg.contains("decode cache") && msg.contains(&format!("{positions} positions")),
        "the message does not name the cache and its positions: {msg}"
    );
    // The byte count is the cache's size: at least 1 KiB per position.
    let bytes: usize = msg
        .split("cannot map ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no byte count in: {msg}"));
    assert!(bytes >= positions * 1024, "{bytes} bytes for {positions}");

    // Still under the limit, a request that fits is answered as before the failure.
    let again = m
        .asr(&samples, &small)
        .expect("a small request under the limit");
    assert_eq!(again.tokens, reference.tokens);
    report("under the limit: same tokens");

    // And once the memory is available again.
    set_address_space_limit(original.rlim_cur);
    let after = m
        .asr(&samples, &small)
        .expect("a request after the limit is lifted");
    assert_eq!(after.tokens, reference.tokens);
    report("lifted: same tokens");
}

#[test]
fn a_decode_cache_that_cannot_be_mapped_is_a_typed_error_and_the_model_stays_usable() {
    let out = child::run("out_of_memory_child", "asr", &[], Duration::from_secs(300));
    let context = || {
        format!(
            "child {}; reports {:#?}; stderr:\n{}",
            out.how(),
            out.lines,
            out.stderr
        )
    };
    assert!(out.success(), "{}", context());
    assert!(
        out.lines.iter().any(|l| l.starts_with("refused: ")
            && l.contains("out of memory")
            && l.contains("os error 12")),
        "{}",
        context()
    );
    assert_eq!(
        out.lines.last().map(String::as_str),
        Some("lifted: same tokens"),
        "{}",
        context()
    );
}
