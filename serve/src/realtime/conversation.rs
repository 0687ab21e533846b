//! The socket's conversation, held by the server for its client: per turn a user item (the
//! question's WAV, the `lfm2_audio.question` artifact, or a typed question) and the
//! assistant's item (the reply artifact and its transcript, or a typed reply). A response sends
//! them to the engine as the request's history: typed items as text artifacts, which the
//! engine's conversation protocol takes beside spoken ones.
//!
//! Tools: a reply's calls are `function_call` items after its message (their text is in the
//! reply's artifact already, so the history skips them); `function_call_output` items in a row
//! are one turn of role `tool` (the outputs joined by newlines), which takes a question's place
//! and is answered by the next response; calls a client adds itself (history it restores)
//! answer the question before them as a typed reply in the model's call form.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use audio_engine::lfm2_audio::conversation::{
    decode_reply, reply_audio_ms, truncate_reply, ReplyFormat, ReplyStep,
};
use audio_engine::lfm2_audio::tools::{write_calls, ToolCall};
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
    /// A function call: one a reply made (its text is in that reply's artifact) or one a
    /// client added.
    FunctionCall {
        /// The id its output names.
        call_id: String,
        /// The function.
        name: String,
        /// Its arguments, a JSON object's text.
        arguments: String,
        /// Whether a reply of this conversation made it (else a client added it).
        of_reply: bool,
    },
    /// A tool's result for a call (`function_call_output`).
    FunctionOutput {
        /// The call it answers.
        call_id: String,
        /// What the tool returned, as the client sent it.
        output: String,
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
            Body::FunctionCall {
                call_id,
                name,
                arguments,
                ..
            } => call_id.len() + name.len() + arguments.len(),
            Body::FunctionOutput { call_id, output } => call_id.len() + output.len(),
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
            Body::FunctionCall {
                call_id,
                name,
                arguments,
                ..
            } => json!({
                "id": self.id, "object": "realtime.item", "type": "function_call",
                "status": "completed", "call_id": call_id, "name": name, "arguments": arguments,
            }),
            Body::FunctionOutput { call_id, output } => json!({
                "id": self.id, "object": "realtime.item", "type": "function_call_output",
                "call_id": call_id, "output": output,
            }),
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

/// The question and history of a response to `items`: the last turn must be a question (a
/// user message, or tools' outputs) and the ones before it pairs of a question and its reply
/// (the engine's conversation protocol). A typed question or a tool turn is asked as the
/// history's trailing text question (the engine's way: a history ending in a question asks
/// it) with no audio.
pub fn request_of(items: &[Item]) -> Result<(AudioInput, Vec<Artifact>), EventError> {
    if let Some(
        last @ Item {
            body: Body::Assistant { .. } | Body::FunctionCall { .. },
            ..
        },
    ) = items.last()
    {
        return Err(EventError::invalid(
            "no_question",
            format!(
                "the conversation's last item `{}` is a reply: commit a question first",
                last.id
            ),
        ));
    }
    let turns = turns_of(items)?;
    let mut history = turns.history;
    match turns.open {
        Some(Open::Spoken(wav)) => Ok((AudioInput::Wav(wav), history)),
        Some(Open::Typed(question)) => {
            history.push(question);
            Ok((AudioInput::default(), history))
        }
        None => Err(match items.last() {
            None => EventError::invalid(
                "conversation_empty",
                "the conversation has no question to answer: commit the input audio buffer \
                 or create an audio item first",
            ),
            Some(last) => EventError::invalid(
                "no_question",
                format!(
                    "the conversation's last item `{}` is a reply: commit a question first",
                    last.id
                ),
            ),
        }),
    }
}

/// Milliseconds of audio a reply artifact holds (0 for one that does not decode).
pub fn artifact_ms(art: &Artifact, fmt: &ReplyFormat) -> u64 {
    reply_audio_ms(art, fmt).unwrap_or(0)
}

/// The history of the items `earlier`: pairs of a question and its reply, as artifacts.
fn history_of(earlier: &[Item]) -> Result<Vec<Artifact>, EventError> {
    let turns = turns_of(earlier)?;
    if turns.open.is_some() {
        return Err(unpaired(earlier.len()));
    }
    Ok(turns.history)
}

/// A question with no reply yet.
enum Open {
    /// A spoken one's WAV.
    Spoken(Vec<u8>),
    /// A typed question's or a tool turn's artifact.
    Typed(Artifact),
}

impl Open {
    fn artifact(self) -> Artifact {
        match self {
            Open::Spoken(wav) => question_artifact(&wav),
            Open::Typed(a) => a,
        }
    }
}

/// Items read as the engine's turns.
struct Turns {
    /// Pairs of a question and its reply, as artifacts.
    history: Vec<Artifact>,
    /// The question after them with no reply yet.
    open: Option<Open>,
}

/// Reads `items` as turns: a question (a user message, or tools' outputs in a row, one tool
/// turn) then its reply (the assistant's artifact, or calls a client added, in the model's
/// call form); a reply's own calls are in its artifact and left out.
fn turns_of(items: &[Item]) -> Result<Turns, EventError> {
    let mut history = Vec::new();
    let mut open: Option<Open> = None;
    let mut outputs: Vec<&str> = Vec::new();
    let mut calls: Vec<ToolCall> = Vec::new();
    let unpaired = || unpaired(items.len());
    // A tool turn's outputs are gathered until the next item that is not one.
    let close_outputs = |outputs: &mut Vec<&str>, open: &mut Option<Open>| {
        if !outputs.is_empty() {
            *open = Some(Open::Typed(tool_artifact(&outputs.join("\n"))));
            outputs.clear();
        }
    };
    // Calls a client added answer the question before them.
    let close_calls = |calls: &mut Vec<ToolCall>,
                       open: &mut Option<Open>,
                       history: &mut Vec<Artifact>|
     -> Result<(), EventError> {
        if calls.is_empty() {
            return Ok(());
        }
        let question = open.take().ok_or_else(|| {
            EventError::invalid(
                "conversation_unpaired",
                "a function_call item a client adds must follow the question it answers",
            )
        })?;
        history.push(question.artifact());
        history.push(text_reply_artifact(&write_calls(calls)));
        calls.clear();
        Ok(())
    };
    for item in items {
        if !matches!(item.body, Body::FunctionOutput { .. }) {
            close_outputs(&mut outputs, &mut open);
        }
        if !matches!(
            item.body,
            Body::FunctionCall {
                of_reply: false,
                ..
            }
        ) {
            close_calls(&mut calls, &mut open, &mut history)?;
        }
        match &item.body {
            Body::User { wav, .. } => {
                if open.is_some() {
                    return Err(unpaired());
                }
                open = Some(Open::Spoken(wav.clone()));
            }
            Body::UserText { text } => {
                if open.is_some() {
                    return Err(unpaired());
                }
                open = Some(Open::Typed(text_artifact(QUESTION_ID, text)));
            }
            Body::Assistant {
                artifact: Some(reply),
                ..
            } => {
                let question = open.take().ok_or_else(unpaired)?;
                history.push(question.artifact());
                history.push(reply.clone());
            }
            Body::Assistant { artifact: None, .. } => return Err(unpaired()),
            Body::FunctionCall { of_reply: true, .. } => {}
            Body::FunctionCall {
                name, arguments, ..
            } => calls.push(ToolCall {
                name: name.clone(),
                arguments: call_arguments(arguments)?,
            }),
            Body::FunctionOutput { output, .. } => {
                if open.is_some() || history.is_empty() {
                    return Err(EventError::invalid(
                        "conversation_unpaired",
                        "a function_call_output answers a reply's call: it must follow a reply",
                    ));
                }
                outputs.push(output);
            }
        }
    }
    close_outputs(&mut outputs, &mut open);
    close_calls(&mut calls, &mut open, &mut history)?;
    Ok(Turns { history, open })
}

/// A call's `arguments` text as the JSON object it must be.
pub fn call_arguments(arguments: &str) -> Result<serde_json::Map<String, Value>, EventError> {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(EventError::invalid(
            "invalid_value",
            format!("a function call's arguments are a JSON object, not {other}"),
        )
        .at("item.arguments")),
        Err(e) => Err(EventError::invalid(
            "invalid_value",
            format!("a function call's arguments are not JSON: {e}"),
        )
        .at("item.arguments")),
    }
}

