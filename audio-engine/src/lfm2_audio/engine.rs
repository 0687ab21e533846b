//! The loaded LFM2-Audio model: the four GGUF files on one device, shared by `Arc`.
//!
//! [`Lfm2Audio`] is cheap to clone, `Send + Sync` and holds only immutable state: the weights
//! bound into typed layers, the configs and the tokenizer, with no lock. Everything a run writes
//! belongs to the run: each task call (and each [`Session`](crate::lfm2_audio::Session)) computes on a
//! backend instance of its own ([`Backend::new_instance`]: its own threads and work buffer) and
//! owns its decode cache (lazily zeroed, so a large context costs nothing until used),
//! depthformer scratch, detokenizer stream and graph allocators. So any number of calls and
//! sessions on one model compute at the same time.

use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::ggml::{Backend, Device, GgmlError, StreamGuard, ThreadBudget, ThreadBudgetStats};

use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::model::backbone::scheduler::{StepScheduler, TickStats};
use crate::lfm2_audio::model::backbone::{
    AudioCodeTable, Backbone, BackboneError, DecodeCache, ForwardOutput, Position, Rows,
};
use crate::lfm2_audio::model::depthformer::scheduler::FrameScheduler;
use crate::lfm2_audio::model::depthformer::Depthformer;
use crate::lfm2_audio::model::detokenizer::config::VocoderConfig;
use crate::lfm2_audio::model::detokenizer::Detokenizer;
use crate::lfm2_audio::model::encoder::AudioEncoder;
use crate::lfm2_audio::model::gguf_keys;
use crate::lfm2_audio::model::load_error::LoadError;
use crate::lfm2_audio::model::package::ModelPackage;
use crate::lfm2_audio::model::weights::{self, WeightFile};
use crate::lfm2_audio::text::tokenizer::Tokenizer;

pub use crate::lfm2_audio::limits::DEFAULT_MAX_AUDIO_SECONDS;
pub use crate::lfm2_audio::model::backbone::AUDIO_CODE_TABLE;

/// Default [`ModelOptions::max_batch`]: 1, every reply computes its own steps (see
/// [`ModelOptions::max_batch`] for why). Binaries take `LFM2_MAX_BATCH` instead
/// ([`ModelOptions::with_vars`]).
pub const DEFAULT_MAX_BATCH: usize = 1;

/// Default [`ModelOptions::batch_from`]: steps batch while three or more replies generate at
/// once (see [`ModelOptions::batch_from`]). Binaries take `LFM2_BATCH_FROM` instead
/// ([`ModelOptions::with_vars`]).
pub const DEFAULT_BATCH_FROM: usize = 3;

/// Default context: prompt plus generated steps.
pub const DEFAULT_CONTEXT: usize = 8192;

