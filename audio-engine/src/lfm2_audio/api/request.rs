//! The wire-level request every front end builds (audio.cpp's shape: task, inputs, history,
//! options) and its one validator, [`Request::resolve`], which turns it into the [`Job`] the
//! engine runs. The C ABI and the HTTP server only translate their formats into a [`Request`]
//! (strings or JSON values into [`OptionMap`], PCM or WAV into [`AudioInput`]); every default,
//! range and rule of what a task takes lives here and in the option table ([`super::options`]).

use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::io::audio::AudioInput;
use crate::lfm2_audio::session::conversation::{
    check_artifacts, Artifact, ArtifactKind, Task, QUESTION_ID,
};
use crate::lfm2_audio::session::S2sRequest;
use crate::lfm2_audio::tasks::asr::AsrOptions;
use crate::lfm2_audio::tasks::s2s::S2sOptions;
use crate::lfm2_audio::tasks::tts::{TtsOptions, Voice};
use crate::lfm2_audio::SamplerConfig;

use super::job::{AsrJob, Job, TtsJob};
use super::options::{resolve, AudioChunkMode, OptionMap, OptionValue, ResolvedOptions};

/// One request as a front end received it, before any check.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The task it asks for.
    pub task: Task,
    /// The text to speak (TTS).
    pub text: Option<String>,
    /// The text's language, where the wire carries it apart from the `language` option.
    pub text_language: Option<String>,
    /// The audio: ASR's input, S2S's question.
    pub audio: Option<AudioInput>,
    /// A voice id (TTS).
    pub voice: Option<String>,
    /// Input artifacts in order: S2S's earlier turns.
    pub history: Vec<Artifact>,
    /// The system prompt of an S2S conversation (OpenAI chat's system message), if not the
    /// default.
    pub system_prompt: Option<String>,
    /// The options by name ([`super::options::REQUEST_OPTIONS`]).
    pub options: OptionMap,
}

impl Request {
    /// An empty request for `task`.
    pub fn new(task: Task) -> Request {
        Request {
            task,
            text: None,
            text_language: None,
            audio: None,
            voice: None,
            history: Vec::new(),
            system_prompt: None,
            options: OptionMap::new(),
        }
    }

    /// Sets option `name` (builder style).
    pub fn option(mut self, name: &str, value: impl Into<OptionValue>) -> Request {
        self.options.insert(name.to_owned(), value.into());
        self
    }
}

/// What the validator needs to know of the model and the front end.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestContext {
    /// The checkpoint's language (`en`, `ja`).
    pub language: String,
    /// The longest audio the encoder takes in one pass, in seconds: an S2S question over it is
    /// refused, ASR audio over it is split (`audio_chunk_mode` `auto`).
    pub max_pass_seconds: f64,
    /// A front end's cap on `max_tokens` (a server's `--max-tokens`), if any.
    pub max_tokens_limit: Option<usize>,
    /// A front end's cap on the whole input audio in seconds (a server's
    /// `--max-audio-seconds`), if any: ASR audio over it is refused even where it would be split.
    pub max_input_seconds: Option<f64>,
    /// Whether an S2S question may be missing because a stream pushes it later (the C ABI's
    /// streaming sessions); the job then holds an empty question.
    pub question_pushed_later: bool,
}

impl RequestContext {
    /// The context for a model of `language` whose one-pass limit is `max_pass_seconds`, with
    /// no front-end cap.
    pub fn new(language: &str, max_pass_seconds: f64) -> RequestContext {
        RequestContext {
            language: language.to_owned(),
            max_pass_seconds,
            max_tokens_limit: None,
            max_input_seconds: None,
            question_pushed_later: false,
        }
    }
}

/// A checked request: the job to run and how a stream groups its frames.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedRequest {
    /// The work.
    pub job: Job,
    /// `stream_frames_per_event`.
    pub frames_per_event: usize,
}

fn invalid(msg: impl Into<String>) -> EngineError {
    EngineError::InvalidRequest(msg.into())
}

