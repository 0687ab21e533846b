//! The one file of the C layer that calls audio-engine: loading a package, the three tasks, and
//! the conversation session, behind small types of our own. The other files name only the
//! engine's plain data (audio input, voice, limits), so when the engine's calls change, this
//! file changes and the rest of the C layer does not.

use std::path::{Path, PathBuf};

use audio_engine::ggml::Device;
use audio_engine::lfm2_audio::conversation::{self as conv, meta_to_text, Artifact};
use audio_engine::lfm2_audio::{
    AsrJob, EngineError, Job, Lfm2Audio, ModelOptions, ReplyEvent, S2sRequest, Session,
    SessionOptions, TickStats, TtsJob,
};
use audio_engine::lfm2_audio::{
    ModelPackage, PackagePaths, Quant, DEFAULT_MAX_SECONDS, INPUT_SAMPLE_RATE, OUTPUT_SAMPLE_RATE,
};

/// Sample rate of every audio output (Hz).
pub const OUTPUT_RATE: u32 = OUTPUT_SAMPLE_RATE;
/// Sample rate the model listens at (Hz): one 80 ms frame is 1280 samples.
pub const INPUT_RATE: u32 = INPUT_SAMPLE_RATE;
/// The longest audio the engine reads in one piece (seconds); the session's own limit
/// (`lfm2_audio.max_pass_seconds`) is checked before, and is never above this.
pub const ENGINE_MAX_SECONDS: f64 = DEFAULT_MAX_SECONDS;

/// Why an engine call failed, sorted the way the C layer reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The request is at fault (bad audio, artifact, options; over capacity).
    Invalid,
    /// The model files could not be loaded.
    Load,
    /// Memory for the request could not be had (the decode cache's mapping, a ggml buffer);
    /// the model and session stay usable.
    OutOfMemory,
    /// The engine failed.
    Runtime,
}

/// An engine failure with its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// How to report it.
    pub kind: FailureKind,
    /// What happened.
    pub message: String,
}

impl Failure {
    fn invalid(message: impl Into<String>) -> Failure {
        Failure {
            kind: FailureKind::Invalid,
            message: message.into(),
        }
    }
}

/// An environment variable, for the engine's documented ones (`LFM2_*`, `LLAMA_LOG`, `HF_*`).
pub(crate) fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn failure(e: EngineError) -> Failure {
    let kind = if e.is_invalid_request() || e.is_capacity() {
        FailureKind::Invalid
    } else if matches!(e, EngineError::Load(_) | EngineError::Tokenizer(_)) {
        FailureKind::Load
    } else if e.is_out_of_memory() {
        FailureKind::OutOfMemory
    } else {
        FailureKind::Runtime
    };
    Failure {
        kind,
        message: e.chain(),
    }
}

fn load_failure(e: impl std::fmt::Display) -> Failure {
    Failure {
        kind: FailureKind::Load,
        message: e.to_string(),
    }
}

/// The four files of a package, found in a directory.
#[derive(Debug, Clone)]
pub struct Package {
    paths: PackagePaths,
}

impl Package {
    /// Finds the package in `dir`; `quant` picks one when the directory holds several.
    pub fn find(dir: &Path, quant: Option<&str>) -> Result<Package, Failure> {
        let package = match quant {
            None => ModelPackage::open(dir).map_err(load_failure)?,
            Some(q) => {
                let q = q
                    .parse::<Quant>()
                    .map_err(|e| Failure::invalid(e.to_string()))?;
                ModelPackage::open_quant(dir, q).map_err(load_failure)?
            }
        };
        Ok(Package {
            paths: package.paths,
        })
    }

    /// The files by role: backbone, mmproj, vocoder, detokenizer.
    pub fn files(&self) -> [(&'static str, &Path); 4] {
        [
            ("model_gguf", self.paths.backbone.as_path()),
            ("mmproj_gguf", self.paths.mmproj.as_path()),
            ("vocoder_gguf", self.paths.vocoder.as_path()),
            ("detokenizer_gguf", self.paths.tokenizer.as_path()),
        ]
    }

    /// Loads the package with `threads` compute threads on `device`.
    pub fn load(&self, threads: usize, device: Device) -> Result<Model, Failure> {
        let package = ModelPackage::open_paths(self.paths.clone()).map_err(load_failure)?;
        let options = ModelOptions {
            n_threads: threads.max(1),
            device: Some(device),
            // why the default (the cores): audio.cpp's sessions each choose their thread
            // count; together they must not put more compute threads on the machine than it
            // has cores.
            max_audio_seconds: ENGINE_MAX_SECONDS,
            // why here: the C library's load entry points are where audio.cpp documents its
            // variables (`LFM2_MAX_BATCH`, `LFM2_NO_REPACK`, ...); the engine reads none.
            ..ModelOptions::default().with_vars(&env_var)
        };
        audio_engine::ggml::set_log_level(audio_engine::lfm2_audio::vars::log_level_from_vars(
            &env_var,
        ));
        Lfm2Audio::from_package(package, options)
            .map(|m| Model {
                model: m,
                threads: threads.max(1),
            })
            .map_err(failure)
    }
}

/// A loaded model (cheap to clone; shared by the sessions using it) and the compute threads
/// its tasks run with.
#[derive(Clone)]
pub struct Model {
    model: Lfm2Audio,
    threads: usize,
}

impl Model {
    /// The same weights, its tasks computing with `threads` threads.
    pub fn with_threads(&self, threads: usize) -> Model {
        Model {
            model: self.model.clone(),
            threads: threads.max(1),
        }
    }