/// How to load a model.
#[derive(Debug, Clone)]
pub struct ModelOptions {
    /// Threads for CPU compute.
    pub n_threads: usize,
    /// The most CPU threads computing at once for this model, over every session and call that
    /// use it (steps, prefills, encoders, prefill ahead): a graph waits until the threads it
    /// runs with are free, so concurrent requests never put more spinning compute threads on
    /// the machine than this (see [`crate::ggml::thread_budget`]). A session asking for more
    /// threads ([`SessionOptions::n_threads`](crate::lfm2_audio::SessionOptions::n_threads))
    /// computes on this many. Default 0: the machine's cores, at least `n_threads` (so
    /// sessions of one thread each still compute side by side, one per core).
    pub max_compute_threads: usize,
    /// CPU threads for the small graphs every audio frame runs: the depthformer's (batched
    /// across replies by the model's frame scheduler) and the detokenizer's. Default 0: the
    /// depthformer's frames run on `n_threads`, and each reply measures its detokenizer graphs
    /// on `n_threads` and on one thread and keeps the cheaper, probing again as it goes (with
    /// another process busy on a core, two threads can cost many times one). A positive count
    /// fixes both (e.g. the thread count on a machine dedicated to the engine). The bytes are
    /// the same either way.
    pub frame_threads: usize,
    /// CPU threads for the batched single-position steps (a text token, an audio frame's
    /// forward) of the model's step scheduler ([`ModelOptions::max_batch`] above 1; unbatched
    /// steps run on their session's threads). Default 0: `n_threads`. The bytes are the same
    /// either way.
    pub step_threads: usize,
    /// The most replies whose single-position steps (and depthformer frames) one tick batches
    /// into one graph, reading the weights once for all of them (see
    /// `StepScheduler`).
    /// 1: no batching, every reply computes its own steps beside the others, sharing the cores
    /// through the thread budget. Default [`DEFAULT_MAX_BATCH`] (1): measured through `serve`
    /// on a 2-core machine, 3, 4 and 8 concurrent requests finished 4-7 % sooner unbatched
    /// (BENCHMARKS.md, "Many conversations on one model"); batching is for machines where a
    /// step's weights, not its arithmetic, bound it. A reply's bytes do not depend on it.
    pub max_batch: usize,
    /// How many replies must be generating at once for their steps and frames to batch (with
    /// `max_batch` above 1): each reply decides at every step, so replies batch while this
    /// many run and compute alone again when fewer do. 0 or 1: batch whenever another reply's
    /// step is announced. Default [`DEFAULT_BATCH_FROM`] (3): two concurrent replies finish
    /// sooner each computing alone (BENCHMARKS.md), so a batching server does not lose at two.
    /// A reply's bytes do not depend on it.
    pub batch_from: usize,
    /// Longest audio accepted in one pass, seconds.
    pub max_audio_seconds: f64,
    /// Positions of the context (prompt + generated steps).
    pub context: usize,
    /// Repack matrix weights for the CPU's SIMD kernels where ggml has one (`Q4_0` with AVX2,
    /// ...; see [`Backend::with_weight_repack`]): faster, with other rounding than the plain
    /// kernels. Default on (binaries turn it off for `LFM2_NO_REPACK=1`, see
    /// [`ModelOptions::with_vars`]).
    pub repack: bool,
    /// Compute products of two columns and more (and of one, on CPUs with AMX-INT8) with
    /// repacked `Q4_0` weights with the AVX-512 VNNI column kernel (vendor patch 0007; see
    /// [`Backend::with_vnni_q4_0`]) where this build has it: prefills, encoders and batched
    /// steps. Where ggml has no AMX, outputs are the same bytes either way. On CPUs with AMX,
    /// it also puts `Q4_0` matrices in ggml's `CPU_REPACK` layout rather than its AMX one,
    /// whose kernels round otherwise, so there the setting changes output bytes (each setting
    /// keeps its own at every batch width). Default on (binaries turn it off for
    /// `LFM2_NO_VNNI_Q4_0=1`, see [`ModelOptions::with_vars`]).
    pub vnni_q4_0: bool,
    /// The device the weights, caches and graphs live on: `cpu`, `vulkan:N`, `cuda:N` or
    /// `metal` (parsed from those strings; the build needs the device's cargo feature). On a
    /// device, each graph runs through ggml's backend scheduler with the CPU as fallback for
    /// the ops the device has no kernel for ([`crate::ggml::fallbacks`] reports which). Loading
    /// fails, naming the device and the devices found, when it is missing. Default `None`: the
    /// best this build offers (CUDA device 0 with feature `cuda`, Metal with `metal`, otherwise
    /// the CPU).
    pub device: Option<Device>,
}

impl Default for ModelOptions {
    fn default() -> Self {
        ModelOptions {
            n_threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            max_compute_threads: 0,
            frame_threads: 0,
            step_threads: 0,
            max_batch: DEFAULT_MAX_BATCH,
            batch_from: DEFAULT_BATCH_FROM,
            max_audio_seconds: DEFAULT_MAX_AUDIO_SECONDS,
            context: DEFAULT_CONTEXT,
            repack: true,
            vnni_q4_0: true,
            device: None,
        }
    }
}

