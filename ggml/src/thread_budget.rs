//! A budget of CPU compute threads shared by every backend instance of one loaded model.
//!
//! Each CPU graph compute starts its own worker threads, and ggml's workers meet at spinning
//! barriers. Two sessions that each compute on all the cores therefore put twice as many
//! spinning threads on the machine as it has cores, and every barrier then waits for a thread
//! the kernel has descheduled: two concurrent requests took several times their time alone.
//! So a compute first takes the threads it runs with from the budget and gives them back when
//! it ends; a compute that does not fit waits.
//!
//! How many it takes: what its backend is set to, at most the budget's total divided among the
//! threads that compute for this model now (each request's thread, a prefill ahead's: those
//! that computed within the last [`ACTIVE_WINDOW`]). Alone, a request computes on the whole
//! budget; two requests on two cores compute one thread each, side by side. That also leaves
//! each request's own thread its core for the work between graphs (sampling, the vocoder's
//! ISTFT), which would otherwise preempt a worker of the other request's graph at its barrier.
//!
//! Waiters are served in arrival order and the first waiter is never overtaken, even by a
//! compute that would fit beside the running ones: a graph on all the threads would otherwise
//! starve behind a stream of one-thread graphs.
//!
//! Streams first: while a reply is generating (a [`StreamGuard`] is held), the computes of
//! running replies (the batched step and frame ticks, the detokenizer: backends marked
//! [`Backend::with_stream_priority`](super::Backend::with_stream_priority)) are served before
//! any other waiter and take the threads the other computes leave (not a share: a tick works
//! for every reply in it), and the other computes (prefills, encoders, prefill ahead) hold at
//! most half the total between them (at least one thread). So a newcomer's prefill block never holds
//! every core: the running streams keep computing beside it, on the other half, and their audio
//! gaps stay near one tick, not one prefill block; the newcomer's prefill takes longer instead.
//! With one thread in all there is nothing to split and the rule only orders the waiters.
//!
//! The thread count never changes a bit of the output, so all of this moves only time.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// A thread that computed this recently still counts as computing for this model: a request
/// spends a few milliseconds between its graphs (sampling, the vocoder), far less than this.
pub const ACTIVE_WINDOW: Duration = Duration::from_millis(100);

/// What a budget has seen since it was made (see [`ThreadBudget::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadBudgetStats {
    /// The most compute threads in use at once.
    pub peak_in_use: usize,
    /// Computes that had to wait for threads.
    pub waits: u64,
    /// Computes run under the budget.
    pub computes: u64,
}

#[derive(Debug, Default)]
struct State {
    in_use: usize,
    /// Of `in_use`, what computes without stream priority hold.
    background_in_use: usize,
    /// Replies generating now ([`StreamGuard`]s alive).
    streams: usize,
    /// The threads that computed lately, with when they last asked.
    active: Vec<(ThreadId, Instant)>,
    /// Tickets of the waiting computes with stream priority, oldest first.
    stream_queue: VecDeque<u64>,
    /// Tickets of the other waiting computes, oldest first.
    queue: VecDeque<u64>,
    next_ticket: u64,
    stats: ThreadBudgetStats,
}

/// A reply generating while this lives: computes without stream priority then hold at most
/// half the budget (see the module docs).
#[derive(Debug)]
pub struct StreamGuard {
    budget: Arc<ThreadBudget>,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.budget.lock().streams -= 1;
        self.budget.freed.notify_all();
    }
}

/// A shared count of CPU compute threads (see the module docs).
#[derive(Debug)]
pub struct ThreadBudget {
    total: usize,
    state: Mutex<State>,
    freed: Condvar,
}

/// Threads taken from a [`ThreadBudget`], given back when dropped.
#[derive(Debug)]
pub(crate) struct ThreadPermit {
    budget: Arc<ThreadBudget>,
    threads: usize,
    priority: bool,
}

impl ThreadBudget {
    /// A budget of `total` threads (at least one).
    pub fn new(total: usize) -> Arc<ThreadBudget> {
        Arc::new(ThreadBudget {
            total: total.max(1),
            state: Mutex::new(State::default()),
            freed: Condvar::new(),
        })
    }

