//! Pull-based streaming over the engine's push-based runs: the run goes on a worker thread
//! whose sink groups the reply's pieces into events and, after each event, waits until the
//! caller asks for the next one. Generation therefore advances as the caller pulls (as in a
//! pull-based API), and a stream finished early stops right after the last event it handed
//! out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::engine::{Failure, FailureKind, Output, Piece};

/// What one event carries.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Group {
    /// Text written since the previous event.
    pub text: String,
    /// Audio since the previous event.
    pub audio: Vec<f32>,
}

/// Collects pieces into events of `per_event` audio pieces (frames) each.
#[derive(Debug)]
pub struct Grouper {
    per_event: usize,
    with_text: bool,
    frames: usize,
    group: Group,
}

impl Grouper {
    /// Events of `per_event` frames; text is kept only `with_text`.
    pub fn new(per_event: usize, with_text: bool) -> Grouper {
        Grouper {
            per_event: per_event.max(1),
            with_text,
            frames: 0,
            group: Group::default(),
        }
    }

    /// Adds a piece; returns an event once it holds `per_event` frames.
    pub fn push(&mut self, piece: Piece) -> Option<Group> {
        match piece {
            Piece::Text(t) => {
                if self.with_text {
                    self.group.text.push_str(&t);
                }
                None
            }
            Piece::Audio(a) => {
                self.group.audio.extend_from_slice(&a);
                self.frames += 1;
                if self.frames < self.per_event {
                    return None;
                }
                self.frames = 0;
                Some(std::mem::take(&mut self.group))
            }
        }
    }

    /// What is left, if anything.
    pub fn flush(&mut self) -> Option<Group> {
        self.frames = 0;
        let g = std::mem::take(&mut self.group);
        (!g.text.is_empty() || !g.audio.is_empty()).then_some(g)
    }
}

/// How a run ended: the state it carried (given back), its output, and whether a cancel
/// stopped it.
pub struct End<C> {
    /// What the job took and gives back (a conversation), `None` if it was lost.
    pub state: Option<C>,
    /// The output, or why there is none.
    pub output: Result<Output, Failure>,
    /// Whether the session's cancel flag stopped it.
    pub cancelled: bool,
}

/// What pulling gives.
pub enum Step<C> {
    /// The next event.
    Event(Group),
    /// The run is over.
    End(End<C>),
}

/// A run on a worker thread, pulled event by event.
pub struct Worker<C: Send + 'static> {
    events: Receiver<Group>,
    go: Sender<bool>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<End<C>>>,
    pulled: bool,
}

type Job<C> =
    Box<dyn FnOnce(&mut dyn FnMut(Piece) -> bool) -> (Option<C>, Result<Output, Failure>) + Send>;

impl<C: Send + 'static> Worker<C> {
    /// Starts `job` (which hands its pieces to the sink it is given) on a worker thread.
    /// `cancel` is the session's cancel flag. If the thread cannot start, the job's state is
    /// lost and the error says so.
    pub fn spawn(
        per_event: usize,
        with_text: bool,
        cancel: Arc<AtomicBool>,
        job: Job<C>,
    ) -> Result<Worker<C>, Failure> {
        let (tx, events) = channel::<Group>();
        let (go, go_rx) = channel::<bool>();
        let stop = Arc::new(AtomicBool::new(false));
        let stop_w = stop.clone();
        let handle = std::thread::Builder::new()
            .name("lfm2e-stream".into())
            .spawn(move || {
                let mut grouper = Grouper::new(per_event, with_text);
                let mut cancelled = false;
                let (state, output) = {
                    let mut sink = |piece: Piece| -> bool {
                        if stop_w.load(Ordering::SeqCst) {
                            return false;
                        }
                        if cancel.load(Ordering::SeqCst) {
                            cancelled = true;
                            return false;
                        }
                        let Some(group) = grouper.push(piece) else {
                            return true;
                        };
                        if tx.send(group).is_err() {
                            return false;
                        }
                        // Wait until the caller asks for the next event (or stops).
                        if go_rx.recv() != Ok(true) || stop_w.load(Ordering::SeqCst) {
                            return false;
                        }
                        if cancel.load(Ordering::SeqCst) {
                            cancelled = true;
                            return false;
                        }
                        true
                    };
                    job(&mut sink)
                };
                if !cancelled && !stop_w.load(Ordering::SeqCst) && output.is_ok() {
                    if let Some(g) = grouper.flush() {
                        let _ = tx.send(g);
                    }
                }
                End {
                    state,
                    output,
                    cancelled,
                }
            })
            .map_err(|e| Failure {
                kind: FailureKind::Runtime,
                message: format!("cannot start the stream's thread: {e}"),
            })?;
        Ok(Worker {
            events,
            go,
            stop,
            handle: Some(handle),
            pulled: false,
        })
    }

    /// The next event, waiting for it, or the end of the run.
    pub fn next(&mut self) -> Step<C> {
        if self.pulled {
            // The worker waits for this after handing out the previous event.
            let _ = self.go.send(true);
        }
        self.pulled = true;
        match self.events.recv() {
            Ok(g) => Step::Event(g),
            Err(_) => Step::End(self.join()),
        }
    }

    /// Stops the run where it is and returns how it ended.
    pub fn finish(mut self) -> End<C> {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.go.send(false);
        self.join()
    }

    fn join(&mut self) -> End<C> {
        let Some(handle) = self.handle.take() else {
            return End {
                state: None,
                output: Err(Failure {
                    kind: FailureKind::Runtime,
                    message: "the stream already ended".into(),
                }),
                cancelled: false,
            };
        };
        // why: events not pulled are dropped; the channel is unbounded, so the worker never
        // waits on it.
        while self.events.try_recv().is_ok() {}
        handle.join().unwrap_or_else(|_| End {
            state: None,
            output: Err(Failure {
                kind: FailureKind::Runtime,
                message: "the generation thread panicked".into(),
            }),
            cancelled: false,
        })
    }
}

impl<C: Send + 'static> Drop for Worker<C> {
    fn drop(&mut self) {
        if self.handle.is_some() {
            self.stop.store(true, Ordering::SeqCst);
            let _ = self.go.send(false);
            let _ = self.join();
        }
    }
}
