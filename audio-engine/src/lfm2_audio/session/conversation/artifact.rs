//! The reply artifact: what an S2S turn generated, as token ids and codes, so that the client
//! can send it back with the next turn.
//!
//! Payload: little-endian `int32` values, one step after another. A text step is its token id;
//! a frame is `-1` followed by one code per codebook. Meta: exactly the keys of
//! [`REPLY_META_KEYS`]. The artifact holds ids and codes only (no embeddings, no logits), so it
//! replays on any quantization of the checkpoint it came from.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::lfm2_audio::engine::Lfm2Audio;
use crate::lfm2_audio::error::EngineError;
pub use crate::lfm2_audio::generation::reply::ReplyStep;

/// Id of the artifact holding an earlier turn's reply.
pub const REPLY_ID: &str = "lfm2_audio.reply";
/// Id of the artifact holding an earlier turn's question (WAV bytes, or a typed question's
/// UTF-8 text: [`is_text`](super::is_text)).
pub const QUESTION_ID: &str = "lfm2_audio.question";
/// The `format` meta value of a reply artifact this engine writes and reads.
pub const REPLY_FORMAT: &str = "lfm2_audio.reply/1";
/// The payload value that starts a frame.
pub const FRAME_MARK: i32 = -1;

/// The meta keys of a reply artifact, all required and no others allowed.
pub const REPLY_META_KEYS: [&str; 7] = [
    "format",
    "language",
    "codebooks",
    "audio_vocab_size",
    "text_vocab_size",
    "steps",
    "ended",
];

/// Reply meta keys whose values are counts.
const COUNT_META_KEYS: [&str; 4] = ["codebooks", "audio_vocab_size", "text_vocab_size", "steps"];

/// One meta value as the wire carries it, read as the engine does: audio.cpp carries every value
/// as text (`"8"`, `"true"`), so a count key's digits become a number and `ended`'s `true` /
/// `false` a boolean; anything else stays text (and is judged when the reply is read). The one
/// codec of reply meta for every front end (with [`meta_to_text`]).
pub fn meta_from_text(key: &str, value: &str) -> serde_json::Value {
    use serde_json::Value;
    if COUNT_META_KEYS.contains(&key) {
        if let Ok(n) = value.parse::<u64>() {
            return Value::from(n);
        }
    } else if key == "ended" && (value == "true" || value == "false") {
        return Value::Bool(value == "true");
    }
    Value::String(value.to_owned())
}

/// [`meta_from_text`] for a JSON value: strings are read as text, other values kept.
pub fn meta_from_json(key: &str, value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::String(s) => meta_from_text(key, s),
        other => other.clone(),
    }
}

/// A meta value as audio.cpp returns it: text (`8`, `true`, the string itself).
pub fn meta_to_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What an artifact holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArtifactKind {
    /// Audio samples (e.g. a WAV).
    Audio,
    /// Text.
    Text,
    /// Discrete acoustic tokens: the kind of a reply artifact.
    AcousticTokens,
    /// Anything else, described by its id: the kind of a question artifact (WAV bytes).
    Custom,
}

impl ArtifactKind {
    /// The kind's name as requests spell it.
    pub fn name(self) -> &'static str {
        match self {
            ArtifactKind::Audio => "audio",
            ArtifactKind::Text => "text",
            ArtifactKind::AcousticTokens => "acoustic_tokens",
            ArtifactKind::Custom => "custom",
        }
    }
}

/// A named blob travelling with a request or a result.
#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    /// What the artifact is, e.g. [`REPLY_ID`] or [`QUESTION_ID`].
    pub id: String,
    /// What its payload holds.
    pub kind: ArtifactKind,
    /// The bytes.
    pub payload: Vec<u8>,
    /// Description of the payload, as JSON values by key.
    pub meta: BTreeMap<String, Value>,
}

/// A decoded reply: its steps and whether it ended on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Every step generated, in order.
    pub steps: Vec<ReplyStep>,
    /// False when the reply was cut (max_tokens reached, stream finished early).
    pub ended: bool,
}

