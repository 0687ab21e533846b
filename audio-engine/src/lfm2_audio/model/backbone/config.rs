//! The LFM2 backbone's hyperparameters and tensor layout, read from `<model>-<q>.gguf`.
//!
//! [`Lfm2Config`] mirrors the Hugging Face `config.json` field names but is derived only from the
//! GGUF metadata (llama.cpp's `lfm2.*` keys) and tensor shapes, never from constants, so the same
//! code reads the 1.2B backbone, the detokenizer and any test model. [`Lfm2Weights`] binds every
//! tensor llama.cpp's `llama_model_lfm2::load_arch_tensors` requires into typed layers, checking
//! each exists with the shape and a type the engine supports, so a bad file fails at load (and
//! already when [`Lfm2Backbone`] opens it) with a [`LoadError`] naming the file and the tensor
//! or key, not deep inside a compute graph.

use std::path::{Path, PathBuf};

use crate::ggml::gguf::{GgufFile, GgufValue};

use super::super::gguf_keys as K;
pub use super::super::load_error::{LoadError, Result};
pub use super::super::tensor_names::{OUTPUT, TOKEN_EMBD};
// why: only the tests (feature `testkit`) read the final norm's name through this path.
use super::super::nn::{Attention, Linear, QkvProjection, RmsNorm, ShortConv, SwiGlu};
#[cfg_attr(not(feature = "testkit"), allow(unused_imports))]
pub use super::super::tensor_names::OUTPUT_NORM;
use super::super::weights::{describe, display_path, open_gguf, Role, VarBuilder};
use crate::ggml::{Param, RopeMode, RopeParams};

pub use super::super::load_error::LFM2_ARCH;

/// What a backbone layer mixes tokens with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LayerKind {
    /// Gated short convolution (`head_count_kv[N] == 0`).
    Conv,
    /// Grouped-query attention with per-head q/k RMSNorm.
    Attention,
}

/// LFM2 backbone hyperparameters, named as in the Hugging Face `config.json`.
#[derive(Debug, Clone, PartialEq)]
#[allow(non_snake_case)] // why: `conv_L_cache` is spelled as in the Hugging Face config
pub struct Lfm2Config {
    /// Embedding width (`lfm2.embedding_length`).
    pub hidden_size: u32,
    /// Number of layers (`lfm2.block_count`).
    pub num_hidden_layers: u32,
    /// Query heads of the attention layers (`lfm2.attention.head_count`).
    pub num_attention_heads: u32,
    /// KV heads per layer (`lfm2.attention.head_count_kv`, scalar or per-layer array); 0 marks a
    /// conv layer.
    pub num_key_value_heads: Vec<u32>,
    /// Width of one attention head: `lfm2.attention.key_length` if present, else
    /// `hidden_size / num_attention_heads` (llama.cpp's rule).
    pub head_dim: u32,
    /// SwiGLU inner width (`lfm2.feed_forward_length`; the effective, already auto-adjusted one).
    pub intermediate_size: u32,
    /// Vocabulary size: `token_embd.weight`'s second dimension.
    pub vocab_size: u32,
    /// Short-conv kernel length (`lfm2.shortconv.l_cache`).
    pub conv_L_cache: u32,
    /// RMSNorm epsilon (`lfm2.attention.layer_norm_rms_epsilon`).
    pub norm_eps: f32,
    /// RoPE base (`lfm2.rope.freq_base`).
    pub rope_theta: f32,
    /// Training context length (`lfm2.context_length`).
    pub max_position_embeddings: u32,
}

/// Reads metadata keys of one file, turning absence and bad values into [`LoadError`]s.
/// Most layers a backbone may declare (llama.cpp's `LLAMA_MAX_LAYERS`, `src/llama-hparams.h`).
pub const MAX_LAYERS: u32 = 512;

struct Keys<'a> {
    gguf: &'a GgufFile,
    file: PathBuf,
}

