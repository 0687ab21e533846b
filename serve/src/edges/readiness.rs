//! Readiness (`GET /health/ready`) and draining.
//!
//! Liveness (`/health`) says the process answers; readiness says a load balancer should send it
//! new work: not while it drains after SIGTERM, nor while a model has every session leased and
//! its queue full (a new request would be answered 503 at once).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::AppState;

/// The server's draining flag: set once on SIGTERM/SIGINT, never cleared.
#[derive(Default)]
pub struct Drain(AtomicBool);

impl Drain {
    /// Starts draining: readiness answers 503, new sockets and requests are refused.
    pub fn start(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether the server drains.
    pub fn is_draining(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Why the server is not ready, or `None` when it is.
pub fn not_ready(state: &AppState) -> Option<String> {
    if state.drain.is_draining() {
        return Some("the server is draining (shutting down)".into());
    }
    let mut seen = HashSet::new();
    for e in &state.entries {
        let pool = &e.pool;
        if !seen.insert(std::sync::Arc::as_ptr(pool)) {
            continue;
        }
        if pool.active() >= pool.size() && pool.queued() >= state.settings.max_queue {
            return Some(format!(
                "model `{}`: all {} sessions are leased and {} requests wait (--max-queue)",
                e.cfg.id,
                pool.size(),
                pool.queued()
            ));
        }
    }
    None
}
