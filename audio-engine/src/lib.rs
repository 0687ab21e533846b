//! Safe inference engine over the pinned ggml/llama.cpp, for LiquidAI's LFM2-Audio (speech
//! recognition, text to speech, speech to speech, multi-turn conversations) and, with feature
//! `llm`, multi-sequence decoding of hybrid LLMs through libllama.
//!
//! The package is `lfm2-audio-engine`; the library is `audio_engine`. Applications use the
//! facade [`lfm2_audio`]: [`Lfm2Audio`](lfm2_audio::Lfm2Audio) (a loaded model, shared freely:
//! an `Arc` inside, `Send + Sync`) and [`Session`](lfm2_audio::Session) (one conversation's
//! caches). [`ggml`] is the safe layer over ggml that the engine is built on; `llm` (feature
//! `llm`) the libllama decoder.
//!
//! # Features
//!
//! None is needed for the engine on the CPU. `hub`: packages from the Hugging Face Hub and its
//! cache (`lfm2_audio::hub`); `convert`: the checkpoint converter; `testkit`: synthetic
//! checkpoints and the built-in demo package (random tiny weights, used by the examples below);
//! `llm`: libllama text models; `cuda`, `metal`, `vulkan`: ggml's GPU backends (the README's
//! device table says which have run). The README's "Features" table has the details.
//!
//! # Load a package
//!
//! A package is a directory with the four GGUF files of LFM2.5-Audio
//! ([`Lfm2Audio::load`](lfm2_audio::Lfm2Audio::load)); the examples here load the demo package
//! (feature `testkit`, written to a temporary directory the first time), whose text and speech
//! are noise by design, so that they run on any machine without a download.
//!
//! ```
//! use audio_engine::lfm2_audio::{default_demo_dir, load_demo, Lfm2Audio, ModelOptions};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // With real weights: Lfm2Audio::load("models/LFM2.5-Audio-1.5B-GGUF", ModelOptions::default())?
//! let model: Lfm2Audio = load_demo(&default_demo_dir(), ModelOptions::default())?;
//! println!("{} on {}", model.description(), model.device_name());
//! # Ok(())
//! # }
//! ```
//!
//! # One speech-to-speech turn
//!
//! A question is 16 kHz mono samples (or WAV bytes of any rate and channel count:
//! [`Lfm2Audio::s2s_wav`](lfm2_audio::Lfm2Audio::s2s_wav)); the reply is text and 24 kHz mono
//! speech.
//!
//! ```
//! use audio_engine::lfm2_audio::*;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = load_demo(&default_demo_dir(), ModelOptions::default())?;
//! // One second of a tone stands in for a spoken question.
//! let question: Vec<f32> = (0..16_000).map(|i| (i as f32 * 0.05).sin() * 0.3).collect();
//! let options = S2sOptions { max_new_tokens: 24, ..S2sOptions::default() };
//! let reply = model.s2s(&question, &options)?;
//! println!("{:?}, {} samples at {OUTPUT_SAMPLE_RATE} Hz", reply.text, reply.audio.len());
//! let wav: Vec<u8> = encode_wav_24k(&reply.audio)?; // or write_wav_file_24k(path, &reply.audio)
//! assert!(wav.len() >= 44);
//! # Ok(())
//! # }
//! ```
//!
//! # A conversation with history
//!
//! A [`Session`](lfm2_audio::Session) keeps one conversation's caches (prefill blocks, encoder
//! outputs); the client keeps the history: each earlier turn's question and the reply artifact
//! that turn returned, sent back with the next request. A session restores what it has cached
//! of that history instead of computing it again, with the same bytes either way.
//!
//! ```
//! use audio_engine::lfm2_audio::*;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = load_demo(&default_demo_dir(), ModelOptions::default())?;
//! let mut session = Session::new(model.clone(), SessionOptions::default());
//! let mut history: Vec<Artifact> = Vec::new();
//! for turn in 0..2 {
//!     // A question as WAV bytes (what a client sends): half a second of a tone.
//!     let samples: Vec<f32> =
//!         (0..8_000).map(|i| (i as f32 * 0.03 * (turn + 1) as f32).sin() * 0.3).collect();
//!     let mut wav = std::io::Cursor::new(Vec::new());
//!     write_wav_f32(&mut wav, &samples, 16_000)?;
//!     let wav = wav.into_inner();
//!     let request = S2sRequest {
//!         question: wav.clone().into(),
//!         history: history.clone(),
//!         return_codes: true, // return this turn's reply artifact, for the next turn's history
//!         s2s: S2sOptions { max_new_tokens: 16, ..S2sOptions::default() },
//!     };
//!     let result = session.s2s(&request)?;
//!     println!("turn {turn}: {:?} ({} prefill steps restored)", result.reply.text,
//!              result.reply.resumed_prefill_steps);
//!     history.push(Artifact {
//!         id: QUESTION_ID.into(),
//!         kind: ArtifactKind::Custom,
//!         payload: wav,
//!         meta: Default::default(),
//!     });
//!     history.push(result.artifact.expect("asked for with return_codes"));
//! }
//! assert_eq!(history.len(), 4);
//! # Ok(())
//! # }
//! ```
//!
//! # A streamed reply
//!
//! Text and audio arrive as events while the reply is generated; the finished stream gives the
//! same result, byte for byte, as the call without streaming.
//!
//! ```
//! use audio_engine::lfm2_audio::*;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = load_demo(&default_demo_dir(), ModelOptions::default())?;
//! let question: Vec<f32> = (0..16_000).map(|i| (i as f32 * 0.05).sin() * 0.3).collect();
//! let options = S2sOptions { max_new_tokens: 24, ..S2sOptions::default() };
//! let mut stream = model.s2s_stream(question.clone(), &options)?;
//! let mut streamed_audio = Vec::new();
//! while let Some(event) = stream.next_event() {
//!     match event {
//!         ReplyEvent::Text(text) => print!("{text}"),
//!         ReplyEvent::Audio(samples) => streamed_audio.extend(samples), // play it here
//!     }
//! }
//! let reply = stream.wait()?;
//! assert_eq!(streamed_audio, reply.audio);
//! let offline = model.s2s(&question, &options)?;
//! assert_eq!((&reply.text, &reply.audio), (&offline.text, &offline.audio));
//! # Ok(())
//! # }
//! ```
//!
//! Sessions stream too ([`Session::s2s_stream`](lfm2_audio::Session::s2s_stream)), and every
//! front end (the C ABI, the HTTP server) goes through the one request model:
//! [`Job`](lfm2_audio::Job) in, events to a sink, [`Outcome`](lfm2_audio::Outcome) out
//! ([`Session::run`](lfm2_audio::Session::run)).
//!
//! # From C
//!
//! The root package (`lfm2-engine`) builds a C library with audio.cpp's C ABI
//! (`include/audiocpp.h`, our extensions in `include/lfm2e.h`); `examples/c/chat.c` in the
//! repository is a multi-turn spoken conversation through it, built with
//! `cc chat.c $(pkg-config --cflags --libs audiocpp)`.
#![warn(missing_docs)]

pub mod ggml;
pub mod lfm2_audio;
#[cfg(feature = "llm")]
pub mod llm;
