//! Deterministic tiny LFM2-Audio checkpoints in the Hugging Face layout that liquid-audio 1.3.0
//! loads (`LFM2AudioModel.from_pretrained`, `LFM2AudioProcessor.from_pretrained` and
//! `LFM2AudioDetokenizer`), for tests that compare the engine with the PyTorch reference.
//!
//! A checkpoint directory holds:
//! - `config.json`: the `LFM2AudioConfig` fields (`architectures`, `codebooks`,
//!   `tie_audio_embeddings`, `semantic_codebook_factor`, `codebook_weight`,
//!   `interleaved_n_text`, `interleaved_n_audio`) and the sections `preprocessor`, `encoder`
//!   (all `ConformerEncoderConfig` fields), `lfm` (`Lfm2Config`) and `depthformer`
//!   (`layers`, `dim`, `tie`). liquid-audio builds its dataclasses from exactly these keys, so
//!   none may be added.
//! - `model.safetensors`: every tensor of the published checkpoint's main state dict, at the
//!   tiny dims (names as in `lfm2-audio-hf-state-dict.txt`), F32 except `codebook_offsets` and
//!   the BatchNorm `num_batches_tracked` (I64).
//! - `audio_detokenizer/config.json` (an `Lfm2Config` with `layer_types` using llama.cpp's
//!   `sliding_attention` and `sliding_window`) and `audio_detokenizer/model.safetensors`.
//! - `tokenizer.json`, `tokenizer_config.json`, `special_tokens_map.json`: a byte-level BPE
//!   with LFM2's special-token ids (see [`bpe`]).
//!
//! Values come from SplitMix64 streams keyed by seed and tensor name, turned into floats with
//! exactly rounded IEEE operations only, so a seed gives the same bytes on every platform.
//! Scales keep activations O(1) through every layer, and the embedding / logit-head scales are
//! large enough that greedy picks have clear margins (small float differences between
//! implementations should not flip a token).

pub mod bpe;
mod rng;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::safetensors::{SafeTensorsError, SafeTensorsWriter};
use rng::{cos_two_pi_frac, tensor_stream, SplitMix64};

/// The seed the committed reference fixture (`tests/fixtures/lfm2_tiny`) was made with.
pub const DEFAULT_SEED: u64 = 11;

/// Number of samples of [`tiny_input_signal`] (1.5 s at 16 kHz).
pub const INPUT_SIGNAL_SAMPLES: usize = 24_000;

/// Why a synthetic checkpoint could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SyntheticError {
    /// Creating a directory or writing a JSON file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// Writing a safetensors file failed.
    #[error(transparent)]
    SafeTensors(#[from] SafeTensorsError),
    /// The configuration is inconsistent.
    #[error("invalid tiny config: {0}")]
    InvalidConfig(String),
}

/// Result of checkpoint generation.
pub type Result<T> = std::result::Result<T, SyntheticError>;