/// Special token ids the tasks need, looked up by name in the backbone's vocabulary.
#[derive(Debug, Clone, Copy)]
pub struct SpecialTokens {
    /// `<|im_end|>`.
    pub im_end: u32,
    /// `<|audio_start|>`.
    pub audio_start: u32,
    /// `<|text_end|>`.
    pub text_end: u32,
    /// The end-of-audio code (codebook size - 1).
    pub end_of_audio: u32,
}

struct Inner {
    label: String,
    /// The device the weights live on (a backend of it; runs compute on instances of their own).
    backend: Backend,
    tokenizer: Tokenizer,
    special: SpecialTokens,
    options: ModelOptions,
    /// The checkpoint's language tag (`general.languages[0]`, else `en`).
    language: String,
    /// Codes per frame.
    codebooks: usize,
    /// Text and audio steps per interleaved block.
    interleave: Interleave,
    backbone: Backbone,
    /// Batches the single-position backbone steps of every reply on this model.
    steps: Arc<StepScheduler>,
    /// Batches the depthformer frames of every speaking reply on this model.
    frames: Arc<FrameScheduler>,
    /// Replies generating now (see [`ModelOptions::batch_from`]).
    generating: Arc<AtomicUsize>,
    encoder: AudioEncoder,
    depth: Depthformer,
    detok: Detokenizer,
}

/// The interleaved S2S schedule: text steps, then frames, per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Interleave {
    n_text: usize,
    n_audio: usize,
    /// Neither key was in the vocoder file, so the EN schedule is used.
    default_schedule: bool,
}

impl Interleave {
    /// The EN checkpoints' schedule, which upstream's vocoder converter leaves implicit.
    const EN: (u32, u32) = (6, 12);

    fn of(v: &VocoderConfig) -> Interleave {
        Interleave {
            n_text: v.interleaved_n_text.unwrap_or(Self::EN.0).max(1) as usize,
            n_audio: v.interleaved_n_audio.unwrap_or(Self::EN.1).max(1) as usize,
            default_schedule: v.interleaved_n_text.is_none() && v.interleaved_n_audio.is_none(),
        }
    }
}

/// A reply counted as generating (see [`Lfm2Audio::generating`]).
#[derive(Debug)]
pub(crate) struct Generating(Arc<AtomicUsize>);

impl Drop for Generating {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A loaded LFM2-Audio model.
#[derive(Clone)]
pub struct Lfm2Audio {
    inner: Arc<Inner>,
}

// why: the model is shared by sessions on many threads with no lock; this fails to compile if a
// component gains state that is not safe to share.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<Lfm2Audio>();
    shared::<Inner>();
};

impl std::fmt::Debug for Lfm2Audio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lfm2Audio")
            .field("model", &self.inner.label)
            .field("backend", &self.inner.backend.name())
            .field("description", &self.description())
            .finish()
    }
}

/// The model's step and frame schedulers, each computing on an instance of `backend` with
/// its thread count ([`ModelOptions::step_threads`], [`ModelOptions::frame_threads`]; 0:
/// `n_threads`).
fn schedulers(
    backend: &Backend,
    options: &ModelOptions,
) -> Result<(Arc<StepScheduler>, Arc<FrameScheduler>), BackboneError> {
    let instance = |fixed: usize| -> Result<Backend, BackboneError> {
        let b = backend.new_instance()?.with_stream_priority(true);
        if b.is_cpu() {
            let n = if fixed == 0 { options.n_threads } else { fixed };
            b.set_n_threads(n.max(1))?;
        }
        Ok(b)
    };
    Ok((
        Arc::new(StepScheduler::new(
            instance(options.step_threads)?,
            options.max_batch,
        )?),
        Arc::new(FrameScheduler::new(
            instance(options.frame_threads)?,
            options.max_batch,
        )?),
    ))
}

fn backend_err(file: &Path) -> impl Fn(GgmlError) -> LoadError + '_ {
    move |source| LoadError::Backend {
        file: file.to_path_buf(),
        source,
    }
}

impl Lfm2Audio {
    /// Loads the package in `dir` (see [`ModelPackage::open`]) on the best available backend.
    pub fn load(dir: impl AsRef<Path>, options: ModelOptions) -> Result<Lfm2Audio, EngineError> {
        let package = ModelPackage::open(dir)?;
        Lfm2Audio::from_package(package, options)
    }

