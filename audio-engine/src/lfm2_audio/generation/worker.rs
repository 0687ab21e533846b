//! The one way a job runs off its caller's thread: [`Worker::spawn`] starts the job on a thread
//! of its own, hands each event the job reports to an [`Outlet`], and gives the outlet the
//! job's [`End`] once it is over. Every streamed run goes through it: the library's
//! [`ReplyStream`](super::reply::ReplyStream) and `TurnStream` (an outlet over a channel, read
//! by `EventStream`), the C ABI's pull-based stream (an outlet that waits until its reader asks
//! for the next event) and the server's routes and Realtime sockets (an outlet into the async
//! channel the socket reads: one channel from the engine to the client).
//!
//! Why the end goes through the outlet too: a reader that cannot block on a thread (an async
//! task) learns of the end in the same order as the events, on the same channel; a panic in the
//! job arrives there as [`EngineError::WorkerPanicked`] instead of a channel that just closes.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use crate::lfm2_audio::error::EngineError;

/// Where a worker's events and its end go. Its methods run on the worker thread.
pub trait Outlet<E, T>: Send + 'static {
    /// Takes one event; `false` stops the job (its reader is gone or asked it to stop).
    fn event(&mut self, event: E) -> bool;

    /// Takes the job's end, after its last event.
    fn end(self, end: End<T>);
}

/// How a job ended.
#[derive(Debug)]
pub struct End<T> {
    /// What the job returned, or [`EngineError::WorkerPanicked`] if it panicked.
    pub result: Result<T, EngineError>,
    /// Whether the worker's cancel flag stopped it: an event refused or a cancel check answered
    /// because the flag was raised.
    pub cancelled: bool,
}

/// A job running on its worker thread. Dropping the handle raises the cancel flag and waits
/// for the thread (its outlet has then had the end); [`Worker::detach`] leaves it running, for
/// readers that learn of the end from the outlet alone.
#[derive(Debug)]
pub struct Worker {
    cancel: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    /// Starts `job` on a thread named `name`. The job reports its events through the sink it is
    /// given (which answers `false` once the job should stop: the outlet refused the event or
    /// `cancel` is raised) and asks the second argument whether to go on between events (for
    /// work that reports nothing for a while, as an encoder pass). If the thread cannot start,
    /// the job and the outlet are dropped and the error says so.
    pub fn spawn<E, T, O, J>(
        name: &str,
        cancel: Arc<AtomicBool>,
        outlet: O,
        job: J,
    ) -> Result<Worker, EngineError>
    where
        E: 'static,
        T: Send + 'static,
        O: Outlet<E, T>,
        J: FnOnce(&mut dyn FnMut(E) -> bool, &dyn Fn() -> bool) -> T + Send + 'static,
    {
        let flag = cancel.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || run(flag, outlet, job))
            .map_err(|e| EngineError::Invariant(format!("cannot start a worker thread: {e}")))?;
        Ok(Worker {
            cancel,
            thread: Some(thread),
        })
    }

    /// Raises the cancel flag: the job stops at its next event or cancel check.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::SeqCst);
    }

    /// Waits for the thread to end (the outlet has had the job's end by then).
    pub fn join(mut self) {
        self.wait();
    }

    /// Leaves the job running on its own; its end reaches the outlet as usual.
    pub fn detach(mut self) {
        self.thread = None;
    }

    fn wait(&mut self) {
        if let Some(t) = self.thread.take() {
            // why ignored: `run` catches the job's panic, so the thread itself cannot panic
            // short of the outlet panicking, whose end then never arrives either way.
            let _ = t.join();
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.cancel();
            self.wait();
        }
    }
}

/// The worker thread's body: the job with a sink over the outlet, then the end.
fn run<E, T, O, J>(cancel: Arc<AtomicBool>, mut outlet: O, job: J)
where
    O: Outlet<E, T>,
    J: FnOnce(&mut dyn FnMut(E) -> bool, &dyn Fn() -> bool) -> T,
{
    let seen = AtomicBool::new(false);
    let keep_going = || {
        let stop = cancel.load(Ordering::SeqCst);
        if stop {
            seen.store(true, Ordering::Relaxed);
        }
        !stop
    };
    let result = {
        let mut sink = |ev: E| keep_going() && outlet.event(ev) && keep_going();
        // why catch: the outlet must hear the end however the job ends (a reader waiting on
        // it would otherwise wait for a channel to close, or forever); the job's state (a
        // leased session, say) is dropped during the unwinding, as without the catch.
        catch_unwind(AssertUnwindSafe(|| job(&mut sink, &keep_going)))
    };
    outlet.end(End {
        result: result.map_err(|_| EngineError::WorkerPanicked),
        cancelled: seen.load(Ordering::Relaxed),
    });
}

/// What an [`EventStream`]'s channel carries.
enum Delivery<E, T> {
    Event(E),
    End(End<T>),
}

