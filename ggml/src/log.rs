//! Routing of ggml's log output.
//!
//! By default ggml prints everything (including per-graph debug chatter) to stderr. The first
//! [`Context`](super::Context) or [`Backend`](super::Backend) this crate creates installs a quiet
//! default instead: warnings and errors go to stderr ([`set_log_level`] changes the level; the
//! binaries set it from `LLAMA_LOG=debug|info|warn|error|none`), everything else is dropped.
//! Call [`set_log_callback`] to receive every message yourself, or [`add_log_hook`] to watch
//! messages without changing what is printed.
//! libllama's messages come through the same path (its log setter also sets ggml's).

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Once, RwLock};

use ggml_sys as sys;

/// Severity of a ggml log message (`enum ggml_log_level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// Debug chatter.
    Debug,
    /// Informational messages.
    Info,
    /// Warnings.
    Warn,
    /// Errors.
    Error,
}

impl LogLevel {
    fn from_raw(level: u32) -> Option<LogLevel> {
        match level {
            sys::GGML_LOG_LEVEL_DEBUG => Some(LogLevel::Debug),
            sys::GGML_LOG_LEVEL_INFO => Some(LogLevel::Info),
            sys::GGML_LOG_LEVEL_WARN => Some(LogLevel::Warn),
            sys::GGML_LOG_LEVEL_ERROR => Some(LogLevel::Error),
            _ => None,
        }
    }
}

/// A receiver of ggml log messages. It may be called from ggml's worker threads.
pub type LogCallback = dyn Fn(LogLevel, &str) + Send + Sync + 'static;

static USER_CALLBACK: RwLock<Option<Arc<LogCallback>>> = RwLock::new(None);
/// A watcher registered with [`add_log_hook`].
type LogHook = Box<dyn Fn(&str) + Send + Sync>;
static HOOKS: RwLock<Vec<LogHook>> = RwLock::new(Vec::new());
static INSTALL: Once = Once::new();
/// Level of the last message, for `GGML_LOG_LEVEL_CONT` continuations.
static LAST_LEVEL: AtomicU32 = AtomicU32::new(sys::GGML_LOG_LEVEL_INFO);

/// Installs this crate's log trampoline into ggml (once per process).
pub(crate) fn ensure_installed() {
    INSTALL.call_once(|| {
        // SAFETY: `trampoline` has the exact signature of `ggml_log_callback`, never unwinds
        // (it catches panics), and ignores `user_data`, so passing null is fine. ggml stores the
        // pointer in a global, which is valid for the whole program as a `fn` item.
        unsafe { sys::ggml_log_set(Some(trampoline), std::ptr::null_mut()) };
    });
}

/// Sends every ggml log message to `callback` instead of the quiet default.
///
/// Passing `None` restores the default (warnings and errors to stderr).
pub fn set_log_callback(callback: Option<Box<LogCallback>>) {
    ensure_installed();
    let mut slot = USER_CALLBACK.write().unwrap_or_else(|e| e.into_inner());
    *slot = callback.map(Arc::from);
}

/// Registers a function that sees every message at every level (e.g. to read a line libllama
/// logs at start-up). Hooks live for the rest of the process.
pub fn add_log_hook(hook: impl Fn(&str) + Send + Sync + 'static) {
    ensure_installed();
    HOOKS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .push(Box::new(hook));
}

/// The default sink's level as [`set_log_level`] encodes it: 0-3 a level, 4 nothing.
static THRESHOLD: AtomicU8 = AtomicU8::new(2);

/// Sets the lowest level the quiet default sink prints to stderr (`None`: nothing). Default
/// [`LogLevel::Warn`]. A callback from [`set_log_callback`] sees every message either way.
pub fn set_log_level(level: Option<LogLevel>) {
    let code = match level {
        Some(LogLevel::Debug) => 0,
        Some(LogLevel::Info) => 1,
        Some(LogLevel::Warn) => 2,
        Some(LogLevel::Error) => 3,
        None => 4,
    };
    THRESHOLD.store(code, Ordering::Relaxed);
}

/// Minimum level printed by the default sink.
fn default_threshold() -> Option<LogLevel> {
    match THRESHOLD.load(Ordering::Relaxed) {
        0 => Some(LogLevel::Debug),
        1 => Some(LogLevel::Info),
        2 => Some(LogLevel::Warn),
        3 => Some(LogLevel::Error),
        _ => None,
    }
}

/// The log callback this layer installs into ggml, for the other C libraries built on the same
/// ggml (libllama's `llama_log_set`, in lfm2-llm) to route their log through the same sinks. It
/// never unwinds and ignores its user data.
///
/// # Safety
///
/// `text` is null or a NUL-terminated string valid for the duration of the call (what ggml and
/// libllama pass).
pub unsafe extern "C" fn trampoline(level: u32, text: *const c_char, _user_data: *mut c_void) {
    if text.is_null() {
        return;
    }
    // SAFETY: ggml passes a NUL-terminated string that is valid for the duration of the call.
    let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
    let level = if level == sys::GGML_LOG_LEVEL_CONT {
        LAST_LEVEL.load(Ordering::Relaxed)
    } else {
        LAST_LEVEL.store(level, Ordering::Relaxed);
        level
    };
    let Some(level) = LogLevel::from_raw(level) else {
        return;
    };
    // A panicking user callback must not unwind into C.
    let _ = std::panic::catch_unwind(|| dispatch(level, &text));
}

fn dispatch(level: LogLevel, text: &str) {
    for hook in HOOKS.read().unwrap_or_else(|e| e.into_inner()).iter() {
        hook(text);
    }
    let callback = USER_CALLBACK
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    match callback {
        Some(cb) => cb(level, text),
        None if default_threshold().is_some_and(|t| level >= t) => eprint!("{text}"),
        None => {}
    }
}
