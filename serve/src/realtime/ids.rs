//! Ids of the server's events, items and responses: a process-wide counter, so ids never repeat
//! across sockets (a client that logs several sockets can tell their items apart).

use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(1);

/// A fresh id with `prefix` (`event`, `item`, `resp`, `sess`).
pub fn fresh(prefix: &str) -> String {
    format!("{prefix}_{:06}", NEXT.fetch_add(1, Ordering::Relaxed))
}