/// Dimensions of a synthetic checkpoint. [`TinyConfig::default`] is the tiny model the tests
/// use; the fields are public so a test can derive variants.
///
/// Dims that liquid-audio hard-codes keep their real values: 128 mel bins, 8 codebooks of 2049
/// entries (2048 codes + end-of-audio), the depthformer's 32 query / 8 KV heads, the
/// detokenizer's width 512 and its 1282-wide head (n_fft 1280), and 2048 codes per codebook in
/// the detokenizer's code embedding.
#[derive(Debug, Clone, PartialEq)]
pub struct TinyConfig {
    /// Mel bins of the features (fixed at 128 by liquid-audio).
    pub n_mels: usize,
    /// FastConformer width.
    pub enc_d_model: usize,
    /// FastConformer layers.
    pub enc_layers: usize,
    /// FastConformer attention heads.
    pub enc_heads: usize,
    /// FastConformer feed-forward expansion (ff width = `enc_ff_expansion * enc_d_model`).
    pub enc_ff_expansion: usize,
    /// Depthwise convolution kernel of the conformer conv module.
    pub enc_conv_kernel: usize,
    /// Channels of the `dw_striding` subsampling convolutions.
    pub enc_subsampling_channels: usize,
    /// Text vocabulary of the backbone (specials + 256 bytes + learned merges).
    pub vocab_size: usize,
    /// Backbone width.
    pub hidden: usize,
    /// Backbone layers.
    pub n_layers: usize,
    /// Indices of the backbone's attention layers; the others are gated short-conv layers.
    pub attn_layers: Vec<usize>,
    /// Backbone query heads.
    pub n_heads: usize,
    /// Backbone KV heads (GQA).
    pub n_kv_heads: usize,
    /// `intermediate_size` written to the `lfm` config; with `block_auto_adjust_ff_dim` the
    /// FFN width is [`TinyConfig::backbone_ff`].
    pub intermediate_size: usize,
    /// Short-conv kernel (`conv_L_cache`).
    pub conv_l_cache: usize,
    /// Backbone RoPE theta.
    pub rope_theta: f64,
    /// RMSNorm epsilon of the backbone, depthformer and detokenizer.
    pub norm_eps: f64,
    /// Audio codebooks (8; liquid-audio's detokenizer hard-codes 8).
    pub codebooks: usize,
    /// Entries per codebook including end-of-audio (2049, hard-coded in liquid-audio).
    pub audio_vocab: usize,
    /// Depthformer layers.
    pub depth_layers: usize,
    /// Depthformer width (32 query heads and 8 KV heads are hard-coded, so head_dim = dim/32).
    pub depth_dim: usize,
    /// Text steps per interleaved block.
    pub interleaved_n_text: usize,
    /// Audio frames per interleaved block.
    pub interleaved_n_audio: usize,
    /// Detokenizer width (512, hard-coded in liquid-audio).
    pub detok_hidden: usize,
    /// Detokenizer layers.
    pub detok_layers: usize,
    /// Indices of the detokenizer's (sliding-window) attention layers.
    pub detok_attn_layers: Vec<usize>,
    /// Detokenizer query heads.
    pub detok_heads: usize,
    /// Detokenizer KV heads.
    pub detok_kv_heads: usize,
    /// Detokenizer FFN width (written with `block_auto_adjust_ff_dim: false`).
    pub detok_ff: usize,
    /// Detokenizer (unused) token-embedding rows.
    pub detok_vocab: usize,
    /// Detokenizer causal sliding window.
    pub detok_sliding_window: usize,
    /// Detokenizer RoPE theta.
    pub detok_rope_theta: f64,
    /// ISTFT size of the detokenizer head (1280; the head is `n_fft + 2` wide).
    pub n_fft: usize,
}

impl Default for TinyConfig {
    fn default() -> TinyConfig {
        TinyConfig {
            n_mels: 128,
            enc_d_model: 64,
            enc_layers: 2,
            enc_heads: 4,
            enc_ff_expansion: 4,
            enc_conv_kernel: 9,
            enc_subsampling_channels: 32,
            vocab_size: 640,
            hidden: 128,
            n_layers: 4,
            attn_layers: vec![1, 3],
            n_heads: 4,
            n_kv_heads: 2,
            intermediate_size: 384,
            conv_l_cache: 3,
            rope_theta: 1_000_000.0,
            norm_eps: 1e-5,
            codebooks: 8,
            audio_vocab: 2049,
            depth_layers: 2,
            // 128 rather than 64: head_dim 4 has two rotary pairs, so interleaved (GPT-J) and
            // rotate-half (NEOX) RoPE give different results; head_dim 2 could not tell them apart.
            depth_dim: 128,
            interleaved_n_text: 6,
            interleaved_n_audio: 12,
            detok_hidden: 512,
            detok_layers: 2,
            detok_attn_layers: vec![1],
            detok_heads: 8,
            detok_kv_heads: 4,
            detok_ff: 256,
            detok_vocab: 64,
            detok_sliding_window: 30,
            detok_rope_theta: 10_000.0,
            n_fft: 1280,
        }
    }
}

impl TinyConfig {
    /// Backbone head dim.
    pub fn head_dim(&self) -> usize {
        self.hidden / self.n_heads
    }

    /// Backbone FFN width: LFM2's `block_auto_adjust_ff_dim` rule (2/3 of
    /// `intermediate_size`, rounded up to a multiple of 256).
    pub fn backbone_ff(&self) -> usize {
        let ff = 2 * self.intermediate_size / 3;
        256 * ff.div_ceil(256)
    }

