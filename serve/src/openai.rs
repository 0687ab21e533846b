//! OpenAI-compatible routes: `POST /v1/audio/transcriptions`, `POST /v1/audio/speech` and
//! `POST /v1/chat/completions` (speech to speech with `modalities: ["text","audio"]`).
//!
//! Multi-turn chat: the client sends the whole conversation; each earlier user message's
//! `input_audio` becomes a question artifact and each earlier assistant message must carry the
//! reply artifact it was returned, in the extension field `lfm2_audio_reply`
//! (`{"id","kind","payload","meta"}`, as in the task routes' `artifacts`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use audio_engine::lfm2_audio::conversation::REPLY_ID;
use audio_engine::lfm2_audio::{
    Artifact, ArtifactKind, AsrJob, AsrOptions, Job, ReplyEvent, S2sOptions, S2sRequest, TtsJob,
    TtsOptions, QUESTION_ID,
};

use crate::artifact_limits::ArtifactTally;
use crate::audio_io::{b64, pcm16, unb64, unb64_len, wav16, wav_from};
use crate::error::ApiError;
use crate::tasks::{
    artifact_json, artifacts_in, body_stream, conversation_key, max_tokens, parse_json,
    parse_voice, record, sampler, sse_frame, sse_response, ArtifactIn, Prepared, SseCtx,
};
use crate::work::{Finished, Msg};
use crate::AppState;

static IDS: AtomicU64 = AtomicU64::new(1);

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

async fn collect(mut rx: tokio::sync::mpsc::Receiver<Msg>) -> Result<Finished, ApiError> {
    while let Some(msg) = rx.recv().await {
        if let Msg::Done(r) = msg {
            return Ok(r?);
        }
    }
    Err(ApiError::internal(
        "the engine worker ended without a result",
    ))
}

// ------------------------------------------------------------------------------------------
// Transcriptions
// ------------------------------------------------------------------------------------------

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TranscriptionJson {
    #[serde(default)]
    model: Option<String>,
    audio: String,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    response_format: Option<String>,
    #[serde(default)]
    max_tokens: Option<usize>,
    #[serde(default)]
    busy_timeout_ms: Option<u64>,
}

/// The transcription's response format (`json` by default).
fn transcription_format(t: &TranscriptionJson) -> Result<String, ApiError> {
    let format = t.response_format.clone().unwrap_or_else(|| "json".into());
    if !["json", "text", "verbose_json"].contains(&format.as_str()) {
        return Err(ApiError::invalid(format!(
            "response_format `{format}` is not json, text or verbose_json"
        )));
    }
    Ok(format)
}

