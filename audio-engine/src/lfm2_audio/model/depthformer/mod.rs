//! The depthformer: turns one backbone hidden state into one audio frame (a code per codebook).
//!
//! Per frame, `C` steps (8 in the published model) of a small transformer (liquid-audio's
//! `StandardBlock(MHA)` stack) over positions `0..C` with a fresh K/V cache:
//!
//! * step `i`'s input is slice `i` of `depth_linear(h)` (`Linear(backbone -> C * d)` with bias,
//!   `h` the backbone's final-norm hidden state) plus, for `i > 0`, row `code[i-1]` of
//!   `depth_embeddings[i-1].embedding`;
//! * each layer: `x += out_proj(attn(RMSNorm(x)))`, `x += w2(silu(w1 y) * w3 y)` with
//!   `y = RMSNorm(x)`; attention is GQA with a fused `qkv_proj`, per-head RMSNorm of q and k
//!   before RoPE, RoPE on interleaved pairs `(x[2j], x[2j+1])` (GPT-J style, ggml's
//!   `RopeMode::Normal`), softmax scale `1/sqrt(head_dim)`; no final norm;
//! * `logits_i = depth_embeddings[i].to_logits(RMSNorm_i(x))` over the codebook's entries, and
//!   the sampler picks `code[i]` from them.
//!
//! liquid-audio (`LFM2AudioModel._sample_audio_frame` and its generate loops) samples all `C`
//! codes and then, when codebook 0 picked end-of-audio (`audio_vocab - 1`, 2048), overwrites
//! the whole frame with end-of-audio. [`Depthformer::frame`] returns the same frame but stops
//! after step 0 in that case: the remaining steps cannot change the result (only the PRNG
//! draws they would have consumed, which no reference reproduces anyway).
//!
//! RoPE theta and the RMSNorm epsilon are liquid-audio's (`MHA(theta=1e6)`, `norm_eps=1e-5`,
//! not taken from the backbone's config); a vocoder file may override them with the optional
//! keys [`KEY_ROPE_THETA`] / [`KEY_NORM_EPS`].
//!
//! # Weights and per-run state
//!
//! A [`Depthformer`] is immutable: its layers are bound once at load (typed [`nn`](super::nn)
//! blocks holding [`Param`]s) and shared by every caller. Everything a run writes lives in a
//! [`DepthScratch`] the caller owns: the backend instance it computes on, the K/V rows of the
//! `C` positions and the frame's `depth_linear` output (a small buffer; step 0 writes
//! `depth_linear(h)` there and every step writes its K/V row), and one graph context and
//! allocator per step. So a built and allocated step graph can be re-run for any frame by
//! setting its two small inputs (hidden state or previous code, position), and several scratches
//! run frames on one depthformer at the same time.
//!
//! A graph borrows the context it lives in, so graphs cannot be stored next to their context in
//! one struct (safe Rust has no self-referential structs). Two ways to run frames:
//!
//! * [`Depthformer::frame`]: builds the step graphs of that one frame in a fresh scratch
//!   (lazily: an end-of-audio frame builds only step 0);
//! * [`Depthformer::session`] with a [`DepthScratch`] the caller keeps beside it: the graphs are
//!   built once (on first use) and re-run for every frame of the session. Use this in a
//!   generation loop.

use crate::ggml::gguf::{GgufFile, GgufValue};
use crate::ggml::{Backend, GgmlError, Param, RopeMode, RopeParams};

use super::detokenizer::config::{VocoderConfig, DEPTH_LINEAR, DEPTH_LINEAR_BIAS};
use super::load_error::LoadError;
use super::nn::{Attention, Linear, QkvProjection, RmsNorm, SwiGlu};
use super::weights::{display_path, open_gguf, Role, VarBuilder, WeightFile};
use crate::lfm2_audio::model::package::Vocoder;
use crate::lfm2_audio::model::sampling::SampleError;

mod batch;
mod graph;
pub mod scheduler;
mod session;

pub use batch::{FrameJob, FrameRows};
// why the allow: only the tests reach these names through `internals` (feature `testkit`).
#[cfg_attr(not(feature = "testkit"), allow(unused_imports))]
pub use session::{DepthScratch, DepthSession};

/// liquid-audio's depthformer RoPE base (`MHA(theta=1_000_000.0)`).
pub const DEFAULT_ROPE_THETA: f32 = 1_000_000.0;
/// liquid-audio's depthformer RMSNorm epsilon (`norm_eps=1e-5` of every norm it uses).
pub const DEFAULT_NORM_EPS: f32 = 1e-5;
/// Optional vocoder metadata key overriding [`DEFAULT_ROPE_THETA`] (f32 or f64, positive).
pub const KEY_ROPE_THETA: &str = super::gguf_keys::DEPTHFORMER_ROPE_THETA;
/// Optional vocoder metadata key overriding [`DEFAULT_NORM_EPS`] (f32 or f64, positive).
pub const KEY_NORM_EPS: &str = super::gguf_keys::DEPTHFORMER_NORM_EPS;

