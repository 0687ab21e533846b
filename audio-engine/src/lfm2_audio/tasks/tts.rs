//! Text to speech: sequential generation (text until `<|audio_start|>`, then frames until end of
//! audio) with one of the four voices; long text is generated in sentence chunks.

use std::time::Instant;

use crate::ggml::Backend;

use crate::lfm2_audio::engine::Lfm2Audio;
use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::generation::reply::{
    ReplyEvent, ReplyOptions, ReplyRequest, ReplyResult, ReplyStream,
};
use crate::lfm2_audio::generation::schedule::Schedule;
use crate::lfm2_audio::limits::check_tts_text;
use crate::lfm2_audio::model::sampling::SamplerConfig;
use crate::lfm2_audio::text::prompt::PromptBuilder;

/// The voices of the TTS system prompt. Every front end (the Rust API, the C ABI, `serve`)
/// parses them here and defaults to the same one: `us_male`, audio.cpp's documented default, so
/// a request that names no voice gets the same bytes through each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Voice {
    /// US English, male (`us_male`, the default).
    #[default]
    UsMale,
    /// US English, female (`us_female`).
    UsFemale,
    /// UK English, male (`uk_male`).
    UkMale,
    /// UK English, female (`uk_female`).
    UkFemale,
}

/// A voice id that names none of the [`Voice`]s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown voice `{id}` (voices: {})", Voice::IDS.join(", "))]
pub struct UnknownVoice {
    /// The id as given.
    pub id: String,
}

impl Voice {
    /// Every voice, in the order of [`Voice::IDS`].
    pub const ALL: [Voice; 4] = [
        Voice::UsMale,
        Voice::UsFemale,
        Voice::UkMale,
        Voice::UkFemale,
    ];

    /// The voice ids as audio.cpp's requests spell them.
    pub const IDS: [&'static str; 4] = ["us_male", "us_female", "uk_male", "uk_female"];

    /// The id (`us_male`, ...).
    pub fn id(self) -> &'static str {
        match self {
            Voice::UsMale => Voice::IDS[0],
            Voice::UsFemale => Voice::IDS[1],
            Voice::UkMale => Voice::IDS[2],
            Voice::UkFemale => Voice::IDS[3],
        }
    }

    /// The system prompt selecting this voice.
    pub fn system_prompt(self) -> String {
        let (accent, who) = match self {
            Voice::UsMale => ("US", "male"),
            Voice::UsFemale => ("US", "female"),
            Voice::UkMale => ("UK", "male"),
            Voice::UkFemale => ("UK", "female"),
        };
        format!("Perform TTS. Use the {accent} {who} voice.")
    }

    /// Parses an id: `us_male`, and also `us-male` (OpenAI-style clients) in any case.
    pub fn parse(s: &str) -> Option<Voice> {
        let id = s.to_ascii_lowercase().replace('-', "_");
        Voice::ALL.into_iter().find(|v| v.id() == id)
    }
}

impl std::str::FromStr for Voice {
    type Err = UnknownVoice;

    fn from_str(s: &str) -> Result<Voice, UnknownVoice> {
        Voice::parse(s).ok_or_else(|| UnknownVoice { id: s.to_owned() })
    }
}

impl std::fmt::Display for Voice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// TTS options. The defaults are the option table's (`max_tokens` 512 per chunk,
/// `text_chunk_size` 200, temperature 0.8, top-k 64), as every front end gives them.
#[derive(Debug, Clone, PartialEq)]
pub struct TtsOptions {
    /// The voice.
    pub voice: Voice,
    /// Most steps per chunk.
    pub max_new_tokens: usize,
    /// Text sampling (default greedy).
    pub text: SamplerConfig,
    /// Audio sampling (default temperature 0.8, top-k 64, seed 0).
    pub audio: SamplerConfig,
    /// Longest chunk of input text, in characters (sentences are kept whole where they fit).
    pub chunk_chars: usize,
}

impl Default for TtsOptions {
    fn default() -> Self {
        TtsOptions {
            voice: Voice::default(),
            max_new_tokens: 512,
            text: SamplerConfig::text(),
            audio: SamplerConfig::tts_audio(0),
            chunk_chars: 200,
        }
    }
}

