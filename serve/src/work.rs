//! The blocking engine work of a request, on a `spawn_blocking` thread: a leased session (S2S)
//! or its model (ASR, TTS) runs the job and reports events and the outcome through a channel.
//! A closed channel (the client went away) or the server's hard stop makes the sink return
//! false, which stops generation at the next event; the lease then gives the session back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use audio_engine::lfm2_audio::{
    Artifact, AsrOptions, EngineError, ReplyEvent, S2sRequest, StopReason, TtsOptions,
};

use crate::pool::Lease;

/// What to run.
pub enum Job {
    /// One speech-to-speech turn on the leased session.
    S2s(Box<S2sRequest>),
    /// Transcribe a WAV.
    Asr(Vec<u8>, AsrOptions),
    /// Speak a text.
    Tts(String, TtsOptions),
}

/// A finished job.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub text: String,
    /// 24 kHz mono (empty for ASR).
    pub audio: Vec<f32>,
    pub artifact: Option<Artifact>,
    pub resumed_prefill_positions: usize,
    pub reused_questions: usize,
    pub prompt_positions: usize,
    pub steps: usize,
    pub ended: bool,
    /// Whether the session served this conversation's previous turn.
    pub affine: bool,
    /// The slot that ran it.
    pub slot: usize,
    /// Time in the engine.
    pub engine_time: Duration,
    /// Input audio seconds (ASR).
    pub input_seconds: f64,
}

/// A message from the worker.
pub enum Msg {
    Event(ReplyEvent),
    Done(Result<Outcome, EngineError>),
}

/// Runs `job` on `lease` off the runtime; events and the outcome arrive on the returned
/// channel (`capacity` events buffered before the generation waits for the client).
pub fn spawn(
    mut lease: Lease,
    job: Job,
    stop: Arc<AtomicBool>,
    capacity: usize,
) -> mpsc::Receiver<Msg> {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    tokio::task::spawn_blocking(move || {
        let t0 = Instant::now();
        let mut sink = |ev: ReplyEvent| {
            !stop.load(Ordering::Relaxed) && tx.blocking_send(Msg::Event(ev)).is_ok()
        };
        let affine = lease.affine;
        let slot = lease.index();
        let res = match job {
            Job::S2s(req) => lease.session().s2s_with(&req, &mut sink).map(|t| Outcome {
                text: t.reply.text,
                audio: t.reply.audio,
                artifact: t.artifact,
                resumed_prefill_positions: t.reply.resumed_prefill_steps,
                reused_questions: t.reused_questions,
                prompt_positions: t.reply.prompt_positions,
                steps: t.reply.steps.len(),
                ended: t.reply.ended,
                ..Default::default()
            }),
            Job::Asr(wav, opts) => {
                let model = lease.model();
                model.read_wav(&wav).and_then(|samples| {
                    let secs = samples.len() as f64 / 16_000.0;
                    // why: the server's hard stop (the shutdown deadline) cuts a transcription
                    // between decode steps too; nothing streams, so there is no client to ask.
                    let mut go = |_: &str| !stop.load(Ordering::Relaxed);
                    model.asr_with(&samples, &opts, &mut go).map(|r| Outcome {
                        text: r.text,
                        prompt_positions: r.prompt_positions,
                        steps: r.tokens.len(),
                        ended: matches!(r.stop, StopReason::ImEnd | StopReason::AudioStart),
                        input_seconds: secs,
                        ..Default::default()
                    })
                })
            }
            Job::Tts(text, opts) => match lease.model().tts_stream(&text, &opts) {
                Err(e) => Err(e),
                Ok(mut stream) => {
                    while let Some(ev) = stream.next_event() {
                        if !sink(ev) {
                            break;
                        }
                    }
                    stream.finish().map(|r| Outcome {
                        text: r.text,
                        audio: r.audio,
                        prompt_positions: r.prompt_positions,
                        steps: r.steps.len(),
                        ended: r.ended,
                        ..Default::default()
                    })
                }
            },
        };
        let res = res.map(|mut o| {
            o.affine = affine;
            o.slot = slot;
            o.engine_time = t0.elapsed();
            o
        });
        // why: give the session back before the client hears the end, so a next turn sent at
        // once finds it free.
        drop(lease);
        let _ = tx.blocking_send(Msg::Done(res));
    });
    rx
}