/// `POST /v1/audio/transcriptions`: multipart (`file`, `model`, `language`, `response_format`
/// json|text|verbose_json, `prompt`, `temperature`), or JSON with `audio` (base64 WAV).
pub async fn transcriptions(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    req: Request,
) -> Result<Response, ApiError> {
    let t0 = Instant::now();
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let mut t = TranscriptionJson::default();
    let wav = if is_json {
        let body = Bytes::from_request(req, &()).await;
        t = parse_json(body)?;
        wav_from(&t.audio, state.audio_dir.as_deref(), "`audio`")?
    } else {
        let mut mp = Multipart::from_request(req, &())
            .await
            .map_err(|r| ApiError::with_status(r.status(), r.body_text()))?;
        let mut file = None;
        while let Some(field) = mp
            .next_field()
            .await
            .map_err(|e| ApiError::with_status(e.status(), e.body_text()))?
        {
            let name = field.name().unwrap_or("").to_owned();
            let data = field
                .bytes()
                .await
                .map_err(|e| ApiError::with_status(e.status(), e.body_text()))?;
            let text = || String::from_utf8_lossy(&data).into_owned();
            match name.as_str() {
                "file" => file = Some(data.to_vec()),
                "model" => t.model = Some(text()),
                "language" => t.language = Some(text()),
                "response_format" => t.response_format = Some(text()),
                "max_tokens" => {
                    t.max_tokens = Some(text().trim().parse().map_err(|_| {
                        ApiError::invalid(format!("max_tokens `{}` is not a number", text()))
                    })?)
                }
                "busy_timeout_ms" => t.busy_timeout_ms = text().trim().parse().ok(),
                // why: accepted for OpenAI clients; ASR here is greedy and takes no prompt.
                "prompt" | "temperature" => {}
                "stream" if text() == "false" => {}
                other => {
                    return Err(ApiError::invalid(format!(
                        "unknown multipart field `{other}` (fields: file, model, language, \
                         response_format, prompt, temperature, max_tokens)"
                    )))
                }
            }
        }
        let wav = file.ok_or_else(|| ApiError::invalid("multipart field `file` is required"))?;
        if !wav.starts_with(b"RIFF") {
            return Err(ApiError::invalid(
                "`file` is not a WAV file (no RIFF header)",
            ));
        }
        wav
    };
    let format = transcription_format(&t)?;
    let entry = state.entry_for(t.model.as_deref(), "asr")?;
    if let Some(l) = t.language.as_deref().filter(|l| !l.is_empty()) {
        if l != entry.language {
            return Err(ApiError::invalid(format!(
                "language `{l}` is not this model's (`{}`)",
                entry.language
            )));
        }
    }
    let d = AsrOptions::default();
    let opts = AsrOptions {
        max_new_tokens: max_tokens(t.max_tokens, d.max_new_tokens, state.settings.max_tokens)?,
        ..d
    };
    let p = Prepared {
        job: Job::Asr(AsrJob {
            audio: wav.into(),
            options: opts,
            chunk_seconds: None,
        }),
        key: None,
    };
    let o = collect(crate::tasks::start(&state, &entry, p, t.busy_timeout_ms).await?).await?;
    let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
    Ok(match format.as_str() {
        "text" => ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], o.outcome.text).into_response(),
        "verbose_json" => Json(json!({
            "task": "transcribe",
            "language": entry.language,
            "duration": o.input_seconds,
            "text": o.text,
            "segments": [{
                "id": 0, "seek": 0, "start": 0.0, "end": o.input_seconds, "text": o.text,
                "tokens": [], "temperature": 0.0,
            }],
            "timing": {"wall_ms": wall_ms, "audio_duration_ms": o.input_seconds * 1e3,
                       "rtf": if o.input_seconds > 0.0 { wall_ms / (o.input_seconds * 1e3) } else { 0.0 }},
        }))
        .into_response(),
        _ => Json(json!({
            "text": o.text,
            "timing": {"wall_ms": wall_ms, "audio_duration_ms": o.input_seconds * 1e3,
                       "rtf": if o.input_seconds > 0.0 { wall_ms / (o.input_seconds * 1e3) } else { 0.0 }},
        }))
        .into_response(),
    })
}

// ------------------------------------------------------------------------------------------
// Speech
// ------------------------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpeechBody {
    #[serde(default)]
    model: Option<String>,
    input: String,
    #[serde(default)]
    voice: Option<String>,
    #[serde(default)]
    response_format: Option<String>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_format: Option<String>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    temperature: Option<f32>,
    #[serde(default)]
    top_k: Option<usize>,
    #[serde(default)]
    max_tokens: Option<usize>,
    #[serde(default)]
    busy_timeout_ms: Option<u64>,
}

/// The speech body's output choices: the response format and, when streamed, the stream
/// format (`audio` or `sse`); checked before any model is picked.
fn speech_format(b: &SpeechBody) -> Result<(String, Option<&'static str>), ApiError> {
    let streaming = b.stream == Some(true) || b.stream_format.is_some();
    let format = b.response_format.clone().unwrap_or_else(|| {
        if streaming {
            "pcm".into()
        } else {
            "wav".into()
        }
    });
    if !["wav", "pcm", "json", "b64_json"].contains(&format.as_str()) {
        return Err(ApiError::invalid(format!(
            "response_format `{format}` is not wav, pcm or json"
        )));
    }
    let stream_format = match (streaming, b.stream_format.as_deref()) {
        (false, _) => None,
        (true, None) | (true, Some("audio")) => Some("audio"),
        (true, Some("sse")) => Some("sse"),
        (true, Some(other)) => {
            return Err(ApiError::invalid(format!(
                "stream_format `{other}` is not sse or audio"
            )))
        }
    };
    if streaming && format != "pcm" {
        return Err(ApiError::invalid(
            "streamed speech needs response_format \"pcm\" (s16le, 24 kHz mono)",
        ));
    }
    if b.input.trim().is_empty() {
        return Err(ApiError::invalid("`input` (what to speak) is empty"));
    }
    Ok((format, stream_format))
}

