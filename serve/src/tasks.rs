//! audio.cpp's task routes: `POST /v1/tasks/run` and `POST /v1/tasks/stream`, with its request
//! JSON (`{"model", "request": {...}, "busy_timeout_ms"?, "stream_format"?}`), result JSON and
//! stream events.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use audio_engine::lfm2_audio::conversation::{parse_return_codes, REPLY_ID};
use audio_engine::lfm2_audio::{
    Artifact, ArtifactKind, AsrJob, AsrOptions, Job, ReplyEvent, S2sOptions, S2sRequest,
    SamplerConfig, TtsJob, TtsOptions, UnknownVoice, Voice, QUESTION_ID, RETURN_CODES,
};

use crate::artifact_limits::ArtifactTally;
use crate::audio_io::{b64, read_allowed_checked, unb64, unb64_len, wav16, wav_from};
use crate::error::ApiError;
use crate::pool::fnv1a;
use crate::work::{self, Finished, Msg};
use crate::{AppState, Entry};

/// The body of both task routes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskBody {
    pub model: String,
    pub request: TaskRequest,
    #[serde(default)]
    pub busy_timeout_ms: Option<u64>,
    #[serde(default)]
    pub stream_format: Option<String>,
}

/// The CLI request JSON, as far as the LFM2 family takes it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskRequest {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub language: Option<String>,
    /// Base64 WAV, or a server-side path under `--audio-dir`.
    #[serde(default)]
    pub audio: Option<String>,
    #[serde(default)]
    pub voice_id: Option<String>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub max_tokens: Option<usize>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub top_k: Option<usize>,
    #[serde(default)]
    pub options: BTreeMap<String, Value>,
    #[serde(default)]
    pub artifacts: Vec<ArtifactIn>,
}

/// An input artifact: `payload` (base64) or `path` (server-side), with `meta`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactIn {
    pub id: String,
    pub kind: String,
    #[serde(default)]
    pub payload: Option<String>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub meta: BTreeMap<String, Value>,
}

/// Parses a JSON body, mapping the body limit (413) and serde's message (400, naming unknown
/// fields) into the envelope.
pub fn parse_json<T: serde::de::DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    let body = body.map_err(|r| ApiError::with_status(r.status(), r.body_text()))?;
    serde_json::from_slice(&body).map_err(|e| ApiError::invalid(format!("request body: {e}")))
}

const REPLY_COUNT_KEYS: [&str; 4] = ["codebooks", "audio_vocab_size", "text_vocab_size", "steps"];