fn nonempty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

fn audio_seconds(audio: &AudioInput, what: &str, ctx: &RequestContext) -> Result<f64, EngineError> {
    let seconds = audio
        .duration_seconds()
        .map_err(|e| invalid(format!("{what}: {e}")))?;
    if let Some(limit) = ctx.max_input_seconds.filter(|l| seconds > *l) {
        return Err(invalid(format!(
            "{what} lasts {seconds:.3} s, over the {limit:.3} s limit"
        )));
    }
    Ok(seconds)
}

impl Request {
    /// Checks the request against what its task takes and builds the job: an unknown option,
    /// one the task does not take, a value of the wrong type or out of range, an input the task
    /// does not take or lacks, a voice or language the model does not have, or history for a
    /// task other than S2S is an [`EngineError::InvalidRequest`] naming it; too many artifacts
    /// an [`EngineError::Capacity`]. Nothing is decoded but the audio's header.
    pub fn resolve(&self, ctx: &RequestContext) -> Result<ResolvedRequest, EngineError> {
        let task = self.task;
        let o = resolve(task, &self.options, ctx.max_tokens_limit)?;
        self.check_language(&o, ctx)?;
        check_artifacts(task, &self.history)?;
        if task != Task::S2s {
            if let Some(a) = self.history.first() {
                return Err(invalid(format!(
                    "{} takes no input artifacts (artifact 0 is `{}`); conversation history is \
                     for s2s",
                    task.name(),
                    a.id
                )));
            }
        }
        if task != Task::S2s && self.system_prompt.is_some() {
            return Err(invalid(format!(
                "{} takes no system prompt (a conversation's system prompt is for s2s)",
                task.name()
            )));
        }
        if task == Task::Asr && nonempty(&self.text).is_some() {
            return Err(invalid(format!(
                "{} takes no text (text is what tts speaks, or s2s's typed question)",
                task.name()
            )));
        }
        if task != Task::Tts {
            if let Some(v) = &self.voice {
                return Err(invalid(format!(
                    "{} takes no voice id (got `{v}`; voices are for tts)",
                    task.name()
                )));
            }
        }
        let job = match task {
            Task::Asr => self.asr(&o, ctx)?,
            Task::Tts => self.tts(&o)?,
            Task::S2s => self.s2s(&o, ctx)?,
        };
        Ok(ResolvedRequest {
            job,
            frames_per_event: o.frames_per_event,
        })
    }

    fn check_language(&self, o: &ResolvedOptions, ctx: &RequestContext) -> Result<(), EngineError> {
        if let Some(l) = o.language.as_deref().filter(|l| !l.is_empty()) {
            if l != ctx.language {
                return Err(invalid(format!(
                    "request option `language` = \"{l}\": this checkpoint's language is {}",
                    ctx.language
                )));
            }
        }
        if let Some(l) = nonempty(&self.text_language) {
            if l != ctx.language {
                return Err(invalid(format!(
                    "the text's language is \"{l}\": this checkpoint's language is {}",
                    ctx.language
                )));
            }
        }
        Ok(())
    }

    fn asr(&self, o: &ResolvedOptions, ctx: &RequestContext) -> Result<Job, EngineError> {
        let audio = self
            .audio
            .clone()
            .ok_or_else(|| invalid("asr needs audio (the speech to transcribe)"))?;
        let seconds = audio_seconds(&audio, "the audio", ctx)?;
        let chunk = o.audio_chunk_seconds.min(ctx.max_pass_seconds);
        let chunk_seconds =
            match o.audio_chunk_mode {
                AudioChunkMode::Vad => return Err(invalid(
                    "request option `audio_chunk_mode` = vad needs a voice-activity model, which \
                     this build does not have (use auto, fixed or none)",
                )),
                AudioChunkMode::None => None,
                AudioChunkMode::Auto if seconds <= ctx.max_pass_seconds => None,
                AudioChunkMode::Auto | AudioChunkMode::Fixed => Some(chunk),
            };
        if chunk_seconds.is_none() && seconds > ctx.max_pass_seconds {
            return Err(invalid(format!(
                "the audio lasts {seconds:.3} s, over the one-pass limit of {} s \
                 (audio_chunk_mode none)",
                ctx.max_pass_seconds
            )));
        }
        Ok(Job::Asr(AsrJob {
            audio,
            options: AsrOptions {
                max_new_tokens: o.max_tokens,
                ..AsrOptions::default()
            },
            chunk_seconds,
        }))
    }