    /// The most threads computing at once.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Counts since the budget was made.
    pub fn stats(&self) -> ThreadBudgetStats {
        self.lock().stats
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // why ignore poisoning: the state is a few counters updated without panicking code
        // between the lock and the unlock.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks a reply generating until the guard is dropped.
    pub fn stream(self: &Arc<Self>) -> StreamGuard {
        self.lock().streams += 1;
        StreamGuard {
            budget: Arc::clone(self),
        }
    }

    /// The most threads computes without stream priority hold together while replies stream.
    fn background_cap(&self) -> usize {
        (self.total - self.total / 2).max(1)
    }

    /// Whether `threads` more fit now for a compute of this priority.
    fn fits(&self, s: &State, threads: usize, priority: bool) -> bool {
        s.in_use + threads <= self.total
            && (priority
                || s.streams == 0
                || self.total < 2
                || s.background_in_use + threads <= self.background_cap())
    }

    /// Takes `want` threads for a compute on the calling thread: clamped to `1..=total` and to
    /// the calling thread's share (see the module docs), waiting for them in arrival order;
    /// `priority`: a running reply's compute, served first.
    pub(crate) fn acquire(self: &Arc<Self>, want: usize, priority: bool) -> ThreadPermit {
        let mut s = self.lock();
        let clamp = |s: &State, share: usize| {
            let cap = match (priority, s.streams) {
                (_, 0) => share,
                // why not the share: a running reply's compute is a batch tick doing the work
                // of every reply in it (or a reply's small detokenizer graph); it takes what
                // the other computes leave, so it neither waits for a prefill block nor
                // computes on fewer threads than are free.
                (true, _) => self.total.saturating_sub(s.background_in_use),
                (false, _) => share.min(self.background_cap()),
            };
            want.clamp(1, cap.max(1))
        };
        let share = self.share(&mut s);
        let threads = clamp(&s, share);
        let ahead = match priority {
            true => !s.stream_queue.is_empty(),
            false => !s.stream_queue.is_empty() || !s.queue.is_empty(),
        };
        if !ahead && self.fits(&s, threads, priority) {
            return self.grant(s, threads, priority);
        }
        let ticket = s.next_ticket;
        s.next_ticket += 1;
        match priority {
            true => s.stream_queue.push_back(ticket),
            false => s.queue.push_back(ticket),
        }
        s.stats.waits += 1;
        loop {
            s = self.freed.wait(s).unwrap_or_else(|e| e.into_inner());
            // why again: a stream may have started or ended while this compute waited.
            let threads = clamp(&s, share);
            let first = match priority {
                true => s.stream_queue.front() == Some(&ticket),
                false => s.stream_queue.is_empty() && s.queue.front() == Some(&ticket),
            };
            if first && self.fits(&s, threads, priority) {
                match priority {
                    true => s.stream_queue.pop_front(),
                    false => s.queue.pop_front(),
                };
                // why notify: the next waiter may fit beside this compute.
                self.freed.notify_all();
                return self.grant(s, threads, priority);
            }
        }
    }

    /// The calling thread's share of the total: the total over the threads computing lately
    /// (this one counted), at least one.
    fn share(&self, s: &mut State) -> usize {
        let (me, now) = (std::thread::current().id(), Instant::now());
        s.active
            .retain(|(id, seen)| *id != me && now.duration_since(*seen) < ACTIVE_WINDOW);
        s.active.push((me, now));
        (self.total / s.active.len()).max(1)
    }

    fn grant(
        self: &Arc<Self>,
        mut s: MutexGuard<'_, State>,
        threads: usize,
        priority: bool,
    ) -> ThreadPermit {
        s.in_use += threads;
        if !priority {
            s.background_in_use += threads;
        }
        s.stats.computes += 1;
        s.stats.peak_in_use = s.stats.peak_in_use.max(s.in_use);
        ThreadPermit {
            budget: Arc::clone(self),
            threads,
            priority,
        }
    }
}

impl ThreadPermit {
    /// The threads this permit holds.
    pub(crate) fn threads(&self) -> usize {
        self.threads
    }
}

impl Drop for ThreadPermit {
    fn drop(&mut self) {
        let mut s = self.budget.lock();
        s.in_use -= self.threads;
        if !self.priority {
            s.background_in_use -= self.threads;
        }
        drop(s);
        self.budget.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn computes_never_hold_more_threads_than_the_total() {
        let budget = ThreadBudget::new(3);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        std::thread::scope(|sc| {
            for w in 0..6 {
                let (budget, running, most) = (&budget, &running, &most);
                sc.spawn(move || {
                    for i in 0..40 {
                        let p = budget.acquire(1 + (w + i) % 4, false);
                        let now = running.fetch_add(p.threads(), Ordering::SeqCst) + p.threads();
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_micros(200));
                        running.fetch_sub(p.threads(), Ordering::SeqCst);
                    }
                });
            }
        });
        assert!(most.load(Ordering::SeqCst) <= 3);
        let s = budget.stats();
        assert_eq!(s.computes, 240);
        assert!(s.peak_in_use <= 3 && s.peak_in_use >= 2, "{s:?}");
        assert!(s.waits > 0, "{s:?}");
    }