impl Keys<'_> {
    fn get(&self, key: &str) -> Result<&GgufValue> {
        self.gguf
            .metadata()
            .get(key)
            .ok_or_else(|| LoadError::MissingKey {
                file: self.file.clone(),
                key: key.to_owned(),
            })
    }

    fn bad(&self, key: &str, reason: impl Into<String>) -> LoadError {
        LoadError::BadValue {
            file: self.file.clone(),
            key: key.to_owned(),
            reason: reason.into(),
        }
    }

    fn to_u32(&self, key: &str, n: i128) -> Result<u32> {
        u32::try_from(n).map_err(|_| self.bad(key, format!("{n} does not fit u32")))
    }

    /// Any integer type: converters disagree on widths (u32 vs i64), so accept all of them.
    fn u32(&self, key: &str) -> Result<u32> {
        let v = self.get(key)?;
        let n = v.as_integer().ok_or_else(|| {
            self.bad(
                key,
                format!("is {}, expected an integer", v.type_description()),
            )
        })?;
        self.to_u32(key, n)
    }

    /// Like [`u32`](Self::u32), `None` when absent.
    fn u32_opt(&self, key: &str) -> Result<Option<u32>> {
        match self.gguf.metadata().get(key) {
            None => Ok(None),
            Some(_) => self.u32(key).map(Some),
        }
    }

    /// A scalar broadcast to every layer, or an integer array with one entry per layer (how
    /// llama.cpp's `get_key_or_arr` reads `head_count_kv` and friends).
    fn per_layer(&self, key: &str, n_layer: u32) -> Result<Vec<u32>> {
        let v = self.get(key)?;
        if let Some(n) = v.as_integer() {
            return Ok(vec![self.to_u32(key, n)?; n_layer as usize]);
        }
        let ints = v.as_array().and_then(|a| a.to_integers()).ok_or_else(|| {
            self.bad(
                key,
                format!(
                    "is {}, expected an integer or integer array",
                    v.type_description()
                ),
            )
        })?;
        if ints.len() != n_layer as usize {
            return Err(self.bad(
                key,
                format!(
                    "has {} entries, expected one per layer ({n_layer})",
                    ints.len()
                ),
            ));
        }
        ints.into_iter().map(|n| self.to_u32(key, n)).collect()
    }

    /// A per-layer key that the engine needs to be the same on every layer.
    fn uniform(&self, key: &str, n_layer: u32) -> Result<u32> {
        let vals = self.per_layer(key, n_layer)?;
        match vals.split_first() {
            Some((&first, rest)) if rest.iter().all(|&v| v == first) => Ok(first),
            Some(_) => Err(self.bad(key, format!("differs between layers: {vals:?}"))),
            None => Err(self.bad(key, "no layers")),
        }
    }

    /// A float stored as f32, f64 or (leniently) an integer.
    fn f32(&self, key: &str) -> Result<f32> {
        match self.get(key)? {
            GgufValue::F32(x) => Ok(*x),
            GgufValue::F64(x) => Ok(*x as f32),
            v => v.as_integer().map(|n| n as f32).ok_or_else(|| {
                self.bad(
                    key,
                    format!("is {}, expected a float", v.type_description()),
                )
            }),
        }
    }
}