    /// Depthformer query heads (hard-coded in liquid-audio).
    pub fn depth_heads(&self) -> usize {
        32
    }

    /// Depthformer KV heads (hard-coded in liquid-audio).
    pub fn depth_kv_heads(&self) -> usize {
        8
    }

    /// Depthformer head dim.
    pub fn depth_head_dim(&self) -> usize {
        self.depth_dim / self.depth_heads()
    }

    /// Depthformer FFN width: liquid-audio's `GLU` rule for `ff_dim = 4 * dim` (2/3 of it,
    /// rounded up to a multiple of 256).
    pub fn depth_ff(&self) -> usize {
        let ff = 2 * (4 * self.depth_dim) / 3;
        256 * ff.div_ceil(256)
    }

    /// Conformer FFN width.
    pub fn enc_ff(&self) -> usize {
        self.enc_ff_expansion * self.enc_d_model
    }

    /// Input width of `conformer.pre_encode.out`: channels x mel bins / 8.
    pub fn pre_encode_out_in(&self) -> usize {
        self.enc_subsampling_channels * self.n_mels.div_ceil(2).div_ceil(2).div_ceil(2)
    }

    /// Whether backbone layer `i` is an attention layer.
    pub fn is_attn(&self, i: usize) -> bool {
        self.attn_layers.contains(&i)
    }

    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(SyntheticError::InvalidConfig(m));
        if self.n_mels != 128 {
            return bad(format!("n_mels {} (liquid-audio needs 128)", self.n_mels));
        }
        if self.hidden % self.n_heads != 0 || self.n_heads % self.n_kv_heads != 0 {
            return bad("backbone heads do not divide".into());
        }
        if self.enc_d_model % self.enc_heads != 0 {
            return bad("encoder heads do not divide d_model".into());
        }
        if self.depth_dim % self.depth_heads() != 0 || self.depth_head_dim() % 2 != 0 {
            return bad(format!(
                "depth_dim {} is not a multiple of 64",
                self.depth_dim
            ));
        }
        if self.detok_hidden != 512 || self.codebooks != 8 || self.audio_vocab != 2049 {
            return bad("detok_hidden, codebooks and audio_vocab are hard-coded".into());
        }
        if self.vocab_size < bpe::BYTE_BASE + 256 + 32 {
            return bad(format!("vocab_size {} too small", self.vocab_size));
        }
        if self.attn_layers.iter().any(|&i| i >= self.n_layers)
            || self
                .detok_attn_layers
                .iter()
                .any(|&i| i >= self.detok_layers)
        {
            return bad("attention layer index out of range".into());
        }
        Ok(())
    }

    fn layer_types(n: usize, attn: &[usize], attn_name: &str) -> Vec<&'static str> {
        (0..n)
            .map(|i| {
                if attn.contains(&i) {
                    if attn_name == "sliding_attention" {
                        "sliding_attention"
                    } else {
                        "full_attention"
                    }
                } else {
                    "conv"
                }
            })
            .collect()
    }

    /// The top-level `config.json`.
    pub fn config_json(&self) -> Value {
        json!({
            "architectures": ["LFM2AudioModel"],
            "codebooks": self.codebooks,
            "tie_audio_embeddings": false,
            // "linear" gives exact loss weights [100, 1, ...] without exp/ln (they are unused at
            // inference but are a buffer of the state dict).
            "semantic_codebook_factor": 100,
            "codebook_weight": "linear",
            "interleaved_n_text": self.interleaved_n_text,
            "interleaved_n_audio": self.interleaved_n_audio,
            "preprocessor": {
                "sample_rate": 16000,
                "normalize": "per_feature",
                "window_size": 0.025,
                "window_stride": 0.01,
                "window": "hann",
                "features": self.n_mels,
                "n_fft": 512,
                "log": true,
                "frame_splicing": 1,
                "dither": 1e-5,
                "pad_to": 0,
                "pad_value": 0.0
            },
            "encoder": {
                "feat_in": self.n_mels,
                "feat_out": -1,
                "n_layers": self.enc_layers,
                "d_model": self.enc_d_model,
                "subsampling": "dw_striding",
                "subsampling_factor": 8,
                "subsampling_conv_channels": self.enc_subsampling_channels,
                "causal_downsampling": false,
                "reduction": null,
                "reduction_position": null,
                "reduction_factor": 1,
                "ff_expansion_factor": self.enc_ff_expansion,
                "self_attention_model": "rel_pos",
                "n_heads": self.enc_heads,
                "att_context_size": [-1, -1],
                "xscaling": false,
                "untie_biases": true,
                "pos_emb_max_len": 5000,
                "conv_kernel_size": self.enc_conv_kernel,
                "conv_norm_type": "batch_norm",
                "conv_context_size": null,
                "dropout": 0.1,
                "dropout_pre_encoder": 0.1,
                "dropout_emb": 0.0,
                "dropout_att": 0.1
            },
            "lfm": {
                "vocab_size": self.vocab_size,
                "hidden_size": self.hidden,
                "intermediate_size": self.intermediate_size,
                "num_hidden_layers": self.n_layers,
                "num_attention_heads": self.n_heads,
                "num_key_value_heads": self.n_kv_heads,
                "max_position_embeddings": 128000,
                "norm_eps": self.norm_eps,
                "rope_theta": self.rope_theta,
                "conv_bias": false,
                "conv_L_cache": self.conv_l_cache,
                "block_multiple_of": 256,
                "block_ffn_dim_multiplier": 1.0,
                "block_auto_adjust_ff_dim": true,
                "full_attn_idxs": self.attn_layers,
                "layer_types": Self::layer_types(self.n_layers, &self.attn_layers, "full_attention"),
                "tie_word_embeddings": true,
                "pad_token_id": 0,
                "bos_token_id": 1,
                "eos_token_id": 7,
                "use_cache": true
            },
            "depthformer": {
                "layers": self.depth_layers,
                "dim": self.depth_dim,
                // Untied, so a test notices an implementation that reads the embedding table
                // where it should read the logit head.
                "tie": false
            }
        })
    }

    /// `audio_detokenizer/config.json` (llama.cpp-style layer types, as the published one).
    pub fn detokenizer_config_json(&self) -> Value {
        json!({
            "architectures": ["Lfm2Model"],
            "model_type": "lfm2",
            "vocab_size": self.detok_vocab,
            "hidden_size": self.detok_hidden,
            "intermediate_size": self.detok_ff,
            "num_hidden_layers": self.detok_layers,
            "num_attention_heads": self.detok_heads,
            "num_key_value_heads": self.detok_kv_heads,
            "max_position_embeddings": 4096,
            "norm_eps": self.norm_eps,
            "rope_theta": self.detok_rope_theta,
            "conv_bias": false,
            "conv_L_cache": self.conv_l_cache,
            "block_multiple_of": 256,
            "block_ffn_dim_multiplier": 1.0,
            "block_auto_adjust_ff_dim": false,
            "layer_types": Self::layer_types(self.detok_layers, &self.detok_attn_layers, "sliding_attention"),
            "sliding_window": self.detok_sliding_window,
            "tie_word_embeddings": false,
            "pad_token_id": 0,
            "bos_token_id": 1,
            "eos_token_id": 7,
            "use_cache": false
        })
    }
}