    /// Loads an opened package.
    pub fn from_package(
        package: ModelPackage,
        options: ModelOptions,
    ) -> Result<Lfm2Audio, EngineError> {
        let label = package.paths.label();
        let mmproj_path = package.paths.mmproj.clone();
        let backend = match &options.device {
            // why not wrapped in a file's error: the device, not a file, is at fault, and the
            // error names it (and lists the devices found).
            Some(device) => Backend::for_device(device)?,
            None => Backend::best_available().map_err(backend_err(&mmproj_path))?,
        }
        .with_weight_repack(options.repack)
        .with_vnni_q4_0(options.vnni_q4_0);
        if backend.is_cpu() {
            backend
                .set_n_threads(options.n_threads.max(1))
                .map_err(backend_err(&mmproj_path))?;
            let total = match options.max_compute_threads {
                0 => std::thread::available_parallelism()
                    .map_or(1, |n| n.get())
                    .max(options.n_threads),
                n => n,
            };
            // why on the model's backend: every run instance is made from it and shares it.
            backend.share_thread_budget(ThreadBudget::new(total));
        }
        let tokenizer = Tokenizer::from_gguf(&package.backbone.gguf)?;
        // why: the JP and EN checkpoints share every shape; a reply artifact names its language
        // so it is not replayed on the other one.
        let language = package
            .backbone
            .gguf
            .metadata()
            .get(gguf_keys::GENERAL_LANGUAGES)
            .and_then(|v| match v.as_array() {
                Some(crate::ggml::gguf::GgufArray::String(l)) => l.first().cloned(),
                _ => None,
            })
            .unwrap_or_else(|| "en".to_owned());
        let end_of_audio = package.vocoder.config.audio_vocab.saturating_sub(1);
        let id = |name: &str| {
            tokenizer
                .token_id(name)
                .ok_or_else(|| LoadError::MissingKey {
                    file: package.paths.backbone.clone(),
                    key: format!("{} entry {name}", gguf_keys::TOKENIZER_TOKENS),
                })
        };
        let special = SpecialTokens {
            im_end: id("<|im_end|>")?,
            audio_start: id("<|audio_start|>")?,
            text_end: id("<|text_end|>")?,
            end_of_audio,
        };
        let interleave = Interleave::of(&package.vocoder.config);
        if interleave.default_schedule {
            tracing::debug!(
                file = %package.paths.vocoder.display(),
                "no interleaved_n_text / interleaved_n_audio keys: using the EN schedule"
            );
        }
        let depth = Depthformer::load(&package.vocoder, &backend)?;
        let detok = Detokenizer::load(package.detokenizer, &package.vocoder, &backend)?;
        let hidden = package.backbone.config.hidden_size as usize;
        let codebooks = package.vocoder.config.codebooks as usize;
        let mut backbone = Backbone::load(package.backbone, &backend)?;
        // why: the code table is loaded once, apart from the encoder's tensors, so the
        // 8 x 2049-row table is not held twice.
        // why: a second read-only map of the same file; GgufFile maps lazily, so this is cheap.
        let mmproj_again = weights::open_gguf(&mmproj_path)?;
        let table = WeightFile::load_filtered(mmproj_again, &backend, |n| n == AUDIO_CODE_TABLE)?;
        let table = AudioCodeTable::new(table, AUDIO_CODE_TABLE, codebooks, hidden)?;
        backbone.set_audio_codes(table);
        // why the vocoder file in the error: the schedulers compute the depthformer's frames
        // too, and a failure here is the backend's, not one file's.
        let (steps, frames) = schedulers(&backend, &options).map_err(|e| LoadError::Backend {
            file: mmproj_path.clone(),
            source: match e {
                BackboneError::Ggml(g) => g,
                other => GgmlError::arg("schedulers", other.to_string()),
            },
        })?;
        let enc_weights =
            WeightFile::load_filtered(package.mmproj, &backend, |n| n != AUDIO_CODE_TABLE)?;
        let encoder = AudioEncoder::load(enc_weights)?;
        Ok(Lfm2Audio {
            inner: Arc::new(Inner {
                label,
                backend,
                tokenizer,
                special,
                options,
                interleave,
                language,
                codebooks,
                backbone,
                steps,
                frames,
                generating: Arc::default(),
                encoder,
                depth,
                detok,
            }),
        })
    }