/// Reply meta as sent: audio.cpp carries every value as a string (`"8"`, `"true"`); the engine
/// reads typed values. Strings that spell a number or a boolean become one.
fn typed_meta(meta: &BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    meta.iter()
        .map(|(k, v)| {
            let v = match (k.as_str(), v) {
                (k, Value::String(s)) if REPLY_COUNT_KEYS.contains(&k) => s
                    .parse::<u64>()
                    .map(Value::from)
                    .unwrap_or_else(|_| v.clone()),
                ("ended", Value::String(s)) if s == "true" || s == "false" => {
                    Value::Bool(s == "true")
                }
                _ => v.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

/// Meta as audio.cpp returns it: every value a string.
pub fn string_meta(meta: &BTreeMap<String, Value>) -> Value {
    Value::Object(
        meta.iter()
            .map(|(k, v)| {
                let s = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), Value::String(s))
            })
            .collect(),
    )
}

/// An output artifact as JSON.
pub fn artifact_json(a: &Artifact) -> Value {
    json!({"id": a.id, "kind": a.kind.name(), "payload": b64(&a.payload), "meta": string_meta(&a.meta)})
}

/// The count and decoded payload bytes `list` declares, from the JSON alone (a server-side
/// file counts when it is opened).
pub fn declared_artifacts(list: &[ArtifactIn]) -> ArtifactTally {
    let mut t = ArtifactTally::default();
    for a in list {
        t.add(a.payload.as_deref().map_or(0, unb64_len));
    }
    t
}

/// Converts the request's artifacts for the engine, after checking their count and decoded
/// sizes against the engine's limits (see [`crate::artifact_limits`]) before any is decoded.
pub fn artifacts_in(
    list: &[ArtifactIn],
    audio_dir: Option<&std::path::Path>,
) -> Result<Vec<Artifact>, ApiError> {
    let mut tally = declared_artifacts(list);
    tally.check()?;
    list.iter()
        .enumerate()
        .map(|(i, a)| {
            let kind = match a.kind.as_str() {
                "audio" => ArtifactKind::Audio,
                "text" => ArtifactKind::Text,
                "acoustic_tokens" => ArtifactKind::AcousticTokens,
                "custom" => ArtifactKind::Custom,
                other => {
                    return Err(ApiError::invalid(format!(
                        "artifact {i} (`{}`): kind `{other}` is not one lfm2_audio takes \
                         (audio, text, acoustic_tokens, custom)",
                        a.id
                    )))
                }
            };
            let what = format!("artifact {i} (`{}`)", a.id);
            let payload = match (&a.payload, &a.path) {
                (Some(p), None) => unb64(p)
                    .ok_or_else(|| ApiError::invalid(format!("{what}: payload is not base64")))?,
                (None, Some(p)) => {
                    let bytes =
                        read_allowed_checked(p, audio_dir, &what, |len| tally.check_file(len))?;
                    tally.bytes = tally.bytes.saturating_add(bytes.len());
                    bytes
                }
                _ => {
                    return Err(ApiError::invalid(format!(
                        "{what}: give exactly one of `payload` (base64) and `path`"
                    )))
                }
            };
            let meta = if a.id == REPLY_ID {
                typed_meta(&a.meta)
            } else {
                a.meta.clone()
            };
            Ok(Artifact {
                id: a.id.clone(),
                kind,
                payload,
                meta,
            })
        })
        .collect()
}

/// The conversation key: `X-Conversation-Id`, else the hash of the first question's bytes.
pub fn conversation_key(headers: &HeaderMap, first_question: Option<&[u8]>) -> Option<u64> {
    if let Some(v) = headers.get("x-conversation-id") {
        return Some(fnv1a(v.as_bytes()));
    }
    first_question.map(fnv1a)
}

/// Checks and caps `max_tokens`.
pub fn max_tokens(req: Option<usize>, default: usize, limit: usize) -> Result<usize, ApiError> {
    match req {
        Some(0) => Err(ApiError::invalid("max_tokens must be positive")),
        Some(n) if n > limit => Err(ApiError::invalid(format!(
            "max_tokens {n} is above this server's limit of {limit}"
        ))),
        Some(n) => Ok(n),
        None => Ok(default.min(limit)),
    }
}

/// An audio sampler from the request's `seed`, `temperature` and `top_k` over `base`.
pub fn sampler(
    base: SamplerConfig,
    seed: Option<u64>,
    temperature: Option<f32>,
    top_k: Option<usize>,
) -> Result<SamplerConfig, ApiError> {
    let mut s = base;
    if let Some(t) = temperature {
        if !t.is_finite() || t < 0.0 {
            return Err(ApiError::invalid(format!(
                "temperature {t} must be a finite number >= 0"
            )));
        }
        s.temperature = t;
    }
    if let Some(k) = top_k {
        s.top_k = k;
    }
    if let Some(seed) = seed {
        s.seed = seed;
    }
    Ok(s)
}

/// A task request turned into an engine job for `entry`.
pub struct Prepared {
    pub job: Job,
    pub key: Option<u64>,
}

fn nonempty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

/// Builds the job of a task request.
pub fn prepare(
    state: &AppState,
    entry: &Entry,
    headers: &HeaderMap,
    r: TaskRequest,
) -> Result<Prepared, ApiError> {
    let limit = state.settings.max_tokens;
    let dir = state.audio_dir.as_deref();
    prepare_for(&entry.cfg.task, &entry.language, limit, dir, headers, r)
}

/// [`prepare`] from the few settings it reads: the entry's task and language, the server's
/// `max_tokens` limit and audio directory (so the checks run without a model, e.g. fuzzed).
pub fn prepare_for(
    task: &str,
    language: &str,
    limit: usize,
    dir: Option<&std::path::Path>,
    headers: &HeaderMap,
    r: TaskRequest,
) -> Result<Prepared, ApiError> {
    if let Some(l) = nonempty(&r.language) {
        if l != language {
            return Err(ApiError::invalid(format!(
                "language `{l}` is not this model's (`{language}`)"
            )));
        }
    }
    let allowed: &[&str] = if task == "s2s" { &[RETURN_CODES] } else { &[] };
    if let Some(k) = r.options.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(ApiError::invalid(format!(
            "unknown option `{k}` for task {task} (it takes: {})",
            if allowed.is_empty() {
                "none".to_owned()
            } else {
                allowed.join(", ")
            }
        )));
    }
    match task {
        "s2s" => {
            if nonempty(&r.text).is_some() {
                return Err(ApiError::invalid(
                    "`text`: s2s answers a spoken question; send it as `audio`",
                ));
            }
            if r.voice_id.is_some() {
                return Err(ApiError::invalid("`voice_id` is for tts, not s2s"));
            }
            let audio = nonempty(&r.audio).ok_or_else(|| {
                ApiError::invalid("`audio` (the question, a base64 WAV) is required")
            })?;
            // why: the artifacts' limits are checked before anything is decoded.
            let history = artifacts_in(&r.artifacts, dir)?;
            let question = wav_from(audio, dir, "`audio`")?;
            let first = history
                .iter()
                .find(|a| a.id == QUESTION_ID)
                .map(|a| a.payload.as_slice())
                .unwrap_or(question.as_slice());
            let key = conversation_key(headers, Some(first));
            let d = S2sOptions::default();
            let s2s = S2sOptions {
                max_new_tokens: max_tokens(r.max_tokens, d.max_new_tokens, limit)?,
                audio: sampler(d.audio, r.seed, r.temperature, r.top_k)?,
                ..d
            };
            Ok(Prepared {
                job: Job::S2s(S2sRequest {
                    question: question.into(),
                    history,
                    return_codes: parse_return_codes(&r.options)?,
                    s2s,
                }),
                key,
            })
        }
        "asr" => {
            for (bad, set) in [
                ("text", nonempty(&r.text).is_some()),
                ("voice_id", r.voice_id.is_some()),
                ("seed", r.seed.is_some()),
                ("temperature", r.temperature.is_some()),
                ("top_k", r.top_k.is_some()),
                ("artifacts", !r.artifacts.is_empty()),
            ] {
                if set {
                    return Err(ApiError::invalid(format!(
                        "`{bad}` is not taken by asr (greedy, single request)"
                    )));
                }
            }
            let audio = nonempty(&r.audio)
                .ok_or_else(|| ApiError::invalid("`audio` (a base64 WAV) is required"))?;
            let wav = wav_from(audio, dir, "`audio`")?;
            let d = AsrOptions::default();
            Ok(Prepared {
                job: Job::Asr(AsrJob {
                    audio: wav.into(),
                    options: AsrOptions {
                        max_new_tokens: max_tokens(r.max_tokens, d.max_new_tokens, limit)?,
                        ..d
                    },
                    chunk_seconds: None,
                }),
                key: conversation_key(headers, None),
            })
        }
        _ => {
            if r.audio.is_some() || !r.artifacts.is_empty() {
                return Err(ApiError::invalid(
                    "tts takes `text` only (no `audio`, no artifacts)",
                ));
            }
            let text = nonempty(&r.text)
                .ok_or_else(|| ApiError::invalid("`text` (what to speak) is required"))?;
            let voice = parse_voice(r.voice_id.as_deref())?;
            let d = TtsOptions::default();
            Ok(Prepared {
                job: Job::Tts(TtsJob {
                    text: text.to_owned(),
                    options: TtsOptions {
                        voice,
                        max_new_tokens: max_tokens(r.max_tokens, d.max_new_tokens, limit)?,
                        audio: sampler(d.audio, r.seed, r.temperature, r.top_k)?,
                        ..d
                    },
                }),
                key: conversation_key(headers, None),
            })
        }
    }
}

/// A voice id (`us_male`, `uk-female`, ...; see [`Voice`]); none or empty: the default
/// (audio.cpp's, as through the C ABI).
pub fn parse_voice(v: Option<&str>) -> Result<Voice, ApiError> {
    match v.filter(|v| !v.is_empty()) {
        None => Ok(Voice::default()),
        Some(v) => v
            .parse()
            .map_err(|e: UnknownVoice| ApiError::invalid(e.to_string())),
    }
}

/// The result JSON.
pub fn result_json(entry: &Entry, o: &Finished, wall: Duration, ttft: Option<Duration>) -> Value {
    let audio_ms = o.audio.len() as f64 / 24.0;
    let wall_ms = wall.as_secs_f64() * 1e3;
    let basis = if entry.cfg.task == "asr" {
        o.input_seconds * 1e3
    } else {
        audio_ms
    };
    let mut timing = json!({
        "wall_ms": wall_ms,
        "audio_duration_ms": basis,
        "rtf": if basis > 0.0 { wall_ms / basis } else { 0.0 },
    });
    if let Some(t) = ttft {
        timing["ttft_ms"] = json!(t.as_secs_f64() * 1e3);
    }
    let mut v = json!({"text": o.text, "language": entry.language, "timing": timing});
    if entry.cfg.task != "asr" {
        v["audio"] = json!(b64(&wav16(&o.audio, 24_000)));
        v["sample_rate"] = json!(24_000);
        v["channels"] = json!(1);
    }
    if let Some(a) = &o.artifact {
        v["artifacts"] = json!([artifact_json(a)]);
    }
    v["lfm2_audio"] = json!({
        "resumed_prefill_positions": o.resumed_prefill_positions,
        "reused_questions": o.reused_questions,
        "prompt_positions": o.prompt_positions,
        "steps": o.steps,
        "ended": o.ended,
        "session_slot": o.slot,
        "affinity": o.affine,
    });
    v
}

/// One stream event.
pub fn event_json(ev: &ReplyEvent, language: &str) -> Value {
    match ev {
        ReplyEvent::Text(t) => {
            json!({"partial_text": {"text": t, "language": language}, "is_final": false})
        }
        ReplyEvent::Audio(s) => json!({"audio": b64(&wav16(s, 24_000)), "is_final": false}),
    }
}

/// Records a finished job's figures.
pub fn record(state: &AppState, o: &Finished) {
    use std::sync::atomic::Ordering::Relaxed;
    state
        .metrics
        .resumed_positions
        .fetch_add(o.resumed_prefill_positions as u64, Relaxed);
    state
        .metrics
        .reused_questions
        .fetch_add(o.reused_questions as u64, Relaxed);
    if !o.audio.is_empty() {
        let secs = o.audio.len() as f64 / 24_000.0;
        state
            .metrics
            .real_time_factor
            .observe(o.engine_time.as_secs_f64() / secs);
    }
}

/// Leases a session of `entry` and starts `job` on it.
pub async fn start(
    state: &Arc<AppState>,
    entry: &Entry,
    p: Prepared,
    busy_timeout_ms: Option<u64>,
) -> Result<tokio::sync::mpsc::Receiver<Msg>, ApiError> {
    let lease = entry
        .pool
        .acquire(p.key, state.busy_timeout(busy_timeout_ms))
        .await?;
    Ok(work::spawn(lease, p.job, state.stop.clone(), 64))
}

/// `POST /v1/tasks/run`.
pub async fn run(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let t0 = Instant::now();
    let b: TaskBody = parse_json(body)?;
    if b.stream_format.is_some() {
        return Err(ApiError::invalid("`stream_format` is for /v1/tasks/stream"));
    }
    let entry = state.entry(&b.model)?;
    let p = prepare(&state, &entry, &headers, b.request)?;
    let mut rx = start(&state, &entry, p, b.busy_timeout_ms).await?;
    let mut ttft = None;
    while let Some(msg) = rx.recv().await {
        match msg {
            Msg::Event(ReplyEvent::Audio(_)) if ttft.is_none() => ttft = Some(t0.elapsed()),
            Msg::Event(_) => {}
            Msg::Done(r) => {
                let o = r?;
                record(&state, &o);
                if let Some(t) = ttft {
                    state.metrics.time_to_first_audio.observe(t.as_secs_f64());
                }
                return Ok(Json(result_json(&entry, &o, t0.elapsed(), None)).into_response());
            }
        }
    }
    Err(ApiError::internal(
        "the engine worker ended without a result",
    ))
}

/// `POST /v1/tasks/stream`: SSE with `stream_format: "sse"`, else `{"events", "result"}`.
pub async fn stream(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let t0 = Instant::now();
    let b: TaskBody = parse_json(body)?;
    let sse = match b.stream_format.as_deref() {
        None => false,
        Some("sse") => true,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "stream_format `{other}` is not supported (only \"sse\")"
            )))
        }
    };
    let entry = state.entry(&b.model)?;
    let p = prepare(&state, &entry, &headers, b.request)?;
    let permit = state.stream_permit()?;
    let mut rx = start(&state, &entry, p, b.busy_timeout_ms).await?;
    if !sse {
        let mut events = Vec::new();
        let mut ttft = None;
        while let Some(msg) = rx.recv().await {
            match msg {
                Msg::Event(ev) => {
                    if ttft.is_none() && matches!(ev, ReplyEvent::Audio(_)) {
                        ttft = Some(t0.elapsed());
                        state
                            .metrics
                            .time_to_first_audio
                            .observe(t0.elapsed().as_secs_f64());
                    }
                    events.push(event_json(&ev, &entry.language));
                }
                Msg::Done(r) => {
                    let o = r?;
                    record(&state, &o);
                    events.push(json!({"is_final": true}));
                    let result =
                        result_json(&entry, &o, t0.elapsed(), Some(ttft.unwrap_or_default()));
                    return Ok(Json(json!({"events": events, "result": result})).into_response());
                }
            }
        }
        return Err(ApiError::internal(
            "the engine worker ended without a result",
        ));
    }
    // why: a request the engine refuses fails before its first event; wait for that first
    // message so such a request is still answered with its status code, not an SSE error.
    let first = rx
        .recv()
        .await
        .ok_or_else(|| ApiError::internal("the engine worker ended without a result"))?;
    if let Msg::Done(Err(e)) = first {
        return Err(e.into());
    }
    let lang = entry.language.clone();
    let st = state.clone();
    let entry2 = entry.clone();
    let framer = move |msg: Msg, ctx: &mut SseCtx| -> (Vec<u8>, bool) {
        match msg {
            Msg::Event(ev) => {
                if !ctx.first_audio_seen && matches!(ev, ReplyEvent::Audio(_)) {
                    ctx.first_audio_seen = true;
                    ctx.ttft = Some(ctx.t0.elapsed());
                    st.metrics
                        .time_to_first_audio
                        .observe(ctx.t0.elapsed().as_secs_f64());
                }
                let v = json!({"type": "task.stream.event", "event": event_json(&ev, &lang)});
                (sse_frame(&v), false)
            }
            Msg::Done(Ok(o)) => {
                record(&st, &o);
                let fin = json!({"type": "task.stream.event", "event": {"is_final": true}});
                let r = result_json(
                    &entry2,
                    &o,
                    ctx.t0.elapsed(),
                    Some(ctx.ttft.unwrap_or_default()),
                );
                let mut out = sse_frame(&fin);
                out.extend(sse_frame(&json!({"type": "task.stream.done", "result": r})));
                (out, true)
            }
            Msg::Done(Err(e)) => {
                let e = ApiError::from(e);
                (
                    sse_frame(&json!({"type": "error", "error": e.body()["error"]})),
                    true,
                )
            }
        }
    };
    Ok(sse_response(
        state.clone(),
        rx,
        Some(first),
        t0,
        permit,
        framer,
    ))
}