/// Fills tensors of one safetensors file from per-name random streams.
struct Filler<'a> {
    w: &'a mut SafeTensorsWriter,
    seed: u64,
}

impl Filler<'_> {
    /// `center + half_width * u`, u uniform in [-1, 1).
    fn uniform(&mut self, name: &str, shape: &[usize], center: f64, half_width: f64) {
        let mut r: SplitMix64 = tensor_stream(self.seed, name);
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|_| (center + half_width * r.symmetric()) as f32)
            .collect();
        self.w.add_f32(name, shape, &v);
    }

    /// Zero-mean values of standard deviation `std` (uniform, half-width std·√3).
    fn random(&mut self, name: &str, shape: &[usize], std: f64) {
        self.uniform(name, shape, 0.0, std * 3f64.sqrt());
    }

    /// A Linear weight `[out, inp]` with std `gain / sqrt(inp)` (outputs keep the input's scale).
    fn linear(&mut self, name: &str, out: usize, inp: usize, gain: f64) {
        self.random(name, &[out, inp], gain / (inp as f64).sqrt());
    }

    /// A bias: small but clearly non-zero.
    fn bias(&mut self, name: &str, n: usize) {
        self.uniform(name, &[n], 0.0, 0.1);
    }

    /// A norm scale: 1 plus noise, so a missing or misplaced scale changes the output.
    fn norm(&mut self, name: &str, n: usize) {
        self.uniform(name, &[n], 1.0, 0.2);
    }

    /// A LayerNorm: scale and shift.
    fn layer_norm(&mut self, prefix: &str, n: usize) {
        self.norm(&format!("{prefix}.weight"), n);
        self.bias(&format!("{prefix}.bias"), n);
    }

    /// A Linear with bias.
    fn linear_bias(&mut self, prefix: &str, out: usize, inp: usize, gain: f64) {
        self.linear(&format!("{prefix}.weight"), out, inp, gain);
        self.bias(&format!("{prefix}.bias"), out);
    }
}