/// Why a depthformer run failed.
#[derive(Debug, thiserror::Error)]
pub enum DepthError {
    /// The hidden state or the codes are malformed.
    #[error("invalid depthformer input: {0}")]
    Input(String),
    /// A [`DepthScratch`] was given to a second session (its graph memory is spent).
    #[error("this DepthScratch already served a session; make a new one")]
    ScratchUsed,
    /// A [`DepthScratch`] made for another depthformer (other step count).
    #[error("this DepthScratch was made for {found} steps, the depthformer has {expected}")]
    ScratchMismatch {
        /// The depthformer's codebooks.
        expected: usize,
        /// The scratch's step count.
        found: usize,
    },
    /// The sampler could not pick (NaN logits).
    #[error("codebook {codebook}: {source}")]
    Sample {
        /// The codebook whose logits failed.
        codebook: usize,
        /// What the sampler reported.
        source: SampleError,
    },
    /// A weight could not be resolved while building a graph.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// ggml rejected an operation or failed to compute.
    #[error(transparent)]
    Ggml(#[from] GgmlError),
    /// The batched frame step this frame ran in failed (every frame of it gets the cause).
    #[error("the batched frame failed: {0}")]
    Batch(#[source] std::sync::Arc<DepthError>),
    /// A batched step of the backbone's batch memory failed.
    #[error(transparent)]
    Backbone(#[from] super::backbone::BackboneError),
}

type R<T> = Result<T, DepthError>;

/// One transformer block: `x += attn(RMSNorm x)`, `x += SwiGLU(RMSNorm x)`.
#[derive(Debug)]
struct DepthLayer {
    /// `operator_norm`.
    attn_norm: RmsNorm,
    /// `operator`: fused `qkv_proj`, `attention.{q,k}_layernorm`, `out_proj`.
    attn: Attention,
    /// `ffn_norm`.
    ffn_norm: RmsNorm,
    /// `feed_forward.{w1, w3, w2}`.
    ffn: SwiGlu,
}

/// One codebook's embedding (the previous code's row feeds the next step) and logits head.
#[derive(Debug)]
struct DepthBook {
    /// `embedding.weight`, `[d, audio_vocab]`.
    embedding: Param,
    /// `embedding_norm`.
    norm: RmsNorm,
    /// `to_logits`, `[d, audio_vocab]`.
    to_logits: Linear,
}

/// A loaded depthformer: weights bound into typed layers, immutable and shareable.
pub struct Depthformer {
    config: VocoderConfig,
    rope_theta: f32,
    norm_eps: f32,
    weights: WeightFile,
    /// `depth_linear`: backbone width -> `C * d`, with bias.
    depth_linear: Linear,
    layers: Vec<DepthLayer>,
    books: Vec<DepthBook>,
    /// The backend the weights were loaded on: [`Depthformer::frame`] and
    /// [`Depthformer::new_scratch`] compute on it.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    backend: Backend,
}

impl std::fmt::Debug for Depthformer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Depthformer")
            .field("config", &self.config)
            .field("rope_theta", &self.rope_theta)
            .field("norm_eps", &self.norm_eps)
            .field("weights", &self.weights)
            .finish()
    }
}

/// Whether `name` is one of the depthformer's tensors (the vocoder file also holds the audio
/// code embedding and the detokenizer's tensors, which other components load).
pub fn is_depthformer_tensor(name: &str) -> bool {
    name.starts_with("depthformer.")
        || name.starts_with("depth_embeddings.")
        || name == DEPTH_LINEAR
        || name == DEPTH_LINEAR_BIAS
}

fn opt_positive_f32(gguf: &GgufFile, key: &str, default: f32) -> Result<f32, LoadError> {
    let Some(v) = gguf.metadata().get(key) else {
        return Ok(default);
    };
    let x = match *v {
        GgufValue::F32(x) => Some(x),
        GgufValue::F64(x) => Some(x as f32),
        _ => None,
    };
    match x {
        Some(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(LoadError::BadValue {
            file: display_path(gguf),
            key: key.to_owned(),
            reason: format!(
                "is {} {v:?}, expected a positive float",
                v.type_description()
            ),
        }),
    }
}

impl DepthLayer {
    /// Binds layer `depthformer.layers.{il}`.
    fn load(
        vb: &VarBuilder<'_>,
        cfg: &VocoderConfig,
        rope: RopeParams,
        eps: f32,
    ) -> Result<DepthLayer, LoadError> {
        let d = cfg.n_embd as usize;
        let hd = cfg.head_dim as usize;
        let kvw = hd * cfg.n_head_kv as usize;
        let ff = cfg.n_ff as usize;
        let op = vb.pp("operator");
        let ffn = vb.pp("feed_forward");
        Ok(DepthLayer {
            attn_norm: RmsNorm::load(&vb.pp("operator_norm"), d, eps)?,
            attn: Attention {
                qkv: QkvProjection::Fused(Linear::load(&op.pp("qkv_proj"), d, d + 2 * kvw, false)?),
                q_norm: RmsNorm::load(&op.pp("attention").pp("q_layernorm"), hd, eps)?,
                k_norm: RmsNorm::load(&op.pp("attention").pp("k_layernorm"), hd, eps)?,
                out: Linear::load(&op.pp("out_proj"), d, d, false)?,
                n_head: cfg.n_head as usize,
                n_kv_head: cfg.n_head_kv as usize,
                head_dim: hd,
                rope,
            },
            ffn_norm: RmsNorm::load(&vb.pp("ffn_norm"), d, eps)?,
            ffn: SwiGlu {
                gate: Linear::load(&ffn.pp("w1"), d, ff, false)?,
                up: Linear::load(&ffn.pp("w3"), d, ff, false)?,
                down: Linear::load(&ffn.pp("w2"), ff, d, false)?,
            },
        })
    }
}

impl Depthformer {
    /// Loads the depthformer tensors of an opened vocoder file onto `backend`.
    ///
    /// The file is opened again (a second read-only mapping, no copy) so the caller keeps its
    /// [`Vocoder`] for the other components; an in-memory vocoder is copied.
    pub fn load(vocoder: &Vocoder, backend: &Backend) -> Result<Depthformer, LoadError> {
        let gguf = match vocoder.gguf.path() {
            Some(p) => open_gguf(p)?,
            None => GgufFile::from_bytes(vocoder.gguf.as_bytes().to_vec())?,
        };
        Depthformer::load_gguf(gguf, backend)
    }

    /// Loads the depthformer tensors of a vocoder file onto `backend`, validating every
    /// dimension and tensor first ([`VocoderConfig::from_gguf`]).
    pub fn load_gguf(gguf: GgufFile, backend: &Backend) -> Result<Depthformer, LoadError> {
        let config = VocoderConfig::from_gguf(&gguf)?;
        let rope_theta = opt_positive_f32(&gguf, KEY_ROPE_THETA, DEFAULT_ROPE_THETA)?;
        let norm_eps = opt_positive_f32(&gguf, KEY_NORM_EPS, DEFAULT_NORM_EPS)?;
        let weights = WeightFile::load_filtered(gguf, backend, is_depthformer_tensor)?;
        let vb = weights.vb();
        let rope = RopeParams::new(config.head_dim as usize, RopeMode::Normal, rope_theta);
        let layers = (0..config.n_layer as usize)
            .map(|il| {
                DepthLayer::load(
                    &vb.pp("depthformer").pp("layers").pp(il),
                    &config,
                    rope,
                    norm_eps,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let d = config.n_embd as usize;
        let vocab = config.audio_vocab as usize;
        let books = (0..config.codebooks as usize)
            .map(|cb| {
                let b = vb.pp("depth_embeddings").pp(cb);
                Ok(DepthBook {
                    embedding: b.pp("embedding").get("weight", &[d, vocab], Role::Matrix)?,
                    norm: RmsNorm::load(&b.pp("embedding_norm"), d, norm_eps)?,
                    to_logits: Linear::load(&b.pp("to_logits"), d, vocab, false)?,
                })
            })
            .collect::<Result<Vec<_>, LoadError>>()?;
        let depth_linear = Linear::load(
            &vb.pp("depth_linear"),
            config.backbone_embd as usize,
            config.codebooks as usize * d,
            true,
        )?;
        Ok(Depthformer {
            config,
            rope_theta,
            norm_eps,
            depth_linear,
            layers,
            books,
            weights,
            backend: backend.clone(),
        })
    }

    /// The vocoder dimensions (codebooks, audio vocabulary, widths).
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn config(&self) -> &VocoderConfig {
        &self.config
    }

    /// Number of codebooks (codes per frame).
    pub fn codebooks(&self) -> usize {
        self.config.codebooks as usize
    }

    /// Entries per codebook, end-of-audio included.
    pub fn audio_vocab(&self) -> usize {
        self.config.audio_vocab as usize
    }

    /// The end-of-audio code (`audio_vocab - 1`, 2048 in the published model).
    pub fn end_of_audio(&self) -> u32 {
        self.config.audio_vocab - 1
    }

    /// The RoPE base in use.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn rope_theta(&self) -> f32 {
        self.rope_theta
    }

    /// The RMSNorm epsilon in use.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn norm_eps(&self) -> f32 {
        self.norm_eps
    }

    /// Bytes of backend memory the depthformer's weights take.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn weight_bytes(&self) -> usize {
        self.weights.size_bytes()
    }

    /// The backend the weights were loaded on.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    fn check_hidden(&self, hidden: &[f32]) -> R<()> {
        let want = self.config.backbone_embd as usize;
        if hidden.len() != want {
            return Err(DepthError::Input(format!(
                "hidden state has {} values, the depthformer reads {want}",
                hidden.len()
            )));
        }
        if hidden.iter().any(|v| !v.is_finite()) {
            return Err(DepthError::Input("hidden state is not finite".into()));
        }
        Ok(())
    }
}