/// The speech body's synthesis options under the server's `max_tokens` limit.
fn speech_options(b: &SpeechBody, limit: usize) -> Result<TtsOptions, ApiError> {
    let d = TtsOptions::default();
    Ok(TtsOptions {
        voice: parse_voice(b.voice.as_deref())?,
        max_new_tokens: max_tokens(b.max_tokens, d.max_new_tokens, limit)?,
        audio: sampler(d.audio, b.seed, b.temperature, b.top_k)?,
        ..d
    })
}

/// `POST /v1/audio/speech`: `wav` (default), `pcm` (s16le 24 kHz) or `json`; streamed with
/// `stream: true` / `stream_format` (`audio`: chunked PCM, `sse`: `speech.audio.delta` events).
pub async fn speech(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let t0 = Instant::now();
    let b: SpeechBody = parse_json(body)?;
    let (format, stream_format) = speech_format(&b)?;
    let streaming = stream_format.is_some();
    let entry = state.entry_for(b.model.as_deref(), "tts")?;
    let opts = speech_options(&b, state.settings.max_tokens)?;
    let p = Prepared {
        job: Job::Tts(TtsJob {
            text: b.input,
            options: opts,
        }),
        key: None,
    };
    let permit = if streaming {
        Some(state.stream_permit()?)
    } else {
        None
    };
    let mut rx = crate::tasks::start(&state, &entry, p, b.busy_timeout_ms).await?;
    let Some(permit) = permit else {
        let o = collect(rx).await?;
        record(&state, &o);
        let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
        let audio_ms = o.audio.len() as f64 / 24.0;
        let rtf = if audio_ms > 0.0 {
            wall_ms / audio_ms
        } else {
            0.0
        };
        let timing = json!({"wall_ms": wall_ms, "audio_duration_ms": audio_ms, "rtf": rtf});
        if format == "json" || format == "b64_json" {
            return Ok(Json(
                json!({"audio": b64(&wav16(&o.audio, 24_000)), "format": "wav", "timing": timing}),
            )
            .into_response());
        }
        let (ct, bytes) = if format == "pcm" {
            ("audio/pcm", pcm16(&o.audio))
        } else {
            ("audio/wav", wav16(&o.audio, 24_000))
        };
        let mut resp = ([(header::CONTENT_TYPE, ct)], bytes).into_response();
        let h = resp.headers_mut();
        for (k, v) in [
            ("x-audiocpp-wall-ms", format!("{wall_ms:.1}")),
            ("x-audiocpp-audio-duration-ms", format!("{audio_ms:.1}")),
            ("x-audiocpp-rtf", format!("{rtf:.4}")),
        ] {
            if let Ok(v) = HeaderValue::from_str(&v) {
                h.insert(k, v);
            }
        }
        return Ok(resp);
    };
    let first = rx
        .recv()
        .await
        .ok_or_else(|| ApiError::internal("the engine worker ended without a result"))?;
    if let Msg::Done(Err(e)) = first {
        return Err(e.into());
    }
    let st = state.clone();
    let first_audio = move |ctx: &mut SseCtx| {
        if !ctx.first_audio_seen {
            ctx.first_audio_seen = true;
            ctx.ttft = Some(ctx.t0.elapsed());
            st.metrics
                .time_to_first_audio
                .observe(ctx.t0.elapsed().as_secs_f64());
        }
    };
    let st2 = state.clone();
    if stream_format == Some("sse") {
        let fa = first_audio;
        Ok(sse_response(
            state.clone(),
            rx,
            Some(first),
            t0,
            permit,
            move |m, ctx| match m {
                Msg::Event(ReplyEvent::Audio(s)) => {
                    fa(ctx);
                    (
                        sse_frame(&json!({"type": "speech.audio.delta", "audio": b64(&pcm16(&s))})),
                        false,
                    )
                }
                Msg::Event(ReplyEvent::Text(_)) => (Vec::new(), false),
                Msg::Done(Ok(o)) => {
                    record(&st2, &o);
                    let ttft = ctx.ttft.map(|t| t.as_secs_f64() * 1e3);
                    let mut out = sse_frame(
                        &json!({"type": "speech.audio.done", "timing": {"ttft_ms": ttft}}),
                    );
                    out.extend_from_slice(b"data: [DONE]\n\n");
                    (out, true)
                }
                Msg::Done(Err(e)) => {
                    let e = ApiError::from(e);
                    (
                        sse_frame(&json!({"type": "error", "error": e.body()["error"]})),
                        true,
                    )
                }
            },
        ))
    } else {
        let fa = first_audio;
        Ok(body_stream(
            state.clone(),
            rx,
            Some(first),
            t0,
            permit,
            move |m, ctx| match m {
                Msg::Event(ReplyEvent::Audio(s)) => {
                    fa(ctx);
                    (pcm16(&s), false)
                }
                Msg::Event(_) => (Vec::new(), false),
                Msg::Done(Ok(o)) => {
                    record(&st2, &o);
                    (Vec::new(), true)
                }
                // why: raw PCM has no place for an error; end the body early (the client sees
                // a short stream) and log it.
                Msg::Done(Err(e)) => {
                    tracing::warn!("speech stream failed: {e}");
                    (Vec::new(), true)
                }
            },
            "audio/pcm",
        ))
    }
}

