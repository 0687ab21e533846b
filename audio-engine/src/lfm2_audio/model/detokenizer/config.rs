//! The vocoder file (`vocoder-<model>-<q>.gguf`): depthformer, audio-code embeddings and the
//! detokenizer's code embedding and ISTFT window. [`VocoderConfig::from_gguf`] reads every
//! dimension from the two metadata keys and the tensor shapes (never from constants) and checks
//! each tensor's presence, shape (ggml order) and type, so a bad file fails at load naming the
//! file and tensor.

use std::path::PathBuf;

use crate::ggml::gguf::{GgufFile, TensorInfo};
use crate::ggml::GgmlType;

use super::super::gguf_keys as K;
use super::super::load_error::{LoadError, Result};
use super::super::weights::display_path;

/// `depthformer_n_layer`.
pub const KEY_N_LAYER: &str = K::DEPTHFORMER_N_LAYER;
/// `depthformer_n_embd`.
pub const KEY_N_EMBD: &str = K::DEPTHFORMER_N_EMBD;
/// Optional `interleaved_n_text`.
pub const KEY_INTERLEAVED_N_TEXT: &str = K::INTERLEAVED_N_TEXT;
/// Optional `interleaved_n_audio`.
pub const KEY_INTERLEAVED_N_AUDIO: &str = K::INTERLEAVED_N_AUDIO;

/// `depth_linear.weight`: backbone hidden state to one input per codebook.
pub const DEPTH_LINEAR: &str = "depth_linear.weight";
/// `depth_linear.bias`.
pub const DEPTH_LINEAR_BIAS: &str = "depth_linear.bias";
/// `audio_embedding.embedding.weight`: the audio-code embedding fed back to the backbone.
pub const AUDIO_EMBEDDING: &str = "audio_embedding.embedding.weight";
/// `emb.emb.weight`: the detokenizer's code embedding.
pub const DETOK_EMBEDDING: &str = "emb.emb.weight";
/// `istft.window`: the detokenizer's synthesis window.
pub const ISTFT_WINDOW: &str = "istft.window";

/// Names of depthformer layer `il`'s tensors.
pub fn layer_tensor(il: usize, what: &str) -> String {
    format!("depthformer.layers.{il}.{what}")
}

/// Name of codebook `cb`'s depth-embedding tensor `what` (`embedding.weight`, ...).
pub fn depth_embedding_tensor(cb: usize, what: &str) -> String {
    format!("depth_embeddings.{cb}.{what}")
}

/// The vocoder's dimensions, all read from the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VocoderConfig {
    /// Depthformer layers (`depthformer_n_layer`).
    pub n_layer: u32,
    /// Depthformer width (`depthformer_n_embd`).
    pub n_embd: u32,
    /// Width of one depthformer attention head (`q_layernorm`'s length).
    pub head_dim: u32,
    /// Query heads: `n_embd / head_dim`.
    pub n_head: u32,
    /// KV heads: from the fused qkv projection's output width.
    pub n_head_kv: u32,
    /// Depthformer SwiGLU width.
    pub n_ff: u32,
    /// Codebooks (number of `depth_embeddings.N`).
    pub codebooks: u32,
    /// Entries per codebook, end-of-audio included (2049 in the published model).
    pub audio_vocab: u32,
    /// Backbone width (`depth_linear`'s input).
    pub backbone_embd: u32,
    /// Detokenizer code-embedding width (`emb.emb.weight`'s rows).
    pub detok_embd: u32,
    /// Detokenizer codes per codebook (`emb.emb.weight` entries / codebooks).
    pub detok_codes: u32,
    /// ISTFT window length (`istft.window`).
    pub n_fft: u32,
    /// `interleaved_n_text`, if present.
    pub interleaved_n_text: Option<u32>,
    /// `interleaved_n_audio`, if present.
    pub interleaved_n_audio: Option<u32>,
}

/// Types the engine reads a matrix in.
fn matrix_type_ok(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::F32
            | GgmlType::F16
            | GgmlType::BF16
            | GgmlType::Q8_0
            | GgmlType::Q4_0
            | GgmlType::Q6_K
    )
}

struct Check<'a> {
    gguf: &'a GgufFile,
    file: PathBuf,
}

