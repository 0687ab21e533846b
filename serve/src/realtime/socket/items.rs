//! Conversation items: a question (spoken or typed) or a typed reply added as an item where
//! `previous_item_id` says, truncation, deletion, retrieval.

use std::time::Instant;

use serde_json::{json, Map, Value};

use crate::audio_io::{unb64, unb64_len};

use super::super::conversation::{call_arguments, text_reply_artifact, Body, Item, Place};
use super::super::error::EventError;
use super::super::events::event;
use super::super::ids;
use super::super::input::{ms_of, pcm16_samples, wav_of};
use super::super::response::CancelReason;
use super::super::session_config::Modality;
use super::super::typed;
use super::{Out, Socket, MIN_COMMIT_MS};

impl Socket {
    pub(super) fn item_create(&mut self, o: &Map<String, Value>) -> Result<Out, EventError> {
        let item = o.get("item").and_then(Value::as_object).ok_or_else(|| {
            EventError::invalid(
                "unsupported_item",
                "conversation.item.create needs an `item` object",
            )
            .at("item")
        })?;
        let place = Place::parse(o.get("previous_item_id"))?;
        let it = self.new_item(item, "item")?;
        if self.conv.get(&it.id).is_some() {
            return Err(EventError::invalid(
                "duplicate_item_id",
                format!("item `{}` exists already", it.id),
            )
            .at("item.id"));
        }
        self.conv
            .room_for(it.bytes(), self.state.settings.max_conversation_bytes)?;
        let json = it.json();
        let spoken = matches!(it.body, Body::User { .. });
        let prev = self.conv.insert(it, &place)?;
        if spoken && self.config.transcription.is_some() {
            self.transcriber
                .enqueue(json["id"].as_str().unwrap_or_default().to_owned());
        }
        // why the done at once: a created item is complete, and LiveKit's update_chat_ctx
        // waits for its `added` (5 s) before the turn goes on.
        Ok(self.names.item_events(&json, prev.as_deref(), true))
    }

