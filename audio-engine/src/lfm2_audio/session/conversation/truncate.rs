//! Cutting a reply where the listener stopped hearing it (a barge-in): the reply artifact keeps
//! its steps up to the last frame whose audio had started playing, so the next turn's prompt
//! holds what was said, not what the model would have gone on to say.
//!
//! Frame `j` of a reply is its audio from `j * 80 ms` to `(j + 1) * 80 ms` (1920 samples at
//! 24 kHz). A cut at `audio_end_ms` keeps the frames that start before it (one partly heard
//! counts as said) and every step generated before the last of them: the text steps ahead of
//! it included, since the model wrote them before that audio. What is kept is a prefix of the
//! generated steps, so the cut reply replays exactly as if generation had stopped there.

use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::model::detokenizer::{SAMPLES_PER_FRAME, SAMPLE_RATE};

use super::artifact::{decode_reply, encode_reply, Artifact, ReplyFormat, ReplyStep};

/// Milliseconds of audio one frame gives (80).
pub const FRAME_MS: u64 = (SAMPLES_PER_FRAME as u64 * 1000) / SAMPLE_RATE as u64;

/// The audio frames of a reply (its end-of-audio frame, which gives no audio, not counted).
fn audio_frames<'a>(
    steps: &'a [ReplyStep],
    fmt: &'a ReplyFormat,
) -> impl Iterator<Item = usize> + 'a {
    steps.iter().enumerate().filter_map(move |(i, s)| match s {
        ReplyStep::Frame(codes) if !fmt.is_end_of_audio(codes) => Some(i),
        _ => None,
    })
}

/// Milliseconds of audio the reply artifact `art` gives.
pub fn reply_audio_ms(art: &Artifact, fmt: &ReplyFormat) -> Result<u64, EngineError> {
    let reply = decode_reply(art, fmt)?;
    Ok(audio_frames(&reply.steps, fmt).count() as u64 * FRAME_MS)
}

/// The reply artifact `art` cut at `audio_end_ms` of its audio (see the module docs). A cut at
/// or after the reply's end returns it unchanged when it is exactly the end; one past the end
/// is an [`EngineError::InvalidRequest`], as the listener cannot have heard audio that was
/// never there. A cut reply says `ended: false`.
pub fn truncate_reply(
    art: &Artifact,
    fmt: &ReplyFormat,
    audio_end_ms: u64,
) -> Result<Artifact, EngineError> {
    let reply = decode_reply(art, fmt)?;
    let frames: Vec<usize> = audio_frames(&reply.steps, fmt).collect();
    let total_ms = frames.len() as u64 * FRAME_MS;
    if audio_end_ms > total_ms {
        return Err(EngineError::InvalidRequest(format!(
            "audio_end_ms {audio_end_ms} is past the reply's {total_ms} ms of audio"
        )));
    }
    if audio_end_ms == total_ms {
        return Ok(art.clone());
    }
    // Frames starting before the cut: ceil(audio_end_ms / FRAME_MS), fewer than all of them.
    let heard = audio_end_ms.div_ceil(FRAME_MS) as usize;
    let keep = match heard {
        0 => 0,
        n => frames[n - 1] + 1,
    };
    encode_reply(&reply.steps[..keep], false, fmt)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt() -> ReplyFormat {
        ReplyFormat {
            language: "en".into(),
            codebooks: 2,
            audio_vocab_size: 5,
            text_vocab_size: 100,
            im_end: 7,
        }
    }

    /// Text 10, 11, frame a, text 12, frame b, frame c, end of audio: 3 frames, 240 ms.
    fn reply() -> Artifact {
        let steps = vec![
            ReplyStep::Text(10),
            ReplyStep::Text(11),
            ReplyStep::Frame(vec![0, 1]),
            ReplyStep::Text(12),
            ReplyStep::Frame(vec![2, 3]),
            ReplyStep::Frame(vec![1, 1]),
            ReplyStep::Frame(vec![4, 4]),
        ];
        encode_reply(&steps, true, &fmt()).unwrap()
    }

    fn steps_after_cut(ms: u64) -> (usize, bool) {
        let cut = truncate_reply(&reply(), &fmt(), ms).unwrap();
        let r = decode_reply(&cut, &fmt()).unwrap();
        (r.steps.len(), r.ended)
    }

    #[test]
    fn a_cut_keeps_every_frame_that_started_and_the_steps_before_it() {
        assert_eq!(reply_audio_ms(&reply(), &fmt()).unwrap(), 240);
        assert_eq!(steps_after_cut(0), (0, false));
        // 1 ms into frame a: it was heard, with the text before it.
        assert_eq!(steps_after_cut(1), (3, false));
        assert_eq!(steps_after_cut(80), (3, false));
        // Into frame b: text 12 was generated before it and stays.
        assert_eq!(steps_after_cut(81), (5, false));
        assert_eq!(steps_after_cut(239), (6, false));
        // All of it: unchanged, end of audio and `ended` included.
        assert_eq!(truncate_reply(&reply(), &fmt(), 240).unwrap(), reply());
    }

    #[test]
    fn a_cut_past_the_audio_is_a_bad_request() {
        let e = truncate_reply(&reply(), &fmt(), 241).unwrap_err();
        assert!(
            matches!(&e, EngineError::InvalidRequest(m) if m.contains("240 ms")),
            "{e}"
        );
    }

    #[test]
    fn a_cut_reply_is_a_prefix_of_the_payload() {
        let full = reply();
        for ms in [1, 100, 200] {
            let cut = truncate_reply(&full, &fmt(), ms).unwrap();
            assert!(full.payload.starts_with(&cut.payload), "{ms} ms");
        }
    }
}