/// A tool turn's artifact: its outputs as a text question of role `tool`.
pub fn tool_artifact(output: &str) -> Artifact {
    let mut art = text_artifact(QUESTION_ID, output);
    art.meta.insert("role".into(), json!("tool"));
    art
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

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, body: Body) -> Item {
        Item {
            id: id.into(),
            body,
        }
    }

    fn asked(text: &str) -> Body {
        Body::UserText { text: text.into() }
    }

    fn replied(text: &str) -> Body {
        Body::Assistant {
            artifact: Some(text_reply_artifact(text)),
            transcript: vec![text.into()],
            status: "completed",
            modality: Modality::Text,
        }
    }

    fn call(of_reply: bool) -> Body {
        Body::FunctionCall {
            call_id: "call_1".into(),
            name: "get_weather".into(),
            arguments: r#"{"city": "Paris"}"#.into(),
            of_reply,
        }
    }

    fn output(text: &str) -> Body {
        Body::FunctionOutput {
            call_id: "call_1".into(),
            output: text.into(),
        }
    }

    fn texts(arts: &[Artifact]) -> Vec<(String, String, Option<String>)> {
        arts.iter()
            .map(|a| {
                (
                    a.id.clone(),
                    String::from_utf8(a.payload.clone()).unwrap(),
                    a.meta
                        .get("role")
                        .and_then(|r| r.as_str())
                        .map(str::to_owned),
                )
            })
            .collect()
    }

    #[test]
    fn tool_outputs_in_a_row_are_one_tool_turn_that_is_asked() {
        // A reply that called a tool (its call item is a view of the reply: left out), the
        // tool's two outputs: the response answers one tool turn.
        let items = [
            item("q", asked("Weather?")),
            item("r", replied("Checking.")),
            item("c", call(true)),
            item("o1", output("21 C")),
            item("o2", output("sunny")),
        ];
        let (audio, history) = request_of(&items).unwrap();
        assert!(matches!(audio, AudioInput::Wav(ref w) if w.is_empty()));
        assert_eq!(
            texts(&history),
            [
                (QUESTION_ID.into(), "Weather?".into(), None),
                (REPLY_ID.into(), "Checking.".into(), None),
                (
                    QUESTION_ID.into(),
                    "21 C\nsunny".into(),
                    Some("tool".into())
                ),
            ]
        );
    }

    #[test]
    fn a_clients_call_answers_its_question_in_the_models_form() {
        let items = [
            item("q", asked("Weather?")),
            item("c", call(false)),
            item("o", output("21 C")),
        ];
        let (_, history) = request_of(&items).unwrap();
        let t = texts(&history);
        assert_eq!(t[1].0, REPLY_ID);
        assert_eq!(
            t[1].1,
            "<|tool_call_start|>[get_weather(city=\"Paris\")]<|tool_call_end|>"
        );
        assert_eq!(t[2].2.as_deref(), Some("tool"));
    }

    #[test]
    fn tool_items_out_of_place_are_refused() {
        let code = |items: &[Item]| request_of(items).unwrap_err().code;
        // An output with no reply before it.
        assert_eq!(code(&[item("o", output("x"))]), "conversation_unpaired");
        assert_eq!(
            code(&[item("q", asked("a")), item("o", output("x"))]),
            "conversation_unpaired"
        );
        // A client's call with no question before it.
        assert_eq!(
            code(&[
                item("q", asked("a")),
                item("r", replied("b")),
                item("c", call(false)),
                item("q2", asked("c")),
            ]),
            "conversation_unpaired"
        );
        // A call last: nothing to answer.
        assert_eq!(
            code(&[item("q", asked("a")), item("c", call(false))]),
            "no_question"
        );
        // Pairs without tools read as before.
        let (_, h) = request_of(&[
            item("q", asked("a")),
            item("r", replied("b")),
            item("q2", asked("c")),
        ])
        .unwrap();
        assert_eq!(h.len(), 3);
        assert!(history_of(&[item("q", asked("a"))]).is_err());
    }

    #[test]
    fn tool_items_show_their_api_shape() {
        let c = item("c", call(true)).json();
        assert_eq!(c["type"], "function_call");
        assert_eq!(c["call_id"], "call_1");
        assert_eq!(c["arguments"], r#"{"city": "Paris"}"#);
        let o = item("o", output("21 C")).json();
        assert_eq!(o["type"], "function_call_output");
        assert_eq!(o["output"], "21 C");
    }
}
