//! The socket's conversation, held by the server for its client: per turn a user item (the
//! question's WAV, the `lfm2_audio.question` artifact, or a typed question) and the
//! assistant's item (the reply artifact and its transcript, or a typed reply). A response sends
//! them to the engine as the request's history: typed items as text artifacts, which the
//! engine's conversation protocol takes beside spoken ones.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use audio_engine::lfm2_audio::conversation::{
    decode_reply, reply_audio_ms, truncate_reply, ReplyFormat, ReplyStep,
};
use audio_engine::lfm2_audio::{
    Artifact, ArtifactKind, AudioInput, Lfm2Audio, QUESTION_ID, REPLY_ID,
};

use super::error::EventError;
use super::session_config::Modality;

/// A user's question or an assistant's reply.
#[derive(Debug, Clone)]
pub enum Body {
    /// A question: its WAV (PCM16 mono at the input rate) and length.
    User {
        /// The question's WAV bytes.
        wav: Vec<u8>,
        /// Its length, ms.
        audio_ms: u64,
        /// When it was committed (where a response's latency counts from).
        committed: std::time::Instant,
        /// What the input transcription heard (`None` until it ran, or when the session does
        /// not ask for it).
        transcript: Option<String>,
    },
    /// A typed question (`input_text`).
    UserText {
        /// The question.
        text: String,
    },
    /// A reply: the artifact the next turn sends back (`None` while it is generated) and the
    /// transcript pieces as they were streamed, one per text event.
    Assistant {
        /// The reply artifact.
        artifact: Option<Artifact>,
        /// The streamed text pieces.
        transcript: Vec<String>,
        /// `completed`, `incomplete` (cancelled, cut at the step limit, truncated) or
        /// `in_progress`.
        status: &'static str,
        /// What its response sent: audio with this transcript, or this text alone.
        modality: Modality,
    },
}

/// One conversation item.
#[derive(Debug, Clone)]
pub struct Item {
    /// Its id (`item_...`).
    pub id: String,
    /// What it holds.
    pub body: Body,
}

impl Item {
    /// The bytes it holds: a question's WAV or text, a reply's artifact and transcript (what
    /// [`Conversation::room_for`] counts).
    pub fn bytes(&self) -> usize {
        match &self.body {
            Body::User {
                wav, transcript, ..
            } => wav.len() + transcript.as_ref().map_or(0, String::len),
            Body::UserText { text } => text.len(),
            Body::Assistant {
                artifact,
                transcript,
                ..
            } => {
                artifact.as_ref().map_or(0, |a| a.payload.len())
                    + transcript.iter().map(String::len).sum::<usize>()
            }
        }
    }

    /// The item as the API shows it (no audio bytes: a client has them already).
    pub fn json(&self) -> Value {
        match &self.body {
            Body::User { transcript, .. } => json!({
                "id": self.id, "object": "realtime.item", "type": "message", "role": "user",
                "status": "completed",
                "content": [{"type": "input_audio", "transcript": transcript}],
            }),
            Body::UserText { text } => json!({
                "id": self.id, "object": "realtime.item", "type": "message", "role": "user",
                "status": "completed",
                "content": [{"type": "input_text", "text": text}],
            }),
            Body::Assistant {
                transcript,
                status,
                modality,
                ..
            } => {
                let content = match modality {
                    Modality::Audio => {
                        json!({"type": "output_audio", "transcript": transcript.concat()})
                    }
                    Modality::Text => json!({"type": "output_text", "text": transcript.concat()}),
                };
                json!({
                    "id": self.id, "object": "realtime.item", "type": "message",
                    "role": "assistant", "status": status, "content": [content],
                })
            }
        }
    }
}

/// Where `conversation.item.create` puts its item (`previous_item_id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// At the end (no `previous_item_id`).
    End,
    /// At the start (`"root"`).
    Root,
    /// Right after the item with this id.
    After(String),
}

impl Place {
    /// The place a `previous_item_id` value names (`null` or absent: the end).
    pub fn parse(v: Option<&Value>) -> Result<Place, EventError> {
        match v {
            None | Some(Value::Null) => Ok(Place::End),
            Some(Value::String(s)) if s == "root" => Ok(Place::Root),
            Some(Value::String(s)) => Ok(Place::After(s.clone())),
            Some(other) => Err(EventError::invalid(
                "invalid_value",
                format!("previous_item_id must be a string, not {other}"),
            )
            .at("previous_item_id")),
        }
    }
}

/// The items of one socket, in order.
#[derive(Debug, Default)]
pub struct Conversation {
    items: Vec<Item>,
}