/// The outlet of an [`EventStream`]: an unbounded channel (the job never waits for its reader).
struct ChannelOutlet<E, T>(mpsc::Sender<Delivery<E, T>>);

impl<E: Send + 'static, T: Send + 'static> Outlet<E, T> for ChannelOutlet<E, T> {
    fn event(&mut self, event: E) -> bool {
        self.0.send(Delivery::Event(event)).is_ok()
    }

    fn end(self, end: End<T>) {
        // why ignored: a reader gone has no use for the end.
        let _ = self.0.send(Delivery::End(end));
    }
}

/// A job on a [`Worker`] whose events are read one by one on the caller's thread, and whose
/// result comes back at the end.
pub(crate) struct EventStream<E: Send + 'static, T: Send + 'static> {
    rx: mpsc::Receiver<Delivery<E, T>>,
    end: Option<End<T>>,
    worker: Worker,
}

impl<E: Send + 'static, T: Send + 'static> EventStream<E, T> {
    /// Starts `job` on a worker thread; its events wait in an unbounded channel until read.
    pub(crate) fn spawn(
        name: &str,
        job: impl FnOnce(&mut dyn FnMut(E) -> bool, &dyn Fn() -> bool) -> T + Send + 'static,
    ) -> Result<EventStream<E, T>, EngineError> {
        let (tx, rx) = mpsc::channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let worker = Worker::spawn(name, cancel, ChannelOutlet(tx), job)?;
        Ok(EventStream {
            rx,
            end: None,
            worker,
        })
    }

    /// The next event, waiting for it; `None` once the job is over.
    pub(crate) fn next_event(&mut self) -> Option<E> {
        if self.end.is_some() {
            return None;
        }
        match self.rx.recv() {
            Ok(Delivery::Event(e)) => Some(e),
            Ok(Delivery::End(end)) => {
                self.end = Some(end);
                None
            }
            // The outlet was dropped without an end: only if the thread could not run it.
            Err(_) => None,
        }
    }

    /// Stops the job where it is and returns its result.
    pub(crate) fn finish(self) -> Result<T, EngineError> {
        self.worker.cancel();
        self.wait()
    }

    /// Waits for the job to end on its own (events not read are dropped) and returns its result.
    pub(crate) fn wait(mut self) -> Result<T, EngineError> {
        while self.next_event().is_some() {}
        let end = self.end.take();
        // why `join` first: the thread is over once the end arrived; joining makes sure the job's
        // state is dropped before the caller goes on.
        let EventStream { worker, .. } = self;
        worker.join();
        match end {
            Some(end) => end.result,
            None => Err(EngineError::WorkerPanicked),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_then_the_result_arrive_in_order() {
        let mut s = EventStream::spawn("test", |sink, _| {
            for i in 0..3 {
                assert!(sink(i));
            }
            "done"
        })
        .unwrap();
        let got: Vec<i32> = std::iter::from_fn(|| s.next_event()).collect();
        assert_eq!(got, [0, 1, 2]);
        assert_eq!(s.wait().unwrap(), "done");
    }

    #[test]
    fn finish_stops_the_job_at_its_next_event() {
        let s = EventStream::spawn("test", |sink, _| {
            let mut sent = 0u64;
            while sink(sent) {
                sent += 1;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            sent
        })
        .unwrap();
        let sent = s.finish().unwrap();
        assert!(sent < 100_000, "the job ran on after finish: {sent}");
    }

    #[test]
    fn a_panicking_job_ends_with_an_error() {
        let mut s = EventStream::<(), ()>::spawn("test", |_, _| panic!("on purpose")).unwrap();
        assert!(s.next_event().is_none());
        assert!(matches!(s.wait(), Err(EngineError::WorkerPanicked)));
    }

    /// An outlet that records what it got.
    struct Record(Arc<std::sync::Mutex<(Vec<u8>, Option<bool>)>>);

    impl Outlet<u8, ()> for Record {
        fn event(&mut self, e: u8) -> bool {
            self.0.lock().unwrap().0.push(e);
            true
        }
        fn end(self, end: End<()>) {
            self.0.lock().unwrap().1 = Some(end.cancelled);
        }
    }

    #[test]
    fn a_raised_cancel_flag_is_reported_as_cancelled() {
        let seen = Arc::new(std::sync::Mutex::new((Vec::new(), None)));
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = cancel.clone();
        let w = Worker::spawn(
            "test",
            cancel,
            Record(seen.clone()),
            move |sink, keep_going| {
                assert!(sink(1));
                flag.store(true, Ordering::SeqCst);
                assert!(!keep_going());
                assert!(!sink(2));
            },
        )
        .unwrap();
        w.join();
        let (events, cancelled) = seen.lock().unwrap().clone();
        assert_eq!(events, [1]);
        assert_eq!(cancelled, Some(true));
    }
}
