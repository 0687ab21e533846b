//! From a request handle to a typed engine job for one task: what the task takes is checked
//! here, so that everything it does not take is refused by name before anything runs.

use audio_engine::lfm2_audio::{AudioInput, Voice, MAX_SAMPLE_RATE, MIN_SAMPLE_RATE};

use crate::engine::{AsrJob, Blob, Kind, S2sJob, TtsJob};
use crate::options::{request_options, AudioChunkMode, RequestOptions, SessionSettings};
use crate::request::{InArtifact, Pcm, Request, ARTIFACT_KINDS, KIND_ACOUSTIC_TOKENS, KIND_CUSTOM};
use crate::status::{AbiError, AbiResult};
use crate::vocab::{Task, FAMILY};

/// A checked request for one task.
#[derive(Debug, Clone, PartialEq)]
pub enum Job {
    /// Speech recognition.
    Asr(AsrJob),
    /// Speech synthesis.
    Tts(TtsJob),
    /// Speech to speech; the question is `None` when a stream is to push it.
    S2s {
        /// Everything but the question (`question` left empty).
        job: S2sJob,
        /// The request's audio, if it had any, checked against the one-pass limit.
        question: Option<AudioInput>,
    },
}

/// A job and how its stream groups frames.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The work.
    pub job: Job,
    /// `stream_frames_per_event`.
    pub frames_per_event: usize,
}

fn refuse_unsupported(req: &Request) -> AbiResult<()> {
    if req.voice_audio.is_some() {
        return Err(AbiError::invalid(format!(
            "{FAMILY} has no speaker reference: a request with voice audio \
             (audiocpp_request_set_voice_audio) is refused"
        )));
    }
    let style = [
        (
            req.style_language.is_some(),
            "audiocpp_request_set_style_language",
        ),
        (req.emotion.is_some(), "audiocpp_request_set_emotion"),
        (
            req.speaking_rate.is_some(),
            "audiocpp_request_set_speaking_rate",
        ),
        (
            req.pitch_shift.is_some(),
            "audiocpp_request_set_pitch_shift",
        ),
        (
            req.energy_scale.is_some(),
            "audiocpp_request_set_energy_scale",
        ),
        (!req.style_tags.is_empty(), "audiocpp_request_set_style_tag"),
    ];
    if let Some((_, call)) = style.iter().find(|(set, _)| *set) {
        return Err(AbiError::invalid(format!(
            "{FAMILY} has no style conditioning: a request set with {call} is refused"
        )));
    }
    Ok(())
}

fn check_language(o: &RequestOptions, req: &Request, language: &str) -> AbiResult<()> {
    if let Some(l) = o.language.as_deref().filter(|l| *l != language) {
        return Err(AbiError::invalid(format!(
            "request option `language` = \"{l}\": this checkpoint's language is {language}"
        )));
    }
    if !req.text_language.is_empty() && req.text_language != language {
        return Err(AbiError::invalid(format!(
            "the text's language is \"{}\": this checkpoint's language is {language}",
            req.text_language
        )));
    }
    Ok(())
}

fn no_text(req: &Request, task: Task) -> AbiResult<()> {
    match req.text.as_deref() {
        Some(t) if !t.is_empty() => Err(AbiError::invalid(format!(
            "{FAMILY} {} takes no text (audiocpp_request_set_text is for tts)",
            task.name()
        ))),
        _ => Ok(()),
    }
}

fn no_voice(req: &Request, task: Task) -> AbiResult<()> {
    match &req.voice_id {
        Some(v) => Err(AbiError::invalid(format!(
            "{FAMILY} {} takes no voice id (got `{v}`; voices are for tts)",
            task.name()
        ))),
        None => Ok(()),
    }
}

fn no_artifacts(req: &Request, task: Task) -> AbiResult<()> {
    match req.artifacts.first() {
        Some(a) => Err(AbiError::invalid(format!(
            "{FAMILY} {} takes no input artifacts (artifact 0 is `{}`); conversation history \
             is for s2s",
            task.name(),
            a.id
        ))),
        None => Ok(()),
    }
}

fn blob(i: usize, a: &InArtifact) -> AbiResult<Blob> {
    let kind = match a.kind {
        KIND_ACOUSTIC_TOKENS => Kind::AcousticTokens,
        KIND_CUSTOM => Kind::Custom,
        other => {
            return Err(AbiError::invalid(format!(
                "input artifact {i} (`{}`) is of kind {}; {FAMILY} s2s takes \
                 lfm2_audio.question (CUSTOM) and lfm2_audio.reply (ACOUSTIC_TOKENS) artifacts",
                a.id, ARTIFACT_KINDS[other as usize]
            )))
        }
    };
    Ok(Blob {
        kind,
        id: a.id.clone(),
        payload: a.payload.clone(),
        meta: a.meta.clone(),
    })
}