    /// What the model's step scheduler has run: ticks, steps, the widest tick.
    pub fn step_stats(&self) -> TickStats {
        self.model.step_stats()
    }

    /// A session without conversation caches, for one-shot tasks on this model's threads.
    fn task_session(&self) -> Session {
        Session::new(
            self.model.clone(),
            SessionOptions {
                prefill_slots: 0,
                kept_questions: 0,
                n_threads: Some(self.threads),
                prefill_ahead: false,
                prefill_head: false,
            },
        )
    }

    /// One line about the model.
    pub fn description(&self) -> String {
        self.model.description()
    }

    /// The checkpoint's language tag (`en`, `ja`).
    pub fn language(&self) -> String {
        self.model.reply_format().language
    }

    /// Transcribes `job.audio` through the engine's ASR job (in chunks of `chunk_seconds` when
    /// given, their texts joined by a space); `keep_going` is asked before each chunk and
    /// between decode steps within one, and stops the run when it says no (`Ok(None)`).
    pub fn asr(
        &self,
        job: AsrJob,
        keep_going: &dyn Fn() -> bool,
    ) -> Result<Option<String>, Failure> {
        // why a cancel check besides the sink: the sink hears only text, so a cancel raised
        // during a chunk's encode, or in a chunk that decodes no text, would wait for the next
        // text; the check is asked before each chunk too.
        let o = self
            .task_session()
            .run_cancellable(&Job::Asr(job), keep_going, &mut |_| true)
            .map_err(failure)?;
        Ok((!o.cancelled).then_some(o.text))
    }

    /// Speaks `job.text`, handing each piece of audio to `sink` as it is produced, and the text
    /// of its text steps, which is not part of the output (false stops: the output then holds
    /// the audio delivered so far, `ended` false).
    pub fn tts(&self, job: TtsJob, sink: &mut dyn FnMut(Piece) -> bool) -> Result<Output, Failure> {
        // why the text steps too: a tts result has no text, but the sink hears the text steps
        // before `<|audio_start|>` (callers drop them), so a cancel takes effect there instead
        // of waiting for the first frame. After a stop the engine delivers nothing more and
        // keeps the audio the sink accepted.
        let o = self
            .task_session()
            .run(&Job::Tts(job), &mut |ev| sink(Piece::of(ev)))
            .map_err(failure)?;
        Ok(Output {
            audio: Some(o.audio),
            ended: o.ended,
            ..Output::default()
        })
    }

    /// A conversation session on this model.
    pub fn conversation(&self, prefill_slots: usize, kept_questions: usize) -> Conversation {
        Conversation(Session::new(
            self.model.clone(),
            SessionOptions {
                prefill_slots,
                kept_questions,
                n_threads: Some(self.threads),
                ..SessionOptions::default()
            },
        ))
    }
}

/// An artifact coming out, its meta as text (audio.cpp's form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// Whether it is a reply (`lfm2_audio.reply`, acoustic tokens); else a custom blob.
    pub acoustic_tokens: bool,
    /// Its id.
    pub id: String,
    /// Its bytes.
    pub payload: Vec<u8>,
    /// Its meta, in a stable order.
    pub meta: Vec<(String, String)>,
}

impl Blob {
    fn from_engine(a: Artifact) -> Blob {
        Blob {
            acoustic_tokens: a.kind == conv::ArtifactKind::AcousticTokens,
            id: a.id,
            payload: a.payload,
            meta: a
                .meta
                .iter()
                .map(|(k, v)| (k.clone(), meta_to_text(v)))
                .collect(),
        }
    }
}

/// A piece of a reply, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// Text (whole characters).
    Text(String),
    /// 24 kHz mono samples.
    Audio(Vec<f32>),
}

impl Piece {
    fn of(ev: ReplyEvent) -> Piece {
        match ev {
            ReplyEvent::Text(t) => Piece::Text(t),
            ReplyEvent::Audio(a) => Piece::Audio(a),
        }
    }
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Output {
    /// The text, for tasks that produce one.
    pub text: Option<String>,
    /// 24 kHz mono audio, for tasks that produce it.
    pub audio: Option<Vec<f32>>,
    /// The reply artifact (s2s with return_codes).
    pub artifact: Option<Blob>,
    /// Whether the reply ended on its own.
    pub ended: bool,
}

/// A multi-turn S2S session with its caches.
pub struct Conversation(Session);

impl Conversation {
    /// Runs a turn, handing each piece to `sink` (false stops: the reply is cut, `ended`
    /// false).
    pub fn s2s(
        &mut self,
        request: S2sRequest,
        sink: &mut dyn FnMut(Piece) -> bool,
    ) -> Result<Output, Failure> {
        let o = self
            .0
            .run(&Job::S2s(request), &mut |ev| sink(Piece::of(ev)))
            .map_err(failure)?;
        Ok(Output {
            text: Some(o.text),
            audio: Some(o.audio),
            artifact: o.artifact.map(Blob::from_engine),
            ended: o.ended,
        })
    }

    /// Prompt positions the last turn restored from kept prefill blocks.
    pub fn resumed_prefill_steps(&self) -> usize {
        self.0.resumed_prefill_steps()
    }

    /// Earlier questions of the last turn whose encoder output was reused.
    pub fn reused_questions(&self) -> usize {
        self.0.reused_questions()
    }
}

/// The canonical form of a path, for comparing file options with the files loaded.
pub fn same_file(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p));
    canon(a) == canon(b)
}
