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
