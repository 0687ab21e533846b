//! How many CPU threads the small graphs of each audio frame get (the depthformer's one per
//! codebook, the detokenizer's), and the backbone's single-position steps ([`StepThreads`]).
//!
//! Those graphs are small, so several threads help only while the cores are free: each graph
//! hands its work to the backend's workers anew, and when another process holds a core every
//! hand-over and barrier waits for the scheduler (measured at full size with one core busy: the
//! depthformer took 378 ms per frame on 2 threads and 18 ms on 1, against 12.8 and 18.8 ms on an
//! idle machine). No fixed count is right on a shared machine, so by default the reply measures:
//! its first frame runs on one thread (the setting that never collapses), its second on the
//! backbone's thread count; it keeps the cheaper and tries the other again [`PROBE_EVERY`] frames
//! later, doubling that interval each time the probe loses (a probe on a busy machine costs a
//! slow frame) and going back to [`PROBE_EVERY`] when it wins, so it follows the machine's load
//! as it changes. The thread count never changes a bit of the output
//! (`tests/thread_counts.rs`), so measuring costs only the time of the probe frames.

use std::time::Duration;

use crate::ggml::Backend;
use crate::lfm2_audio::error::EngineError;

/// Frames between two probes of the setting not in use, after a probe that won.
pub const PROBE_EVERY: usize = 16;

/// The longest interval between probes.
const PROBE_AT_MOST: usize = 256;

/// The thread count of a reply's per-frame graphs (see the module docs).
#[derive(Debug)]
pub(crate) struct FrameThreads {
    backend: Backend,
    /// The two settings measured: one thread, then the backbone's thread count.
    choices: [usize; 2],
    /// Smoothed cost of a frame at each setting, once measured.
    cost: [Option<Duration>; 2],
    /// The setting the backend has now (index into `choices`).
    current: usize,
    /// Frames run so far.
    frames: usize,
    /// The frame of the next probe, and the interval after it.
    next_probe: usize,
    interval: usize,
    /// Whether the coming frame probes the setting not chosen.
    probing: bool,
    adaptive: bool,
}

impl FrameThreads {
    /// Per-frame graphs on `backend` (an instance of their own): `fixed` threads, or, when
    /// `fixed` is 0 and `n_threads` > 1 on a CPU backend, chosen by measuring between
    /// `n_threads` and one.
    pub(crate) fn new(
        backend: Backend,
        fixed: usize,
        n_threads: usize,
    ) -> Result<FrameThreads, EngineError> {
        let adaptive = fixed == 0 && n_threads > 1 && backend.is_cpu();
        let first = if adaptive { 1 } else { fixed.max(1) };
        if backend.is_cpu() {
            backend.set_n_threads(first)?;
        }
        Ok(FrameThreads {
            backend,
            choices: [first, n_threads.max(1)],
            cost: [None, None],
            current: 0,
            frames: 0,
            next_probe: 0,
            interval: PROBE_EVERY,
            probing: false,
            adaptive,
        })
    }

    /// The backend the per-frame graphs compute on.
    pub(crate) fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Sets the thread count for the next frame.
    pub(crate) fn before_frame(&mut self) -> Result<(), EngineError> {
        if !self.adaptive {
            return Ok(());
        }
        let want = match self.cost {
            // The first two frames measure each setting once.
            [None, _] => 0,
            [Some(_), None] => 1,
            [Some(a), Some(b)] => {
                let best = usize::from(b < a);
                if self.frames == 2 {
                    self.next_probe = 2 + PROBE_EVERY;
                }
                self.probing = self.frames == self.next_probe;
                if self.probing {
                    1 - best
                } else {
                    best
                }
            }
        };
        if want != self.current {
            self.backend.set_n_threads(self.choices[want])?;
            self.current = want;
        }
        Ok(())
    }

    /// Records what the frame's graphs took.
    pub(crate) fn after_frame(&mut self, took: Duration) {
        self.frames += 1;
        if self.probing {
            let won = self.cost[1 - self.current].is_some_and(|other| took < other);
            self.interval = if won {
                PROBE_EVERY
            } else {
                (self.interval * 2).min(PROBE_AT_MOST)
            };
            self.next_probe = self.frames - 1 + self.interval;
        }
        let c = &mut self.cost[self.current];
        // why: a probe is the only news about the other setting, so it replaces the old figure
        // (the load may have changed since); the setting in use is smoothed, half of the old
        // figure keeping one slow frame (a page fault, a preemption) from flipping the choice.
        *c = Some(match *c {
            Some(old) if !self.probing => (old + took) / 2,
            _ => took,
        });
        self.probing = false;
    }

    /// The thread count the coming frame runs with.
    #[cfg(test)]
    fn current_threads(&self) -> usize {
        self.choices[self.current]
    }
}