/// Dimensions of one LFM2 stack (backbone or detokenizer).
struct Lfm2Dims<'a> {
    hidden: usize,
    ff: usize,
    heads: usize,
    kv_heads: usize,
    l_cache: usize,
    attn: &'a [usize],
    layers: usize,
    /// Gain of the projections that write into the residual stream (`out_proj`, `w2`).
    out_gain: f64,
    /// Whether the final norm's scales get random signs (see `fill_lfm2_layers`).
    signed_final_norm: bool,
}

/// The `lfm.*` tensors of an LFM2 stack without the embedding.
fn fill_lfm2_layers(f: &mut Filler<'_>, d: &Lfm2Dims<'_>) {
    let h = d.hidden;
    let hd = h / d.heads;
    for i in 0..d.layers {
        let p = format!("lfm.layers.{i}");
        if d.attn.contains(&i) {
            f.linear(
                &format!("{p}.self_attn.q_proj.weight"),
                d.heads * hd,
                h,
                1.0,
            );
            f.linear(
                &format!("{p}.self_attn.k_proj.weight"),
                d.kv_heads * hd,
                h,
                1.0,
            );
            f.linear(
                &format!("{p}.self_attn.v_proj.weight"),
                d.kv_heads * hd,
                h,
                1.0,
            );
            f.linear(
                &format!("{p}.self_attn.out_proj.weight"),
                h,
                d.heads * hd,
                d.out_gain,
            );
            f.norm(&format!("{p}.self_attn.q_layernorm.weight"), hd);
            f.norm(&format!("{p}.self_attn.k_layernorm.weight"), hd);
        } else {
            // Depthwise causal conv over B*x; taps of std 0.5 keep the gated product O(1).
            f.random(&format!("{p}.conv.conv.weight"), &[h, 1, d.l_cache], 0.5);
            f.linear(&format!("{p}.conv.in_proj.weight"), 3 * h, h, 1.0);
            f.linear(&format!("{p}.conv.out_proj.weight"), h, h, d.out_gain);
        }
        f.linear(&format!("{p}.feed_forward.w1.weight"), d.ff, h, 1.0);
        f.linear(&format!("{p}.feed_forward.w3.weight"), d.ff, h, 1.0);
        f.linear(&format!("{p}.feed_forward.w2.weight"), h, d.ff, d.out_gain);
        f.norm(&format!("{p}.operator_norm.weight"), h);
        f.norm(&format!("{p}.ffn_norm.weight"), h);
    }
    if d.signed_final_norm {
        // Scales of random sign (magnitude 1 ± 0.2). The text head is tied to the embedding, so
        // with positive scales the input token's own row, still present in the residual stream,
        // scores high and greedy decoding falls into repeating one token; random signs cancel
        // that self-similarity on average while keeping the logits' spread.
        let mut r = rng::tensor_stream(f.seed ^ 0x5167_4E5F_F1A7_0001, "lfm.embedding_norm.weight");
        let v: Vec<f32> = (0..h)
            .map(|_| {
                let m = 1.0 + 0.2 * r.symmetric();
                (if r.next_u64() & 1 == 1 { -m } else { m }) as f32
            })
            .collect();
        f.w.add_f32("lfm.embedding_norm.weight", &[h], &v);
    } else {
        f.norm("lfm.embedding_norm.weight", h);
    }
}

