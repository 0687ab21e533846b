//! Reading the earlier turns a request carries, and the conversation limit.
//!
//! The limit (prompt + max_tokens within [`CONVERSATION_LIMIT`] steps) is checked as soon as
//! the request shows it passed: on each reply's step count from its meta, before any payload is
//! read; on the chat markup; after each question is encoded ([`ConversationBudget::add_question`]);
//! and last on the whole prompt ([`ConversationBudget::check_prompt`]). A first turn (no
//! history) is not held to it, only to the context, which the session checks.

use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::generation::reply::ReplyStep;
use crate::lfm2_audio::io::audio::{load_wav_bytes_16k, ReadOptions};
use crate::lfm2_audio::text::tokenizer::Tokenizer;
use crate::lfm2_audio::text::tools::tool_response;

use super::artifact::{check_reply_meta, decode_checked, Artifact, ArtifactKind, Reply};
use super::artifact::{ReplyFormat, ReplyMeta, QUESTION_ID, REPLY_ID};
use super::prompt::{ChatMarkup, QuestionLayout};

pub use crate::lfm2_audio::limits::CONVERSATION_LIMIT;

/// Refuses `prompt_steps + max_tokens` over `limit` as [`EngineError::Capacity`], saying to leave
/// out the oldest turns. `stage` says what the count covers (e.g. "known from the replies'
/// meta"), as the count may be a lower bound taken before the whole prompt is built.
pub fn check_room(
    prompt_steps: usize,
    max_tokens: usize,
    limit: usize,
    stage: &str,
) -> Result<(), EngineError> {
    let total = prompt_steps.saturating_add(max_tokens);
    if total > limit {
        return Err(EngineError::Capacity(format!(
            "conversation too long: its prompt takes at least {prompt_steps} steps ({stage}) \
             and max_tokens {max_tokens}, {total} in all, over the {limit}-step limit of a \
             conversation; leave out the oldest turns"
        )));
    }
    Ok(())
}

/// A running count of a conversation prompt's steps, checked against the limit at each addition.
/// Inactive (every check passes) for a first turn, which only the context limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationBudget {
    limit: usize,
    max_tokens: usize,
    turns: usize,
    known: usize,
}

impl ConversationBudget {
    /// A budget for a turn after `turns` earlier ones, whose prompt is known to take at least
    /// `known` steps so far.
    pub fn new(limit: usize, max_tokens: usize, turns: usize, known: usize) -> Self {
        ConversationBudget {
            limit,
            max_tokens,
            turns,
            known,
        }
    }

    /// Whether the conversation limit applies (the request has earlier turns).
    pub fn is_active(&self) -> bool {
        self.turns > 0
    }

    /// Earlier turns in the request.
    pub fn turns(&self) -> usize {
        self.turns
    }

    /// Prompt steps known so far.
    pub fn known_steps(&self) -> usize {
        self.known
    }

    /// The max_tokens the budget keeps room for.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The limit in force.
    pub fn limit(&self) -> usize {
        self.limit
    }

    fn check(&self, stage: &str) -> Result<(), EngineError> {
        if !self.is_active() {
            return Ok(());
        }
        check_room(self.known, self.max_tokens, self.limit, stage)
    }

    /// Adds question `index`'s `rows` audio positions once it is encoded (an earlier one, or the
    /// new one, last) and checks the limit.
    pub fn add_question(&mut self, index: usize, rows: usize) -> Result<(), EngineError> {
        self.known = self.known.saturating_add(rows);
        self.check(&format!("after encoding question {}", index + 1))
    }

    /// Checks the whole prompt's length, `prompt_steps`.
    pub fn check_prompt(&self, prompt_steps: usize) -> Result<(), EngineError> {
        if !self.is_active() {
            return Ok(());
        }
        check_room(
            prompt_steps,
            self.max_tokens,
            self.limit,
            "the whole prompt",
        )
    }
}

/// What reading a history needs from the checkpoint and the session.
#[derive(Debug, Clone)]
pub struct HistoryConfig<'a> {
    /// What a reply must fit.
    pub format: &'a ReplyFormat,
    /// The chat markup (tokenized with the session's system prompt).
    pub markup: &'a ChatMarkup,
    /// Steps the prompt and max_tokens may take together ([`CONVERSATION_LIMIT`]).
    pub limit: usize,
    /// How earlier questions are read (held to the same length limit as the new one).
    pub wav: ReadOptions,
    /// The checkpoint's tokenizer: typed questions and replies are tokenized as liquid-audio's
    /// `ChatState.add_text` does.
    pub tokenizer: &'a Tokenizer,
}