/// The thread count of the backbone's single-position steps (a text token, an audio frame's
/// forward), on the decode cache's backend, which prefills run on too.
///
/// Unlike the per-frame graphs, a backbone step on one thread costs nearly twice its time on
/// two when the cores are free, so probing one thread by routine would cost more than it could
/// win. Steps run on the full count, and one thread is tried only when a step has become
/// markedly slower than the fastest seen at the full count (another process holding a core
/// makes the workers' barriers wait: steps took 1.8-2x and more); when one thread wins it is
/// kept, and the full count is probed again [`PROBE_EVERY`] steps later, the interval doubling
/// while it loses, as for frames. Set before every step (a reply keeps one policy for text
/// steps and one for frames on the same backend) and the full count given back when dropped,
/// whatever ended the reply.
#[derive(Debug)]
pub(crate) struct StepThreads {
    backend: Backend,
    full: usize,
    adaptive: bool,
    /// Running on one thread.
    single: bool,
    /// The fastest step at the full count.
    best_full: Option<Duration>,
    /// Smoothed cost at the setting in use.
    cost: Option<Duration>,
    /// Whether the coming step probes the other setting.
    probing: bool,
    steps: usize,
    next_probe: usize,
    interval: usize,
}

/// A step at the full count this much slower than the fastest one makes the next step try one
/// thread.
const SLOWER: f64 = 1.5;

impl StepThreads {
    /// Steps on `backend` with `fixed` threads, or, when `fixed` is 0 on a CPU backend with
    /// `n_threads` > 1, as the type docs say.
    pub(crate) fn new(
        backend: Backend,
        fixed: usize,
        n_threads: usize,
    ) -> Result<StepThreads, EngineError> {
        let full = n_threads.max(1);
        let adaptive = fixed == 0 && full > 1 && backend.is_cpu();
        if backend.is_cpu() && !adaptive && fixed > 0 {
            backend.set_n_threads(fixed)?;
        }
        Ok(StepThreads {
            backend,
            full,
            adaptive,
            single: false,
            best_full: None,
            cost: None,
            probing: false,
            steps: 0,
            next_probe: 0,
            interval: PROBE_EVERY,
        })
    }

    /// Sets the thread count for the next step.
    pub(crate) fn before_step(&mut self) -> Result<(), EngineError> {
        if !self.adaptive {
            return Ok(());
        }
        if self.single && self.steps >= self.next_probe {
            self.probing = true;
        }
        self.backend.set_n_threads(self.current_threads())?;
        Ok(())
    }

    /// Records what the step took.
    pub(crate) fn after_step(&mut self, took: Duration) {
        if !self.adaptive {
            return;
        }
        self.steps += 1;
        let on_full = self.single == self.probing;
        if on_full {
            self.best_full = Some(self.best_full.map_or(took, |b| b.min(took)));
        }
        if self.probing {
            self.probing = false;
            if self.cost.is_some_and(|c| took < c) {
                self.single = !self.single;
                self.cost = Some(took);
                self.interval = PROBE_EVERY;
            } else {
                // A lost probe: the next waits twice as long (each costs a slow step).
                self.interval = (self.interval * 2).min(PROBE_AT_MOST);
            }
            self.next_probe = self.steps + self.interval;
            return;
        }
        // why smoothed: one slow step (a page fault, a preemption) should not flip the choice.
        self.cost = Some(self.cost.map_or(took, |c| (c + took) / 2));
        let slow = self
            .best_full
            .is_some_and(|b| took.as_secs_f64() > SLOWER * b.as_secs_f64());
        if on_full && slow && self.steps >= self.next_probe {
            self.probing = true;
        }
    }

    /// The thread count the coming step runs with.
    fn current_threads(&self) -> usize {
        if self.single != self.probing {
            1
        } else {
            self.full
        }
    }
}

