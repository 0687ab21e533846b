//! FastConformer audio encoder and adapter of LFM2-Audio, as ggml graphs over the tensors of the
//! mmproj GGUF (llama.cpp's names, see lfm2-audio-tooling's `convert::mmproj`).
//!
//! Input: normalised log-mel features, mel-major `[n_mels, n_frames]` as
//! [`crate::lfm2_audio::model::features`] produces them. Output: the conformer states
//! `[ceil(n_frames / 8), d_model]` and the adapter output `[.., backbone hidden]`, both
//! row-major per encoder frame. The math follows liquid-audio's `ConformerEncoder` in eval mode
//! with a single unpadded utterance (no attention or time masks apply) and
//! `xscaling = false`, as llama.cpp's `lfm2a` graph does.
//!
//! The layers are bound once at load (typed blocks holding [`Param`](crate::ggml::Param)s); each
//! call builds its graph on a metadata-only context and allocates it on the given backend with a
//! [`GraphAllocator`]; nothing here assumes the CPU.

pub mod adapter;
pub mod config;
pub mod conformer;
pub mod subsampling;

use crate::ggml::{Backend, Context, GgmlError, GgmlType, GraphAllocator, Tensor};
use crate::lfm2_audio::model::load_error::LoadError;
use crate::lfm2_audio::model::weights::WeightFile;

pub use config::EncoderConfig;

use adapter::Adapter;
use conformer::{rel_pos_embedding, ConformerLayer};
use subsampling::Subsampling;

/// Why encoding failed.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// The features do not fit the encoder.
    #[error("bad encoder input: {reason}")]
    BadInput {
        /// What is wrong.
        reason: String,
    },
    /// ggml refused to build, allocate or compute the graph.
    #[error("encoder graph: {0}")]
    Ggml(#[from] GgmlError),
    /// A weight could not be resolved (only if the file changed since loading).
    #[error(transparent)]
    Load(#[from] LoadError),
}

/// Result of encoding.
pub type EncodeResult<T> = std::result::Result<T, EncodeError>;

/// The outputs of one [`AudioEncoder::encode`] call.
#[derive(Debug, Clone, PartialEq)]
pub struct EncoderOutput {
    /// Encoder frames (`ceil(n_frames / 8)`).
    pub n_frames: usize,
    /// Conformer output, `n_frames` rows of `d_model`.
    pub conformer: Vec<f32>,
    /// Conformer width.
    pub d_model: usize,
    /// Adapter output, `n_frames` rows of `out_dim` (the backbone's input embeddings).
    pub adapter: Vec<f32>,
    /// Adapter width (the backbone hidden size).
    pub out_dim: usize,
}

/// All weights of the encoder, bound and checked.
#[derive(Debug)]
struct Model {
    sub: Subsampling,
    layers: Vec<ConformerLayer>,
    adapter: Adapter,
}

impl Model {
    fn load(w: &WeightFile, cfg: &EncoderConfig) -> Result<Model, LoadError> {
        let vb = w.vb();
        Ok(Model {
            sub: Subsampling::load(&vb, cfg)?,
            layers: (0..cfg.n_layers)
                .map(|il| ConformerLayer::load(&vb, cfg, il))
                .collect::<Result<_, _>>()?,
            adapter: Adapter::load(&vb, cfg)?,
        })
    }
}

/// The FastConformer encoder + adapter of an mmproj file: immutable, shareable.
pub struct AudioEncoder {
    weights: WeightFile,
    config: EncoderConfig,
    model: Model,
}

impl std::fmt::Debug for AudioEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AudioEncoder")
            .field("weights", &self.weights)
            .field("config", &self.config)
            .finish()
    }
}

impl AudioEncoder {
    /// Takes the weights of an mmproj file, checking the metadata and every tensor the graphs
    /// use (name, shape, type); errors name the file and the key or tensor.
    pub fn load(weights: WeightFile) -> Result<AudioEncoder, LoadError> {
        let config = EncoderConfig::from_weights(&weights)?;
        let model = Model::load(&weights, &config)?;
        Ok(AudioEncoder {
            weights,
            config,
            model,
        })
    }

