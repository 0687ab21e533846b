//! Ticks: jobs that many threads post, run in batches by whichever poster finds no batch
//! running (the backbone's decode steps and the depthformer's frames of every reply on a
//! model; see [`backbone::scheduler`](super::backbone::scheduler)).
//!
//! A thread says it will post before it does: it takes an [`Intent`] as soon as it knows
//! (a reply, when it learns its next step is a frame; at the start of each step for its
//! backbone step) and spends it on the post. A poster waits for its result; the first poster
//! that finds no tick running leads one: it waits until every intent has been posted (at most
//! [`MAX_GATHER`]), takes up to `max_batch` posted jobs in posting order, runs them as one batch
//! without the lock, hands each its result and leaves; jobs posted meanwhile wait for the next
//! tick. So a thread alone runs its jobs itself without waiting, and threads join and leave
//! between ticks.
//!
//! Why wait for intents: a reply that will post is busy with the rest of its step (sampling,
//! a tick of the other kind, the detokenizer); waiting for it keeps the replies in step, so
//! ticks stay wide. While a tick waits the machine is busy with that other work, so little is
//! lost; the cap bounds what a reply held up elsewhere costs the others.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The longest a tick waits for intended posts.
pub const MAX_GATHER: Duration = Duration::from_millis(250);

/// What a tick runner has run so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TickStats {
    /// Ticks (batches) run.
    pub ticks: u64,
    /// Jobs run in them.
    pub steps: u64,
    /// The widest tick.
    pub max_width: usize,
}

struct Shared<J, D> {
    queue: VecDeque<(u64, J)>,
    running: bool,
    done: HashMap<u64, D>,
    next_ticket: u64,
    /// Intents taken and not yet posted or dropped.
    intents: usize,
    stats: TickStats,
}

/// Batches jobs `J` posted from many threads into ticks; each job's result is a `D`.
pub struct Ticks<J, D> {
    shared: Mutex<Shared<J, D>>,
    changed: Condvar,
    max_batch: usize,
}

/// A post announced (see the module docs); dropping it unposted withdraws it.
pub struct Intent<J, D> {
    ticks: Arc<Ticks<J, D>>,
    live: bool,
}

impl<J, D> std::fmt::Debug for Intent<J, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Intent").field("live", &self.live).finish()
    }
}

impl<J, D> Drop for Intent<J, D> {
    fn drop(&mut self) {
        if self.live {
            self.ticks.lock().intents -= 1;
            // why: a tick gathering for this post stops waiting for it.
            self.ticks.changed.notify_all();
        }
    }
}

impl<J, D> Ticks<J, D> {
    /// Ticks of at most `max_batch` jobs (at least 1).
    pub fn new(max_batch: usize) -> Ticks<J, D> {
        Ticks {
            shared: Mutex::new(Shared {
                queue: VecDeque::new(),
                running: false,
                done: HashMap::new(),
                next_ticket: 0,
                intents: 0,
                stats: TickStats::default(),
            }),
            changed: Condvar::new(),
            max_batch: max_batch.max(1),
        }
    }

    /// The most jobs one tick runs.
    pub fn max_batch(&self) -> usize {
        self.max_batch
    }

    /// What has run so far.
    pub fn stats(&self) -> TickStats {
        self.lock().stats
    }