/// A question of the conversation: spoken or typed.
#[derive(Debug, Clone, PartialEq)]
pub enum Question {
    /// Mono samples at 16 kHz, ready for the encoder.
    Audio(Vec<f32>),
    /// The typed text's token ids (control-token text recognised, as `ChatState.add_text`).
    Text(Vec<u32>),
    /// A tool's result (a turn of role `tool`, after a reply): its turn text's token ids, the
    /// output between the response markers ([`tool_response`]).
    Tool(Vec<u32>),
}

impl Question {
    /// The question's place in a prompt once its audio (if any) is encoded into `rows` rows.
    pub fn layout(&self, rows: usize) -> QuestionLayout {
        match self {
            Question::Audio(_) => QuestionLayout::Audio { rows },
            Question::Text(ids) => QuestionLayout::Text(ids.clone()),
            Question::Tool(ids) => QuestionLayout::Tool(ids.clone()),
        }
    }
}

/// One earlier turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// The question.
    pub question: Question,
    /// The reply as generated (a typed reply: its text's tokens).
    pub reply: Reply,
}

/// The earlier turns of a request, and the limit's running count.
#[derive(Debug, Clone, PartialEq)]
pub struct History {
    /// The turns in conversation order.
    pub turns: Vec<Turn>,
    /// A question after the last turn with no reply yet: the request's own question when it
    /// carries none apart (a typed question is sent this way).
    pub pending: Option<Question>,
    /// The prompt's steps known so far (markup and replies), to add each question's rows to.
    pub budget: ConversationBudget,
}

impl History {
    /// The replies in order (for [`ChatMarkup::build`]).
    pub fn replies(&self) -> impl Iterator<Item = &Reply> {
        self.turns.iter().map(|t| &t.reply)
    }
}

/// Whether an artifact's payload is UTF-8 text: kind `text`, or meta `format` = `text` (the C
/// ABI has no text kind).
pub fn is_text(art: &Artifact) -> bool {
    art.kind == ArtifactKind::Text
        || art.meta.get("format").and_then(|v| v.as_str()) == Some("text")
}

/// Whether a question artifact is a tool's result: text with meta `role` = `tool`.
pub fn is_tool_result(art: &Artifact) -> bool {
    is_text(art) && art.meta.get("role").and_then(|v| v.as_str()) == Some("tool")
}

fn utf8<'a>(art: &'a Artifact, what: &str) -> Result<&'a str, EngineError> {
    std::str::from_utf8(&art.payload)
        .map_err(|e| invalid(format!("{what} is text but not UTF-8: {e}")))
}

fn invalid(msg: String) -> EngineError {
    EngineError::InvalidRequest(msg)
}