fn fill_main(f: &mut Filler<'_>, c: &TinyConfig) {
    let cb = c.codebooks;
    let offsets: Vec<i64> = (0..cb).map(|i| (i * c.audio_vocab) as i64).collect();
    f.w.add_i64("codebook_offsets", &[cb], &offsets);
    let mut weights = vec![1.0f32; cb];
    weights[0] = 100.0;
    f.w.add_f32("audio_loss_weights", &[cb], &weights);

    // Backbone. Embedding std 0.5: it is also the tied text head, and with the final norm's
    // output at RMS ~1 this gives text logits of std ~0.5·√hidden ≈ 5.7, i.e. greedy margins of
    // order 1 instead of razor-thin ones.
    let h = c.hidden;
    f.random("lfm.embed_tokens.weight", &[c.vocab_size, h], 0.5);
    fill_lfm2_layers(
        f,
        &Lfm2Dims {
            hidden: h,
            ff: c.backbone_ff(),
            heads: c.n_heads,
            kv_heads: c.n_kv_heads,
            l_cache: c.conv_l_cache,
            attn: &c.attn_layers,
            layers: c.n_layers,
            // With the text head tied to the embedding, a residual stream dominated by the input
            // token's own embedding makes greedy decoding repeat its input; stronger layer
            // outputs keep the layers in charge of the prediction.
            out_gain: 2.0,
            signed_final_norm: true,
        },
    );

    // FastConformer.
    let ch = c.enc_subsampling_channels;
    let d = c.enc_d_model;
    let pe = "conformer.pre_encode";
    f.random(&format!("{pe}.conv.0.weight"), &[ch, 1, 3, 3], 1.0 / 3.0);
    f.bias(&format!("{pe}.conv.0.bias"), ch);
    for (dw, pw) in [(2, 3), (5, 6)] {
        f.random(&format!("{pe}.conv.{dw}.weight"), &[ch, 1, 3, 3], 1.0 / 3.0);
        f.bias(&format!("{pe}.conv.{dw}.bias"), ch);
        // After ReLU roughly half the inputs are zero: gain √2 keeps the scale.
        f.random(
            &format!("{pe}.conv.{pw}.weight"),
            &[ch, ch, 1, 1],
            (2.0 / ch as f64).sqrt(),
        );
        f.bias(&format!("{pe}.conv.{pw}.bias"), ch);
    }
    f.linear_bias(&format!("{pe}.out"), d, c.pre_encode_out_in(), 2f64.sqrt());
    let ff = c.enc_ff();
    let dk = d / c.enc_heads;
    for i in 0..c.enc_layers {
        let p = format!("conformer.layers.{i}");
        for k in [
            "norm_feed_forward1",
            "norm_self_att",
            "norm_conv",
            "norm_feed_forward2",
            "norm_out",
        ] {
            f.layer_norm(&format!("{p}.{k}"), d);
        }
        for k in ["feed_forward1", "feed_forward2"] {
            f.linear_bias(&format!("{p}.{k}.linear1"), ff, d, 1.0);
            f.linear_bias(&format!("{p}.{k}.linear2"), d, ff, 1.0);
        }
        for k in ["linear_q", "linear_k", "linear_v", "linear_out"] {
            f.linear_bias(&format!("{p}.self_attn.{k}"), d, d, 1.0);
        }
        f.linear(&format!("{p}.self_attn.linear_pos.weight"), d, d, 1.0);
        f.random(
            &format!("{p}.self_attn.pos_bias_u"),
            &[c.enc_heads, dk],
            0.2,
        );
        f.random(
            &format!("{p}.self_attn.pos_bias_v"),
            &[c.enc_heads, dk],
            0.2,
        );
        let cv = format!("{p}.conv");
        f.random(
            &format!("{cv}.pointwise_conv1.weight"),
            &[2 * d, d, 1],
            1.0 / (d as f64).sqrt(),
        );
        f.bias(&format!("{cv}.pointwise_conv1.bias"), 2 * d);
        let k = c.enc_conv_kernel;
        f.random(
            &format!("{cv}.depthwise_conv.weight"),
            &[d, 1, k],
            1.0 / (k as f64).sqrt(),
        );
        f.bias(&format!("{cv}.depthwise_conv.bias"), d);
        let bn = format!("{cv}.batch_norm");
        f.norm(&format!("{bn}.weight"), d);
        f.bias(&format!("{bn}.bias"), d);
        f.uniform(&format!("{bn}.running_mean"), &[d], 0.0, 0.3);
        // Positive variances in [0.5, 1.5]: a folded BatchNorm must divide by sqrt(var + eps).
        f.uniform(&format!("{bn}.running_var"), &[d], 1.0, 0.5);
        f.w.add_i64(
            &format!("{bn}.num_batches_tracked"),
            &[],
            &[1000 + i as i64],
        );
        f.random(
            &format!("{cv}.pointwise_conv2.weight"),
            &[d, d, 1],
            1.0 / (d as f64).sqrt(),
        );
        f.bias(&format!("{cv}.pointwise_conv2.bias"), d);
    }

    // Adapter: LayerNorm -> Linear -> GELU -> Linear.
    f.layer_norm("audio_adapter.model.0", d);
    f.linear_bias("audio_adapter.model.1", h, d, 1.0);
    f.linear_bias("audio_adapter.model.3", h, h, 2f64.sqrt());

    // Audio-code embedding fed back to the backbone (sum of 8 rows: std 0.2·√8 ≈ 0.57) and its
    // unused logit head.
    let av = cb * c.audio_vocab;
    f.random("audio_embedding.embedding.weight", &[av, h], 0.2);
    f.norm("audio_embedding.embedding_norm.weight", h);
    f.random("audio_embedding.to_logits.weight", &[av, h], 0.1);

    // Depthformer.
    let dd = c.depth_dim;
    f.linear_bias("depth_linear", cb * dd, h, 1.0);
    let qkv = dd + 2 * c.depth_head_dim() * c.depth_kv_heads();
    let dff = c.depth_ff();
    for i in 0..c.depth_layers {
        let p = format!("depthformer.layers.{i}");
        f.linear(&format!("{p}.operator.qkv_proj.weight"), qkv, dd, 1.0);
        f.linear(&format!("{p}.operator.out_proj.weight"), dd, dd, 1.0);
        f.norm(
            &format!("{p}.operator.bounded_attention.q_layernorm.weight"),
            c.depth_head_dim(),
        );
        f.norm(
            &format!("{p}.operator.bounded_attention.k_layernorm.weight"),
            c.depth_head_dim(),
        );
        f.linear(&format!("{p}.feed_forward.w1.weight"), dff, dd, 1.0);
        f.linear(&format!("{p}.feed_forward.w3.weight"), dff, dd, 1.0);
        f.linear(&format!("{p}.feed_forward.w2.weight"), dd, dff, 1.0);
        f.norm(&format!("{p}.operator_norm.weight"), dd);
        f.norm(&format!("{p}.ffn_norm.weight"), dd);
    }
    for i in 0..cb {
        let p = format!("depth_embeddings.{i}");
        f.random(&format!("{p}.embedding.weight"), &[c.audio_vocab, dd], 0.5);
        f.norm(&format!("{p}.embedding_norm.weight"), dd);
        // Logit std ~0.45·√dim ≈ 5: clear greedy margins over 2049 codes.
        f.random(&format!("{p}.to_logits.weight"), &[c.audio_vocab, dd], 0.45);
    }
}

