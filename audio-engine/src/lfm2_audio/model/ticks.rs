//! Ticks: jobs that many threads post, run in batches by whichever poster finds no batch
//! running (the backbone's decode steps and the depthformer's frames of every reply on a
//! model; see [`backbone::scheduler`](super::backbone::scheduler)).
//!
//! Each thread that will post is a [`Member`] while it takes part. A poster waits for its
//! result; the first poster that finds no tick running leads one: it waits until every member
//! has posted or a short gathering time has passed, takes up to `max_batch` posted jobs in
//! posting order, runs them as one batch without the lock, hands each its result and leaves;
//! jobs posted meanwhile wait for the next tick. So a thread alone runs its jobs itself without
//! waiting, and members join and leave between ticks.
//!
//! The gathering time is half the last tick's run time (at most [`MAX_GATHER`]): a member
//! still busy with other work that would post within it joins the tick rather than wait a
//! whole tick for the next one, and one busy longer does not hold the others up for more.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The longest a tick waits for members that have not posted yet.
pub const MAX_GATHER: Duration = Duration::from_millis(20);

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
    last_tick: Duration,
    stats: TickStats,
}

/// Batches jobs `J` posted from many threads into ticks; each job's result is a `D`.
pub struct Ticks<J, D> {
    shared: Mutex<Shared<J, D>>,
    changed: Condvar,
    members: AtomicUsize,
    max_batch: usize,
}

/// A thread taking part in the ticks (counted while a tick gathers); leaves when dropped.
pub struct Member<J, D> {
    ticks: Arc<Ticks<J, D>>,
}

impl<J, D> std::fmt::Debug for Member<J, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member").finish_non_exhaustive()
    }
}

impl<J, D> Drop for Member<J, D> {
    fn drop(&mut self) {
        self.ticks.members.fetch_sub(1, Ordering::Relaxed);
        // why: a tick gathering for this member stops waiting for it.
        self.ticks.changed.notify_all();
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
                last_tick: Duration::ZERO,
                stats: TickStats::default(),
            }),
            changed: Condvar::new(),
            members: AtomicUsize::new(0),
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

    /// Takes part until the returned member is dropped.
    pub fn join(self: &Arc<Self>) -> Member<J, D> {
        self.members.fetch_add(1, Ordering::Relaxed);
        Member {
            ticks: self.clone(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Shared<J, D>> {
        // why: the state stays consistent under a panic (each change is a whole push or
        // remove), so a poisoned lock is taken over rather than failing every later job.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Posts `job`, waits for its tick and returns its result. A leading poster runs the
    /// tick's jobs with `run`, which returns one result per job, in order.
    pub fn post(&self, job: J, run: &dyn Fn(Vec<J>) -> Vec<D>) -> D {
        let mut st = self.lock();
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
        let deadline = Instant::now() + (st.last_tick / 2).min(MAX_GATHER);
        loop {
            let expected = self.members.load(Ordering::Relaxed).min(self.max_batch);
            let now = Instant::now();
            if st.queue.len() >= expected || now >= deadline {
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

        let started = Instant::now();
        let results = run(jobs);
        let took = started.elapsed();

        let mut st = self.lock();
        st.running = false;
        st.last_tick = took;
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
    fn a_lone_poster_runs_its_own_jobs_one_per_tick() {
        let t: Arc<Ticks<u32, u32>> = Arc::new(Ticks::new(4));
        let _m = t.join();
        for i in 0..5 {
            assert_eq!(
                t.post(i, &|jobs| jobs.iter().map(|j| j * 10).collect()),
                i * 10
            );
        }
        let s = t.stats();
        assert_eq!((s.ticks, s.steps, s.max_width), (5, 5, 1));
    }

    #[test]
    fn members_share_ticks_and_each_gets_its_own_result() {
        let t: Arc<Ticks<(usize, u32), u32>> = Arc::new(Ticks::new(3));
        let members: Vec<_> = (0..3).map(|_| t.join()).collect();
        std::thread::scope(|sc| {
            for who in 0..3 {
                let t = &t;
                sc.spawn(move || {
                    for i in 0..20u32 {
                        let got = t.post((who, i), &|jobs| {
                            // why the pause: a slow tick gives the others time to post, and
                            // sets the next gathering time.
                            std::thread::sleep(Duration::from_millis(2));
                            jobs.iter().map(|&(w, i)| w as u32 * 1000 + i).collect()
                        });
                        assert_eq!(got, who as u32 * 1000 + i);
                    }
                });
            }
        });
        drop(members);
        let s = t.stats();
        assert_eq!(s.steps, 60);
        assert!(s.max_width >= 2 && s.max_width <= 3, "{s:?}");
        assert!(s.ticks < 60, "{s:?}");
    }
}
