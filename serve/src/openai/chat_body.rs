//! A chat completion's body: its fields, the output it asks for, and the conversation its
//! messages hold (the system prompt, the earlier turns as artifacts, the new question, spoken
//! or typed), each checked before a model is involved.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use audio_engine::lfm2_audio::conversation::REPLY_ID;
use audio_engine::lfm2_audio::tools::{write_calls, ToolCall};
use audio_engine::lfm2_audio::{Artifact, ArtifactKind, QUESTION_ID};

use crate::artifact_limits::ArtifactTally;
use crate::audio_io::{unb64, unb64_len};
use crate::error::ApiError;
use crate::tasks::{artifacts_in, ArtifactIn};

/// The body of `POST /v1/chat/completions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ChatBody {
    #[serde(default)]
    pub(super) model: Option<String>,
    messages: Vec<ChatMessage>,
    #[serde(default)]
    modalities: Option<Vec<String>>,
    #[serde(default)]
    audio: Option<AudioParams>,
    #[serde(default)]
    pub(super) stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<Value>,
    #[serde(default)]
    pub(super) max_tokens: Option<usize>,
    #[serde(default)]
    pub(super) max_completion_tokens: Option<usize>,
    #[serde(default)]
    pub(super) seed: Option<u64>,
    #[serde(default)]
    pub(super) temperature: Option<f32>,
    #[serde(default)]
    pub(super) top_k: Option<usize>,
    #[serde(default)]
    n: Option<u32>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    pub(super) busy_timeout_ms: Option<u64>,
    /// Liquid's dialect ([`super::liquid`]): `true` (the only value taken here).
    #[serde(default)]
    pub(super) reset_context: Option<bool>,
    /// Function tools, listed in the system turn in LFM2's form (see [`prompt_tools`]).
    #[serde(default)]
    tools: Option<Vec<Value>>,
    /// `"auto"`, `"none"` (the tools are left out), `"required"` or a named function (both
    /// taken as `"auto"`: the model decides).
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    parallel_tool_calls: Option<bool>,
}

