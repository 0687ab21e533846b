//! How many CPU threads the small graphs of each audio frame get (the depthformer's one per
//! codebook, the detokenizer's).
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
use crate::lfm2_audio::engine::Lfm2Audio;
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
    /// The thread policy of a reply of `model` whose backbone computes on `backend`: on the
    /// CPU an instance of their own (so their thread count can change), following
    /// [`ModelOptions::frame_threads`](crate::lfm2_audio::ModelOptions::frame_threads);
    /// elsewhere `backend` itself.
    pub(crate) fn for_reply(
        model: &Lfm2Audio,
        backend: &Backend,
    ) -> Result<FrameThreads, EngineError> {
        let options = model.options();
        let n = backend.n_threads().unwrap_or(options.n_threads).max(1);
        // why stream priority: the detokenizer's graphs are a running reply's.
        let b = if backend.is_cpu() {
            backend.new_instance()?.with_stream_priority(true)
        } else {
            backend.clone()
        };
        FrameThreads::new(b, options.frame_threads, n)
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    fn pacer() -> FrameThreads {
        let b = Backend::cpu().unwrap();
        FrameThreads::new(b, 0, 2).unwrap()
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