    fn tts(&self, o: &ResolvedOptions) -> Result<Job, EngineError> {
        if self.audio.is_some() {
            return Err(invalid(
                "tts takes no audio (audio is asr's input and s2s's question)",
            ));
        }
        let text = self.text.clone().unwrap_or_default();
        if text.trim().is_empty() {
            return Err(invalid("tts needs text (what to speak)"));
        }
        let voice = match nonempty(&self.voice) {
            None => Voice::default(),
            Some(id) => id
                .parse::<Voice>()
                .map_err(|e| invalid(format!("tts: {e}")))?,
        };
        Ok(Job::Tts(TtsJob {
            text,
            options: TtsOptions {
                voice,
                max_new_tokens: o.max_tokens,
                text: SamplerConfig::text(),
                audio: sampler(o),
                chunk_chars: if o.one_text_chunk {
                    usize::MAX
                } else {
                    o.text_chunk_size
                },
            },
        }))
    }

    fn s2s(&self, o: &ResolvedOptions, ctx: &RequestContext) -> Result<Job, EngineError> {
        let mut history = self.history.clone();
        let question = match (&self.audio, nonempty(&self.text)) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "s2s takes its question as audio or as text, not both",
                ))
            }
            // why a trailing question artifact: a history ending with a question that has no
            // reply asks it (`History::pending`), so a typed question needs no other path.
            (None, Some(text)) => {
                history.push(Artifact {
                    id: QUESTION_ID.to_owned(),
                    kind: ArtifactKind::Text,
                    payload: text.as_bytes().to_vec(),
                    meta: Default::default(),
                });
                AudioInput::default()
            }
            (Some(a), None) => {
                let seconds = audio_seconds(a, "the question", ctx)?;
                if seconds > ctx.max_pass_seconds {
                    return Err(invalid(format!(
                        "the question lasts {seconds:.3} s, over the one-pass limit of {} s",
                        ctx.max_pass_seconds
                    )));
                }
                a.clone()
            }
            (None, None) if ctx.question_pushed_later => AudioInput::default(),
            // A history that ends with a question (a typed one, or a tool's result) asks it.
            (None, None) if history.last().is_some_and(|a| a.id == QUESTION_ID) => {
                AudioInput::default()
            }
            (None, None) => {
                return Err(invalid(
                    "s2s needs the question as audio, typed as text, or as the history's last \
                     artifact",
                ))
            }
        };
        Ok(Job::S2s(S2sRequest {
            question,
            history,
            return_codes: o.return_codes,
            s2s: S2sOptions {
                max_new_tokens: o.max_tokens,
                text: text_sampler(o),
                audio: sampler(o),
                system_prompt: self
                    .system_prompt
                    .clone()
                    .unwrap_or_else(|| S2sOptions::default().system_prompt),
            },
        }))
    }
}

/// S2S's text sampler: the greedy default untouched at `text_temperature` 0 (so its bytes are
/// today's), else every token kept (liquid-audio's `text_top_k=None`) with the request's seed.
fn text_sampler(o: &ResolvedOptions) -> SamplerConfig {
    if o.text_temperature > 0.0 {
        SamplerConfig {
            temperature: o.text_temperature,
            top_k: 0,
            seed: o.seed,
        }
    } else {
        SamplerConfig::text()
    }
}

fn sampler(o: &ResolvedOptions) -> SamplerConfig {
    SamplerConfig {
        temperature: o.temperature,
        top_k: o.top_k,
        seed: o.seed,
    }
}
