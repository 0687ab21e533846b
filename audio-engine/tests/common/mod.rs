//! Helpers shared by integration tests: include with `mod common;` and use e.g.
//! `common::lfm2_tiny::checkpoint_dir()`.
//!
//! Each test binary compiles this module on its own and uses only part of it.
#![allow(dead_code)]

pub mod child;
pub mod lfm2_tiny;
pub mod package;
pub mod scratch;
pub mod upstream;
pub mod wav;

/// `e` and every source below it, joined with `: ` (what a binary prints with `{:#}`).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(&format!(": {s}"));
        source = s.source();
    }
    msg
}

/// For a test that needs a device which is not there: reports `why` through [`ci_skip::skip`]
/// (a marker line; a failure in CI) and returns, or panics with it when `LFM2E_REQUIRE_DEVICE`
/// is set (not empty, not `0`).
/// `scripts/vulkan-check.sh` sets it: it has just installed lavapipe for these tests, so a
/// missing device there is a failure, not a skip.
pub fn skip_without_device(why: &str) {
    let required = matches!(std::env::var("LFM2E_REQUIRE_DEVICE").as_deref(), Ok(v) if !v.is_empty() && v != "0");
    assert!(!required, "{why} (LFM2E_REQUIRE_DEVICE is set)");
    ci_skip::skip("device test", why);
}
