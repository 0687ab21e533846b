//! The session handle: a task in a mode on a model, offline runs and pull-based streams, and
//! the cancel flag another thread may raise while it runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use audio_engine::ggml::Device;
use audio_engine::lfm2_audio::{Job, S2sRequest};

use crate::engine::{self, Conversation, Failure, FailureKind, Output};
use crate::jobs::{audio_of, plan, Plan};
use crate::model::ModelInner;
use crate::options::SessionSettings;
use crate::request::{Pcm, Request};
use crate::result::{EventData, ResultData};
use crate::status::{AbiError, AbiResult, Status};
use crate::stream::{End, Step, Worker};
use crate::vocab::{Mode, Task};

/// `AUDIOCPP_STREAM_INPUT_NONE`.
pub const INPUT_NONE: i32 = 0;
/// `AUDIOCPP_STREAM_INPUT_AUDIO_CHUNKS`.
pub const INPUT_AUDIO_CHUNKS: i32 = 1;
/// `AUDIOCPP_STREAM_OUTPUT_FINAL_RESULT`.
pub const OUTPUT_FINAL_RESULT: i32 = 0;
/// `AUDIOCPP_STREAM_OUTPUT_PULL_EVENTS`.
pub const OUTPUT_PULL_EVENTS: i32 = 1;

/// `audiocpp_stream_input_kind` / `audiocpp_stream_output_kind` and the preferred chunk.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// 0 none, 1 audio chunks.
    pub input: i32,
    /// 0 final result, 1 pull events.
    pub output: i32,
    /// Preferred chunk in samples (at 16 kHz).
    pub chunk_samples: i64,
    /// Preferred chunk in seconds.
    pub chunk_seconds: f64,
}

enum StreamState {
    /// Started; s2s collects the question.
    Pending { plan: Plan, pushed: Option<Pcm> },
    /// The reply is being generated.
    Running(Worker<Conversation>),
    /// The reply is over; its output waits for `stream_finish`.
    Done(Output),
}

struct State {
    settings: SessionSettings,
    engine: engine::Model,
    conversation: Option<Conversation>,
    stream: Option<StreamState>,
    figures: (usize, usize),
    was_cancelled: bool,
}

impl State {
    fn conversation(&mut self) -> &mut Conversation {
        let (engine, s) = (&self.engine, &self.settings);
        self.conversation
            .get_or_insert_with(|| engine.conversation(s.prefill_slots, s.kept_questions))
    }

    fn take_conversation(&mut self) -> Conversation {
        self.conversation();
        self.conversation.take().expect("just made")
    }
}

/// `audiocpp_session`.
pub struct SessionHandle {
    /// The model (kept alive by the session).
    pub model: Arc<ModelInner>,
    /// The task.
    pub task: Task,
    /// The mode.
    pub mode: Mode,
    cancel: Arc<AtomicBool>,
    state: Mutex<State>,
}

// why: lfm2e_session_cancel reaches a session from another thread while a run holds it, through
// a shared reference; that is sound only for a `Sync` handle.
const _: fn() = || {
    fn sync<T: Sync + Send>() {}
    sync::<SessionHandle>();
};

/// The question of an s2s run: the pushed audio (checked here) before the request's (checked
/// when the request was planned); `None` when there is neither.
/// The question of an s2s job: the pushed audio, else the request's own (`has_question`).
fn set_question(
    job: &mut S2sRequest,
    pushed: Option<Pcm>,
    has_question: bool,
    settings: &SessionSettings,
) -> AbiResult<()> {
    match pushed {
        Some(pcm) => job.question = audio_of(&pcm, settings, "the question")?,
        None if has_question => {}
        None => {
            return Err(AbiError::invalid(
                "s2s needs the question as audio (audiocpp_request_set_audio, or \
                 audiocpp_stream_push on a streaming session)",
            ))
        }
    }
    Ok(())
}