impl Lfm2Config {
    /// Reads the config of an opened backbone file. Checks the architecture and that the values
    /// are consistent (heads divide the width, one KV count per layer, at least one of each is
    /// positive), but not the tensors: see [`Lfm2Tensors::validate`].
    pub fn from_gguf(gguf: &GgufFile) -> Result<Lfm2Config> {
        let keys = Keys {
            gguf,
            file: display_path(gguf),
        };
        let arch_key = K::GENERAL_ARCHITECTURE;
        let arch = keys.get(arch_key)?;
        let arch = arch
            .as_str()
            .ok_or_else(|| keys.bad(arch_key, "not a string"))?;
        if arch != LFM2_ARCH {
            return Err(LoadError::WrongArchitecture {
                file: keys.file.clone(),
                found: arch.to_owned(),
                expected: LFM2_ARCH.to_owned(),
            });
        }
        let hidden_size = keys.u32(K::LFM2_EMBEDDING_LENGTH)?;
        let num_hidden_layers = keys.u32(K::LFM2_BLOCK_COUNT)?;
        if hidden_size == 0 || num_hidden_layers == 0 {
            return Err(keys.bad(
                K::LFM2_EMBEDDING_LENGTH,
                "width and layer count must be positive",
            ));
        }
        // why: per-layer keys are broadcast to one entry per layer, so an unchecked count is an
        // allocation of the file's choosing (u32::MAX layers: 16 GiB, found by fuzz target
        // gguf); llama.cpp refuses more than LLAMA_MAX_LAYERS too.
        if num_hidden_layers > MAX_LAYERS {
            return Err(keys.bad(
                K::LFM2_BLOCK_COUNT,
                format!("is {num_hidden_layers}, above llama.cpp's limit of {MAX_LAYERS} layers"),
            ));
        }
        let num_attention_heads = keys.uniform(K::LFM2_HEAD_COUNT, num_hidden_layers)?;
        let num_key_value_heads = keys.per_layer(K::LFM2_HEAD_COUNT_KV, num_hidden_layers)?;
        let head_dim = match keys.u32_opt(K::LFM2_KEY_LENGTH)? {
            Some(d) => d,
            None => {
                // why: llama.cpp defaults n_embd_head_k to n_embd / n_head; a remainder would make
                // the q projection's width disagree with heads * head_dim.
                if num_attention_heads == 0 || hidden_size % num_attention_heads != 0 {
                    return Err(keys.bad(
                        K::LFM2_HEAD_COUNT,
                        format!("{num_attention_heads} heads do not divide width {hidden_size}"),
                    ));
                }
                hidden_size / num_attention_heads
            }
        };
        for &kv in &num_key_value_heads {
            if kv != 0 && num_attention_heads % kv != 0 {
                return Err(keys.bad(
                    K::LFM2_HEAD_COUNT_KV,
                    format!("{kv} KV heads do not divide {num_attention_heads} query heads"),
                ));
            }
        }
        let intermediate_size = keys.uniform(K::LFM2_FEED_FORWARD_LENGTH, num_hidden_layers)?;
        let conv_l_cache = keys.u32(K::LFM2_SHORTCONV_L_CACHE)?;
        let norm_eps = keys.f32(K::LFM2_RMS_EPS)?;
        let rope_theta = keys.f32(K::LFM2_ROPE_FREQ_BASE)?;
        let max_position_embeddings = keys.u32(K::LFM2_CONTEXT_LENGTH)?;

        // why: the embedding matrix is the ground truth for the vocabulary (llama.cpp sizes its
        // logits from it); fall back to the token list or `lfm2.vocab_size` only to name the
        // missing tensor later rather than a less useful missing key.
        let vocab_size = match gguf.tensor(TOKEN_EMBD) {
            Some(t) => match t.shape() {
                [_, v] => keys.to_u32(TOKEN_EMBD, i128::from(*v))?,
                found => {
                    return Err(LoadError::BadShape {
                        file: keys.file.clone(),
                        tensor: TOKEN_EMBD.to_owned(),
                        expected: vec![u64::from(hidden_size), 0],
                        found: found.to_vec(),
                    })
                }
            },
            None => {
                return Err(LoadError::MissingTensor {
                    file: keys.file.clone(),
                    tensor: TOKEN_EMBD.to_owned(),
                })
            }
        };

        Ok(Lfm2Config {
            hidden_size,
            num_hidden_layers,
            num_attention_heads,
            num_key_value_heads,
            head_dim,
            intermediate_size,
            vocab_size,
            conv_L_cache: conv_l_cache,
            norm_eps,
            rope_theta,
            max_position_embeddings,
        })
    }

