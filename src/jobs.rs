//! From a request handle to the engine's request for one task: the ABI's fields become the
//! engine's [`Request`](EngineRequest) and the engine checks it, so every task refuses by name,
//! before anything runs, what it does not take, with the same rules as every other front end.

use std::collections::BTreeMap;

use audio_engine::lfm2_audio::conversation::meta_from_text;
use audio_engine::lfm2_audio::{
    Artifact, ArtifactKind, AudioInput, Job, Request as EngineRequest, RequestContext,
    MAX_SAMPLE_RATE, MIN_SAMPLE_RATE,
};

use crate::options::{option_map, SessionSettings};
use crate::request::{InArtifact, Pcm, Request, ARTIFACT_KINDS, KIND_ACOUSTIC_TOKENS, KIND_CUSTOM};
use crate::status::{AbiError, AbiResult};
use crate::vocab::{Task, FAMILY};

/// A checked request: the engine's job, and for an s2s stream whose question is pushed later,
/// the request's own audio if it had any.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The work (an s2s question may be empty until a stream pushes it).
    pub job: Job,
    /// Whether the request itself carried its question (audio, or s2s text; else a stream
    /// pushes it).
    pub has_question: bool,
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

fn artifact(i: usize, a: &InArtifact) -> AbiResult<Artifact> {
    let kind = match a.kind {
        KIND_ACOUSTIC_TOKENS => ArtifactKind::AcousticTokens,
        KIND_CUSTOM => ArtifactKind::Custom,
        other => {
            return Err(AbiError::invalid(format!(
                "input artifact {i} (`{}`) is of kind {}; {FAMILY} s2s takes \
                 lfm2_audio.question (CUSTOM: WAV bytes, or text with meta format=text) and \
                 lfm2_audio.reply (ACOUSTIC_TOKENS; or CUSTOM text, a text-only reply) artifacts",
                a.id, ARTIFACT_KINDS[other as usize]
            )))
        }
    };
    Ok(Artifact {
        id: a.id.clone(),
        kind,
        payload: a.payload.clone(),
        meta: a
            .meta
            .iter()
            .map(|(k, v)| (k.clone(), meta_from_text(k, v)))
            .collect::<BTreeMap<_, _>>(),
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
    pcm_input(pcm)
}

fn pcm_input(pcm: &Pcm) -> AbiResult<AudioInput> {
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

/// Translates `req` into the engine's request for `task` and has the engine check it: every
/// default, range and rule is the engine's (`audio_engine::lfm2_audio::Request::resolve`);
/// only what the ABI has and the engine does not (speaker references, style conditioning, PCM
/// shapes, artifact kinds by number) is refused here.
pub fn plan(
    task: Task,
    req: &Request,
    settings: &SessionSettings,
    language: &str,
    streaming: bool,
) -> AbiResult<Plan> {
    refuse_unsupported(req)?;
    if let Some(key) = req.option_arrays.keys().next() {
        return Err(AbiError::invalid(format!(
            "request option `{key}` is a list; {FAMILY} takes no list options"
        )));
    }
    let history = if task == Task::S2s {
        req.artifacts
            .iter()
            .enumerate()
            .map(|(i, a)| artifact(i, a))
            .collect::<AbiResult<Vec<_>>>()?
    } else {
        // why: the engine names the first artifact of a task that takes none; the kind of an
        // artifact it never reads does not matter.
        req.artifacts
            .iter()
            .map(|a| Artifact {
                id: a.id.clone(),
                kind: ArtifactKind::Custom,
                payload: Vec::new(),
                meta: BTreeMap::new(),
            })
            .collect()
    };
    let engine_req = EngineRequest {
        task,
        text: req.text.clone(),
        text_language: Some(req.text_language.clone()),
        audio: req.audio.as_ref().map(pcm_input).transpose()?,
        voice: req.voice_id.clone(),
        history,
        system_prompt: None,
        options: option_map(&req.options),
    };
    let ctx = RequestContext {
        question_pushed_later: streaming,
        ..RequestContext::new(language, settings.max_pass_seconds)
    };
    let resolved = engine_req
        .resolve(&ctx)
        .map_err(|e| AbiError::invalid(e.to_string()))?;
    Ok(Plan {
        job: resolved.job,
        has_question: req.audio.is_some()
            || (task == Task::S2s && req.text.as_deref().is_some_and(|t| !t.is_empty())),
        frames_per_event: resolved.frames_per_event,
    })
}