/// `data: {json}\n\n`.
pub fn sse_frame(v: &Value) -> Vec<u8> {
    let mut out = b"data: ".to_vec();
    out.extend(serde_json::to_vec(v).unwrap_or_default());
    out.extend_from_slice(b"\n\n");
    out
}

/// What a stream's framer keeps.
pub struct SseCtx {
    pub t0: Instant,
    pub first_audio_seen: bool,
    pub ttft: Option<Duration>,
    pub done: bool,
    pub state: Arc<AppState>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Drop for SseCtx {
    fn drop(&mut self) {
        if !self.done {
            // The body was dropped before the end: the client went away (the worker's next
            // send fails and generation stops).
            self.state
                .metrics
                .disconnects
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::info!("client disconnected mid-stream; generation stopped");
        }
    }
}

/// A streamed body of the worker's messages, framed by `framer` (which says when it is done).
pub fn sse_response(
    state: Arc<AppState>,
    rx: tokio::sync::mpsc::Receiver<Msg>,
    first: Option<Msg>,
    t0: Instant,
    permit: tokio::sync::OwnedSemaphorePermit,
    framer: impl FnMut(Msg, &mut SseCtx) -> (Vec<u8>, bool) + Send + 'static,
) -> Response {
    body_stream(state, rx, first, t0, permit, framer, "text/event-stream")
}

/// [`sse_response`] with any content type (chunked PCM).
pub fn body_stream(
    state: Arc<AppState>,
    rx: tokio::sync::mpsc::Receiver<Msg>,
    first: Option<Msg>,
    t0: Instant,
    permit: tokio::sync::OwnedSemaphorePermit,
    framer: impl FnMut(Msg, &mut SseCtx) -> (Vec<u8>, bool) + Send + 'static,
    content_type: &'static str,
) -> Response {
    let ctx = SseCtx {
        t0,
        first_audio_seen: false,
        ttft: None,
        done: false,
        state,
        _permit: permit,
    };
    let s = futures_util::stream::unfold(
        (rx, first, ctx, framer),
        |(mut rx, mut first, mut ctx, mut framer)| async move {
            if ctx.done {
                return None;
            }
            let msg = match first.take() {
                Some(m) => Some(m),
                None => rx.recv().await,
            };
            let (bytes, done) = match msg {
                Some(m) => framer(m, &mut ctx),
                None => (Vec::new(), true),
            };
            ctx.done = done;
            Some((
                Ok::<_, std::io::Error>(Bytes::from(bytes)),
                (rx, first, ctx, framer),
            ))
        },
    );
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(s),
    )
        .into_response()
}