    /// The kind of layer `il` (`Conv` when it has no KV heads).
    ///
    /// # Panics
    /// If `il >= num_hidden_layers`.
    pub fn layer_kind(&self, il: usize) -> LayerKind {
        if self.num_key_value_heads[il] == 0 {
            LayerKind::Conv
        } else {
            LayerKind::Attention
        }
    }

    /// The kind of every layer, in order.
    pub fn layer_kinds(&self) -> Vec<LayerKind> {
        (0..self.num_hidden_layers as usize)
            .map(|il| self.layer_kind(il))
            .collect()
    }

    /// Indices of the attention layers (those holding a KV cache).
    pub fn attention_layers(&self) -> Vec<usize> {
        (0..self.num_hidden_layers as usize)
            .filter(|&il| self.layer_kind(il) == LayerKind::Attention)
            .collect()
    }
}

/// What one backbone layer mixes tokens with, bound from `blk.N.*`.
#[derive(Debug, Clone)]
pub enum Mixer {
    /// `shortconv.{in_proj, conv, out_proj}`.
    Conv(ShortConv),
    /// `attn_{q, k, v, q_norm, k_norm, output}`: GQA with per-head q/k RMSNorm and NEOX RoPE.
    Attention(Attention),
}

/// One backbone layer: `x += mixer(RMSNorm x)`, `x += SwiGLU(RMSNorm x)`.
#[derive(Debug, Clone)]
pub struct Lfm2Layer {
    /// `blk.N.attn_norm`: the pre-mixer RMSNorm (on conv layers too).
    pub attn_norm: RmsNorm,
    /// The conv or attention block.
    pub mixer: Mixer,
    /// `blk.N.ffn_norm`: the pre-FFN RMSNorm.
    pub ffn_norm: RmsNorm,
    /// `blk.N.ffn_{gate, up, down}`.
    pub ffn: SwiGlu,
}

impl Lfm2Layer {
    /// Conv or attention.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn kind(&self) -> LayerKind {
        match self.mixer {
            Mixer::Conv(_) => LayerKind::Conv,
            Mixer::Attention(_) => LayerKind::Attention,
        }
    }
}

/// Every backbone weight as typed layers, with the shapes and types of llama.cpp's
/// `llama_model_lfm2::load_arch_tensors`: q `[hidden, hidden]` (llama.cpp uses `n_embd` for the
/// q width, i.e. heads*head_dim == hidden), k/v `[hidden, kv*head_dim]`, output
/// `[hidden, hidden]`, conv `[L, hidden]` (F32), in_proj `[hidden, 3*hidden]`; norms F32.
#[derive(Debug, Clone)]
pub struct Lfm2Weights {
    /// `token_embd.weight`, `[hidden, vocab]`.
    pub token_embd: Param,
    /// `token_embd_norm.weight`: the final norm.
    pub output_norm: RmsNorm,
    /// The text head: `output.weight` when the file has an untied one, else `token_embd`.
    pub head: Param,
    /// Per-layer blocks.
    pub layers: Vec<Lfm2Layer>,
}