    #[test]
    fn the_first_waiter_is_not_overtaken_by_smaller_computes() {
        let budget = ThreadBudget::new(3);
        let one = budget.acquire(1, false);
        // why: once this thread has not asked for a while, the waiter below computes alone
        // and its share is the whole budget.
        std::thread::sleep(ACTIVE_WINDOW + Duration::from_millis(50));
        let order = Arc::new(Mutex::new(Vec::new()));
        std::thread::scope(|sc| {
            let (b, o) = (&budget, &order);
            // Wants all three threads: waits for `one`.
            sc.spawn(move || {
                let p = b.acquire(3, false);
                o.lock().unwrap().push(("all", p.threads()));
            });
            while budget.stats().waits < 1 {
                std::thread::yield_now();
            }
            // Would fit beside `one`, but arrives after the waiter.
            sc.spawn(move || {
                let p = b.acquire(1, false);
                o.lock().unwrap().push(("late one", p.threads()));
            });
            while budget.stats().waits < 2 {
                std::thread::yield_now();
            }
            drop(one);
        });
        assert_eq!(*order.lock().unwrap(), [("all", 3), ("late one", 1)]);
    }

    #[test]
    fn threads_computing_at_once_share_the_total() {
        let budget = ThreadBudget::new(4);
        assert_eq!(
            budget.acquire(4, false).threads(),
            4,
            "alone: the whole budget"
        );
        std::thread::sleep(ACTIVE_WINDOW + Duration::from_millis(50));
        let (a, b) = std::thread::scope(|sc| {
            let a = sc
                .spawn(|| budget.acquire(4, false).threads())
                .join()
                .unwrap();
            // `a`'s thread computed just now: two threads share the four.
            let b = sc
                .spawn(|| budget.acquire(4, false).threads())
                .join()
                .unwrap();
            (a, b)
        });
        assert_eq!((a, b), (4, 2));
        std::thread::sleep(ACTIVE_WINDOW + Duration::from_millis(50));
        assert_eq!(
            budget.acquire(4, false).threads(),
            4,
            "the others went quiet"
        );
    }

    #[test]
    fn wants_are_clamped_to_the_total() {
        let budget = ThreadBudget::new(2);
        assert_eq!(budget.acquire(8, false).threads(), 2);
        assert_eq!(budget.acquire(0, false).threads(), 1);
        assert_eq!(budget.stats().waits, 0);
    }

    #[test]
    fn while_a_reply_streams_other_computes_hold_half_and_its_computes_go_first() {
        let budget = ThreadBudget::new(4);
        let stream = budget.stream();
        // A prefill asking for all four gets half.
        let prefill = budget.acquire(4, false);
        assert_eq!(prefill.threads(), 2);
        // A second one waits (the half is taken) though two threads are free ...
        let order = Arc::new(Mutex::new(Vec::new()));
        std::thread::scope(|sc| {
            let (b, o) = (&budget, &order);
            sc.spawn(move || {
                let p = b.acquire(2, false);
                o.lock().unwrap().push(("prefill", p.threads()));
            });
            while budget.stats().waits < 1 {
                std::thread::yield_now();
            }
            // ... while a stream's tick computes beside the first at once.
            let tick = budget.acquire(2, true);
            assert_eq!(tick.threads(), 2);
            o.lock().unwrap().push(("tick", tick.threads()));
            drop(tick);
            drop(prefill);
        });
        assert_eq!(*order.lock().unwrap(), [("tick", 2), ("prefill", 2)]);
        drop(stream);
        std::thread::sleep(ACTIVE_WINDOW + Duration::from_millis(50));
        assert_eq!(
            budget.acquire(4, false).threads(),
            4,
            "no stream: the whole budget"
        );
    }
}