impl Reply {
    /// Number of prompt positions the reply takes (one per step, a frame being one step).
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether the reply has no step.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

/// What a reply must fit: the checkpoint's language, codebooks and vocabularies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyFormat {
    /// The checkpoint's language tag (e.g. `en`, `ja`); a reply of another language is refused.
    pub language: String,
    /// Codes per frame.
    pub codebooks: usize,
    /// Entries per codebook, end-of-audio included (2049: codes 0..=2047, end of audio 2048).
    pub audio_vocab_size: u32,
    /// Size of the text vocabulary; text ids must be below it.
    pub text_vocab_size: u32,
    /// The `<|im_end|>` id, which ends a reply and is never one of its steps.
    pub im_end: u32,
}

impl Lfm2Audio {
    /// What a reply artifact of this model must fit.
    pub fn reply_format(&self) -> ReplyFormat {
        let s = self.special_tokens();
        ReplyFormat {
            language: self.language().to_owned(),
            codebooks: self.codebooks(),
            audio_vocab_size: s.end_of_audio + 1,
            text_vocab_size: self.tokenizer().n_vocab() as u32,
            im_end: s.im_end,
        }
    }
}

impl ReplyFormat {
    /// The end-of-audio code.
    pub fn end_of_audio(&self) -> u32 {
        self.audio_vocab_size.saturating_sub(1)
    }

    /// Whether `codes` is the end-of-audio frame.
    pub fn is_end_of_audio(&self, codes: &[u32]) -> bool {
        !codes.is_empty() && codes.iter().all(|&c| c == self.end_of_audio())
    }

    /// Checks that the format itself is usable (a misconfigured engine, not a bad request).
    pub fn validate(&self) -> Result<(), EngineError> {
        // why: every code, the frame mark included, must fit an int32, and a codebook needs at
        // least one audio code besides end of audio.
        if self.codebooks == 0
            || self.audio_vocab_size < 2
            || self.audio_vocab_size > i32::MAX as u32
            || self.text_vocab_size == 0
            || self.text_vocab_size > i32::MAX as u32
            || self.language.is_empty()
        {
            return Err(EngineError::Invariant(format!(
                "unusable reply format: language {:?}, {} codebooks of {} codes, {} text ids",
                self.language, self.codebooks, self.audio_vocab_size, self.text_vocab_size
            )));
        }
        Ok(())
    }

    /// Checks one step against the checkpoint: a text id below `text_vocab_size` and not
    /// `<|im_end|>`; a frame of `codebooks` codes below `audio_vocab_size`, all end of audio
    /// when its first code is. The caller picks the error kind (a request's fault when read
    /// from an artifact, the engine's when about to be written).
    pub fn check_step(&self, step: &ReplyStep) -> Result<(), String> {
        match step {
            ReplyStep::Text(id) => {
                if *id >= self.text_vocab_size {
                    return Err(format!(
                        "text id {id} is outside the {}-token vocabulary",
                        self.text_vocab_size
                    ));
                }
                if *id == self.im_end {
                    return Err(format!(
                        "text id {id} is <|im_end|>, which ends a reply and is not one of its steps"
                    ));
                }
                Ok(())
            }
            ReplyStep::Frame(codes) => {
                if codes.len() != self.codebooks {
                    return Err(format!(
                        "a frame holds {} codes, the checkpoint has {} codebooks",
                        codes.len(),
                        self.codebooks
                    ));
                }
                if let Some((cb, code)) = codes
                    .iter()
                    .enumerate()
                    .find(|(_, &c)| c >= self.audio_vocab_size)
                {
                    return Err(format!(
                        "code {code} of codebook {cb} is outside the {}-entry codebook",
                        self.audio_vocab_size
                    ));
                }
                // why: the generator turns a frame whose first code is end of audio into an
                // all-end-of-audio frame, so a partial one was never generated.
                if codes[0] == self.end_of_audio() && !self.is_end_of_audio(codes) {
                    return Err(format!(
                        "a frame starts with end of audio ({}) but is not all end of audio",
                        self.end_of_audio()
                    ));
                }
                Ok(())
            }
        }
    }