fn not_found(id: &str) -> EventError {
    EventError::invalid(
        "item_not_found",
        format!("no conversation item has the id `{id}`"),
    )
    .at("item_id")
}

impl Conversation {
    /// Refuses an item of `extra` bytes when the conversation would then hold more than `max`
    /// (the server's `--max-conversation-bytes`): one socket's memory stays bounded, and the
    /// client is told to delete older items.
    pub fn room_for(&self, extra: usize, max: usize) -> Result<(), EventError> {
        let held: usize = self.items.iter().map(Item::bytes).sum();
        if held.saturating_add(extra) > max {
            return Err(EventError::invalid(
                "conversation_too_large",
                format!(
                    "the conversation holds {held} bytes and this item {extra}: over the \
                     server's limit of {max} bytes (--max-conversation-bytes); delete older \
                     items (conversation.item.delete)"
                ),
            ));
        }
        Ok(())
    }

    /// The last item's id (`previous_item_id` of the next).
    pub fn last_id(&self) -> Option<String> {
        self.items.last().map(|i| i.id.clone())
    }

    /// Appends `item`; returns its `previous_item_id`.
    pub fn push(&mut self, item: Item) -> Option<String> {
        let prev = self.last_id();
        self.items.push(item);
        prev
    }

    /// Puts `item` at `place`; returns its `previous_item_id` (`None`: it is first). An
    /// unknown item to follow is an error and nothing changes.
    pub fn insert(&mut self, item: Item, place: &Place) -> Result<Option<String>, EventError> {
        let at = match place {
            Place::End => self.items.len(),
            Place::Root => 0,
            Place::After(id) => {
                let i = self.items.iter().position(|i| i.id == *id).ok_or_else(|| {
                    EventError::invalid(
                        "previous_item_not_found",
                        format!("no conversation item has the id `{id}` to insert after"),
                    )
                    .at("previous_item_id")
                })?;
                i + 1
            }
        };
        let prev = at.checked_sub(1).map(|i| self.items[i].id.clone());
        self.items.insert(at, item);
        Ok(prev)
    }

    /// The item `id`.
    pub fn get(&self, id: &str) -> Option<&Item> {
        self.items.iter().find(|i| i.id == id)
    }

    /// The item `id`, to change.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut Item> {
        self.items.iter_mut().find(|i| i.id == id)
    }

    /// Removes the item `id`.
    pub fn delete(&mut self, id: &str) -> Result<Item, EventError> {
        let at = self
            .items
            .iter()
            .position(|i| i.id == id)
            .ok_or_else(|| not_found(id))?;
        Ok(self.items.remove(at))
    }

    /// The next response's question and history: the last item must be a question and the
    /// ones before it pairs of a question and its reply (the engine's conversation protocol).
    pub fn request(&self) -> Result<(AudioInput, Vec<Artifact>), EventError> {
        request_of(&self.items)
    }

    /// The history of a question committed now: the items so far, which must be pairs of a
    /// question and its reply.
    pub fn history_for_new_question(&self) -> Result<Vec<Artifact>, EventError> {
        history_of(&self.items)
    }

    /// Cuts the reply `id` of `model` at `audio_end_ms` of its audio (what its listener heard):
    /// its artifact keeps the steps up to there, its transcript the text of the text steps kept.
    pub fn truncate(
        &mut self,
        id: &str,
        content_index: u64,
        audio_end_ms: u64,
        model: &Lfm2Audio,
    ) -> Result<(), EventError> {
        let fmt = &model.reply_format();
        let item = self.get_mut(id).ok_or_else(|| not_found(id))?;
        let Body::Assistant {
            artifact,
            transcript,
            status,
            ..
        } = &mut item.body
        else {
            return Err(EventError::invalid(
                "item_not_assistant",
                format!("item `{id}` is a question: only a reply's audio can be truncated"),
            )
            .at("item_id"));
        };
        if content_index != 0 {
            return Err(EventError::invalid(
                "invalid_content_index",
                format!("a reply has one content part (index 0), not {content_index}"),
            )
            .at("content_index"));
        }
        let Some(art) = artifact.as_ref() else {
            return Err(EventError::invalid(
                "item_in_progress",
                format!("reply `{id}` is still being generated: cancel it first"),
            )
            .at("item_id"));
        };
        if art.kind == ArtifactKind::Text {
            return Err(EventError::invalid(
                "item_not_audio",
                format!("item `{id}` is a typed reply: it has no audio to truncate"),
            )
            .at("item_id"));
        }
        let cut = truncate_reply(art, fmt, audio_end_ms).map_err(|e| {
            EventError::invalid("invalid_audio_end_ms", e.to_string()).at("audio_end_ms")
        })?;
        if cut != *art {
            *transcript = vec![reply_text(&cut, model)?];
        }
        if cut != *art {
            *status = "incomplete";
        }
        *artifact = Some(cut);
        Ok(())
    }
}