impl ChatBody {
    /// The function tools that go into the prompt: none without `tools` or with `tool_choice`
    /// `"none"`; each a `{"type": "function", "function": {...}}` or a bare definition.
    pub(super) fn prompt_tools(&self) -> Result<Vec<Value>, ApiError> {
        let _ = self.parallel_tool_calls;
        let tools = self.tools.clone().unwrap_or_default();
        for (i, t) in tools.iter().enumerate() {
            let f = t.get("function").unwrap_or(t);
            let name = f.get("name").and_then(Value::as_str).unwrap_or("");
            if name.is_empty() {
                return Err(ApiError::invalid(format!(
                    "tools[{i}]: a function tool needs a `name` (in `function`)"
                )));
            }
            if t.get("type")
                .and_then(Value::as_str)
                .is_some_and(|k| k != "function")
            {
                return Err(ApiError::invalid(format!(
                    "tools[{i}]: only function tools are taken"
                )));
            }
        }
        match &self.tool_choice {
            None | Some(Value::Null) => Ok(tools),
            Some(Value::String(c)) if c == "none" => Ok(Vec::new()),
            Some(Value::String(c)) if c == "auto" || c == "required" => Ok(tools),
            Some(Value::Object(o)) if o.get("type").and_then(Value::as_str) == Some("function") => {
                Ok(tools)
            }
            Some(other) => Err(ApiError::invalid(format!(
                "tool_choice is \"none\", \"auto\", \"required\" or {{\"type\": \"function\", \
                 ...}}, not {other}"
            ))),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AudioParams {
    #[serde(default)]
    voice: Option<String>,
    #[serde(default)]
    format: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChatMessage {
    role: String,
    #[serde(default)]
    content: Option<Value>,
    /// OpenAI's assistant audio reference (`{"id"}`), accepted and ignored.
    #[serde(default)]
    audio: Option<Value>,
    /// Our extension: the reply artifact the assistant turn was returned.
    #[serde(default)]
    lfm2_audio_reply: Option<ArtifactIn>,
    #[serde(default)]
    name: Option<String>,
    /// An assistant message's calls (`[{"id", "type": "function", "function": {"name",
    /// "arguments"}}]`).
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
    /// A tool message's call (taken, not needed: the outputs follow their reply in order).
    #[serde(default)]
    tool_call_id: Option<String>,
}

/// A user message's question: spoken (WAV bytes) or typed (its text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Question {
    /// An `input_audio` part's WAV bytes.
    Spoken(Vec<u8>),
    /// String content, or the message's `text` parts joined by newlines.
    Typed(String),
    /// Tool messages after a reply (their contents joined by newlines): a turn of role `tool`.
    Tool(String),
}

impl Question {
    /// The history artifact of the question once a reply follows it.
    pub(super) fn into_artifact(self) -> Artifact {
        let mut meta = BTreeMap::new();
        let (kind, payload) = match self {
            Question::Spoken(wav) => (ArtifactKind::Custom, wav),
            Question::Typed(text) => (ArtifactKind::Text, text.into_bytes()),
            Question::Tool(text) => {
                meta.insert("role".into(), Value::from("tool"));
                (ArtifactKind::Text, text.into_bytes())
            }
        };
        Artifact {
            id: QUESTION_ID.into(),
            kind,
            payload,
            meta,
        }
    }
}

/// The text of a message's `text` parts (`{"type":"text","text":...}`), joined by newlines, or
/// `None` when it has none.
fn text_parts(parts: &[Value], i: usize) -> Result<Option<String>, ApiError> {
    let mut texts = Vec::new();
    for (j, p) in parts.iter().enumerate() {
        if p.get("type").and_then(Value::as_str) == Some("text") {
            let t = p.get("text").and_then(Value::as_str).ok_or_else(|| {
                ApiError::invalid(format!(
                    "messages[{i}].content[{j}]: a text part needs a string `text`"
                ))
            })?;
            texts.push(t);
        }
    }
    Ok((!texts.is_empty()).then(|| texts.join("\n")))
}

/// A user message's question: its `input_audio` part (one, base64 WAV), or its text (string
/// content or `text` parts); a message with both, or with neither, is refused (a turn asks one
/// question).
fn user_question(m: &ChatMessage, i: usize) -> Result<Question, ApiError> {
    let parts = match &m.content {
        Some(Value::String(s)) => return typed(s, i),
        Some(Value::Array(p)) => p,
        _ => {
            return Err(ApiError::invalid(format!(
                "messages[{i}]: a user message needs string content, or an `input_audio` or \
                 `text` content part"
            )))
        }
    };
    let mut audio = None;
    for (j, p) in parts.iter().enumerate() {
        match p.get("type").and_then(Value::as_str) {
            Some("input_audio") => {
                let ia = p.get("input_audio").ok_or_else(|| {
                    ApiError::invalid(format!("messages[{i}].content[{j}]: `input_audio` missing"))
                })?;
                if let Some(f) = ia.get("format").and_then(Value::as_str) {
                    if f != "wav" {
                        return Err(ApiError::invalid(format!(
                            "messages[{i}].content[{j}]: input_audio format `{f}` is not wav"
                        )));
                    }
                }
                let data = ia.get("data").and_then(Value::as_str).ok_or_else(|| {
                    ApiError::invalid(format!(
                        "messages[{i}].content[{j}]: input_audio.data (base64 WAV) missing"
                    ))
                })?;
                let b = unb64(data)
                    .filter(|b| b.starts_with(b"RIFF"))
                    .ok_or_else(|| {
                        ApiError::invalid(format!(
                            "messages[{i}].content[{j}]: input_audio.data is not a base64 WAV"
                        ))
                    })?;
                if audio.replace(b).is_some() {
                    return Err(ApiError::invalid(format!(
                        "messages[{i}]: one input_audio part per user message"
                    )));
                }
            }
            Some("text") => {}
            other => {
                return Err(ApiError::invalid(format!(
                    "messages[{i}].content[{j}]: unknown content part type {other:?}"
                )))
            }
        }
    }
    match (audio, text_parts(parts, i)?) {
        (Some(_), Some(_)) => Err(ApiError::invalid(format!(
            "messages[{i}]: a user message is spoken (input_audio) or typed (text), not both: \
             each turn asks one question"
        ))),
        (Some(wav), None) => Ok(Question::Spoken(wav)),
        (None, Some(text)) => typed(&text, i),
        (None, None) => Err(ApiError::invalid(format!(
            "messages[{i}]: no input_audio or text content part"
        ))),
    }
}

fn typed(text: &str, i: usize) -> Result<Question, ApiError> {
    if text.trim().is_empty() {
        return Err(ApiError::invalid(format!(
            "messages[{i}]: the user message's text is empty"
        )));
    }
    Ok(Question::Typed(text.to_owned()))
}

/// An earlier assistant message's text, for a text-only reply: string content or `text` parts.
fn assistant_text(m: &ChatMessage, i: usize) -> Result<Option<String>, ApiError> {
    Ok(match &m.content {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(p)) => text_parts(p, i)?,
        _ => None,
    }
    .filter(|t| !t.trim().is_empty()))
}

/// The chat body's output choices: whether the reply carries audio, and its format; checked
/// before any model is picked.
pub(super) fn chat_output(b: &ChatBody) -> Result<(bool, String), ApiError> {
    let _ = (&b.user, &b.stream_options);
    if b.n.is_some_and(|n| n != 1) {
        return Err(ApiError::invalid("n must be 1"));
    }
    let modalities = b
        .modalities
        .clone()
        .unwrap_or_else(|| vec!["text".into(), "audio".into()]);
    if let Some(m) = modalities.iter().find(|m| *m != "text" && *m != "audio") {
        return Err(ApiError::invalid(format!(
            "unknown modality `{m}` (text, audio)"
        )));
    }
    let want_audio = modalities.iter().any(|m| m == "audio");
    let audio_format = b
        .audio
        .as_ref()
        .and_then(|a| a.format.clone())
        .unwrap_or_else(|| "wav".into());
    if !["wav", "pcm16"].contains(&audio_format.as_str()) {
        return Err(ApiError::invalid(format!(
            "audio.format `{audio_format}` is not wav or pcm16"
        )));
    }
    if let Some(v) = b.audio.as_ref().and_then(|a| a.voice.as_deref()) {
        if !v.is_empty() && v != "default" {
            return Err(ApiError::invalid(format!(
                "audio.voice `{v}`: speech-to-speech replies have the model's own voice \
                 (leave it out or use \"default\")"
            )));
        }
    }
    Ok((want_audio, audio_format))
}

/// Bytes of a message's question or text-only reply: its `input_audio` data, from the base64
/// lengths alone, and its text.
fn declared_bytes(m: &ChatMessage) -> usize {
    match &m.content {
        Some(Value::String(s)) => s.len(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| {
                p.get("input_audio")
                    .and_then(|a| a.get("data")?.as_str())
                    .map(unb64_len)
                    .or_else(|| p.get("text")?.as_str().map(str::len))
            })
            .fold(0usize, usize::saturating_add),
        _ => 0,
    }
}

/// The artifacts the earlier turns of `messages` become (each assistant message: the user
/// question before it and its reply), counted from the JSON before anything is decoded.
fn declared_history(messages: &[ChatMessage]) -> ArtifactTally {
    let mut t = ArtifactTally::default();
    let mut question = 0;
    for m in messages {
        match m.role.as_str() {
            "user" => question = declared_bytes(m),
            "tool" => question += declared_bytes(m),
            "assistant" => {
                t.add(std::mem::take(&mut question));
                t.add(match m.lfm2_audio_reply.as_ref() {
                    Some(r) => r.payload.as_deref().map_or(0, unb64_len),
                    None => declared_bytes(m),
                });
            }
            _ => {}
        }
    }
    t
}

/// A chat body's system prompt, earlier turns (as artifacts) and new question.
pub(super) type Conversation = (Option<String>, Vec<Artifact>, Question);

/// The conversation of a chat body: the system prompt, the earlier turns as artifacts (a typed
/// question or a text-only assistant reply as a `text` artifact) and the new question.
pub(super) fn chat_conversation(b: &ChatBody) -> Result<Conversation, ApiError> {
    // why: the engine's artifact limits, before any turn is decoded (see
    // crate::artifact_limits).
    declared_history(&b.messages).check()?;
    // The conversation: [system] (user assistant)* user.
    let mut system = None;
    let mut history = Vec::new();
    let mut question = None;
    let mut expect_user = true;
    for (i, m) in b.messages.iter().enumerate() {
        let _ = &m.name;
        match m.role.as_str() {
            "system" | "developer" if i == 0 => {
                system = Some(match &m.content {
                    Some(Value::String(s)) => s.clone(),
                    _ => {
                        return Err(ApiError::invalid(
                            "messages[0]: system content must be a string",
                        ))
                    }
                })
            }
            "user" if expect_user && question.is_none() => {
                question = Some(user_question(m, i)?);
                expect_user = false;
            }
            "tool" if expect_user && !history.is_empty() => {
                let _ = &m.tool_call_id;
                let output = match assistant_text(m, i)? {
                    Some(t) => t,
                    None => m.content.as_ref().map(Value::to_string).unwrap_or_default(),
                };
                question = Some(match question.take() {
                    Some(Question::Tool(before)) => Question::Tool(format!("{before}\n{output}")),
                    _ => Question::Tool(output),
                });
            }
            "assistant" if !expect_user || matches!(question, Some(Question::Tool(_))) => {
                history.extend(reply_turn(m, i, question.take())?);
                expect_user = true;
            }
            r => {
                return Err(ApiError::invalid(format!(
                    "messages[{i}]: role `{r}` out of order (expected [system] then user and \
                     assistant in turn, tool messages after an assistant, ending with user or \
                     tool)"
                )))
            }
        }
    }
    let question = match (question, expect_user) {
        (Some(q), false) => q,
        (Some(q @ Question::Tool(_)), true) => q,
        _ => {
            return Err(ApiError::invalid(
                "the last message must be a user message (input_audio or text) or a tool's",
            ))
        }
    };
    Ok((system, history, question))
}

/// An assistant message `m` (at `i`) and the `question` it answers, as history artifacts: its
/// `lfm2_audio_reply`, else a typed reply of its calls (in the model's form) and text.
fn reply_turn(
    m: &ChatMessage,
    i: usize,
    question: Option<Question>,
) -> Result<Vec<Artifact>, ApiError> {
    let _ = &m.audio;
    let calls = written_calls(m, i)?;
    // why the artifact first: a client echoing a spoken reply sends its transcript as content
    // too, and the reply's steps (codes included) are what was said.
    let reply = match (m.lfm2_audio_reply.clone(), assistant_text(m, i)?) {
        (Some(mut reply), _) => {
            if reply.id.is_empty() {
                reply.id = REPLY_ID.into();
            }
            artifacts_in(&[reply], None)?
        }
        (None, text) if text.is_some() || !calls.is_empty() => vec![Artifact {
            id: REPLY_ID.into(),
            kind: ArtifactKind::Text,
            payload: format!("{calls}{}", text.unwrap_or_default()).into_bytes(),
            meta: BTreeMap::new(),
        }],
        (None, _) => {
            return Err(ApiError::invalid(format!(
                "messages[{i}]: an earlier assistant turn must carry the `lfm2_audio_reply` \
                 its response returned, or text content or tool_calls (a text-only reply)"
            )))
        }
    };
    let q = question
        .ok_or_else(|| ApiError::internal("an assistant turn without its user question"))?;
    let mut out = vec![q.into_artifact()];
    out.extend(reply);
    Ok(out)
}

/// An assistant message's `tool_calls` in the model's call form (empty without calls).
fn written_calls(m: &ChatMessage, i: usize) -> Result<String, ApiError> {
    let Some(list) = m.tool_calls.as_ref().filter(|l| !l.is_empty()) else {
        return Ok(String::new());
    };
    let mut calls = Vec::with_capacity(list.len());
    for (j, c) in list.iter().enumerate() {
        let bad = |what: &str| ApiError::invalid(format!("messages[{i}].tool_calls[{j}]: {what}"));
        let f = c.get("function").ok_or_else(|| bad("needs `function`"))?;
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("needs `function.name`"))?;
        let args = f.get("arguments").and_then(Value::as_str).unwrap_or("{}");
        let Ok(Value::Object(arguments)) = serde_json::from_str::<Value>(args) else {
            return Err(bad("`function.arguments` must be a JSON object's text"));
        };
        calls.push(ToolCall {
            name: name.to_owned(),
            arguments,
        });
    }
    Ok(write_calls(&calls))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wav_b64() -> String {
        // why a header only: the route checks the RIFF mark; the engine reads the WAV later.
        crate::audio_io::b64(b"RIFF\0\0\0\0WAVE")
    }

    fn conversation(messages: Value) -> Result<Conversation, ApiError> {
        let b: ChatBody = serde_json::from_value(json!({ "messages": messages })).unwrap();
        chat_conversation(&b)
    }

    fn spoken() -> Value {
        json!({"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": wav_b64(), "format": "wav"}}]})
    }

    #[test]
    fn tool_calls_and_tool_messages_are_a_reply_and_a_tool_turn() {
        let call = json!({"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}});
        let (_, history, q) = conversation(json!([
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": null, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "21 C"},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ]))
        .unwrap();
        assert_eq!(history.len(), 2);
        assert_eq!(
            history[1].payload,
            b"<|tool_call_start|>[get_weather(city=\"Paris\")]<|tool_call_end|>"
        );
        assert_eq!(q, Question::Tool("21 C\nsunny".into()));
        let art = q.into_artifact();
        assert_eq!(art.meta.get("role"), Some(&json!("tool")));
        // The tool's turn answered, then a user question.
        let (_, history, _) = conversation(json!([
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "tool_calls": [call], "content": "Checking."},
            {"role": "tool", "tool_call_id": "call_1", "content": "21 C"},
            {"role": "assistant", "content": "It is 21 C."},
            {"role": "user", "content": "Thanks."},
        ]))
        .unwrap();
        assert_eq!(history.len(), 4);
        assert_eq!(history[2].meta.get("role"), Some(&json!("tool")));
        // Out of order: a tool message with no reply before it, a user message after a tool's.
        for bad in [
            json!([{"role": "tool", "content": "x"}]),
            json!([{"role": "user", "content": "a"}, {"role": "tool", "content": "x"}]),
            json!([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                   {"role": "tool", "content": "x"}, {"role": "user", "content": "c"}]),
            json!([{"role": "user", "content": "a"},
                   {"role": "assistant", "tool_calls": [{"function": {"name": "f",
                       "arguments": "[1]"}}]}, {"role": "user", "content": "c"}]),
        ] {
            assert!(conversation(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn typed_user_messages_and_text_only_replies_become_text_artifacts() {
        let (system, history, q) = conversation(json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello?"},
            {"role": "assistant", "content": [{"type": "text", "text": "Hi."}]},
            spoken(),
            {"role": "assistant", "content": "ignored: the reply artifact is what was said",
             "lfm2_audio_reply": {"id": "", "kind": "acoustic_tokens", "payload": "AAAAAA=="}},
            {"role": "user", "content": [{"type": "text", "text": "one"},
                                         {"type": "text", "text": "two"}]},
        ]))
        .unwrap();
        assert_eq!(system.as_deref(), Some("Be brief."));
        assert_eq!(q, Question::Typed("one\ntwo".into()));
        let got: Vec<(&str, ArtifactKind, &[u8])> = history
            .iter()
            .map(|a| (a.id.as_str(), a.kind, a.payload.as_slice()))
            .collect();
        assert_eq!(
            got,
            vec![
                (QUESTION_ID, ArtifactKind::Text, &b"Hello?"[..]),
                (REPLY_ID, ArtifactKind::Text, &b"Hi."[..]),
                (QUESTION_ID, ArtifactKind::Custom, &b"RIFF\0\0\0\0WAVE"[..]),
                (REPLY_ID, ArtifactKind::AcousticTokens, &[0u8, 0, 0, 0][..]),
            ]
        );
    }

    #[test]
    fn a_question_both_spoken_and_typed_or_neither_is_refused() {
        let both = json!([{"role": "user", "content": [
            {"type": "text", "text": "hi"},
            {"type": "input_audio", "input_audio": {"data": wav_b64()}}]}]);
        let e = conversation(both).unwrap_err();
        assert!(e.to_string().contains("not both"), "{e}");
        for (content, needle) in [
            (json!("  "), "empty"),
            (json!([]), "no input_audio or text"),
            (json!([{"type": "text"}]), "string `text`"),
            (json!(null), "needs string content"),
        ] {
            let e = conversation(json!([{"role": "user", "content": content}])).unwrap_err();
            assert!(e.to_string().contains(needle), "{needle}: {e}");
        }
        let bare = json!([spoken(), {"role": "assistant", "content": " "}, spoken()]);
        let e = conversation(bare).unwrap_err();
        assert!(e.to_string().contains("lfm2_audio_reply"), "{e}");
    }
}
