//! The LFM2 backbone's hyperparameters and tensor layout, read from `<model>-<q>.gguf`.
//!
//! [`Lfm2Config`] mirrors the Hugging Face `config.json` field names but is derived only from the
//! GGUF metadata (llama.cpp's `lfm2.*` keys) and tensor shapes, never from constants, so the same
//! code reads the 1.2B backbone, the detokenizer and any test model. [`Lfm2Tensors`] names every
//! tensor llama.cpp's `llama_model_lfm2::load_arch_tensors` requires, and
//! [`Lfm2Tensors::validate`] checks each exists with the shape and a type the engine supports, so
//! a bad file fails at load with a [`LoadError`] naming the file and the tensor or key, not deep
//! inside a compute graph.

use std::path::{Path, PathBuf};

use crate::ggml::gguf::{GgufFile, GgufValue, TensorInfo};

use super::gguf_keys as K;
pub use super::load_error::{LoadError, Result};
use super::weights::{display_path, open_gguf};
use crate::ggml::GgmlType;

pub use super::load_error::LFM2_ARCH;

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

/// Name of the token embedding (also the tied output head when `output.weight` is absent).
pub const TOKEN_EMBD: &str = "token_embd.weight";
/// Name of the final RMSNorm (llama.cpp's converter stores LFM2's final norm under this name).
pub const OUTPUT_NORM: &str = "token_embd_norm.weight";
/// Name of the optional untied output head.
pub const OUTPUT: &str = "output.weight";

/// The token-mixing tensors of one layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MixerTensors {
    /// A gated short-conv layer.
    Conv {
        /// `blk.N.shortconv.in_proj.weight`, [hidden, 3*hidden]: B, C and x.
        in_proj: String,
        /// `blk.N.shortconv.conv.weight`, [L, hidden]: the depthwise kernel.
        conv: String,
        /// `blk.N.shortconv.out_proj.weight`, [hidden, hidden].
        out_proj: String,
    },
    /// An attention layer.
    Attention {
        /// `blk.N.attn_q.weight`, [hidden, heads*head_dim].
        q: String,
        /// `blk.N.attn_k.weight`, [hidden, kv_heads*head_dim].
        k: String,
        /// `blk.N.attn_v.weight`, [hidden, kv_heads*head_dim].
        v: String,
        /// `blk.N.attn_output.weight`, [heads*head_dim, hidden].
        output: String,
        /// `blk.N.attn_q_norm.weight`, [head_dim].
        q_norm: String,
        /// `blk.N.attn_k_norm.weight`, [head_dim].
        k_norm: String,
    },
}

/// The llama.cpp tensor names of one backbone layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerTensors {
    /// Layer index `N`.
    pub index: usize,
    /// Conv or attention.
    pub kind: LayerKind,
    /// `blk.N.attn_norm.weight`: the pre-mixer RMSNorm (on conv layers too).
    pub attn_norm: String,
    /// `blk.N.ffn_norm.weight`: the pre-FFN RMSNorm.
    pub ffn_norm: String,
    /// `blk.N.ffn_gate.weight`, [hidden, ff].
    pub ffn_gate: String,
    /// `blk.N.ffn_up.weight`, [hidden, ff].
    pub ffn_up: String,
    /// `blk.N.ffn_down.weight`, [ff, hidden].
    pub ffn_down: String,
    /// The conv or attention tensors.
    pub mixer: MixerTensors,
}

/// What a tensor is, which decides the types it may be stored in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorRole {
    /// A matrix used in a matmul or row lookup: F32, F16, Q8_0, Q4_0 or Q6_K.
    Matrix,
    /// A norm weight or conv kernel: F32 only (every published quantization keeps them F32, and
    /// the element-wise ops consuming them are F32).
    F32Only,
}

impl TensorRole {
    /// Whether a tensor in this role may be stored as `ty`.
    pub fn allows(self, ty: GgmlType) -> bool {
        match self {
            TensorRole::Matrix => matches!(
                ty,
                GgmlType::F32 | GgmlType::F16 | GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q6_K
            ),
            TensorRole::F32Only => ty == GgmlType::F32,
        }
    }
}

/// One tensor the config requires: name, shape (ggml order) and role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedTensor {
    /// The llama.cpp name.
    pub name: String,
    /// The shape in ggml order (`shape[0]` fastest).
    pub shape: Vec<u64>,
    /// Which types it may have.
    pub role: TensorRole,
}

/// Every backbone tensor name, as llama.cpp's LFM2 loader expects them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lfm2Tensors {
    /// `token_embd.weight`, [hidden, vocab].
    pub token_embd: String,
    /// `token_embd_norm.weight`, [hidden]: the final norm.
    pub output_norm: String,
    /// `output.weight`, [hidden, vocab], when the file has an untied head (`None`: tied).
    pub output: Option<String>,
    /// Per-layer names.
    pub layers: Vec<LayerTensors>,
}

impl Lfm2Tensors {
    /// The names `cfg` implies; `has_output` says whether the file stores an untied head.
    pub fn new(cfg: &Lfm2Config, has_output: bool) -> Lfm2Tensors {
        let layers = (0..cfg.num_hidden_layers as usize)
            .map(|i| {
                let n = |s: &str| format!("blk.{i}.{s}.weight");
                let kind = cfg.layer_kind(i);
                let mixer = match kind {
                    LayerKind::Conv => MixerTensors::Conv {
                        in_proj: n("shortconv.in_proj"),
                        conv: n("shortconv.conv"),
                        out_proj: n("shortconv.out_proj"),
                    },
                    LayerKind::Attention => MixerTensors::Attention {
                        q: n("attn_q"),
                        k: n("attn_k"),
                        v: n("attn_v"),
                        output: n("attn_output"),
                        q_norm: n("attn_q_norm"),
                        k_norm: n("attn_k_norm"),
                    },
                };
                LayerTensors {
                    index: i,
                    kind,
                    attn_norm: n("attn_norm"),
                    ffn_norm: n("ffn_norm"),
                    ffn_gate: n("ffn_gate"),
                    ffn_up: n("ffn_up"),
                    ffn_down: n("ffn_down"),
                    mixer,
                }
            })
            .collect();
        Lfm2Tensors {
            token_embd: TOKEN_EMBD.to_owned(),
            output_norm: OUTPUT_NORM.to_owned(),
            output: has_output.then(|| OUTPUT.to_owned()),
            layers,
        }
    }