impl<'a> Check<'a> {
    fn tensor(&self, name: &str) -> Result<&'a TensorInfo> {
        self.gguf
            .tensor(name)
            .ok_or_else(|| LoadError::MissingTensor {
                file: self.file.clone(),
                tensor: name.to_owned(),
            })
    }

    fn bad_shape(&self, name: &str, expected: Vec<u64>, t: &TensorInfo) -> LoadError {
        LoadError::BadShape {
            file: self.file.clone(),
            tensor: name.to_owned(),
            expected,
            found: t.shape().to_vec(),
        }
    }

    /// Checks `name` exists with `shape` and a type allowed for a matrix (`f32_only`: F32).
    fn expect(&self, name: &str, shape: &[u64], f32_only: bool) -> Result<&'a TensorInfo> {
        let t = self.tensor(name)?;
        if t.shape() != shape {
            return Err(self.bad_shape(name, shape.to_vec(), t));
        }
        let ok = if f32_only {
            t.ggml_type() == GgmlType::F32
        } else {
            matrix_type_ok(t.ggml_type())
        };
        if !ok {
            return Err(LoadError::BadType {
                file: self.file.clone(),
                tensor: name.to_owned(),
                found: t.ggml_type(),
            });
        }
        Ok(t)
    }

    /// A 2-D tensor's shape, any dims.
    fn dims2(&self, name: &str) -> Result<(u64, u64)> {
        let t = self.tensor(name)?;
        match t.shape() {
            [a, b] => Ok((*a, *b)),
            _ => Err(self.bad_shape(name, vec![0, 0], t)),
        }
    }

    fn key_u32(&self, key: &str, required: bool) -> Result<Option<u32>> {
        let Some(v) = self.gguf.metadata().get(key) else {
            return if required {
                Err(LoadError::MissingKey {
                    file: self.file.clone(),
                    key: key.to_owned(),
                })
            } else {
                Ok(None)
            };
        };
        let n = v.as_integer().and_then(|n| u32::try_from(n).ok());
        match n {
            Some(n) if n > 0 => Ok(Some(n)),
            _ => Err(LoadError::BadValue {
                file: self.file.clone(),
                key: key.to_owned(),
                reason: format!("is {}, expected a positive integer", v.type_description()),
            }),
        }
    }
}

fn to_u32(c: &Check<'_>, name: &str, n: u64) -> Result<u32> {
    u32::try_from(n).map_err(|_| LoadError::BadValue {
        file: c.file.clone(),
        key: name.to_owned(),
        reason: format!("dimension {n} does not fit u32"),
    })
}

