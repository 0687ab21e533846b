//! Which build of ggml's CPU code is in use (hand-written: these functions are ggml-sys's own,
//! build/dispatch.c, not ggml's).
//!
//! The default build compiles the CPU code once per instruction-set level (`x64`, `haswell`,
//! `icelake`, `zen4`, `sapphirerapids` on x86-64) and the first call into ggml's CPU code
//! picks the highest level the running CPU supports. A one-level build (`GGML_SYS_CPU=native`,
//! `portable`, ...) has one level of that name.
//!
//! A level can be forced before that first call, so that a machine can run (and test) a lower
//! level than its best. Nothing here reads the environment: a program or test that wants a
//! variable for it reads it itself and calls [`force`].

use std::ffi::{c_char, c_int, CStr, CString};
use std::fmt;

unsafe extern "C" {
    fn ggml_sys_cpu_level_count() -> c_int;
    fn ggml_sys_cpu_level_name(i: c_int) -> *const c_char;
    fn ggml_sys_cpu_level_runs(i: c_int) -> c_int;
    fn ggml_sys_cpu_level() -> *const c_char;
    fn ggml_sys_cpu_level_force(name: *const c_char) -> c_int;
}

/// One compiled level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Level {
    /// Its name, e.g. `haswell`.
    pub name: &'static str,
    /// Whether this CPU has every feature the level's code uses.
    pub runs: bool,
}

/// A static C string from dispatch.c as `&'static str`.
fn name(p: *const c_char) -> &'static str {
    assert!(!p.is_null(), "ggml-sys: no level name");
    // SAFETY: dispatch.c returns pointers to string literals (static, NUL-terminated, ASCII).
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .expect("level names are ASCII")
}

/// The compiled levels, lowest first.
pub fn levels() -> Vec<Level> {
    // SAFETY: the queries take plain integers and read constant tables (and, once, cpuid).
    let n = unsafe { ggml_sys_cpu_level_count() };
    (0..n)
        .map(|i| Level {
            // SAFETY: as above; i is in range.
            name: name(unsafe { ggml_sys_cpu_level_name(i) }),
            // SAFETY: as above.
            runs: unsafe { ggml_sys_cpu_level_runs(i) } != 0,
        })
        .collect()
}

/// The level in use; the first call (or the first use of ggml's CPU code) fixes it to the
/// highest one this CPU runs, unless [`force`] chose one before.
pub fn in_use() -> &'static str {
    // SAFETY: no arguments; the choice is one atomic compare-and-swap in dispatch.c.
    name(unsafe { ggml_sys_cpu_level() })
}

/// Why [`force`] refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForceError {
    /// No compiled level has this name.
    Unknown(String),
    /// This CPU lacks a feature the level's code uses.
    Unsupported(String),
    /// Another level is already in use (ggml's CPU code ran before).
    AlreadyChosen {
        /// The level asked for.
        wanted: String,
        /// The level in use.
        in_use: &'static str,
    },
}

impl fmt::Display for ForceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ForceError::Unknown(l) => write!(
                f,
                "no CPU level {l:?} in this build (levels: {:?})",
                levels().iter().map(|l| l.name).collect::<Vec<_>>()
            ),
            ForceError::Unsupported(l) => write!(f, "this CPU cannot run CPU level {l:?}"),
            ForceError::AlreadyChosen { wanted, in_use } => write!(
                f,
                "CPU level {wanted:?} asked for after level {in_use:?} was already in use"
            ),
        }
    }
}

impl std::error::Error for ForceError {}

/// Uses level `level` for the rest of the process. Call it before anything uses ggml's CPU
/// code; forcing the level already in use succeeds.
pub fn force(level: &str) -> Result<(), ForceError> {
    let c = CString::new(level).map_err(|_| ForceError::Unknown(level.to_owned()))?;
    // SAFETY: c is a valid NUL-terminated string for the duration of the call, which only
    // compares it with the level names.
    match unsafe { ggml_sys_cpu_level_force(c.as_ptr()) } {
        0 => Ok(()),
        -2 => Err(ForceError::Unsupported(level.to_owned())),
        -3 => Err(ForceError::AlreadyChosen {
            wanted: level.to_owned(),
            in_use: in_use(),
        }),
        _ => Err(ForceError::Unknown(level.to_owned())),
    }
}