fn fill_detokenizer(f: &mut Filler<'_>, c: &TinyConfig) {
    let h = c.detok_hidden;
    // The code embedding has 2048 rows per codebook (no end-of-audio row).
    f.random(
        "emb.emb.weight",
        &[c.codebooks * (c.audio_vocab - 1), h],
        1.0,
    );
    f.random("lfm.embed_tokens.weight", &[c.detok_vocab, h], 0.5);
    fill_lfm2_layers(
        f,
        &Lfm2Dims {
            hidden: h,
            ff: c.detok_ff,
            heads: c.detok_heads,
            kv_heads: c.detok_kv_heads,
            l_cache: c.conv_l_cache,
            attn: &c.detok_attn_layers,
            layers: c.detok_layers,
            out_gain: 1.0,
            signed_final_norm: false,
        },
    );
    // Head: log-magnitudes and phases of std ~0.5, so exp() stays tame.
    f.linear_bias("lin", c.n_fft + 2, h, 0.5);
    // The ISTFT window: periodic Hann, as torch.hann_window(n_fft) (from an exact-arithmetic
    // cosine, see rng::cos_two_pi_frac).
    let n = c.n_fft as u64;
    let window: Vec<f32> = (0..n)
        .map(|k| (0.5 - 0.5 * cos_two_pi_frac(k, n)) as f32)
        .collect();
    f.w.add_f32("istft.window", &[c.n_fft], &window);
}

