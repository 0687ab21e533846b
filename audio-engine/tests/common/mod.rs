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