/// The text of a reply artifact's text steps, as the stream gave it (control tokens left out,
/// the bytes read as UTF-8).
fn reply_text(art: &Artifact, model: &Lfm2Audio) -> Result<String, EventError> {
    let bad = |e: String| EventError::invalid("invalid_item", e);
    let steps = decode_reply(art, &model.reply_format())
        .map_err(|e| bad(e.to_string()))?
        .steps;
    let tok = model.tokenizer();
    let ids: Vec<u32> = steps
        .iter()
        .filter_map(|s| match s {
            ReplyStep::Text(t) if !tok.is_control(*t) => Some(*t),
            _ => None,
        })
        .collect();
    let bytes = tok.decode_bytes(&ids).map_err(|e| bad(e.to_string()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The question and history of a response to `items`: the last one must be a question and the
/// ones before it pairs of a question and its reply (the engine's conversation protocol).
/// A typed question is asked as the history's trailing text question (the engine's way: a
/// history ending in a question asks it) with no audio.
pub fn request_of(items: &[Item]) -> Result<(AudioInput, Vec<Artifact>), EventError> {
    let Some((last, earlier)) = items.split_last() else {
        return Err(EventError::invalid(
            "conversation_empty",
            "the conversation has no question to answer: commit the input audio buffer \
                 or create an audio item first",
        ));
    };
    let mut history = history_of(earlier)?;
    match &last.body {
        Body::User { wav, .. } => Ok((AudioInput::Wav(wav.clone()), history)),
        Body::UserText { text } => {
            history.push(text_artifact(QUESTION_ID, text));
            Ok((AudioInput::default(), history))
        }
        Body::Assistant { .. } => Err(EventError::invalid(
            "no_question",
            format!(
                "the conversation's last item `{}` is a reply: commit a question first",
                last.id
            ),
        )),
    }
}

/// Milliseconds of audio a reply artifact holds (0 for one that does not decode).
pub fn artifact_ms(art: &Artifact, fmt: &ReplyFormat) -> u64 {
    reply_audio_ms(art, fmt).unwrap_or(0)
}

/// The history of the items `earlier`: pairs of a question and its reply, as artifacts.
fn history_of(earlier: &[Item]) -> Result<Vec<Artifact>, EventError> {
    if !earlier.len().is_multiple_of(2) {
        return Err(unpaired(earlier.len()));
    }
    let mut history = Vec::with_capacity(earlier.len());
    for pair in earlier.chunks(2) {
        let question = match &pair[0].body {
            Body::User { wav, .. } => question_artifact(wav),
            Body::UserText { text } => text_artifact(QUESTION_ID, text),
            Body::Assistant { .. } => return Err(unpaired(earlier.len())),
        };
        let Body::Assistant {
            artifact: Some(reply),
            ..
        } = &pair[1].body
        else {
            return Err(unpaired(earlier.len()));
        };
        history.push(question);
        history.push(reply.clone());
    }
    Ok(history)
}

fn unpaired(n: usize) -> EventError {
    EventError::invalid(
        "conversation_unpaired",
        format!(
            "the {n} items before the question must be pairs of a question and its finished \
             reply (the engine's conversation protocol): delete the unpaired items"
        ),
    )
}

/// A typed turn's artifact: `id` ([`QUESTION_ID`] or [`REPLY_ID`]) of kind text, its payload
/// the UTF-8 text (how the engine's history takes typed questions and replies).
pub fn text_artifact(id: &str, text: &str) -> Artifact {
    Artifact {
        id: id.into(),
        kind: ArtifactKind::Text,
        payload: text.as_bytes().to_vec(),
        meta: BTreeMap::new(),
    }
}

/// A typed reply's artifact (an assistant message a client created).
pub fn text_reply_artifact(text: &str) -> Artifact {
    text_artifact(REPLY_ID, text)
}

/// The history artifact of a question's WAV.
pub fn question_artifact(wav: &[u8]) -> Artifact {
    Artifact {
        id: QUESTION_ID.into(),
        kind: ArtifactKind::Custom,
        payload: wav.to_vec(),
        meta: BTreeMap::new(),
    }
}