    /// Every tensor with its expected shape and role, in file order of llama.cpp's loader.
    ///
    /// Shapes follow `llama_model_lfm2::load_arch_tensors`: q [hidden, hidden] (llama.cpp uses
    /// `n_embd` for the q width, i.e. heads*head_dim == hidden), k/v [hidden, kv*head_dim],
    /// output [hidden, hidden], conv [L, hidden], in_proj [hidden, 3*hidden].
    pub fn expected(&self, cfg: &Lfm2Config) -> Vec<ExpectedTensor> {
        use TensorRole::{F32Only, Matrix};
        let h = u64::from(cfg.hidden_size);
        let ff = u64::from(cfg.intermediate_size);
        let hd = u64::from(cfg.head_dim);
        let vocab = u64::from(cfg.vocab_size);
        let mut out = Vec::new();
        let mut push = |name: &String, shape: Vec<u64>, role| {
            out.push(ExpectedTensor {
                name: name.clone(),
                shape,
                role,
            })
        };
        push(&self.token_embd, vec![h, vocab], Matrix);
        push(&self.output_norm, vec![h], F32Only);
        if let Some(o) = &self.output {
            push(o, vec![h, vocab], Matrix);
        }
        for l in &self.layers {
            push(&l.ffn_norm, vec![h], F32Only);
            push(&l.ffn_gate, vec![h, ff], Matrix);
            push(&l.ffn_down, vec![ff, h], Matrix);
            push(&l.ffn_up, vec![h, ff], Matrix);
            push(&l.attn_norm, vec![h], F32Only);
            match &l.mixer {
                MixerTensors::Attention {
                    q,
                    k,
                    v,
                    output,
                    q_norm,
                    k_norm,
                } => {
                    let kv = u64::from(cfg.num_key_value_heads[l.index]) * hd;
                    push(q_norm, vec![hd], F32Only);
                    push(k_norm, vec![hd], F32Only);
                    push(q, vec![h, h], Matrix);
                    push(k, vec![h, kv], Matrix);
                    push(v, vec![h, kv], Matrix);
                    push(output, vec![h, h], Matrix);
                }
                MixerTensors::Conv {
                    in_proj,
                    conv,
                    out_proj,
                } => {
                    push(conv, vec![u64::from(cfg.conv_L_cache), h], F32Only);
                    push(in_proj, vec![h, 3 * h], Matrix);
                    push(out_proj, vec![h, h], Matrix);
                }
            }
        }
        out
    }

    /// Builds the names for `cfg` and checks every expected tensor of `gguf` exists with the
    /// expected shape and an allowed type. Returns the names on success.
    pub fn validate(gguf: &GgufFile, cfg: &Lfm2Config) -> Result<Lfm2Tensors> {
        let file = display_path(gguf);
        let names = Lfm2Tensors::new(cfg, gguf.tensor(OUTPUT).is_some());
        for e in names.expected(cfg) {
            let t = gguf
                .tensor(&e.name)
                .ok_or_else(|| LoadError::MissingTensor {
                    file: file.clone(),
                    tensor: e.name.clone(),
                })?;
            if !same_shape(t, &e.shape) {
                return Err(LoadError::BadShape {
                    file,
                    tensor: e.name,
                    expected: e.shape,
                    found: t.shape().to_vec(),
                });
            }
            if !e.role.allows(t.ggml_type()) {
                return Err(LoadError::BadType {
                    file,
                    tensor: e.name,
                    found: t.ggml_type(),
                });
            }
        }
        Ok(names)
    }
}

/// Shapes compared as ggml does: padded to 4 dimensions with trailing 1s.
fn same_shape(t: &TensorInfo, expected: &[u64]) -> bool {
    let pad = |s: &[u64]| {
        let mut p = [1u64; 4];
        for (d, v) in p.iter_mut().zip(s) {
            *d = *v;
        }
        (s.len() <= 4).then_some(p)
    };
    matches!((pad(t.shape()), pad(expected)), (Some(a), Some(b)) if a == b)
}

/// A backbone file opened and checked: the GGUF, its config and its tensor names.
#[derive(Debug)]
pub struct Lfm2Backbone {
    /// The opened (memory-mapped) file.
    pub gguf: GgufFile,
    /// Hyperparameters.
    pub config: Lfm2Config,
    /// Validated tensor names.
    pub tensors: Lfm2Tensors,
}

impl Lfm2Backbone {
    /// Opens `path`, reads the config and validates every tensor.
    pub fn open(path: impl AsRef<Path>) -> Result<Lfm2Backbone> {
        Lfm2Backbone::from_gguf(open_gguf(path)?)
    }

    /// Reads the config and validates every tensor of an already opened file.
    pub fn from_gguf(gguf: GgufFile) -> Result<Lfm2Backbone> {
        let config = Lfm2Config::from_gguf(&gguf)?;
        let tensors = Lfm2Tensors::validate(&gguf, &config)?;
        Ok(Lfm2Backbone {
            gguf,
            config,
            tensors,
        })
    }
}