/// Splits `text` into chunks of at most `max` characters, at sentence ends where possible, then
/// at spaces, then anywhere.
pub fn chunk_text(text: &str, max: usize) -> Vec<String> {
    let max = max.max(1);
    let mut sentences = Vec::new();
    let mut cur = String::new();
    for ch in text.chars() {
        cur.push(ch);
        if matches!(ch, '.' | '!' | '?' | '\n' | '。' | '！' | '？') {
            sentences.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        sentences.push(cur);
    }
    let mut chunks: Vec<String> = Vec::new();
    let mut chunk = String::new();
    // why: the chunk's length in characters, kept as it grows; counting the chunk again for
    // every sentence made a text of many short sentences quadratic with a large `max`.
    let mut chunk_len = 0usize;
    let push = |c: &mut String, len: &mut usize, chunks: &mut Vec<String>| {
        let t = c.trim();
        if !t.is_empty() {
            chunks.push(t.to_owned());
        }
        c.clear();
        *len = 0;
    };
    for s in sentences {
        let s_len = s.chars().count();
        if chunk_len + s_len > max {
            push(&mut chunk, &mut chunk_len, &mut chunks);
        }
        if s_len <= max {
            chunk.push_str(&s);
            chunk_len += s_len;
            continue;
        }
        // A sentence longer than a chunk: split at spaces, then hard.
        for word in s.split_inclusive(' ') {
            let w_len = word.chars().count();
            if chunk_len + w_len > max {
                push(&mut chunk, &mut chunk_len, &mut chunks);
            }
            if w_len > max {
                let chars: Vec<char> = word.chars().collect();
                for piece in chars.chunks(max) {
                    chunk.extend(piece);
                    push(&mut chunk, &mut chunk_len, &mut chunks);
                }
            } else {
                chunk.push_str(word);
                chunk_len += w_len;
            }
        }
    }
    push(&mut chunk, &mut chunk_len, &mut chunks);
    chunks
}

impl Lfm2Audio {
    fn tts_request(&self, text: &str, opts: &TtsOptions) -> ReplyRequest {
        let mut b = PromptBuilder::new(self.tokenizer());
        b.system(&opts.voice.system_prompt())
            .text(text)
            .assistant_turn();
        ReplyRequest {
            prompt: b.finish(),
            rows: Vec::new(),
            schedule: Schedule::sequential(self.schedule_tokens()),
            opts: ReplyOptions {
                max_new_tokens: opts.max_new_tokens,
                text: opts.text,
                audio: opts.audio,
                call_markers: false,
            },
            started: Instant::now(),
            encode: Default::default(),
        }
    }

    fn tts_run(
        &self,
        text: &str,
        opts: &TtsOptions,
        sink: &mut dyn FnMut(ReplyEvent) -> bool,
    ) -> Result<ReplyResult, EngineError> {
        // why: the call computes on a backend of its own, so it never waits for other calls.
        let backend = self.run_backend(None)?;
        self.tts_on(&backend, text, opts, sink)
    }

    /// Speaks `text` computing on `backend`, handing each event to `sink`.
    pub(crate) fn tts_on(
        &self,
        backend: &Backend,
        text: &str,
        opts: &TtsOptions,
        sink: &mut dyn FnMut(ReplyEvent) -> bool,
    ) -> Result<ReplyResult, EngineError> {
        check_tts_text(text)?;
        let chunks = chunk_text(text, opts.chunk_chars);
        if chunks.is_empty() {
            return Err(EngineError::InvalidRequest("no text to speak".into()));
        }
        let started = Instant::now();
        let mut all = ReplyResult::default();
        let mut stop = false;
        for (i, chunk) in chunks.iter().enumerate() {
            // why: every chunk uses its own seed stream (seed + index), so a chunk's audio does
            // not depend on how many draws the chunks before it made.
            let mut o = opts.clone();
            o.audio.seed = opts.audio.seed.wrapping_add(i as u64);
            let mut guard = |ev: ReplyEvent| {
                let go = sink(ev);
                stop |= !go;
                go
            };
            let r = self.run_reply(backend, self.tts_request(chunk, &o), None, &mut guard)?;
            if all.timings.first_audio.is_none() {
                all.timings.first_audio = r.timings.first_audio.map(|_| started.elapsed());
            }
            all.text.push_str(&r.text);
            all.audio.extend_from_slice(&r.audio);
            all.steps.extend(r.steps);
            all.prompt_positions += r.prompt_positions;
            all.ended = r.ended;
            all.timings.prefill += r.timings.prefill;
            all.timings.generate += r.timings.generate;
            let steps = &mut all.timings.steps;
            steps.text.extend(r.timings.steps.text);
            steps.depthformer.extend(r.timings.steps.depthformer);
            steps.frame_backbone.extend(r.timings.steps.frame_backbone);
            steps.detokenizer.extend(r.timings.steps.detokenizer);
            if stop || !r.ended {
                break;
            }
        }
        all.timings.total = started.elapsed();
        Ok(all)
    }

    /// Speaks `text`.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub(crate) fn tts(&self, text: &str, opts: &TtsOptions) -> Result<ReplyResult, EngineError> {
        self.tts_run(text, opts, &mut |_| true)
    }

    /// Starts a streamed TTS; events arrive through the stream.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub(crate) fn tts_stream(
        &self,
        text: &str,
        opts: &TtsOptions,
    ) -> Result<ReplyStream, EngineError> {
        check_tts_text(text)?;
        if chunk_text(text, opts.chunk_chars).is_empty() {
            return Err(EngineError::InvalidRequest("no text to speak".into()));
        }
        let model = self.clone();
        let opts = opts.clone();
        let text = text.to_owned();
        ReplyStream::spawn(move |sink| model.tts_run(&text, &opts, sink))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_keep_sentences_and_respect_the_limit() {
        let t = "One two. Three four five! Six?";
        assert_eq!(chunk_text(t, 100), vec![t.to_owned()]);
        assert_eq!(
            chunk_text(t, 12),
            vec!["One two.", "Three four", "five! Six?"]
        );
        for c in chunk_text(&"word ".repeat(50), 17) {
            assert!(c.chars().count() <= 17, "{c}");
        }
        assert_eq!(chunk_text("abcdefgh", 3), vec!["abc", "def", "gh"]);
        assert!(chunk_text("   ", 10).is_empty());
    }

    #[test]
    fn voices() {
        assert_eq!(
            Voice::UkMale.system_prompt(),
            "Perform TTS. Use the UK male voice."
        );
        assert_eq!(Voice::parse("us_female"), Some(Voice::UsFemale));
        assert_eq!(Voice::parse("UK-Male"), Some(Voice::UkMale));
        assert_eq!(Voice::parse("fr-male"), None);
        assert_eq!(Voice::default(), Voice::UsMale, "audio.cpp's default");
        for (v, id) in Voice::ALL.into_iter().zip(Voice::IDS) {
            assert_eq!(v.to_string(), id);
            assert_eq!(id.parse::<Voice>(), Ok(v));
        }
        let e = "us male".parse::<Voice>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown voice `us male` (voices: us_male, us_female, uk_male, uk_female)"
        );
    }
}
