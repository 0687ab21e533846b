//! Pull-based streaming over the engine's push-based runs: the run goes on the engine's
//! [`Worker`](audio_engine::lfm2_audio::worker::Worker) with an outlet ([`Paced`]) that groups
//! the reply's pieces into events and, after each event, waits until the caller asks for the
//! next one. Generation therefore advances as the caller pulls (as in a pull-based API), and a
//! stream finished early stops right after the last event it handed out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

use audio_engine::lfm2_audio::worker::{self, Outlet};

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

/// What a job returns: the state it gives back and its output.
type Ran<C> = (Option<C>, Result<Output, Failure>);

type Job<C> = Box<dyn FnOnce(&mut dyn FnMut(Piece) -> bool) -> Ran<C> + Send>;

/// What the outlet hands the reader.
enum Delivery<C> {
    Event(Group),
    End(End<C>),
}

/// The outlet: pieces grouped into events; after handing one out it waits for the reader's
/// go (`true`: the next one; `false` or a reader gone: stop).
struct Paced<C> {
    grouper: Grouper,
    tx: Sender<Delivery<C>>,
    go: Receiver<bool>,
    /// Raised by [`Worker::finish`]: the reader wants no more events.
    stop: Arc<AtomicBool>,
}

impl<C: Send + 'static> Outlet<Piece, Ran<C>> for Paced<C> {
    fn event(&mut self, piece: Piece) -> bool {
        if self.stop.load(Ordering::SeqCst) {
            return false;
        }
        let Some(group) = self.grouper.push(piece) else {
            return true;
        };
        if self.tx.send(Delivery::Event(group)).is_err() {
            return false;
        }
        self.go.recv() == Ok(true) && !self.stop.load(Ordering::SeqCst)
    }

    fn end(mut self, end: worker::End<Ran<C>>) {
        let cancelled = end.cancelled;
        let (state, output) = end.result.unwrap_or_else(|e| {
            (
                None,
                Err(Failure {
                    kind: FailureKind::Runtime,
                    message: e.to_string(),
                }),
            )
        });
        // why only a whole run flushes: a stopped or failed one hands out nothing more.
        if !cancelled && !self.stop.load(Ordering::SeqCst) && output.is_ok() {
            if let Some(g) = self.grouper.flush() {
                let _ = self.tx.send(Delivery::Event(g));
            }
        }
        let _ = self.tx.send(Delivery::End(End {
            state,
            output,
            cancelled,
        }));
    }
}

/// A run on the engine's worker, pulled event by event.
pub struct Worker<C: Send + 'static> {
    events: Receiver<Delivery<C>>,
    go: Sender<bool>,
    stop: Arc<AtomicBool>,
    worker: Option<worker::Worker>,
    pulled: bool,
}

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
        let (tx, events) = channel();
        let (go, go_rx) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        let outlet = Paced {
            grouper: Grouper::new(per_event, with_text),
            tx,
            go: go_rx,
            stop: stop.clone(),
        };
        let worker =
            worker::Worker::spawn("lfm2e-stream", cancel, outlet, move |sink, _| job(sink))
                .map_err(|e| Failure {
                    kind: FailureKind::Runtime,
                    message: format!("cannot start the stream's thread: {e}"),
                })?;
        Ok(Worker {
            events,
            go,
            stop,
            worker: Some(worker),
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
            Ok(Delivery::Event(g)) => Step::Event(g),
            Ok(Delivery::End(end)) => Step::End(self.join(Some(end))),
            Err(_) => Step::End(self.join(None)),
        }
    }

    /// Stops the run where it is and returns how it ended.
    pub fn finish(mut self) -> End<C> {
        self.stop();
        self.join(None)
    }

    fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.go.send(false);
    }

    /// Waits for the thread; `end` if it was read already, else read here (events not pulled
    /// are dropped: the channel is unbounded, so the worker never waits on it).
    fn join(&mut self, mut end: Option<End<C>>) -> End<C> {
        while end.is_none() {
            match self.events.recv() {
                Ok(Delivery::End(e)) => end = Some(e),
                Ok(Delivery::Event(_)) => {}
                Err(_) => break,
            }
        }
        // why `join`, not the handle's drop: that raises the cancel flag, which is the
        // session's and would report a stop as a cancel.
        if let Some(w) = self.worker.take() {
            w.join();
        }
        end.unwrap_or_else(|| End {
            state: None,
            output: Err(Failure {
                kind: FailureKind::Runtime,
                message: "the stream already ended".into(),
            }),
            cancelled: false,
        })
    }
}

impl<C: Send + 'static> Drop for Worker<C> {
    fn drop(&mut self) {
        if self.worker.is_some() {
            self.stop();
            let _ = self.join(None);
        }
    }
}