impl Drop for StepThreads {
    fn drop(&mut self) {
        if self.backend.is_cpu() && self.backend.n_threads() != Some(self.full) {
            // why ignore: the count is in range (it was set before); a failure would leave the
            // next prefill slower, never wrong.
            let _ = self.backend.set_n_threads(self.full);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pacer() -> FrameThreads {
        let b = Backend::cpu().unwrap();
        FrameThreads::new(b, 0, 2).unwrap()
    }

    /// Runs `n` steps of `steps`, each costing `cost(step, threads)`; returns the thread counts.
    fn run_steps(
        p: &mut StepThreads,
        n: usize,
        cost: impl Fn(usize, usize) -> Duration,
    ) -> Vec<usize> {
        (0..n)
            .map(|f| {
                p.before_step().unwrap();
                let t = p.current_threads();
                p.after_step(cost(f, t));
                t
            })
            .collect()
    }

    fn steps() -> StepThreads {
        StepThreads::new(Backend::cpu().unwrap(), 0, 2).unwrap()
    }

    #[test]
    fn steps_keep_the_full_count_while_the_machine_is_idle() {
        let ms = Duration::from_millis;
        // Two threads 22 ms, one 40 ms, a little jitter: never a probe of one thread.
        let seen = run_steps(&mut steps(), 300, |f, t| match t {
            2 => ms(22 + (f % 3) as u64),
            _ => ms(40),
        });
        assert!(seen.iter().all(|&t| t == 2), "{seen:?}");
    }

    #[test]
    fn steps_move_to_one_thread_under_contention_and_back_after_it() {
        let ms = Duration::from_millis;
        // A core gets busy at step 10 (two threads: 22 -> 90 ms; one: 40 -> 45) and free again
        // at step 100.
        let cost = |f: usize, t: usize| match (t, (10..100).contains(&f)) {
            (2, false) => ms(22),
            (2, true) => ms(90),
            (_, false) => ms(40),
            (_, true) => ms(45),
        };
        let seen = run_steps(&mut steps(), 200, cost);
        assert!(seen[..10].iter().all(|&t| t == 2));
        // The first slow step makes the next one try one thread, which wins and stays.
        assert_eq!(&seen[10..13], &[2, 1, 1]);
        let busy_full = (12..100).filter(|&f| seen[f] == 2).count();
        assert!(
            busy_full <= 4,
            "{busy_full} probes of two threads while busy: {seen:?}"
        );
        // After the load is gone, a probe of two threads wins within the longest interval.
        let back = (100..200)
            .find(|&f| seen[f] == 2 && seen[f + 1] == 2)
            .unwrap();
        assert!(back <= 100 + PROBE_AT_MOST, "{seen:?}");
        assert!(seen[190..].iter().all(|&t| t == 2), "{seen:?}");
    }

    #[test]
    fn the_full_count_comes_back_when_the_policy_is_dropped() {
        let b = Backend::cpu().unwrap();
        b.set_n_threads(2).unwrap();
        let mut p = StepThreads::new(b.clone(), 0, 2).unwrap();
        p.single = true;
        p.next_probe = usize::MAX;
        p.before_step().unwrap();
        assert_eq!(b.n_threads(), Some(1));
        drop(p);
        assert_eq!(b.n_threads(), Some(2));
    }

    #[test]
    fn measures_both_then_keeps_the_cheaper_and_probes() {
        let mut p = pacer();
        let ms = Duration::from_millis;
        let mut seen = Vec::new();
        for _ in 0..40 {
            p.before_frame().unwrap();
            seen.push(p.current_threads());
            // Two threads are slow here (a busy machine): 300 ms against 18.
            p.after_frame(if p.current_threads() == 2 {
                ms(300)
            } else {
                ms(18)
            });
        }
        assert_eq!(
            &seen[..2],
            &[1, 2],
            "first one thread, then the backbone's count"
        );
        // Then one thread, except probes of two, the interval doubling as they lose.
        let probes: Vec<usize> = (2..40).filter(|&f| seen[f] == 2).collect();
        assert_eq!(probes, vec![18]);
        let mut p = pacer();
        let mut probes = Vec::new();
        for f in 0..200 {
            p.before_frame().unwrap();
            if f >= 2 && p.current_threads() == 2 {
                probes.push(f);
            }
            p.after_frame(if p.current_threads() == 2 {
                ms(300)
            } else {
                ms(18)
            });
        }
        assert_eq!(probes, vec![18, 50, 114]);
    }

    #[test]
    fn follows_the_load_when_it_goes_away() {
        let mut p = pacer();
        let ms = Duration::from_millis;
        let mut seen = Vec::new();
        for f in 0..64 {
            p.before_frame().unwrap();
            seen.push(p.current_threads());
            let busy = f < 20;
            let t = match (p.current_threads(), busy) {
                (2, true) => ms(300),
                (2, false) => ms(12),
                _ => ms(18),
            };
            p.after_frame(t);
        }
        // Busy until frame 20: one thread (the probe at 18 confirms it); the probe at 50 finds
        // two threads cheaper again and keeps them.
        let probes_of_two: Vec<usize> = (2..50).filter(|&f| seen[f] == 2).collect();
        assert_eq!(probes_of_two, vec![18]);
        assert!(seen[50..64].iter().all(|&n| n == 2), "{seen:?}");
    }

    #[test]
    fn a_fixed_count_never_changes() {
        let b = Backend::cpu().unwrap();
        let mut p = FrameThreads::new(b, 1, 2).unwrap();
        for _ in 0..40 {
            p.before_frame().unwrap();
            assert_eq!(p.current_threads(), 1);
            p.after_frame(Duration::from_millis(500));
        }
    }
}