impl VocoderConfig {
    /// Reads the dimensions of an opened vocoder file and validates every tensor.
    pub fn from_gguf(gguf: &GgufFile) -> Result<VocoderConfig> {
        let c = Check {
            gguf,
            file: display_path(gguf),
        };
        let n_layer = c.key_u32(KEY_N_LAYER, true)?.unwrap_or(0);
        let n_embd = c.key_u32(KEY_N_EMBD, true)?.unwrap_or(0);
        let d = u64::from(n_embd);

        // Depthformer layer 0 fixes head width, KV heads and FFN width; every layer must match.
        let qn = layer_tensor(0, "operator.attention.q_layernorm.weight");
        let head_dim = match c.tensor(&qn)?.shape() {
            [hd] if *hd > 0 && d % *hd == 0 => *hd,
            _ => return Err(c.bad_shape(&qn, vec![0], c.tensor(&qn)?)),
        };
        let qkv0 = layer_tensor(0, "operator.qkv_proj.weight");
        let (qkv_in, qkv_out) = c.dims2(&qkv0)?;
        let kv_width = qkv_out
            .checked_sub(d)
            .filter(|w| w % (2 * head_dim) == 0 && *w > 0);
        let Some(kv_width) = kv_width.filter(|_| qkv_in == d) else {
            return Err(c.bad_shape(&qkv0, vec![d, d + 2 * head_dim], c.tensor(&qkv0)?));
        };
        let n_head_kv = kv_width / 2 / head_dim;
        let (_, n_ff) = c.dims2(&layer_tensor(0, "feed_forward.w1.weight"))?;
        for il in 0..n_layer as usize {
            let l = |s: &str| layer_tensor(il, s);
            c.expect(&l("operator.qkv_proj.weight"), &[d, qkv_out], false)?;
            c.expect(&l("operator.out_proj.weight"), &[d, d], false)?;
            c.expect(
                &l("operator.attention.q_layernorm.weight"),
                &[head_dim],
                true,
            )?;
            c.expect(
                &l("operator.attention.k_layernorm.weight"),
                &[head_dim],
                true,
            )?;
            c.expect(&l("feed_forward.w1.weight"), &[d, n_ff], false)?;
            c.expect(&l("feed_forward.w3.weight"), &[d, n_ff], false)?;
            c.expect(&l("feed_forward.w2.weight"), &[n_ff, d], false)?;
            c.expect(&l("operator_norm.weight"), &[d], true)?;
            c.expect(&l("ffn_norm.weight"), &[d], true)?;
        }
        // why: a layer beyond the declared count means the key and the tensors disagree.
        let extra = layer_tensor(n_layer as usize, "operator.qkv_proj.weight");
        if gguf.tensor(&extra).is_some() {
            return Err(LoadError::BadValue {
                file: c.file.clone(),
                key: KEY_N_LAYER.to_owned(),
                reason: format!("{n_layer} layers declared but '{extra}' exists"),
            });
        }

        // Codebooks: depth_embeddings.0.. until one is missing; depth_linear must feed them all.
        let mut codebooks = 0usize;
        while gguf
            .tensor(&depth_embedding_tensor(codebooks, "embedding.weight"))
            .is_some()
        {
            codebooks += 1;
        }
        if codebooks == 0 {
            c.tensor(&depth_embedding_tensor(0, "embedding.weight"))?;
        }
        let (_, audio_vocab) = c.dims2(&depth_embedding_tensor(0, "embedding.weight"))?;
        for cb in 0..codebooks {
            let e = |s: &str| depth_embedding_tensor(cb, s);
            c.expect(&e("embedding.weight"), &[d, audio_vocab], false)?;
            c.expect(&e("embedding_norm.weight"), &[d], true)?;
            c.expect(&e("to_logits.weight"), &[d, audio_vocab], false)?;
        }
        let cbs = codebooks as u64;
        let (backbone_embd, _) = c.dims2(DEPTH_LINEAR)?;
        c.expect(DEPTH_LINEAR, &[backbone_embd, cbs * d], false)?;
        c.expect(DEPTH_LINEAR_BIAS, &[cbs * d], true)?;
        c.expect(AUDIO_EMBEDDING, &[backbone_embd, cbs * audio_vocab], false)?;
        for (name, shape, f32_only) in [
            (
                "audio_embedding.embedding_norm.weight",
                vec![backbone_embd],
                true,
            ),
            (
                "audio_embedding.to_logits.weight",
                vec![backbone_embd, cbs * audio_vocab],
                false,
            ),
        ] {
            if gguf.tensor(name).is_some() {
                c.expect(name, &shape, f32_only)?;
            }
        }
        let (detok_embd, detok_rows) = c.dims2(DETOK_EMBEDDING)?;
        if detok_rows % cbs != 0 {
            return Err(c.bad_shape(
                DETOK_EMBEDDING,
                vec![detok_embd, cbs * (detok_rows / cbs).max(1)],
                c.tensor(DETOK_EMBEDDING)?,
            ));
        }
        c.expect(DETOK_EMBEDDING, &[detok_embd, detok_rows], false)?;
        let n_fft = match c.tensor(ISTFT_WINDOW)?.shape() {
            [n] if *n > 0 => *n,
            _ => return Err(c.bad_shape(ISTFT_WINDOW, vec![0], c.tensor(ISTFT_WINDOW)?)),
        };
        c.expect(ISTFT_WINDOW, &[n_fft], true)?;

        Ok(VocoderConfig {
            n_layer,
            n_embd,
            head_dim: to_u32(&c, &qn, head_dim)?,
            n_head: to_u32(&c, &qn, d / head_dim)?,
            n_head_kv: to_u32(&c, &qkv0, n_head_kv)?,
            n_ff: to_u32(&c, "feed_forward.w1.weight", n_ff)?,
            codebooks: to_u32(&c, DEPTH_LINEAR, cbs)?,
            audio_vocab: to_u32(&c, AUDIO_EMBEDDING, audio_vocab)?,
            backbone_embd: to_u32(&c, DEPTH_LINEAR, backbone_embd)?,
            detok_embd: to_u32(&c, DETOK_EMBEDDING, detok_embd)?,
            detok_codes: to_u32(&c, DETOK_EMBEDDING, detok_rows / cbs)?,
            n_fft: to_u32(&c, ISTFT_WINDOW, n_fft)?,
            interleaved_n_text: c.key_u32(KEY_INTERLEAVED_N_TEXT, false)?,
            interleaved_n_audio: c.key_u32(KEY_INTERLEAVED_N_AUDIO, false)?,
        })
    }
}