    /// A message a client adds (`item`, at `param`): a spoken question, a typed one, a typed
    /// reply, a function call (a reply's, restored) or a tool's output. System messages are
    /// refused: instructions go in `session.update`.
    pub(super) fn new_item(
        &self,
        item: &Map<String, Value>,
        param: &str,
    ) -> Result<Item, EventError> {
        let unsupported = |m: String| EventError::invalid("unsupported_item", m).at(param);
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "message" => {}
            "function_call" => return function_call(item, param),
            "function_call_output" => return function_output(item, param),
            _ => {
                return Err(unsupported(format!(
                    "item type `{kind}` is not taken here: messages (user questions, assistant \
                     replies), function_call and function_call_output"
                )))
            }
        }
        match item.get("role").and_then(Value::as_str).unwrap_or("") {
            "user" if typed::is_typed(item) => Ok(Item {
                id: item_id(item),
                body: Body::UserText {
                    text: typed::user_text(item, param)?,
                },
            }),
            "user" => self.audio_question(item, param),
            "assistant" => {
                let text = typed::assistant_text(item, param)?;
                Ok(Item {
                    id: item_id(item),
                    body: Body::Assistant {
                        artifact: Some(text_reply_artifact(&text)),
                        transcript: vec![text],
                        status: "completed",
                        modality: Modality::Text,
                    },
                })
            }
            role => Err(unsupported(format!(
                "a `{role}` message is not a conversation item here: the conversation is user \
                 questions and assistant replies (set a system prompt with the session's \
                 `instructions`)"
            ))),
        }
    }

    /// A user message with one `input_audio` part (`item`, at `param`) as a question item (its
    /// id the given one, or a fresh one).
    pub(super) fn audio_question(
        &self,
        item: &Map<String, Value>,
        param: &str,
    ) -> Result<Item, EventError> {
        let bad = |m: &str| EventError::invalid("unsupported_item", m.to_owned()).at(param);
        if item.get("type").and_then(Value::as_str) != Some("message")
            || item.get("role").and_then(Value::as_str) != Some("user")
        {
            return Err(bad(
                "a spoken question is a user message with one input_audio part",
            ));
        }
        let parts = item.get("content").and_then(Value::as_array);
        let audio = match parts.map(Vec::as_slice) {
            Some([p]) if p.get("type").and_then(Value::as_str) == Some("input_audio") => p
                .get("audio")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("the input_audio part needs `audio`: base64 PCM16"))?,
            _ => {
                return Err(bad(
                    "a user message here has one input_audio part (spoken) or only input_text \
                     parts (typed)",
                ))
            }
        };
        let content = format!("{param}.content");
        let rate = self.input.rate();
        let max = (self.state.settings.max_audio_seconds * f64::from(rate)) as usize;
        if unb64_len(audio) / 2 > max {
            return Err(EventError::invalid(
                "audio_too_long",
                format!(
                    "the question is longer than this server's limit of {} s",
                    self.state.settings.max_audio_seconds
                ),
            )
            .at(content));
        }
        let bytes = unb64(audio).ok_or_else(|| {
            EventError::invalid("invalid_base64", "`audio` is not valid base64").at(&content)
        })?;
        let samples = pcm16_samples(&bytes)?;
        if ms_of(samples.len() as u64, rate) < MIN_COMMIT_MS {
            return Err(EventError::invalid(
                "audio_too_short",
                format!("a question needs at least {MIN_COMMIT_MS} ms of audio"),
            )
            .at(content));
        }
        Ok(Item {
            id: item_id(item),
            body: Body::User {
                wav: wav_of(&samples, rate),
                audio_ms: ms_of(samples.len() as u64, rate),
                committed: Instant::now(),
                transcript: None,
            },
        })
    }

    /// A `response.create`'s `input` (at `param`): item references to this conversation's
    /// items and new messages, in order.
    pub(super) fn input_items(&self, v: &Value, param: &str) -> Result<Vec<Item>, EventError> {
        let list = v.as_array().ok_or_else(|| {
            EventError::invalid(
                "invalid_value",
                format!("input must be a list of items, not {v}"),
            )
            .at(param)
        })?;
        let mut out = Vec::with_capacity(list.len());
        for (i, it) in list.iter().enumerate() {
            let at = format!("{param}[{i}]");
            let o = it.as_object().ok_or_else(|| {
                EventError::invalid(
                    "invalid_value",
                    format!("an input item is an object, not {it}"),
                )
                .at(&at)
            })?;
            if o.get("type").and_then(Value::as_str) == Some("item_reference") {
                let id = o.get("id").and_then(Value::as_str).unwrap_or("");
                let item = self.conv.get(id).ok_or_else(|| {
                    EventError::invalid(
                        "item_not_found",
                        format!("no conversation item has the id `{id}`"),
                    )
                    .at(format!("{at}.id"))
                })?;
                out.push(item.clone());
            } else {
                out.push(self.new_item(o, &at)?);
            }
        }
        Ok(out)
    }

    /// The item id an event names, refused while the running response writes that item.
    pub(super) fn idle_item<'a>(&self, o: &'a Map<String, Value>) -> Result<&'a str, EventError> {
        let id = o.get("item_id").and_then(Value::as_str).ok_or_else(|| {
            EventError::invalid("missing_item_id", "the event needs `item_id`").at("item_id")
        })?;
        if self.response.as_ref().is_some_and(|r| r.item_id == id) {
            return Err(EventError::invalid(
                "item_in_progress",
                format!("item `{id}` is being generated: cancel the response first"),
            )
            .at("item_id"));
        }
        Ok(id)
    }

    pub(super) fn item_truncate(&mut self, o: &Map<String, Value>) -> Result<Out, EventError> {
        let int = |k: &str| {
            o.get(k).and_then(Value::as_u64).ok_or_else(|| {
                EventError::invalid("invalid_value", format!("`{k}` must be an integer >= 0")).at(k)
            })
        };
        // why: a client truncates right after `speech_started`, while the reply the turn
        // detection cancelled is still stopping; or it truncates the reply still running, which
        // is how a client whose session has `interrupt_response` stops playback (the OpenAI
        // Agents SDK's `interrupt()`): the listener heard no more, so the reply is cancelled
        // (`client_cancelled`). Either way the cut waits for its end (see `finish`).
        if let Some(r) = self.response.as_mut() {
            if o.get("item_id").and_then(Value::as_str) == Some(r.item_id.as_str()) {
                let (content_index, audio_end_ms) = (int("content_index")?, int("audio_end_ms")?);
                if content_index != 0 {
                    return Err(EventError::invalid(
                        "invalid_content_index",
                        format!("a reply has one content part (index 0), not {content_index}"),
                    )
                    .at("content_index"));
                }
                r.cancel(CancelReason::Client);
                r.truncate_at_end = Some((content_index, audio_end_ms));
                return Ok(Vec::new());
            }
        }
        let id = self.idle_item(o)?.to_owned();
        let (content_index, audio_end_ms) = (int("content_index")?, int("audio_end_ms")?);
        self.conv
            .truncate(&id, content_index, audio_end_ms, self.entry.pool.model())?;
        Ok(vec![event(
            "conversation.item.truncated",
            json!({"item_id": id, "content_index": content_index, "audio_end_ms": audio_end_ms}),
        )])
    }

    pub(super) fn item_delete(&mut self, o: &Map<String, Value>) -> Result<Out, EventError> {
        let id = self.idle_item(o)?.to_owned();
        self.conv.delete(&id)?;
        // why: a transcription of a deleted question would name an item the client dropped.
        self.transcriber.forget(&id);
        Ok(vec![event(
            "conversation.item.deleted",
            json!({"item_id": id}),
        )])
    }
}

/// A string field of an item, required.
fn required_str<'a>(
    item: &'a Map<String, Value>,
    key: &str,
    param: &str,
) -> Result<&'a str, EventError> {
    item.get(key).and_then(Value::as_str).ok_or_else(|| {
        EventError::invalid("invalid_value", format!("the item needs `{key}`, a string"))
            .at(format!("{param}.{key}"))
    })
}

/// A `function_call` item a client adds (history it restores): `name`, `arguments` (a JSON
/// object's text), `call_id`.
fn function_call(item: &Map<String, Value>, param: &str) -> Result<Item, EventError> {
    let name = required_str(item, "name", param)?;
    let arguments = item
        .get("arguments")
        .and_then(Value::as_str)
        .unwrap_or("{}");
    call_arguments(arguments).map_err(|e| e.at(format!("{param}.arguments")))?;
    Ok(Item {
        id: item_id(item),
        body: Body::FunctionCall {
            call_id: required_str(item, "call_id", param)?.to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
            of_reply: false,
        },
    })
}

/// A `function_call_output` item: a tool's `output` for `call_id`.
fn function_output(item: &Map<String, Value>, param: &str) -> Result<Item, EventError> {
    Ok(Item {
        id: item_id(item),
        body: Body::FunctionOutput {
            call_id: required_str(item, "call_id", param)?.to_owned(),
            output: required_str(item, "output", param)?.to_owned(),
        },
    })
}

/// The id a client gave its item (kept: LiveKit matches its acks by it), or a fresh one.
fn item_id(item: &Map<String, Value>) -> String {
    item.get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.len() <= 64)
        .map_or_else(|| ids::fresh("item"), str::to_owned)
}