/// Reads the earlier turns from a request's input artifacts: per turn, in order, an
/// [`QUESTION_ID`] (WAV bytes, kind custom or audio; or UTF-8 text, kind text or meta
/// `format` = `text`; a tool's result is such text with meta `role` = `tool`, after a reply)
/// and the [`REPLY_ID`] that turn returned (or a typed reply, UTF-8 text marked the same way). A question after the last reply is the pending question
/// ([`History::pending`]).
///
/// Every artifact's id, order and reply meta is checked first, and the limit with them: each
/// reply's step count comes from its meta, before any payload is read, and the reading stops
/// at the first reply that leaves no room for `max_tokens`, with the chat markup counted. Then
/// payloads and WAVs are read. Wrong ids, order, kinds, meta, payloads or WAVs are
/// [`EngineError::InvalidRequest`]; passing the limit is [`EngineError::Capacity`].
pub fn read_history(
    artifacts: &[Artifact],
    cfg: &HistoryConfig<'_>,
    max_tokens: usize,
) -> Result<History, EngineError> {
    cfg.format.validate()?;
    // why: the turn count is only a bound until every artifact is checked, but each reply seen
    // so far is a whole turn, so counting markup for those turns alone never overcounts.
    let mut metas: Vec<(usize, usize, Option<ReplyMeta>)> = Vec::new();
    let mut reply_steps = 0usize;
    let mut open_question: Option<usize> = None;
    for (i, art) in artifacts.iter().enumerate() {
        let turn = metas.len() + 1;
        match art.id.as_str() {
            QUESTION_ID => {
                if let Some(q) = open_question {
                    return Err(invalid(format!(
                        "turn {turn}'s {QUESTION_ID} (input artifact {q}) has no {REPLY_ID} \
                         after it: input artifact {i} is another question; send each turn as \
                         its question then its reply, in conversation order"
                    )));
                }
                if !is_text(art) && !matches!(art.kind, ArtifactKind::Custom | ArtifactKind::Audio)
                {
                    return Err(invalid(format!(
                        "turn {turn}'s {QUESTION_ID} (input artifact {i}) is of kind {}, \
                         expected {} (WAV bytes) or {} (a typed question)",
                        art.kind.name(),
                        ArtifactKind::Custom.name(),
                        ArtifactKind::Text.name()
                    )));
                }
                if let Some(role) = art.meta.get("role") {
                    match role.as_str() {
                        Some("user") => {}
                        Some("tool") if !is_text(art) => {
                            return Err(invalid(format!(
                                "turn {turn}'s {QUESTION_ID} (input artifact {i}) has role \
                                 `tool` but is not text: a tool's result is its output as text"
                            )));
                        }
                        Some("tool") if metas.is_empty() => {
                            return Err(invalid(format!(
                                "input artifact {i} is a tool's result (role `tool`) with no \
                                 reply before it: a tool's result answers an earlier reply"
                            )));
                        }
                        Some("tool") => {}
                        _ => {
                            return Err(invalid(format!(
                                "turn {turn}'s {QUESTION_ID} (input artifact {i}) has role \
                                 {role}; a question's role is `user` (the default) or `tool`"
                            )));
                        }
                    }
                }
                open_question = Some(i);
            }
            REPLY_ID => {
                let Some(q) = open_question.take() else {
                    return Err(invalid(format!(
                        "input artifact {i} is an {REPLY_ID} out of turn, with no \
                         {QUESTION_ID} before it; send each turn as its question then its \
                         reply, in conversation order"
                    )));
                };
                if is_text(art) {
                    // why no meta: a typed reply is text the client holds (an assistant text
                    // item); its steps are counted once it is tokenized, below.
                    metas.push((q, i, None));
                    continue;
                }
                let meta = check_reply_meta(art, cfg.format).map_err(|e| {
                    invalid(format!(
                        "turn {turn}'s {REPLY_ID} (input artifact {i}) does not fit this \
                         checkpoint: {e}"
                    ))
                })?;
                reply_steps = reply_steps.saturating_add(meta.steps);
                metas.push((q, i, Some(meta)));
                let known = cfg
                    .markup
                    .markup_steps(metas.len())
                    .saturating_add(reply_steps);
                check_room(
                    known,
                    max_tokens,
                    cfg.limit,
                    &format!(
                        "the chat markup and the step counts of the replies of turns 1 to \
                         {turn}, before their payloads are read"
                    ),
                )?;
            }
            other => {
                return Err(invalid(format!(
                    "input artifact {i} has unknown id `{other}`; a conversation takes only \
                     {QUESTION_ID} and {REPLY_ID} artifacts"
                )));
            }
        }
    }
    let question = |t: usize, q: usize| -> Result<Question, EngineError> {
        let what = format!("turn {t}'s {QUESTION_ID} (input artifact {q})");
        let art = &artifacts[q];
        if is_tool_result(art) {
            let output = utf8(art, &what)?;
            return Ok(Question::Tool(
                cfg.tokenizer.encode(&tool_response(output), true),
            ));
        }
        if is_text(art) {
            return Ok(Question::Text(
                cfg.tokenizer.encode(utf8(art, &what)?, true),
            ));
        }
        load_wav_bytes_16k(&art.payload, &cfg.wav)
            .map(Question::Audio)
            .map_err(|e| invalid(format!("{what} is not a usable WAV: {e}")))
    };
    let mut turns = Vec::with_capacity(metas.len());
    for (t, &(q, r, meta)) in metas.iter().enumerate() {
        let what = format!("turn {}'s {REPLY_ID} (input artifact {r})", t + 1);
        let reply = match meta {
            Some(meta) => decode_checked(&artifacts[r], meta, cfg.format, &what)?,
            None => {
                let ids = cfg.tokenizer.encode(utf8(&artifacts[r], &what)?, true);
                // why here: a typed reply is the client's text, so a token the prompt cannot
                // hold (`<|im_end|>` would end the reply early) is the request's fault, not an
                // invariant of the prompt builder, which checks every step again.
                for (i, &id) in ids.iter().enumerate() {
                    cfg.format
                        .check_step(&ReplyStep::Text(id))
                        .map_err(|e| invalid(format!("{what}, a typed reply: token {i}: {e}")))?;
                }
                reply_steps = reply_steps.saturating_add(ids.len());
                Reply {
                    steps: ids.into_iter().map(ReplyStep::Text).collect(),
                    ended: true,
                }
            }
        };
        turns.push(Turn {
            question: question(t + 1, q)?,
            reply,
        });
    }
    let pending = open_question
        .map(|q| question(turns.len() + 1, q))
        .transpose()?;
    let known = cfg
        .markup
        .markup_steps(turns.len())
        .saturating_add(reply_steps);
    let budget = ConversationBudget::new(cfg.limit, max_tokens, turns.len(), known);
    budget.check("the chat markup and every reply")?;
    Ok(History {
        budget,
        turns,
        pending,
    })
}
