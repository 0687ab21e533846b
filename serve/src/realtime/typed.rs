//! Typed conversation items (`conversation.item.create`, a `response.create`'s `input`): a
//! user message of `input_text` parts is a typed question, an assistant message of
//! `output_text` / `text` parts (or audio parts that carry only a `transcript`) a typed reply.
//! Both enter the engine's history as text artifacts; a typed question is answered with
//! speech like a spoken one.

use serde_json::{Map, Value};

use audio_engine::lfm2_audio::limits::MAX_TTS_TEXT_BYTES;

use super::error::EventError;

/// The longest typed item, bytes (the engine's longest text to speak: a typed item is prompt
/// text of the same kind, and the conversation's token limit bounds the rest).
pub const MAX_TEXT_BYTES: usize = MAX_TTS_TEXT_BYTES;

fn unsupported(param: &str, message: impl Into<String>) -> EventError {
    EventError::invalid("unsupported_item", message).at(param)
}

/// A message's content parts (at `param`).
fn parts<'a>(item: &'a Map<String, Value>, param: &str) -> Result<&'a [Value], EventError> {
    item.get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| {
            unsupported(
                &format!("{param}.content"),
                "a message needs a non-empty `content` list",
            )
        })
}

/// Whether a user message is typed: every part is `input_text` (a spoken one holds
/// `input_audio`).
pub fn is_typed(item: &Map<String, Value>) -> bool {
    item.get("content")
        .and_then(Value::as_array)
        .is_some_and(|p| {
            !p.is_empty()
                && p.iter()
                    .all(|p| p.get("type").and_then(Value::as_str) == Some("input_text"))
        })
}

/// The text of `parts` whose type is one of `kinds`, read from `field`s (the first one a part
/// has), joined by newlines; another part type, a missing or empty text, or a text past
/// [`MAX_TEXT_BYTES`] is an error at `param`.
fn joined(parts: &[Value], kinds: &[(&str, &str)], param: &str) -> Result<String, EventError> {
    let mut texts = Vec::with_capacity(parts.len());
    for (i, p) in parts.iter().enumerate() {
        let at = format!("{param}.content[{i}]");
        let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
        let Some((_, field)) = kinds.iter().find(|(k, _)| *k == kind) else {
            let names: Vec<&str> = kinds.iter().map(|(k, _)| *k).collect();
            return Err(unsupported(
                &format!("{at}.type"),
                format!(
                    "content part type `{kind}` is not taken here: use {}",
                    names.join(" or ")
                ),
            ));
        };
        let text = p.get(*field).and_then(Value::as_str).ok_or_else(|| {
            EventError::invalid(
                "invalid_value",
                format!("a `{kind}` part needs `{field}`: a string"),
            )
            .at(format!("{at}.{field}"))
        })?;
        texts.push(text);
    }
    let text = texts.join("\n");
    if text.trim().is_empty() {
        return Err(
            EventError::invalid("empty_text", "the message's text is empty")
                .at(format!("{param}.content")),
        );
    }
    if text.len() > MAX_TEXT_BYTES {
        return Err(EventError::invalid(
            "text_too_long",
            format!(
                "the message's text is {} bytes, over the {MAX_TEXT_BYTES}-byte limit",
                text.len()
            ),
        )
        .at(format!("{param}.content")));
    }
    Ok(text)
}

/// A typed user message's question: its `input_text` parts' texts.
pub fn user_text(item: &Map<String, Value>, param: &str) -> Result<String, EventError> {
    joined(parts(item, param)?, &[("input_text", "text")], param)
}

/// An assistant message's text: its `output_text` / `text` parts' texts, or the `transcript`
/// of its `output_audio` / `audio` parts (the model takes a reply's audio only as the codes
/// it generated, so a client's assistant audio enters the history as its transcript).
pub fn assistant_text(item: &Map<String, Value>, param: &str) -> Result<String, EventError> {
    joined(
        parts(item, param)?,
        &[
            ("output_text", "text"),
            ("text", "text"),
            ("output_audio", "transcript"),
            ("audio", "transcript"),
        ],
        param,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_typed_question_joins_its_parts_and_refuses_others() {
        let q = obj(json!({"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "Hello."}, {"type": "input_text", "text": "Hi?"}]}));
        assert!(is_typed(&q));
        assert_eq!(user_text(&q, "item").unwrap(), "Hello.\nHi?");
        let mixed = obj(json!({"content": [{"type": "input_text", "text": "a"},
                                           {"type": "input_audio", "audio": ""}]}));
        assert!(!is_typed(&mixed));
        let e = user_text(&mixed, "item").unwrap_err();
        assert_eq!(e.param.as_deref(), Some("item.content[1].type"));
        let empty = obj(json!({"content": [{"type": "input_text", "text": "  "}]}));
        assert_eq!(user_text(&empty, "item").unwrap_err().code, "empty_text");
        let none = obj(json!({"content": []}));
        assert_eq!(
            user_text(&none, "item").unwrap_err().param.as_deref(),
            Some("item.content")
        );
        let long = obj(json!({"content": [{"type": "input_text",
                                           "text": "a".repeat(MAX_TEXT_BYTES + 1)}]}));
        assert_eq!(user_text(&long, "item").unwrap_err().code, "text_too_long");
    }

    #[test]
    fn an_assistant_message_takes_text_and_audio_transcripts() {
        let a = obj(json!({"content": [{"type": "output_text", "text": "Sure."},
                                       {"type": "audio", "transcript": "Go on."}]}));
        assert_eq!(assistant_text(&a, "item").unwrap(), "Sure.\nGo on.");
        let no_text = obj(json!({"content": [{"type": "text"}]}));
        assert_eq!(
            assistant_text(&no_text, "item")
                .unwrap_err()
                .param
                .as_deref(),
            Some("item.content[0].text")
        );
    }
}
