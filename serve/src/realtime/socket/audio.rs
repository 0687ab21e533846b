//! The input audio: appends, the VAD's turns (barge-in, commit, respond) and commits.

use std::time::Instant;

use serde_json::{json, Map, Value};

use crate::audio_io::{unb64, unb64_len};

use super::super::conversation::{Body, Item};
use super::super::error::EventError;
use super::super::events::event;
use super::super::ids;
use super::super::input::{ms_of, pcm16_samples, wav_of};
use super::super::response::CancelReason;
use super::super::turns::{Answer, TurnEvent};
use super::replies::turn_request;
use super::{Out, Socket, MIN_COMMIT_MS};

impl Socket {
    pub(super) fn append(&mut self, o: &Map<String, Value>) -> Result<Out, EventError> {
        let audio = o.get("audio").and_then(Value::as_str).ok_or_else(|| {
            EventError::invalid("missing_audio", "append needs `audio`: base64 PCM16").at("audio")
        })?;
        // why before decoding: an oversized append is refused without allocating it.
        self.input.check_room(unb64_len(audio) / 2)?;
        let bytes = unb64(audio).ok_or_else(|| {
            EventError::invalid("invalid_base64", "`audio` is not valid base64").at("audio")
        })?;
        let samples = pcm16_samples(&bytes)?;
        self.input.append(&samples)?;
        let turns = self.turns.push(&samples);
        let mut out = Vec::new();
        for t in turns {
            out.extend(self.on_turn(t));
        }
        Ok(out)
    }

    /// The end-of-turn model's answer to an ask of the turn detection (`semantic_vad`): the
    /// turn it ends, if it does.
    pub(super) fn on_answer(&mut self, a: Answer) -> Out {
        let mut out = Vec::new();
        for t in self.turns.answer(a) {
            out.extend(self.on_turn(t));
        }
        out
    }

    /// A turn the turn detection heard: speech started (barge-in) or stopped (commit,
    /// respond).
    /// A refusal of the response it would start is an `error` event after the turn's own
    /// events, which the client still gets.
    pub(super) fn on_turn(&mut self, t: TurnEvent) -> Out {
        let Some(mode) = self.turns.mode() else {
            return Vec::new();
        };
        let (create_response, interrupt_response) =
            (mode.create_response(), mode.interrupt_response());
        match t {
            TurnEvent::SpeechStarted { audio_start_ms } => {
                let item_id = ids::fresh("item");
                let out = vec![event(
                    "input_audio_buffer.speech_started",
                    json!({"audio_start_ms": audio_start_ms, "item_id": item_id}),
                )];
                self.speech = Some((item_id, audio_start_ms));
                if interrupt_response {
                    // Barge-in: the reply stops at its next step and none of its audio still
                    // on the way to the client is sent.
                    if let Some(r) = self.response.as_mut() {
                        r.cancel(CancelReason::TurnDetected);
                    }
                }
                out
            }
            TurnEvent::SpeechStopped { audio_end_ms } => {
                let (item_id, start) = self
                    .speech
                    .take()
                    .unwrap_or_else(|| (ids::fresh("item"), audio_end_ms));
                let mut out = vec![event(
                    "input_audio_buffer.speech_stopped",
                    json!({"audio_end_ms": audio_end_ms, "item_id": item_id}),
                )];
                let samples = self.input.take_range(start, audio_end_ms);
                if ms_of(samples.len() as u64, self.input.rate()) < MIN_COMMIT_MS {
                    return out;
                }
                match self.commit_samples(item_id, &samples) {
                    Ok(events) => out.extend(events),
                    // why no response: the turn was not committed.
                    Err(e) => {
                        out.push(e.event(None));
                        return out;
                    }
                }
                if create_response {
                    if self.response.is_some() {
                        // why: a barge-in cancelled it (or, without interrupt_response, it
                        // runs on); this turn is answered as soon as its response.done is out.
                        self.respond_after = Some(Instant::now());
                    } else {
                        match self.response_create(None, Some(Instant::now())) {
                            Ok(events) => out.extend(events),
                            Err(e) => out.push(e.event(None)),
                        }
                    }
                }
                out
            }
            TurnEvent::Paused { audio_end_ms } => {
                if create_response {
                    self.start_early_turn(audio_end_ms);
                }
                Vec::new()
            }
            // The turn goes on: the early start is moot, and the session stops it when the
            // next request (another early start, or the turn itself) is not that turn.
            TurnEvent::Resumed => Vec::new(),
        }
    }

    /// The speaker paused: starts the turn that the silence, if it holds, will commit (the
    /// speech so far after the conversation so far) on a free session, so that its encode and
    /// prefill are under way or done when the turn is committed. Skipped while a response runs,
    /// while an earlier early start still holds its session, when no session is free, and when
    /// the conversation could not take a question now; the turn then runs as it would have.
    fn start_early_turn(&mut self, audio_end_ms: u64) {
        if self.response.is_some() || self.early.as_ref().is_some_and(|h| !h.is_finished()) {
            return;
        }
        let Some((_, start)) = self.speech else {
            return;
        };
        let rate = self.input.rate();
        let samples = self.input.copy_range(start, audio_end_ms);
        if ms_of(samples.len() as u64, rate) < MIN_COMMIT_MS {
            return;
        }
        let (Ok(history), Ok(params)) = (
            self.conv.history_for_new_question(),
            self.response_params(None),
        ) else {
            return;
        };
        let Some(mut lease) = self.entry.pool.try_acquire(Some(self.key)) else {
            return;
        };
        let request = turn_request(wav_of(&samples, rate), history, params.s2s);
        self.early = Some(tokio::task::spawn_blocking(move || {
            // A failure here is the turn's own to report when it is committed.
            if let Err(e) = lease.session().prepare_turn(&request) {
                tracing::debug!("early turn not started: {e}");
            }
        }));
    }

    pub(super) fn commit(&mut self) -> Result<Out, EventError> {
        if self.input.ms() < MIN_COMMIT_MS {
            return Err(EventError::invalid(
                "input_audio_buffer_commit_empty",
                format!(
                    "buffer too small: expected at least {MIN_COMMIT_MS} ms of audio, have {} ms",
                    self.input.ms()
                ),
            ));
        }
        let item_id = self
            .speech
            .take()
            .map_or_else(|| ids::fresh("item"), |(id, _)| id);
        let samples = self.input.take_all();
        self.turns.reset(self.received_ms());
        self.commit_samples(item_id, &samples)
    }

    /// A question from `samples`: the `committed` event and its item's; refused (the audio
    /// dropped) when the conversation has no room for it.
    pub(super) fn commit_samples(
        &mut self,
        item_id: String,
        samples: &[i16],
    ) -> Result<Out, EventError> {
        let rate = self.input.rate();
        let item = Item {
            id: item_id.clone(),
            body: Body::User {
                wav: wav_of(samples, rate),
                audio_ms: ms_of(samples.len() as u64, rate),
                committed: Instant::now(),
                transcript: None,
            },
        };
        self.conv
            .room_for(item.bytes(), self.state.settings.max_conversation_bytes)?;
        let json = item.json();
        let prev = self.conv.push(item);
        if self.config.transcription.is_some() {
            // why queued, not run: the socket loop starts it when no response generates.
            self.transcriber.enqueue(item_id.clone());
        }
        let mut out = vec![event(
            "input_audio_buffer.committed",
            json!({"previous_item_id": prev, "item_id": item_id}),
        )];
        out.extend(self.names.item_events(&json, prev.as_deref(), true));
        Ok(out)
    }
}