impl Lfm2Weights {
    /// Binds every tensor `cfg` implies from the root of a file's name tree.
    pub fn load(vb: &VarBuilder<'_>, cfg: &Lfm2Config) -> Result<Lfm2Weights> {
        let h = cfg.hidden_size as usize;
        let ff = cfg.intermediate_size as usize;
        let hd = cfg.head_dim as usize;
        let vocab = cfg.vocab_size as usize;
        let eps = cfg.norm_eps;
        let token_embd = vb
            .pp("token_embd")
            .get("weight", &[h, vocab], Role::Matrix)?;
        let output_norm = RmsNorm::load(&vb.pp("token_embd_norm"), h, eps)?;
        let head = if vb.contains(OUTPUT) {
            vb.pp("output").get("weight", &[h, vocab], Role::Matrix)?
        } else {
            token_embd.clone()
        };
        let rope = RopeParams::new(hd, RopeMode::Neox, cfg.rope_theta);
        let layers = (0..cfg.num_hidden_layers as usize)
            .map(|il| {
                let b = vb.pp("blk").pp(il);
                let mixer = match cfg.layer_kind(il) {
                    LayerKind::Conv => {
                        let c = b.pp("shortconv");
                        Mixer::Conv(ShortConv {
                            conv: c.pp("conv").get(
                                "weight",
                                &[cfg.conv_L_cache as usize, h],
                                Role::Vector,
                            )?,
                            in_proj: Linear::load(&c.pp("in_proj"), h, 3 * h, false)?,
                            out_proj: Linear::load(&c.pp("out_proj"), h, h, false)?,
                            dim: h,
                        })
                    }
                    LayerKind::Attention => {
                        let nkv = cfg.num_key_value_heads[il] as usize;
                        Mixer::Attention(Attention {
                            q_norm: RmsNorm::load(&b.pp("attn_q_norm"), hd, eps)?,
                            k_norm: RmsNorm::load(&b.pp("attn_k_norm"), hd, eps)?,
                            qkv: QkvProjection::Separate {
                                q: Linear::load(&b.pp("attn_q"), h, h, false)?,
                                k: Linear::load(&b.pp("attn_k"), h, nkv * hd, false)?,
                                v: Linear::load(&b.pp("attn_v"), h, nkv * hd, false)?,
                            },
                            out: Linear::load(&b.pp("attn_output"), h, h, false)?,
                            n_head: cfg.num_attention_heads as usize,
                            n_kv_head: nkv,
                            head_dim: hd,
                            rope,
                        })
                    }
                };
                Ok(Lfm2Layer {
                    ffn_norm: RmsNorm::load(&b.pp("ffn_norm"), h, eps)?,
                    ffn: SwiGlu {
                        gate: Linear::load(&b.pp("ffn_gate"), h, ff, false)?,
                        down: Linear::load(&b.pp("ffn_down"), ff, h, false)?,
                        up: Linear::load(&b.pp("ffn_up"), h, ff, false)?,
                    },
                    attn_norm: RmsNorm::load(&b.pp("attn_norm"), h, eps)?,
                    mixer,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Lfm2Weights {
            token_embd,
            output_norm,
            head,
            layers,
        })
    }
}

/// A backbone file opened and checked: the GGUF and its config. Every tensor the config
/// implies was bound once ([`Lfm2Weights::load`] on the file's tensor directory), so a missing,
/// misshapen or mistyped tensor fails here, naming the file and the tensor.
#[derive(Debug)]
pub struct Lfm2Backbone {
    /// The opened (memory-mapped) file.
    pub gguf: GgufFile,
    /// Hyperparameters.
    pub config: Lfm2Config,
}

impl Lfm2Backbone {
    /// Opens `path`, reads the config and validates every tensor.
    pub fn open(path: impl AsRef<Path>) -> Result<Lfm2Backbone> {
        Lfm2Backbone::from_gguf(open_gguf(path)?)
    }

    /// Reads the config and validates every tensor of an already opened file.
    pub fn from_gguf(gguf: GgufFile) -> Result<Lfm2Backbone> {
        let config = Lfm2Config::from_gguf(&gguf)?;
        let store = describe(&gguf)?;
        Lfm2Weights::load(&VarBuilder::new(&display_path(&gguf), &store), &config)?;
        Ok(Lfm2Backbone { gguf, config })
    }

    /// The file's tensors the backbone's layers do not use, sorted (the detokenizer's output
    /// head, for one).
    pub fn unused_tensors(&self) -> Result<Vec<String>> {
        let store = describe(&self.gguf)?;
        let path = display_path(&self.gguf);
        let vb = VarBuilder::new(&path, &store);
        Lfm2Weights::load(&vb, &self.config)?;
        Ok(vb.unbound())
    }
}