/// The engine's input for `pcm` (its samples, no WAV), checked against the one-pass limit.
pub fn audio_of(pcm: &Pcm, settings: &SessionSettings, what: &str) -> AbiResult<AudioInput> {
    let seconds = pcm.seconds();
    if seconds > settings.max_pass_seconds {
        return Err(AbiError::invalid(format!(
            "{what} lasts {seconds:.3} s, over the session's lfm2_audio.max_pass_seconds \
             ({} s)",
            settings.max_pass_seconds
        )));
    }
    audio_unchecked(pcm)
}

fn audio_unchecked(pcm: &Pcm) -> AbiResult<AudioInput> {
    let channels = u16::try_from(pcm.channels).map_err(|_| {
        AbiError::invalid(format!(
            "audio has {} channels; 1..={} are read",
            pcm.channels,
            u16::MAX
        ))
    })?;
    // why here: the ABI names the accepted rates and channel counts in its own words, before
    // the engine sees the samples.
    if !(MIN_SAMPLE_RATE..=MAX_SAMPLE_RATE).contains(&pcm.rate) {
        return Err(AbiError::invalid(format!(
            "audio sample rate {} Hz is outside {MIN_SAMPLE_RATE}..={MAX_SAMPLE_RATE} Hz",
            pcm.rate
        )));
    }
    if channels == 0 {
        return Err(AbiError::invalid("audio has 0 channels"));
    }
    // The samples as they are: the engine averages the channels and converts the rate exactly
    // as it reads a float WAV of them.
    Ok(AudioInput::Pcm {
        samples: pcm.samples.clone(),
        sample_rate: pcm.rate,
        channels,
    })
}

/// Checks `req` for `task` on a model of `language` and builds the job.
pub fn plan(
    task: Task,
    req: &Request,
    settings: &SessionSettings,
    language: &str,
) -> AbiResult<Plan> {
    let o = request_options(task, &req.options, &req.option_arrays)?;
    refuse_unsupported(req)?;
    check_language(&o, req, language)?;
    let job =
        match task {
            Task::Asr => {
                no_text(req, task)?;
                no_voice(req, task)?;
                no_artifacts(req, task)?;
                let pcm = req.audio.as_ref().ok_or_else(|| {
                    AbiError::invalid("asr needs audio (audiocpp_request_set_audio)")
                })?;
                let seconds = pcm.seconds();
                let chunk = o.audio_chunk_seconds.min(settings.max_pass_seconds);
                let chunk_seconds = match o.audio_chunk_mode {
                    AudioChunkMode::Vad => return Err(AbiError::invalid(
                        "request option `audio_chunk_mode` = vad needs a voice-activity model, \
                         which this build does not have (use auto, fixed or none)",
                    )),
                    AudioChunkMode::None => None,
                    AudioChunkMode::Auto if seconds <= settings.max_pass_seconds => None,
                    AudioChunkMode::Auto | AudioChunkMode::Fixed => Some(chunk),
                };
                let audio = match chunk_seconds {
                    None => audio_of(pcm, settings, "the audio")?,
                    Some(_) => audio_unchecked(pcm)?,
                };
                Job::Asr(AsrJob {
                    audio,
                    max_tokens: o.max_tokens,
                    chunk_seconds,
                })
            }
            Task::Tts => {
                if req.audio.is_some() {
                    return Err(AbiError::invalid(
                        "lfm2_audio tts takes no audio (audiocpp_request_set_audio is for asr and \
                     s2s)",
                    ));
                }
                no_artifacts(req, task)?;
                let text = req.text.clone().unwrap_or_default();
                if text.trim().is_empty() {
                    return Err(AbiError::invalid(
                        "tts needs text (audiocpp_request_set_text)",
                    ));
                }
                let voice = match req.voice_id.as_deref() {
                    None => Voice::default(),
                    Some(id) => id
                        .parse::<Voice>()
                        .map_err(|e| AbiError::invalid(format!("{FAMILY} tts: {e}")))?,
                };
                Job::Tts(TtsJob {
                    text,
                    voice,
                    max_tokens: o.max_tokens,
                    temperature: o.temperature,
                    top_k: o.top_k,
                    seed: o.seed,
                    chunk_chars: if o.one_text_chunk {
                        usize::MAX
                    } else {
                        o.text_chunk_size
                    },
                })
            }
            Task::S2s => {
                no_text(req, task)?;
                no_voice(req, task)?;
                let history = req
                    .artifacts
                    .iter()
                    .enumerate()
                    .map(|(i, a)| blob(i, a))
                    .collect::<AbiResult<Vec<_>>>()?;
                Job::S2s {
                    job: S2sJob {
                        question: AudioInput::default(),
                        history,
                        return_codes: o.return_codes,
                        max_tokens: o.max_tokens,
                        temperature: o.temperature,
                        top_k: o.top_k,
                        seed: o.seed,
                    },
                    question: req
                        .audio
                        .as_ref()
                        .map(|pcm| audio_of(pcm, settings, "the question"))
                        .transpose()?,
                }
            }
        };
    Ok(Plan {
        job,
        frames_per_event: o.frames_per_event,
    })
}