    /// The meta a reply artifact of `steps` steps carries.
    fn meta(&self, steps: usize, ended: bool) -> BTreeMap<String, Value> {
        let mut m = BTreeMap::new();
        m.insert("format".to_owned(), Value::from(REPLY_FORMAT));
        m.insert("language".to_owned(), Value::from(self.language.clone()));
        m.insert("codebooks".to_owned(), Value::from(self.codebooks as u64));
        m.insert(
            "audio_vocab_size".to_owned(),
            Value::from(u64::from(self.audio_vocab_size)),
        );
        m.insert(
            "text_vocab_size".to_owned(),
            Value::from(u64::from(self.text_vocab_size)),
        );
        m.insert("steps".to_owned(), Value::from(steps as u64));
        m.insert("ended".to_owned(), Value::from(ended));
        m
    }
}

/// Writes a reply artifact of `steps`. Fails as [`EngineError::ReplyStep`] on a step that does
/// not fit `fmt`: the session produced it, so the request is not at fault.
pub fn encode_reply(
    steps: &[ReplyStep],
    ended: bool,
    fmt: &ReplyFormat,
) -> Result<Artifact, EngineError> {
    fmt.validate()?;
    let mut payload = Vec::with_capacity(steps.len() * 4);
    for (i, step) in steps.iter().enumerate() {
        fmt.check_step(step)
            .map_err(|reason| EngineError::ReplyStep { step: i, reason })?;
        match step {
            // why: check_step bounded ids and codes by vocabulary sizes that fit an int32.
            ReplyStep::Text(id) => payload.extend_from_slice(&(*id as i32).to_le_bytes()),
            ReplyStep::Frame(codes) => {
                payload.extend_from_slice(&FRAME_MARK.to_le_bytes());
                for &c in codes {
                    payload.extend_from_slice(&(c as i32).to_le_bytes());
                }
            }
        }
    }
    Ok(Artifact {
        id: REPLY_ID.to_owned(),
        kind: ArtifactKind::AcousticTokens,
        payload,
        meta: fmt.meta(steps.len(), ended),
    })
}

/// What a reply artifact's meta says, once checked against the checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyMeta {
    /// Steps the payload holds.
    pub steps: usize,
    /// Whether the reply ended on its own.
    pub ended: bool,
}

fn meta_u64(meta: &BTreeMap<String, Value>, key: &str) -> Result<u64, String> {
    let v = &meta[key];
    v.as_u64()
        .ok_or_else(|| format!("meta `{key}` is {v}, not a non-negative integer"))
}

fn meta_must_equal(
    meta: &BTreeMap<String, Value>,
    key: &str,
    expected: u64,
    what: &str,
) -> Result<(), String> {
    let found = meta_u64(meta, key)?;
    if found != expected {
        return Err(format!(
            "meta `{key}` is {found}, this checkpoint has {expected} {what}"
        ));
    }
    Ok(())
}

/// Checks a reply artifact's id, kind and meta against `fmt`, without touching its payload
/// (so a history's length can be judged before any payload is read). The message says what
/// does not fit; the caller adds which artifact it was.
pub fn check_reply_meta(art: &Artifact, fmt: &ReplyFormat) -> Result<ReplyMeta, String> {
    if art.id != REPLY_ID {
        return Err(format!("artifact id is `{}`, not `{REPLY_ID}`", art.id));
    }
    if art.kind != ArtifactKind::AcousticTokens {
        return Err(format!(
            "kind is {}, a reply is {}",
            art.kind.name(),
            ArtifactKind::AcousticTokens.name()
        ));
    }
    if let Some(k) = art
        .meta
        .keys()
        .find(|k| !REPLY_META_KEYS.contains(&k.as_str()))
    {
        return Err(format!("unknown meta key `{k}`"));
    }
    if let Some(k) = REPLY_META_KEYS.iter().find(|k| !art.meta.contains_key(**k)) {
        return Err(format!("meta key `{k}` is missing"));
    }
    match art.meta["format"].as_str() {
        Some(REPLY_FORMAT) => {}
        _ => {
            return Err(format!(
                "meta `format` is {}, not \"{REPLY_FORMAT}\"",
                art.meta["format"]
            ))
        }
    }
    match art.meta["language"].as_str() {
        Some(l) if l == fmt.language => {}
        _ => {
            return Err(format!(
                "meta `language` is {}, this checkpoint's is \"{}\"",
                art.meta["language"], fmt.language
            ))
        }
    }
    meta_must_equal(&art.meta, "codebooks", fmt.codebooks as u64, "codebooks")?;
    meta_must_equal(
        &art.meta,
        "audio_vocab_size",
        u64::from(fmt.audio_vocab_size),
        "codes per codebook",
    )?;
    meta_must_equal(
        &art.meta,
        "text_vocab_size",
        u64::from(fmt.text_vocab_size),
        "text ids",
    )?;
    // why: an absurd count must still reach the length check as a number (and fail there as
    // capacity), so saturate instead of refusing it here.
    let steps = usize::try_from(meta_u64(&art.meta, "steps")?).unwrap_or(usize::MAX);
    let ended = art.meta["ended"]
        .as_bool()
        .ok_or_else(|| format!("meta `ended` is {}, not true or false", art.meta["ended"]))?;
    Ok(ReplyMeta { steps, ended })
}