fn write_json(path: &Path, v: &Value) -> Result<()> {
    let mut s = serde_json::to_string_pretty(v).expect("JSON values serialize");
    s.push('\n');
    fs::write(path, s).map_err(|source| SyntheticError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes the checkpoint of `config` with values from `seed` into `dir` (created if needed;
/// existing files are overwritten).
pub fn write_checkpoint(dir: &Path, config: &TinyConfig, seed: u64) -> Result<()> {
    config.validate()?;
    let detok_dir = dir.join("audio_detokenizer");
    fs::create_dir_all(&detok_dir).map_err(|source| SyntheticError::Io {
        path: detok_dir.clone(),
        source,
    })?;

    let mut main = SafeTensorsWriter::new();
    main.metadata("format", "pt");
    fill_main(&mut Filler { w: &mut main, seed }, config);
    main.write(dir.join("model.safetensors"))?;

    let mut detok = SafeTensorsWriter::new();
    detok.metadata("format", "pt");
    // A different stream family: the detokenizer reuses names such as lfm.embed_tokens.weight.
    fill_detokenizer(
        &mut Filler {
            w: &mut detok,
            seed: seed ^ 0xD7E7_0C3A_11A5_0001,
        },
        config,
    );
    detok.write(detok_dir.join("model.safetensors"))?;

    write_json(&dir.join("config.json"), &config.config_json())?;
    write_json(
        &detok_dir.join("config.json"),
        &config.detokenizer_config_json(),
    )?;
    let vocab = bpe::learn(config.vocab_size);
    write_json(&dir.join("tokenizer.json"), &bpe::tokenizer_json(&vocab))?;
    write_json(
        &dir.join("tokenizer_config.json"),
        &bpe::tokenizer_config_json(),
    )?;
    write_json(
        &dir.join("special_tokens_map.json"),
        &bpe::special_tokens_map_json(),
    )?;
    Ok(())
}

/// Writes the [`TinyConfig::default`] checkpoint with values from `seed` into `dir`.
pub fn write_tiny_checkpoint(dir: &Path, seed: u64) -> Result<TinyConfig> {
    let config = TinyConfig::default();
    write_checkpoint(dir, &config, seed)?;
    Ok(config)
}

/// The reference fixture's input: 1.5 s of 16 kHz mono made with integer arithmetic only (a
/// triangle wave sweeping up, a square wave with a changing period, an envelope, and LCG noise),
/// quantized to 16 bits, so Python and Rust produce identical samples. Values are `n / 32768`.
pub fn tiny_input_signal() -> Vec<f32> {
    let n = INPUT_SIGNAL_SAMPLES as i64;
    let mut lcg: u64 = 0x2545_F491_4F6C_DD1D;
    let mut phase: i64 = 0; // triangle phase in 1/65536 of a period
    let mut out = Vec::with_capacity(INPUT_SIGNAL_SAMPLES);
    for i in 0..n {
        // Frequency sweeps 200 Hz -> 1400 Hz: increment = f * 65536 / 16000.
        let freq = 200 + 1200 * i / n;
        phase = (phase + freq * 65536 / 16000) % 65536;
        // Triangle in [-16384, 16384].
        let tri = if phase < 32768 {
            phase - 16384
        } else {
            49152 - phase
        };
        // Square wave with a period that alternates between 40 and 25 samples every 4000
        // samples (400 Hz / 640 Hz), amplitude 3000.
        let period = if (i / 4000) % 2 == 0 { 40 } else { 25 };
        let sq = if (i % period) < period / 2 {
            3000
        } else {
            -3000
        };
        // Envelope: rises over 0.25 s, a dip in the middle, in 1/1024 steps.
        let env = (i * 1024 / 4000).min(1024)
            - if (10_000..14_000).contains(&i) {
                600
            } else {
                0
            };
        lcg = lcg
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let noise = ((lcg >> 33) % 2001) as i64 - 1000;
        let v = (tri + sq) * env / 1024 + noise;
        out.push(v.clamp(-32768, 32767) as f32 / 32768.0);
    }
    out
}