    /// The package label (`<model>-<q>`).
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    /// The backbone's tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.inner.tokenizer
    }

    /// Special token ids.
    pub fn special_tokens(&self) -> SpecialTokens {
        self.inner.special
    }

    /// The checkpoint's language tag (`general.languages[0]`, else `en`).
    pub fn language(&self) -> &str {
        &self.inner.language
    }

    /// Codes per audio frame.
    pub fn codebooks(&self) -> usize {
        self.inner.codebooks
    }

    /// Text and audio steps per block of an interleaved reply.
    pub fn interleave(&self) -> (usize, usize) {
        (self.inner.interleave.n_text, self.inner.interleave.n_audio)
    }

    /// A one-line description: package, backend, language and the interleaved schedule (with
    /// where it came from).
    pub fn description(&self) -> String {
        let i = &self.inner.interleave;
        let source = if i.default_schedule {
            "EN default: the vocoder has no interleaved_n_text / interleaved_n_audio keys"
        } else {
            "from the vocoder's interleaved_n_text / interleaved_n_audio"
        };
        format!(
            "{} on {}, language {}, S2S schedule {} text / {} frames ({source})",
            self.inner.label,
            self.inner.backend.name(),
            self.inner.language,
            i.n_text,
            i.n_audio,
        )
    }

    /// The options the model was loaded with.
    pub fn options(&self) -> &ModelOptions {
        &self.inner.options
    }

    /// The backend the model's weights live on, as ggml names it (`CPU`, `Vulkan0`, `CUDA0`).
    pub fn device_name(&self) -> &str {
        self.inner.backend.name()
    }

    /// What the CPU compute-thread budget shared by this model's sessions and calls has seen
    /// ([`ModelOptions::max_compute_threads`]); `None` on other devices.
    pub fn compute_thread_stats(&self) -> Option<ThreadBudgetStats> {
        self.inner.backend.thread_budget().map(|b| b.stats())
    }

    /// The backbone.
    pub(crate) fn backbone(&self) -> &Backbone {
        &self.inner.backbone
    }

    /// The depthformer.
    pub(crate) fn depthformer(&self) -> &Depthformer {
        &self.inner.depth
    }

    /// The audio encoder (with its adapter).
    pub(crate) fn encoder(&self) -> &AudioEncoder {
        &self.inner.encoder
    }

    /// The detokenizer.
    pub(crate) fn detokenizer(&self) -> &Detokenizer {
        &self.inner.detok
    }

    /// A backend instance of the model's device for one run, with `n_threads` CPU threads (the
    /// model's [`ModelOptions::n_threads`] when `None`).
    pub(crate) fn run_backend(&self, n_threads: Option<usize>) -> Result<Backend, EngineError> {
        let b = self.inner.backend.new_instance()?;
        if b.is_cpu() {
            let n = n_threads.unwrap_or(self.inner.options.n_threads).max(1);
            b.set_n_threads(n)?;
        }
        Ok(b)
    }

    /// The scheduler that batches the backbone steps of this model's replies.
    pub(crate) fn step_scheduler(&self) -> &Arc<StepScheduler> {
        &self.inner.steps
    }

    /// What the step scheduler has run so far: ticks, steps, the widest tick.
    pub fn step_stats(&self) -> TickStats {
        self.inner.steps.stats()
    }

    /// Marks a reply generating until the guard is dropped: the model's other computes then
    /// leave half the CPU threads to the running replies (see [`crate::ggml::thread_budget`]).
    pub(crate) fn stream_guard(&self) -> Option<StreamGuard> {
        self.inner.backend.thread_budget().map(|b| b.stream())
    }

    /// Counts a reply as generating until the guard drops.
    pub(crate) fn generating(&self) -> Generating {
        self.inner.generating.fetch_add(1, Ordering::Relaxed);
        Generating(self.inner.generating.clone())
    }

    /// Whether a reply's next step and frame should go through the model's schedulers: batching
    /// is on and at least [`ModelOptions::batch_from`] replies are generating.
    pub(crate) fn batching_now(&self) -> bool {
        let o = &self.inner.options;
        o.max_batch > 1 && self.inner.generating.load(Ordering::Relaxed) >= o.batch_from
    }

    /// The scheduler that batches the depthformer frames of this model's replies.
    pub(crate) fn frame_scheduler(&self) -> &Arc<FrameScheduler> {
        &self.inner.frames
    }

    /// What the frame scheduler has run so far: ticks, frames, the widest tick.
    pub fn frame_stats(&self) -> TickStats {
        self.inner.frames.stats()
    }
}