fn abi(f: Failure) -> AbiError {
    let status = match f.kind {
        FailureKind::Invalid => Status::InvalidArgument,
        FailureKind::Load => Status::LoadFailed,
        FailureKind::OutOfMemory => Status::OutOfMemory,
        FailureKind::Runtime => Status::Runtime,
    };
    AbiError::new(status, f.message)
}

fn cancelled() -> AbiError {
    AbiError::runtime(
        "cancelled: lfm2e_session_cancel stopped the run; the session is still usable",
    )
}

impl SessionHandle {
    /// A session of `task` in `mode` with `threads` compute threads.
    pub fn new(
        model: Arc<ModelInner>,
        task: Task,
        mode: Mode,
        (device, threads): (Device, usize),
        settings: SessionSettings,
    ) -> AbiResult<SessionHandle> {
        let engine = model.engine(threads, device)?;
        Ok(SessionHandle {
            model,
            task,
            mode,
            cancel: Arc::new(AtomicBool::new(false)),
            state: Mutex::new(State {
                settings,
                engine,
                conversation: None,
                stream: None,
                figures: (0, 0),
                was_cancelled: false,
            }),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // why: a panic inside a run is reported as RUNTIME; the state it leaves is still
        // consistent (a stream is dropped, a conversation recreated when lost).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn plan(&self, req: &Request, st: &State) -> AbiResult<Plan> {
        let streaming = self.mode == Mode::Streaming;
        plan(
            self.task,
            req,
            &st.settings,
            &self.model.language,
            streaming,
        )
    }

    /// Raises the cancel flag (any thread).
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::SeqCst);
    }

    fn begin(&self, st: &mut State) {
        self.cancel.store(false, Ordering::SeqCst);
        st.was_cancelled = false;
    }

    /// Whether the last run ended by a cancel.
    pub fn was_cancelled(&self) -> bool {
        self.state().was_cancelled
    }

    /// Resumed prefill steps and reused questions of the last s2s run.
    pub fn figures(&self) -> (usize, usize) {
        self.state().figures
    }

    /// `audiocpp_session_prepare`: checks the request.
    pub fn prepare(&self, req: Option<&Request>) -> AbiResult<()> {
        let st = self.state();
        if let Some(r) = req {
            self.plan(r, &st)?;
        }
        Ok(())
    }

    fn output(&self, out: Output) -> ResultData {
        ResultData::of_output(out, &self.model.language)
    }

    /// Runs a checked job to its end on this thread (cancel checked at every step).
    fn run_job(&self, st: &mut State, plan: Plan, pushed: Option<Pcm>) -> AbiResult<Output> {
        let cancel = self.cancel.clone();
        let mut was = false;
        let mut keep_going = |_: engine::Piece| {
            if cancel.load(Ordering::SeqCst) {
                was = true;
                false
            } else {
                true
            }
        };
        let out = match plan.job {
            Job::Asr(j) => {
                let stop = || !self.cancel.load(Ordering::SeqCst);
                match st.engine.asr(j, &stop).map_err(abi)? {
                    Some(text) => Output {
                        text: Some(text),
                        ended: true,
                        ..Output::default()
                    },
                    None => {
                        was = true;
                        Output::default()
                    }
                }
            }
            Job::Tts(j) => st.engine.tts(j, &mut keep_going).map_err(abi)?,
            Job::S2s(mut job) => {
                set_question(&mut job, pushed, plan.has_question, &st.settings)?;
                let conv = st.conversation();
                let r = conv.s2s(job, &mut keep_going);
                let figures = (conv.resumed_prefill_steps(), conv.reused_questions());
                st.figures = figures;
                r.map_err(abi)?
            }
            other => {
                return Err(AbiError::not_available(format!(
                    "{} is not run by this ABI",
                    other.task().name()
                )))
            }
        };
        if was {
            st.was_cancelled = true;
            return Err(cancelled());
        }
        Ok(out)
    }

