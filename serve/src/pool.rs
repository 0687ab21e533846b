//! A pool of sessions per loaded model: a request leases one (waiting in a bounded queue, up to
//! a timeout, when all are busy), runs on it off the async runtime, and gives it back.
//!
//! Affinity: a lease names its conversation key; a free session that served the same key last
//! is preferred, so its prefill blocks and encoder outputs of that conversation are reused.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use audio_engine::lfm2_audio::{Lfm2Audio, Session, SessionOptions};

use crate::error::ApiError;

struct Slot {
    session: Option<Session>,
    last_key: Option<u64>,
    last_used: u64,
}

/// The sessions of one loaded model.
pub struct Pool {
    model: Lfm2Audio,
    options: SessionOptions,
    sem: Arc<Semaphore>,
    slots: Mutex<Vec<Slot>>,
    size: usize,
    waiting: AtomicUsize,
    max_queue: usize,
    clock: AtomicU64,
    /// Leases that found the session of their conversation free.
    pub affinity_hits: AtomicU64,
}

/// A leased session; dropping it gives the session back (a fresh one if the work panicked).
pub struct Lease {
    pool: Arc<Pool>,
    index: usize,
    key: Option<u64>,
    session: Option<Session>,
    /// Whether the session served this conversation's previous turn.
    pub affine: bool,
    _permit: OwnedSemaphorePermit,
}

impl Lease {
    /// The leased session.
    pub fn session(&mut self) -> &mut Session {
        self.session
            .as_mut()
            .expect("a lease holds its session until dropped")
    }

    /// The model.
    pub fn model(&self) -> &Lfm2Audio {
        &self.pool.model
    }

    /// Which slot of the pool.
    pub fn index(&self) -> usize {
        self.index
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let session = match self.session.take() {
            // why: a panic mid-turn may leave the caches half-updated; start the slot afresh.
            Some(_) if std::thread::panicking() => None,
            s => s,
        };
        let session =
            session.unwrap_or_else(|| Session::new(self.pool.model.clone(), self.pool.options));
        let mut slots = self.pool.slots.lock().unwrap_or_else(|e| e.into_inner());
        let slot = &mut slots[self.index];
        slot.session = Some(session);
        slot.last_key = self.key;
        slot.last_used = self.pool.clock.fetch_add(1, Ordering::Relaxed);
    }
}

/// Decrements the waiting count when a wait ends, however it ends (cancelled included).
struct Waiting<'a>(&'a AtomicUsize);
impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Pool {
    /// `size` sessions on `model`, at most `max_queue` requests waiting.
    pub fn new(model: Lfm2Audio, options: SessionOptions, size: usize, max_queue: usize) -> Pool {
        let size = size.max(1);
        let slots = (0..size)
            .map(|_| Slot {
                session: Some(Session::new(model.clone(), options)),
                last_key: None,
                last_used: 0,
            })
            .collect();
        Pool {
            model,
            options,
            sem: Arc::new(Semaphore::new(size)),
            slots: Mutex::new(slots),
            size,
            waiting: AtomicUsize::new(0),
            max_queue,
            clock: AtomicU64::new(1),
            affinity_hits: AtomicU64::new(0),
        }
    }

    /// The model.
    pub fn model(&self) -> &Lfm2Audio {
        &self.model
    }

    /// Sessions in the pool.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Sessions leased now.
    pub fn active(&self) -> usize {
        self.size - self.sem.available_permits()
    }

    /// Requests waiting for a session now.
    pub fn queued(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// The session options.
    pub fn session_options(&self) -> SessionOptions {
        self.options
    }

    /// Leases a session, preferring the one that last served `key`; waits at most `timeout`
    /// (`None`: unbounded) in a queue of at most `max_queue`.
    pub async fn acquire(
        self: &Arc<Self>,
        key: Option<u64>,
        timeout: Option<Duration>,
    ) -> Result<Lease, ApiError> {
        let permit = match self.sem.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.max_queue {
                    self.waiting.fetch_sub(1, Ordering::SeqCst);
                    return Err(ApiError::busy(format!(
                        "all {} sessions are busy and {} requests are queued",
                        self.size, self.max_queue
                    )));
                }
                let _w = Waiting(&self.waiting);
                let acquire = self.sem.clone().acquire_owned();
                let res = match timeout {
                    Some(t) => tokio::time::timeout(t, acquire).await.map_err(|_| {
                        ApiError::busy(format!(
                            "no session became free within {} ms",
                            t.as_millis()
                        ))
                    })?,
                    None => acquire.await,
                };
                res.map_err(|_| ApiError::busy("the server is shutting down"))?
            }
        };
        self.lease(key, permit)
    }

    /// Leases a session now if one is free (preferring the one that last served `key`),
    /// without queueing.
    pub fn try_acquire(self: &Arc<Self>, key: Option<u64>) -> Option<Lease> {
        let permit = self.sem.clone().try_acquire_owned().ok()?;
        self.lease(key, permit).ok()
    }

    fn lease(
        self: &Arc<Self>,
        key: Option<u64>,
        permit: OwnedSemaphorePermit,
    ) -> Result<Lease, ApiError> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let affine = key.and_then(|k| {
            slots
                .iter()
                .position(|s| s.session.is_some() && s.last_key == Some(k))
        });
        let index = match affine {
            Some(i) => i,
            // The least recently used free session (its caches are the least likely wanted).
            None => slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s.session.is_some())
                .min_by_key(|(_, s)| s.last_used)
                .map(|(i, _)| i)
                .ok_or_else(|| ApiError::internal("a permit was granted but no session is free"))?,
        };
        if affine.is_some() {
            self.affinity_hits.fetch_add(1, Ordering::Relaxed);
        }
        let session = slots[index].session.take();
        drop(slots);
        Ok(Lease {
            pool: self.clone(),
            index,
            key,
            session,
            affine: affine.is_some(),
            _permit: permit,
        })
    }
}

/// FNV-1a, 64 bits: the conversation key of a header value or of a first question's bytes.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}