/// Prefills `positions` (a whole prompt) in the blocks of its partition `blocks`
/// ([`Prompt::blocks`](crate::lfm2_audio::text::prompt::Prompt::blocks)) into an empty `cache`;
/// returns the last position's outputs.
pub(crate) fn prefill_blocks(
    backbone: &Backbone,
    cache: &mut DecodeCache,
    positions: &[Position<'_>],
    blocks: &[Range<usize>],
) -> Result<ForwardOutput, EngineError> {
    prefill_blocks_with(backbone, cache, positions, blocks, true, &mut |_, _| {
        Ok(true)
    })
}

/// Called after each prefill block with the cache and the block's range; returns whether to go
/// on.
pub type BlockDone<'a> = dyn FnMut(&DecodeCache, &Range<usize>) -> Result<bool, EngineError> + 'a;

/// Runs the blocks of `blocks` (the partition of the prompt `positions`) from the one that starts
/// at the cache's length on, so a cache holding restored blocks continues where they end. After
/// each block `on_block(cache, block)` is called; it returns whether to go on (false stops
/// after that block). With `want_last` the prompt's last block returns its last position's
/// outputs; otherwise (or when stopped early) the returned outputs are empty.
///
/// Each block runs as one forward call of exactly its positions, so what it writes into the
/// cache depends only on the prompt up to its end and on the partition, never on whether
/// earlier blocks ran or were restored.
pub fn prefill_blocks_with(
    backbone: &Backbone,
    cache: &mut DecodeCache,
    positions: &[Position<'_>],
    blocks: &[Range<usize>],
    want_last: bool,
    on_block: &mut BlockDone<'_>,
) -> Result<ForwardOutput, EngineError> {
    if positions.is_empty() {
        return Err(EngineError::InvalidRequest("empty prompt".into()));
    }
    if positions.len() > cache.capacity() {
        return Err(EngineError::Capacity(format!(
            "the prompt needs {} positions, the context holds {}",
            positions.len(),
            cache.capacity()
        )));
    }
    let covers = blocks.first().map(|b| b.start) == Some(0)
        && blocks.last().map(|b| b.end) == Some(positions.len())
        && blocks.windows(2).all(|w| w[0].end == w[1].start)
        && blocks.iter().all(|b| b.start < b.end);
    if !covers {
        return Err(EngineError::Invariant(format!(
            "a prefill partition of {} blocks does not cover the {} prompt positions in order",
            blocks.len(),
            positions.len()
        )));
    }
    let from = blocks
        .iter()
        .position(|b| b.start == cache.len())
        .ok_or_else(|| {
            EngineError::Invariant(format!(
                "the cache holds {} positions, which is not where a block of the prompt starts",
                cache.len()
            ))
        })?;
    let mut out = ForwardOutput::default();
    for (i, block) in blocks.iter().enumerate().skip(from) {
        let last = i + 1 == blocks.len();
        let rows = if last && want_last {
            Rows::Last
        } else {
            Rows::None
        };
        let o = backbone.forward(cache, &positions[block.clone()], rows, last && want_last)?;
        if last && want_last {
            out = o;
        }
        if !on_block(cache, block)? {
            break;
        }
    }
    Ok(out)
}