    /// `audiocpp_session_run`.
    pub fn run(&self, req: &Request) -> AbiResult<ResultData> {
        if self.mode != Mode::Offline {
            return Err(AbiError::not_available(
                "audiocpp_session_run needs an offline session; this one is streaming (use \
                 audiocpp_stream_start / next_event / finish)",
            ));
        }
        let mut st = self.state();
        let plan = self.plan(req, &st)?;
        self.begin(&mut st);
        let out = self.run_job(&mut st, plan, None)?;
        Ok(self.output(out))
    }

    fn require_streaming(&self, call: &str) -> AbiResult<()> {
        if self.mode != Mode::Streaming {
            return Err(AbiError::not_available(format!(
                "{call} needs a streaming session; this one is offline (use \
                 audiocpp_session_run)"
            )));
        }
        Ok(())
    }

    /// `audiocpp_stream_policy`.
    pub fn policy(&self) -> AbiResult<Policy> {
        self.require_streaming("audiocpp_stream_policy")?;
        Ok(match self.task {
            Task::S2s => Policy {
                input: INPUT_AUDIO_CHUNKS,
                output: OUTPUT_PULL_EVENTS,
                chunk_samples: i64::from(engine::INPUT_RATE) * 80 / 1000,
                chunk_seconds: 0.08,
            },
            _ => Policy {
                input: INPUT_NONE,
                output: OUTPUT_PULL_EVENTS,
                chunk_samples: 0,
                chunk_seconds: 0.0,
            },
        })
    }

    /// Ends any stream in flight, giving its conversation back.
    fn end_stream(st: &mut State) {
        if let Some(StreamState::Running(w)) = st.stream.take() {
            if let Some(c) = w.finish().state {
                st.conversation = Some(c);
            }
        }
    }

    /// `audiocpp_stream_start`.
    pub fn stream_start(&self, req: &Request) -> AbiResult<()> {
        self.require_streaming("audiocpp_stream_start")?;
        let mut st = self.state();
        Self::end_stream(&mut st);
        let plan = self.plan(req, &st)?;
        self.begin(&mut st);
        st.stream = Some(StreamState::Pending { plan, pushed: None });
        Ok(())
    }

    /// `audiocpp_stream_push`.
    pub fn stream_push(&self, chunk: Pcm, start_sample: i64) -> AbiResult<()> {
        self.require_streaming("audiocpp_stream_push")?;
        if self.task != Task::S2s {
            return Err(AbiError::not_available(format!(
                "a {} stream takes no input (audiocpp_stream_policy: \
                 AUDIOCPP_STREAM_INPUT_NONE)",
                self.task.name()
            )));
        }
        let mut st = self.state();
        match st.stream.as_mut() {
            None => Err(AbiError::invalid(
                "no stream in flight: call audiocpp_stream_start first",
            )),
            Some(StreamState::Pending { pushed, .. }) => {
                let so_far = pushed.as_ref().map_or(0, Pcm::frames);
                if start_sample != so_far as i64 {
                    return Err(AbiError::invalid(format!(
                        "chunk starts at sample {start_sample}, but {so_far} frames were pushed \
                         so far; push the question's chunks in order"
                    )));
                }
                match pushed {
                    None => *pushed = Some(chunk),
                    Some(q) => {
                        if q.rate != chunk.rate || q.channels != chunk.channels {
                            return Err(AbiError::invalid(format!(
                                "chunk is {} Hz x {} channels, the question so far {} Hz x {}",
                                chunk.rate, chunk.channels, q.rate, q.channels
                            )));
                        }
                        q.samples
                            .try_reserve(chunk.samples.len())
                            .map_err(|_| AbiError::out_of_memory("the pushed question"))?;
                        q.samples.extend_from_slice(&chunk.samples);
                    }
                }
                Ok(())
            }
            Some(_) => Err(AbiError::invalid(
                "the question ended when the reply started (at the first \
                 audiocpp_stream_next_event); start a new stream for the next question",
            )),
        }
    }