    /// Announces a post: ticks gather for it until it is posted or dropped.
    pub fn intend(self: &Arc<Self>) -> Intent<J, D> {
        self.lock().intents += 1;
        Intent {
            ticks: Arc::clone(self),
            live: true,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Shared<J, D>> {
        // why: the state stays consistent under a panic (each change is a whole push or
        // remove), so a poisoned lock is taken over rather than failing every later job.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Posts `job` (spending `intent` when given, which must be one of these ticks'), waits for
    /// its tick and returns its result. A leading poster runs the tick's jobs with `run`,
    /// which returns one result per job, in order.
    pub fn post(&self, intent: Option<Intent<J, D>>, job: J, run: &dyn Fn(Vec<J>) -> Vec<D>) -> D {
        let mut st = self.lock();
        if let Some(mut i) = intent {
            debug_assert!(
                std::ptr::eq(Arc::as_ptr(&i.ticks), self),
                "another Ticks' intent"
            );
            i.live = false;
            st.intents -= 1;
        }
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.queue.push_back((ticket, job));
        self.changed.notify_all();
        loop {
            if let Some(d) = st.done.remove(&ticket) {
                return d;
            }
            if !st.running {
                st = self.lead(st, run);
                continue;
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Gathers, runs and hands out one tick; returns with the lock held again.
    fn lead<'s>(
        &'s self,
        mut st: MutexGuard<'s, Shared<J, D>>,
        run: &dyn Fn(Vec<J>) -> Vec<D>,
    ) -> MutexGuard<'s, Shared<J, D>> {
        st.running = true;
        let deadline = Instant::now() + MAX_GATHER;
        loop {
            let now = Instant::now();
            if st.intents == 0 || st.queue.len() >= self.max_batch || now >= deadline {
                break;
            }
            st = self
                .changed
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let width = st.queue.len().min(self.max_batch);
        let (tickets, jobs): (Vec<u64>, Vec<J>) = st.queue.drain(..width).unzip();
        drop(st);

        let results = run(jobs);

        let mut st = self.lock();
        st.running = false;
        st.stats.ticks += 1;
        st.stats.steps += width as u64;
        st.stats.max_width = st.stats.max_width.max(width);
        debug_assert_eq!(results.len(), tickets.len(), "one result per job");
        st.done.extend(tickets.into_iter().zip(results));
        self.changed.notify_all();
        st
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_poster_runs_its_own_jobs_one_per_tick_without_waiting() {
        let t: Arc<Ticks<u32, u32>> = Arc::new(Ticks::new(4));
        let started = Instant::now();
        for i in 0..5 {
            let intent = t.intend();
            assert_eq!(
                t.post(Some(intent), i, &|jobs| jobs
                    .iter()
                    .map(|j| j * 10)
                    .collect()),
                i * 10
            );
        }
        assert!(started.elapsed() < MAX_GATHER, "a lone poster waited");
        let s = t.stats();
        assert_eq!((s.ticks, s.steps, s.max_width), (5, 5, 1));
    }

    #[test]
    fn announced_posts_share_ticks_and_each_gets_its_own_result() {
        let t: Arc<Ticks<(usize, u32), u32>> = Arc::new(Ticks::new(3));
        let barrier = std::sync::Barrier::new(3);
        std::thread::scope(|sc| {
            for who in 0..3 {
                let (t, barrier) = (&t, &barrier);
                sc.spawn(move || {
                    for i in 0..20u32 {
                        let intent = t.intend();
                        barrier.wait();
                        // why the uneven pause: the posts arrive apart, and the ticks still
                        // gather all three.
                        std::thread::sleep(Duration::from_millis(who as u64 * 3));
                        let got = t.post(Some(intent), (who, i), &|jobs| {
                            jobs.iter().map(|&(w, i)| w as u32 * 1000 + i).collect()
                        });
                        assert_eq!(got, who as u32 * 1000 + i);
                    }
                });
            }
        });
        let s = t.stats();
        assert_eq!((s.steps, s.max_width), (60, 3), "{s:?}");
        assert!(s.ticks <= 25, "{s:?}");
    }

    #[test]
    fn a_withdrawn_intent_stops_the_gathering() {
        let t: Arc<Ticks<u32, u32>> = Arc::new(Ticks::new(4));
        let other = t.intend();
        std::thread::scope(|sc| {
            sc.spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                drop(other);
            });
            let started = Instant::now();
            assert_eq!(t.post(None, 7, &|jobs| jobs), 7);
            let waited = started.elapsed();
            assert!(
                waited >= Duration::from_millis(15) && waited < MAX_GATHER,
                "{waited:?}"
            );
        });
    }
}
