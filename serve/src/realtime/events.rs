//! The server events' shapes, as the OpenAI SDK's `types/realtime` parse them. Names are the
//! GA ones; a socket opened with `OpenAI-Beta: realtime=v1` (or `?beta=1`) gets the beta names
//! of the events that were renamed (`response.audio.delta`, `response.audio_transcript.delta`,
//! their `.done`, `conversation.item.created`).

use serde_json::{json, Value};

use super::ids;

/// Which names a socket's events use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Names {
    /// The beta protocol's names.
    pub beta: bool,
}

/// A server event of `kind` with `fields` and a fresh `event_id`.
pub fn event(kind: &str, fields: Value) -> Value {
    let mut v = json!({"type": kind, "event_id": ids::fresh("event")});
    if let (Some(o), Value::Object(f)) = (v.as_object_mut(), fields) {
        o.extend(f);
    }
    v
}

impl Names {
    /// `response.output_audio.delta` (beta `response.audio.delta`).
    pub fn audio_delta(self) -> &'static str {
        if self.beta {
            "response.audio.delta"
        } else {
            "response.output_audio.delta"
        }
    }

    /// `response.output_audio.done` (beta `response.audio.done`).
    pub fn audio_done(self) -> &'static str {
        if self.beta {
            "response.audio.done"
        } else {
            "response.output_audio.done"
        }
    }

    /// `response.output_audio_transcript.delta` (beta `response.audio_transcript.delta`).
    pub fn transcript_delta(self) -> &'static str {
        if self.beta {
            "response.audio_transcript.delta"
        } else {
            "response.output_audio_transcript.delta"
        }
    }

    /// `response.output_audio_transcript.done` (beta `response.audio_transcript.done`).
    pub fn transcript_done(self) -> &'static str {
        if self.beta {
            "response.audio_transcript.done"
        } else {
            "response.output_audio_transcript.done"
        }
    }

    /// `response.output_text.delta` (beta `response.text.delta`).
    pub fn text_delta(self) -> &'static str {
        if self.beta {
            "response.text.delta"
        } else {
            "response.output_text.delta"
        }
    }

    /// `response.output_text.done` (beta `response.text.done`).
    pub fn text_done(self) -> &'static str {
        if self.beta {
            "response.text.done"
        } else {
            "response.output_text.done"
        }
    }

    /// The event that adds an item: `conversation.item.added` (beta
    /// `conversation.item.created`).
    pub fn item_added(self) -> &'static str {
        if self.beta {
            "conversation.item.created"
        } else {
            "conversation.item.added"
        }
    }

    /// An item joined the conversation (GA: `conversation.item.added` and, when it is
    /// complete, `conversation.item.done`; beta: `conversation.item.created`).
    pub fn item_events(self, item: &Value, previous: Option<&str>, complete: bool) -> Vec<Value> {
        let mut out = vec![event(
            self.item_added(),
            json!({"previous_item_id": previous, "item": item}),
        )];
        if complete && !self.beta {
            out.push(event(
                "conversation.item.done",
                json!({"previous_item_id": previous, "item": item}),
            ));
        }
        out
    }
}

/// The parts of a response's audio events that name where they belong.
pub fn part(response_id: &str, item_id: &str) -> Value {
    json!({"response_id": response_id, "item_id": item_id, "output_index": 0, "content_index": 0})
}

/// `fields` merged into `base`.
pub fn with(mut base: Value, fields: Value) -> Value {
    if let (Some(o), Value::Object(f)) = (base.as_object_mut(), fields) {
        o.extend(f);
    }
    base
}
