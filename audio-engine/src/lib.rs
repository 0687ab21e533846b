//! Safe inference engine over the pinned ggml, for LiquidAI's LFM2-Audio (speech recognition,
//! text to speech, speech to speech, multi-turn conversations).
//!
//! The package is `lfm2-audio-engine`; the library is `audio_engine`. Applications use the
//! facade [`lfm2_audio`]: [`Lfm2Audio`](lfm2_audio::Lfm2Audio) (a loaded model, shared freely:
//! an `Arc` inside, `Send + Sync`) and [`Session`](lfm2_audio::Session) (one conversation's
//! caches). [`ggml`] is the safe layer over ggml that the engine is built on. libllama's text
//! models are another crate's (`lfm2-llm`).
//!
//! # Features
//!
//! None is needed for the engine on the CPU. `hub`: packages from the Hugging Face Hub and its
//! cache (`lfm2_audio::hub`); `testkit`: the engine's internals for the workspace's tests and
//! tooling; `cuda`, `metal`, `vulkan`: ggml's GPU backends (the README's device table says
//! which have run). The README's "Features" table has the details.
//! The checkpoint converter, synthetic checkpoints and the built-in demo package are the
//! tooling crate's (`lfm2-audio-tooling`, library `audio_tooling`).
//!
//! # Load a package
//!
//! A package is a directory with the four GGUF files of LFM2.5-Audio
//! ([`Lfm2Audio::load`](lfm2_audio::Lfm2Audio::load)); the examples here load the demo package
//! (`audio_tooling::load_demo`, written to a temporary directory the first time), whose text and
//! speech are noise by design, so that they run on any machine without a download.
//!
//! ```
//! use audio_engine::lfm2_audio::{Lfm2Audio, ModelOptions};
//! use audio_tooling::{default_demo_dir, load_demo};
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
//! Every task (ASR, TTS, S2S) is a [`Job`](lfm2_audio::Job) run through one door:
//! [`Lfm2Audio::run`](lfm2_audio::Lfm2Audio::run) for a call that keeps nothing,
//! [`Session::run`](lfm2_audio::Session::run) for a conversation with caches. A question is
//! WAV bytes of any rate and channel count, or PCM samples
//! ([`AudioInput`](lfm2_audio::AudioInput)); the reply is text and 24 kHz mono speech.
//!
//! ```
//! use audio_engine::lfm2_audio::*;
//! use audio_tooling::{default_demo_dir, load_demo};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = load_demo(&default_demo_dir(), ModelOptions::default())?;
//! // One second of a tone stands in for a spoken question.
//! let samples: Vec<f32> = (0..16_000).map(|i| (i as f32 * 0.05).sin() * 0.3).collect();
//! let job = Job::S2s(S2sRequest {
//!     question: AudioInput::Pcm { samples, sample_rate: 16_000, channels: 1 },
//!     history: Vec::new(),
//!     return_codes: false,
//!     s2s: S2sOptions { max_new_tokens: 24, ..S2sOptions::default() },
//! });
//! let reply = model.run(&job, &mut |_event| true)?;
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
//! use audio_tooling::{default_demo_dir, load_demo};
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
//!     let job = Job::S2s(S2sRequest {
//!         question: wav.clone().into(),
//!         history: history.clone(),
//!         return_codes: true, // return this turn's reply artifact, for the next turn's history
//!         s2s: S2sOptions { max_new_tokens: 16, ..S2sOptions::default() },
//!     });
//!     let result = session.run(&job, &mut |_event| true)?;
//!     println!("turn {turn}: {:?} ({} prefill positions restored)", result.text,
//!              result.resumed_prefill_positions);
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
//! Text and audio go to the sink as events while the reply is generated (return false to stop
//! it; [`Session::run_cancellable`](lfm2_audio::Session::run_cancellable) also takes a cancel
//! check); the outcome is the same, byte for byte, whether the events were played or not.
//!
//! ```
//! use audio_engine::lfm2_audio::*;
//! use audio_tooling::{default_demo_dir, load_demo};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = load_demo(&default_demo_dir(), ModelOptions::default())?;
//! let job = Job::Tts(TtsJob {
//!     text: "Hello there.".into(),
//!     options: TtsOptions { max_new_tokens: 24, ..TtsOptions::default() },
//! });
//! let mut streamed_audio = Vec::new();
//! let reply = model.run(&job, &mut |event| {
//!     match event {
//!         ReplyEvent::Text(text) => print!("{text}"),
//!         ReplyEvent::Audio(samples) => streamed_audio.extend(samples), // play it here
//!     }
//!     true
//! })?;
//! assert_eq!(streamed_audio, reply.audio);
//! let offline = model.run(&job, &mut |_| true)?;
//! assert_eq!((&reply.text, &reply.audio), (&offline.text, &offline.audio));
//! # Ok(())
//! # }
//! ```
//!
//! A session's doors are [`Session::run`](lfm2_audio::Session::run),
//! [`Session::run_cancellable`](lfm2_audio::Session::run_cancellable) and
//! [`Session::prepare_turn`](lfm2_audio::Session::prepare_turn) (a turn's encoding and prefill
//! started before it is asked for); every front end (the C ABI, the HTTP server) goes through
//! them with the one request model: a [`Request`](lfm2_audio::Request) resolved into a
//! [`Job`](lfm2_audio::Job), events to a sink, an [`Outcome`](lfm2_audio::Outcome) out.
//!
//! # From C
//!
//! The root package (`lfm2-engine`) builds a C library with audio.cpp's C ABI
//! (`include/audiocpp.h`, our extensions in `include/lfm2e.h`); `examples/c/chat.c` in the
//! repository is a multi-turn spoken conversation through it, built with
//! `cc chat.c $(pkg-config --cflags --libs audiocpp)`.
#![warn(missing_docs)]

/// The safe layer over ggml the engine is built on (the crate `lfm2-ggml`, under the path the
/// engine has always given it).
pub use lfm2_ggml as ggml;
pub mod lfm2_audio;