/// A task route's JSON body checked as [`run`] and [`stream`] check it before a model is
/// involved, for an entry of `task` and language `en` (no server-side paths, `limit` as the
/// server's `max_tokens`). For the fuzz targets (`fuzz/`); not an API.
#[doc(hidden)]
pub fn check_body(task: &str, body: &[u8], limit: usize) -> Result<(), ApiError> {
    let b: TaskBody = parse_json(Ok(Bytes::copy_from_slice(body)))?;
    prepare_for(task, "en", limit, None, &HeaderMap::new(), b.request).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use audio_engine::lfm2_audio::limits::MAX_ARTIFACT_BYTES;

    fn artifact(payload: Option<&str>, path: Option<&str>) -> ArtifactIn {
        ArtifactIn {
            id: QUESTION_ID.into(),
            kind: "custom".into(),
            payload: payload.map(str::to_owned),
            path: path.map(str::to_owned),
            meta: BTreeMap::new(),
        }
    }

    #[test]
    fn a_server_side_artifact_past_the_byte_limit_is_refused_before_it_is_read() {
        let dir = std::env::temp_dir().join(format!("serve-artifact-limit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dir = dir.canonicalize().unwrap();
        // why: a sparse file, so one past the limit costs no disk and reading it would show as
        // a 256 MiB allocation instead of the refusal.
        let big = dir.join("big.bin");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_ARTIFACT_BYTES as u64 + 1)
            .unwrap();
        std::fs::write(dir.join("small.bin"), [1u8, 2, 3]).unwrap();

        let e = artifacts_in(&[artifact(None, Some("big.bin"))], Some(&dir)).unwrap_err();
        assert_eq!(e.status.as_u16(), 400);
        assert!(e.message.contains("MAX_ARTIFACT_BYTES"), "{}", e.message);

        // The files count with the base64 payloads before them.
        let payload = b64(&[0u8; 6]);
        let ok = artifacts_in(
            &[
                artifact(Some(&payload), None),
                artifact(None, Some("small.bin")),
            ],
            Some(&dir),
        )
        .unwrap();
        assert_eq!(ok[1].payload, [1, 2, 3]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