    /// The encoder's configuration.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn config(&self) -> &EncoderConfig {
        &self.config
    }

    /// The weights this encoder reads.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn weights(&self) -> &WeightFile {
        &self.weights
    }

    /// Encodes `n_frames` frames of mel-major features (`mel[m * n_frames + t]`, `n_mels` rows)
    /// on `backend`, which must be the one the weights were loaded on.
    pub fn encode(
        &self,
        backend: &Backend,
        mel: &[f32],
        n_frames: usize,
    ) -> EncodeResult<EncoderOutput> {
        self.encode_in(
            backend,
            &GraphAllocator::labelled(backend, "encoder")?,
            mel,
            n_frames,
        )
    }

    /// [`AudioEncoder::encode`] with its graph's tensors in `alloc`'s buffer (for `backend`).
    ///
    /// why: a caller that encodes again (a session, question after question) keeps the
    /// allocator, so the buffer is made once at its largest size instead of mapped, zeroed by
    /// the kernel page by page and unmapped for every question (about a tenth of an encode).
    pub fn encode_in(
        &self,
        backend: &Backend,
        alloc: &GraphAllocator,
        mel: &[f32],
        n_frames: usize,
    ) -> EncodeResult<EncoderOutput> {
        let cfg = &self.config;
        let n_mels = cfg.n_mels;
        if n_frames == 0 {
            return Err(EncodeError::BadInput {
                reason: "no frames".into(),
            });
        }
        if Some(mel.len()) != n_mels.checked_mul(n_frames) {
            return Err(EncodeError::BadInput {
                reason: format!(
                    "{} values are not {n_mels} mel bins x {n_frames} frames",
                    mel.len()
                ),
            });
        }
        if let Some(i) = mel.iter().position(|v| !v.is_finite()) {
            return Err(EncodeError::BadInput {
                reason: format!("value {i} is not finite"),
            });
        }
        let t_out = cfg.output_frames(n_frames);

        // why these sizes: ~80 nodes per layer plus the subsampling and adapter; every node is
        // one tensor object in the metadata context.
        let graph_size = 128 * cfg.n_layers + 256;
        let ctx = Context::metadata_with_graph(2 * graph_size, graph_size)?;
        let model = &self.model;
        let mel_in = ctx.new_tensor_2d(GgmlType::F32, n_mels as i64, n_frames as i64)?;
        mel_in.set_input();
        let n_pos = 2 * t_out - 1;
        let pos_in = ctx.new_tensor_2d(GgmlType::F32, cfg.d_model as i64, n_pos as i64)?;
        pos_in.set_input();

        let mut x: Tensor<'_> = model.sub.build(&ctx, mel_in)?;
        if x.ne()[1] as usize != t_out {
            return Err(EncodeError::BadInput {
                reason: format!("subsampling made {} frames, expected {t_out}", x.ne()[1]),
            });
        }
        for layer in &model.layers {
            x = layer.build(&ctx, cfg, x, pos_in)?;
        }
        let conformer_out = x;
        let adapter_out = model.adapter.build(&ctx, x)?;
        conformer_out.set_output();
        adapter_out.set_output();

        let mut graph = ctx.new_graph(graph_size)?;
        graph.build_forward_expand(conformer_out)?;
        graph.build_forward_expand(adapter_out)?;
        alloc.alloc_graph(&graph)?;

        // the graph wants [n_mels, T] with mel bins fastest; the features are frames-fastest
        let mut frames_major = vec![0f32; mel.len()];
        for (m, row) in mel.chunks_exact(n_frames).enumerate() {
            for (t, &v) in row.iter().enumerate() {
                frames_major[t * n_mels + m] = v;
            }
        }
        mel_in.set_f32(&frames_major)?;
        pos_in.set_f32(&rel_pos_embedding(cfg.d_model, t_out))?;
        alloc.compute(backend, &graph)?;

        Ok(EncoderOutput {
            n_frames: t_out,
            conformer: conformer_out.get_f32()?,
            d_model: cfg.d_model,
            adapter: adapter_out.get_f32()?,
            out_dim: cfg.out_dim,
        })
    }
}