    fn start_worker(
        &self,
        st: &mut State,
        plan: Plan,
        pushed: Option<Pcm>,
    ) -> AbiResult<Worker<Conversation>> {
        let cancel = self.cancel.clone();
        let n = plan.frames_per_event;
        match plan.job {
            Job::Tts(j) => {
                let model = st.engine.clone();
                Worker::spawn(
                    n,
                    false,
                    cancel,
                    Box::new(move |sink| (None, model.tts(j, sink))),
                )
                .map_err(abi)
            }
            Job::S2s(mut job) => {
                if pushed.is_none() && !plan.has_question {
                    return Err(AbiError::invalid(
                        "no question: push it with audiocpp_stream_push (or set the request's \
                         audio) before the first audiocpp_stream_next_event",
                    ));
                }
                set_question(&mut job, pushed, plan.has_question, &st.settings)?;
                let mut conv = st.take_conversation();
                Worker::spawn(
                    n,
                    true,
                    cancel,
                    Box::new(move |sink| {
                        let out = conv.s2s(job, sink);
                        (Some(conv), out)
                    }),
                )
                .map_err(abi)
            }
            Job::Asr(_) => Err(AbiError::not_available("asr has no streaming mode")),
            other => Err(AbiError::not_available(format!(
                "{} has no streaming mode in this ABI",
                other.task().name()
            ))),
        }
    }

    fn ended(&self, st: &mut State, end: End<Conversation>) -> AbiResult<Output> {
        if let Some(c) = end.state {
            st.figures = (c.resumed_prefill_steps(), c.reused_questions());
            st.conversation = Some(c);
        }
        if end.cancelled {
            st.was_cancelled = true;
            return Err(cancelled());
        }
        end.output.map_err(abi)
    }

    /// `audiocpp_stream_next_event`: the next event, or `None` once the reply is over.
    pub fn stream_next(&self) -> AbiResult<Option<EventData>> {
        self.require_streaming("audiocpp_stream_next_event")?;
        let mut st = self.state();
        let st = &mut *st;
        loop {
            match st.stream.take() {
                None => {
                    return Err(AbiError::invalid(
                        "no stream in flight: call audiocpp_stream_start first",
                    ))
                }
                Some(StreamState::Pending { plan, pushed }) => {
                    let w = self.start_worker(st, plan, pushed)?;
                    st.stream = Some(StreamState::Running(w));
                }
                Some(StreamState::Running(mut w)) => match w.next() {
                    Step::Event(g) => {
                        st.stream = Some(StreamState::Running(w));
                        return Ok(Some(EventData {
                            result: ResultData::of_piece(g.text, g.audio, &self.model.language),
                            is_final: false,
                        }));
                    }
                    Step::End(end) => {
                        let out = self.ended(st, end)?;
                        st.stream = Some(StreamState::Done(out));
                        return Ok(None);
                    }
                },
                Some(done @ StreamState::Done(_)) => {
                    st.stream = Some(done);
                    return Ok(None);
                }
            }
        }
    }

    /// `audiocpp_stream_finish`.
    pub fn stream_finish(&self) -> AbiResult<ResultData> {
        self.require_streaming("audiocpp_stream_finish")?;
        let mut st = self.state();
        let st = &mut *st;
        let out = match st.stream.take() {
            None => {
                return Err(AbiError::invalid(
                    "no stream in flight: call audiocpp_stream_start first",
                ))
            }
            Some(StreamState::Pending { plan, pushed }) => self.run_job(st, plan, pushed)?,
            Some(StreamState::Running(w)) => {
                let end = w.finish();
                self.ended(st, end)?
            }
            Some(StreamState::Done(out)) => out,
        };
        Ok(self.output(out))
    }

    /// `audiocpp_stream_reset`.
    pub fn stream_reset(&self) -> AbiResult<()> {
        self.require_streaming("audiocpp_stream_reset")?;
        let mut st = self.state();
        Self::end_stream(&mut st);
        st.stream = None;
        Ok(())
    }
}