// ------------------------------------------------------------------------------------------
// Chat completions
// ------------------------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChatBody {
    #[serde(default)]
    model: Option<String>,
    messages: Vec<ChatMessage>,
    #[serde(default)]
    modalities: Option<Vec<String>>,
    #[serde(default)]
    audio: Option<AudioParams>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<Value>,
    #[serde(default)]
    max_tokens: Option<usize>,
    #[serde(default)]
    max_completion_tokens: Option<usize>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    temperature: Option<f32>,
    #[serde(default)]
    top_k: Option<usize>,
    #[serde(default)]
    n: Option<u32>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    busy_timeout_ms: Option<u64>,
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
}

/// The WAV bytes of a user message's `input_audio` part (text parts are refused: S2S takes
/// speech).
fn user_audio(m: &ChatMessage, i: usize) -> Result<Vec<u8>, ApiError> {
    let parts = match &m.content {
        Some(Value::Array(p)) => p,
        _ => {
            return Err(ApiError::invalid(format!(
                "messages[{i}]: a user message needs an `input_audio` content part (speech in)"
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
            Some("text") => {
                return Err(ApiError::invalid(format!(
                    "messages[{i}].content[{j}]: text parts are not taken; this model answers \
                     speech (send an input_audio part)"
                )))
            }
            other => {
                return Err(ApiError::invalid(format!(
                    "messages[{i}].content[{j}]: unknown content part type {other:?}"
                )))
            }
        }
    }
    audio.ok_or_else(|| ApiError::invalid(format!("messages[{i}]: no input_audio content part")))
}

/// The chat body's output choices: whether the reply carries audio, and its format; checked
/// before any model is picked.
fn chat_output(b: &ChatBody) -> Result<(bool, String), ApiError> {
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

/// Decoded bytes of a user message's `input_audio` data, from the base64 lengths alone.
fn declared_audio_bytes(m: &ChatMessage) -> usize {
    let Some(Value::Array(parts)) = &m.content else {
        return 0;
    };
    parts
        .iter()
        .filter_map(|p| p.get("input_audio")?.get("data")?.as_str())
        .fold(0usize, |n, d| n.saturating_add(unb64_len(d)))
}

/// The artifacts the earlier turns of `messages` become (each assistant message: the user
/// question before it and its reply), counted from the JSON before anything is decoded.
fn declared_history(messages: &[ChatMessage]) -> ArtifactTally {
    let mut t = ArtifactTally::default();
    let mut question = 0;
    for m in messages {
        match m.role.as_str() {
            "user" => question = declared_audio_bytes(m),
            "assistant" => {
                t.add(std::mem::take(&mut question));
                let reply = m.lfm2_audio_reply.as_ref();
                t.add(
                    reply
                        .and_then(|r| r.payload.as_deref())
                        .map_or(0, unb64_len),
                );
            }
            _ => {}
        }
    }
    t
}

/// A chat body's system prompt, earlier turns (as artifacts) and new question (WAV bytes).
type Conversation = (Option<String>, Vec<Artifact>, Vec<u8>);

/// The conversation of a chat body: the system prompt, the earlier turns as artifacts and the
/// new question's WAV bytes.
fn chat_conversation(b: &ChatBody) -> Result<Conversation, ApiError> {
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
            "user" if expect_user => {
                question = Some(user_audio(m, i)?);
                expect_user = false;
            }
            "assistant" if !expect_user => {
                let _ = &m.audio;
                let mut reply = m.lfm2_audio_reply.clone().ok_or_else(|| {
                    ApiError::invalid(format!(
                        "messages[{i}]: an earlier assistant turn must carry the \
                         `lfm2_audio_reply` its response returned"
                    ))
                })?;
                if reply.id.is_empty() {
                    reply.id = REPLY_ID.into();
                }
                let mut a = artifacts_in(&[reply], None)?;
                history.push(Artifact {
                    id: QUESTION_ID.into(),
                    kind: ArtifactKind::Custom,
                    payload: question.take().unwrap_or_default(),
                    meta: BTreeMap::new(),
                });
                history.append(&mut a);
                expect_user = true;
            }
            r => {
                return Err(ApiError::invalid(format!(
                    "messages[{i}]: role `{r}` out of order (expected [system] then user and \
                     assistant in turn, ending with user)"
                )))
            }
        }
    }
    let question = match (question, expect_user) {
        (Some(q), false) => q,
        _ => {
            return Err(ApiError::invalid(
                "the last message must be a user message with input_audio",
            ))
        }
    };
    Ok((system, history, question))
}

/// `POST /v1/chat/completions`.
pub async fn chat(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let t0 = Instant::now();
    let b: ChatBody = parse_json(body)?;
    let (want_audio, audio_format) = chat_output(&b)?;
    let entry = state.entry_for(b.model.as_deref(), "s2s")?;
    let (system, history, question) = chat_conversation(&b)?;
    let first = history
        .first()
        .map(|a| a.payload.clone())
        .unwrap_or_else(|| question.clone());
    let key = conversation_key(&headers, Some(&first));
    let d = S2sOptions::default();
    let s2s = S2sOptions {
        max_new_tokens: max_tokens(
            b.max_completion_tokens.or(b.max_tokens),
            d.max_new_tokens,
            state.settings.max_tokens,
        )?,
        audio: sampler(d.audio, b.seed, b.temperature, b.top_k)?,
        system_prompt: system.unwrap_or(d.system_prompt.clone()),
        ..d
    };
    let p = Prepared {
        job: Job::S2s(S2sRequest {
            question: question.into(),
            history,
            return_codes: true,
            s2s,
        }),
        key,
    };
    let id = format!("chatcmpl-{}", IDS.fetch_add(1, Ordering::Relaxed));
    let audio_id = format!("audio-{}", IDS.fetch_add(1, Ordering::Relaxed));
    let created = now_secs();
    let model = entry.cfg.id.clone();
    let streaming = b.stream == Some(true);
    let permit = if streaming {
        Some(state.stream_permit()?)
    } else {
        None
    };
    let mut rx = crate::tasks::start(&state, &entry, p, b.busy_timeout_ms).await?;
    let finish = |o: &Finished| if o.ended { "stop" } else { "length" };
    let usage = |o: &Finished| {
        json!({"prompt_tokens": o.prompt_positions, "completion_tokens": o.steps,
               "total_tokens": o.prompt_positions + o.steps})
    };
    let Some(permit) = permit else {
        let o = collect(rx).await?;
        record(&state, &o);
        let mut message = json!({"role": "assistant", "content": o.text, "refusal": null});
        if want_audio {
            let data = if audio_format == "pcm16" {
                pcm16(&o.audio)
            } else {
                wav16(&o.audio, 24_000)
            };
            message["audio"] = json!({
                "id": audio_id, "data": b64(&data), "expires_at": created + 3600,
                "transcript": o.text, "format": audio_format, "sample_rate": 24_000,
            });
        }
        if let Some(a) = &o.artifact {
            message["lfm2_audio_reply"] = artifact_json(a);
        }
        return Ok(Json(json!({
            "id": id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish(&o), "logprobs": null}],
            "usage": usage(&o),
            "lfm2_audio": {"resumed_prefill_positions": o.resumed_prefill_positions,
                           "reused_questions": o.reused_questions, "session_slot": o.slot,
                           "affinity": o.affine, "wall_ms": t0.elapsed().as_secs_f64() * 1e3},
        }))
        .into_response());
    };
    let first = rx
        .recv()
        .await
        .ok_or_else(|| ApiError::internal("the engine worker ended without a result"))?;
    if let Msg::Done(Err(e)) = first {
        return Err(e.into());
    }
    let st = state.clone();
    let chunk = move |delta: Value, finish: Option<&str>| {
        json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut started = false;
    Ok(sse_response(
        state.clone(),
        rx,
        Some(first),
        t0,
        permit,
        move |m, ctx| {
            let mut out = Vec::new();
            if !started {
                started = true;
                out.extend(sse_frame(&chunk(
                    json!({"role": "assistant", "content": ""}),
                    None,
                )));
            }
            let done = match m {
                Msg::Event(ReplyEvent::Text(t)) => {
                    out.extend(sse_frame(&chunk(json!({"content": t}), None)));
                    false
                }
                Msg::Event(ReplyEvent::Audio(s)) => {
                    if !ctx.first_audio_seen {
                        ctx.first_audio_seen = true;
                        ctx.ttft = Some(ctx.t0.elapsed());
                        st.metrics
                            .time_to_first_audio
                            .observe(ctx.t0.elapsed().as_secs_f64());
                    }
                    if want_audio {
                        out.extend(sse_frame(&chunk(
                        json!({"audio": {"id": audio_id, "data": b64(&pcm16(&s)), "sample_rate": 24_000}}),
                        None,
                    )));
                    }
                    false
                }
                Msg::Done(Ok(o)) => {
                    record(&st, &o);
                    let mut delta = json!({});
                    if let Some(a) = &o.artifact {
                        delta["lfm2_audio_reply"] = artifact_json(a);
                    }
                    if want_audio {
                        delta["audio"] = json!({"id": audio_id, "expires_at": created + 3600, "transcript": o.text});
                    }
                    let mut last = chunk(delta, Some(finish(&o)));
                    last["usage"] = usage(&o);
                    last["lfm2_audio"] = json!({"resumed_prefill_positions": o.resumed_prefill_positions,
                    "reused_questions": o.reused_questions, "session_slot": o.slot, "affinity": o.affine,
                    "ttft_ms": ctx.ttft.map(|t| t.as_secs_f64() * 1e3)});
                    out.extend(sse_frame(&last));
                    out.extend_from_slice(b"data: [DONE]\n\n");
                    true
                }
                Msg::Done(Err(e)) => {
                    let e = ApiError::from(e);
                    out.extend(sse_frame(&json!({"error": e.body()["error"]})));
                    true
                }
            };
            (out, done)
        },
    ))
}

/// The OpenAI routes' JSON bodies checked as their handlers check them before a model is
/// involved (no server-side paths, `limit` as the server's `max_tokens`): `route` is
/// `transcriptions`, `speech` or `chat`. For the fuzz targets (`fuzz/`); not an API.
#[doc(hidden)]
pub fn check_body(route: &str, body: &[u8], limit: usize) -> Result<(), ApiError> {
    let body = Ok(Bytes::copy_from_slice(body));
    match route {
        "transcriptions" => {
            let t: TranscriptionJson = parse_json(body)?;
            wav_from(&t.audio, None, "`audio`")?;
            transcription_format(&t)?;
            let d = AsrOptions::default();
            max_tokens(t.max_tokens, d.max_new_tokens, limit)?;
        }
        "speech" => {
            let b: SpeechBody = parse_json(body)?;
            speech_format(&b)?;
            speech_options(&b, limit)?;
        }
        "chat" => {
            let b: ChatBody = parse_json(body)?;
            chat_output(&b)?;
            chat_conversation(&b)?;
            let d = S2sOptions::default();
            max_tokens(
                b.max_completion_tokens.or(b.max_tokens),
                d.max_new_tokens,
                limit,
            )?;
            sampler(d.audio, b.seed, b.temperature, b.top_k)?;
        }
        other => return Err(ApiError::invalid(format!("no route `{other}`"))),
    }
    Ok(())
}