/// Reads the payload of a reply whose meta passed [`check_reply_meta`].
fn decode_payload(
    payload: &[u8],
    meta: ReplyMeta,
    fmt: &ReplyFormat,
) -> Result<Vec<ReplyStep>, String> {
    if payload.len() % 4 != 0 {
        return Err(format!(
            "payload is {} bytes, not a whole number of int32 values",
            payload.len()
        ));
    }
    // why: the payload, not the meta's claim, bounds the allocation.
    let mut steps = Vec::with_capacity(meta.steps.min(payload.len() / 4));
    let mut values = payload
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    while let Some(v) = values.next() {
        let i = steps.len();
        if i == meta.steps {
            return Err(format!(
                "payload holds more than the {} steps its meta says",
                meta.steps
            ));
        }
        let step = if v == FRAME_MARK {
            let mut codes = Vec::with_capacity(fmt.codebooks);
            for cb in 0..fmt.codebooks {
                let c = values.next().ok_or_else(|| {
                    format!(
                        "payload ends inside step {i}, a frame, after {cb} of {} codes",
                        fmt.codebooks
                    )
                })?;
                let c = u32::try_from(c)
                    .map_err(|_| format!("step {i}: code {c} of codebook {cb} is negative"))?;
                codes.push(c);
            }
            ReplyStep::Frame(codes)
        } else {
            let id = u32::try_from(v).map_err(|_| {
                format!("step {i}: value {v} is neither a token id nor the frame mark -1")
            })?;
            ReplyStep::Text(id)
        };
        fmt.check_step(&step)
            .map_err(|e| format!("step {i}: {e}"))?;
        steps.push(step);
    }
    if steps.len() != meta.steps {
        return Err(format!(
            "payload holds {} steps, its meta says {}",
            steps.len(),
            meta.steps
        ));
    }
    Ok(steps)
}

/// Reads a reply artifact written by [`encode_reply`] for the same checkpoint. Anything that
/// does not fit (id, kind, format, meta keys or values, length, tokens, codes) is an
/// [`EngineError::InvalidRequest`] naming the problem.
pub fn decode_reply(art: &Artifact, fmt: &ReplyFormat) -> Result<Reply, EngineError> {
    fmt.validate()?;
    let bad = |e: String| EngineError::InvalidRequest(format!("{REPLY_ID} artifact: {e}"));
    let meta = check_reply_meta(art, fmt).map_err(bad)?;
    let steps = decode_payload(&art.payload, meta, fmt).map_err(bad)?;
    Ok(Reply {
        steps,
        ended: meta.ended,
    })
}

/// Like [`decode_reply`] for a reply whose meta was already checked; errors name the turn.
pub(crate) fn decode_checked(
    art: &Artifact,
    meta: ReplyMeta,
    fmt: &ReplyFormat,
    what: &str,
) -> Result<Reply, EngineError> {
    let steps = decode_payload(&art.payload, meta, fmt)
        .map_err(|e| EngineError::InvalidRequest(format!("{what}: {e}")))?;
    Ok(Reply {
        steps,
        ended: meta.ended,
    })
}
