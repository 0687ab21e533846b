//! Random models of a real architecture, built in memory (no file) through libllama's
//! `llama_model_init_from_user`: for tests and benchmarks that need real graphs but no weights.

use crate::error::Result;
use crate::llama::{LlamaError, LlamaModel, TensorRequest};
use lfm2_ggml::gguf::GgufMetadata;

/// Architectures [`RandomModel`] can build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// Qwen3.5 dense: gated-delta-net layers with full attention every `full_attention_interval`.
    Qwen35,
    /// Qwen3-Next: the same hybrid layout with a mixture-of-experts feed-forward.
    Qwen3Next,
    /// LFM2: gated short-conv layers and GQA attention layers.
    Lfm2,
}

impl Arch {
    /// The `general.architecture` string.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Qwen35 => "qwen35",
            Arch::Qwen3Next => "qwen3next",
            Arch::Lfm2 => "lfm2",
        }
    }

    /// Whether the recurrent layers are gated delta nets (the in-place state update applies).
    pub fn has_gated_delta_net(self) -> bool {
        matches!(self, Arch::Qwen35 | Arch::Qwen3Next)
    }
}

/// Shape and seed of a random model. Field names follow the GGUF keys they become.
#[derive(Debug, Clone)]
pub struct RandomModel {
    /// Architecture.
    pub arch: Arch,
    /// `vocab_size` (a `none` tokenizer: ids only).
    pub vocab_size: u32,
    /// `embedding_length`.
    pub embedding_length: u32,
    /// `block_count`.
    pub block_count: u32,
    /// `feed_forward_length` (per expert for qwen3next).
    pub feed_forward_length: u32,
    /// `attention.head_count`.
    pub head_count: u32,
    /// `attention.head_count_kv`.
    pub head_count_kv: u32,
    /// `attention.key_length` = `value_length` (head dim).
    pub head_dim: u32,
    /// Every n-th layer is attention (qwen35/qwen3next: `full_attention_interval`; lfm2: the
    /// layers with `head_count_kv > 0`).
    pub full_attention_interval: u32,
    /// `ssm.state_size`: S_k = S_v of the delta net.
    pub ssm_state_size: u32,
    /// `ssm.group_count`: H_k.
    pub ssm_group_count: u32,
    /// `ssm.time_step_rank`: H_v.
    pub ssm_time_step_rank: u32,
    /// `ssm.conv_kernel` (qwen) / `shortconv.l_cache` (lfm2).
    pub conv_kernel: u32,
    /// Experts (qwen3next only).
    pub expert_count: u32,
    /// Seed of the weights.
    pub seed: u64,
}

impl RandomModel {
    /// A tiny qwen35 (4 layers: delta net, attention, delta net, attention; H_k = H_v / 2).
    pub fn tiny_qwen35(seed: u64) -> RandomModel {
        RandomModel {
            arch: Arch::Qwen35,
            vocab_size: 128,
            embedding_length: 64,
            block_count: 4,
            feed_forward_length: 128,
            head_count: 4,
            head_count_kv: 2,
            head_dim: 16,
            full_attention_interval: 2,
            ssm_state_size: 16,
            ssm_group_count: 2,
            ssm_time_step_rank: 4,
            conv_kernel: 4,
            expert_count: 0,
            seed,
        }
    }

    /// A tiny qwen3next (the qwen35 shapes plus 4 experts, 2 used).
    pub fn tiny_qwen3next(seed: u64) -> RandomModel {
        RandomModel {
            arch: Arch::Qwen3Next,
            expert_count: 4,
            ..RandomModel::tiny_qwen35(seed)
        }
    }

    /// A tiny lfm2 (conv, attention, conv, attention).
    pub fn tiny_lfm2(seed: u64) -> RandomModel {
        RandomModel {
            arch: Arch::Lfm2,
            conv_kernel: 3,
            ..RandomModel::tiny_qwen35(seed)
        }
    }

    /// qwen35 with the delta-net shapes of the real models (S_v 128, 32 value heads, 16 key
    /// heads) but few layers and a small vocabulary: the per-step state traffic of a real model.
    pub fn bench_qwen35(block_count: u32, seed: u64) -> RandomModel {
        RandomModel {
            arch: Arch::Qwen35,
            vocab_size: 1024,
            embedding_length: 1024,
            block_count,
            feed_forward_length: 2048,
            head_count: 8,
            head_count_kv: 2,
            head_dim: 128,
            full_attention_interval: 4,
            ssm_state_size: 128,
            ssm_group_count: 16,
            ssm_time_step_rank: 32,
            conv_kernel: 4,
            expert_count: 0,
            seed,
        }
    }

    /// The GGUF metadata libllama reads for this model.
    pub fn metadata(&self) -> GgufMetadata {
        let a = self.arch.name();
        let mut m = GgufMetadata::new();
        let mut put = |k: String, v: lfm2_ggml::gguf::GgufValue| {
            m.set(k, v).expect("distinct, well-formed keys");
        };
        put("general.architecture".into(), a.into());
        put("general.name".into(), format!("random-{a}").into());
        put("tokenizer.ggml.model".into(), "none".into());
        put(format!("{a}.vocab_size"), self.vocab_size.into());
        put(format!("{a}.context_length"), 8192u32.into());
        put(
            format!("{a}.embedding_length"),
            self.embedding_length.into(),
        );
        put(format!("{a}.block_count"), self.block_count.into());
        put(
            format!("{a}.feed_forward_length"),
            self.feed_forward_length.into(),
        );
        put(format!("{a}.attention.head_count"), self.head_count.into());
        match self.arch {
            Arch::Lfm2 => {
                // A layer with zero KV heads is a short-conv layer.
                let kv: Vec<u32> = (0..self.block_count)
                    .map(|il| {
                        if (il + 1) % self.full_attention_interval == 0 {
                            self.head_count_kv
                        } else {
                            0
                        }
                    })
                    .collect();
                put(format!("{a}.attention.head_count_kv"), kv.into());
                put(
                    format!("{a}.attention.layer_norm_rms_epsilon"),
                    1e-5f32.into(),
                );
                put(format!("{a}.rope.freq_base"), 1e6f32.into());
                put(format!("{a}.shortconv.l_cache"), self.conv_kernel.into());
            }
            Arch::Qwen35 | Arch::Qwen3Next => {
                put(
                    format!("{a}.attention.head_count_kv"),
                    self.head_count_kv.into(),
                );
                put(format!("{a}.attention.key_length"), self.head_dim.into());
                put(format!("{a}.attention.value_length"), self.head_dim.into());
                put(
                    format!("{a}.attention.layer_norm_rms_epsilon"),
                    1e-6f32.into(),
                );
                put(format!("{a}.rope.freq_base"), 1e7f32.into());
                // Partial rotary as in the real models: a quarter of the head, in M-RoPE sections.
                let n_rot = self.head_dim / 4;
                put(format!("{a}.rope.dimension_count"), n_rot.into());
                let s = n_rot / 2;
                let sections: Vec<i32> = vec![
                    (s - s / 2) as i32,
                    (s / 4) as i32,
                    (s / 2 - s / 4) as i32,
                    0,
                ];
                put(format!("{a}.rope.dimension_sections"), sections.into());
                put(
                    format!("{a}.full_attention_interval"),
                    self.full_attention_interval.into(),
                );
                put(format!("{a}.ssm.conv_kernel"), self.conv_kernel.into());
                put(format!("{a}.ssm.state_size"), self.ssm_state_size.into());
                put(format!("{a}.ssm.group_count"), self.ssm_group_count.into());
                put(
                    format!("{a}.ssm.time_step_rank"),
                    self.ssm_time_step_rank.into(),
                );
                put(
                    format!("{a}.ssm.inner_size"),
                    (self.ssm_state_size * self.ssm_time_step_rank).into(),
                );
                if self.arch == Arch::Qwen3Next {
                    put(format!("{a}.expert_count"), self.expert_count.into());
                    put(
                        format!("{a}.expert_used_count"),
                        (self.expert_count / 2).max(1).into(),
                    );
                    put(
                        format!("{a}.expert_feed_forward_length"),
                        self.feed_forward_length.into(),
                    );
                    put(
                        format!("{a}.expert_shared_feed_forward_length"),
                        self.feed_forward_length.into(),
                    );
                }
            }
        }
        m
    }

    /// Builds the model (weights drawn per tensor name from the seed, so any tensor's values do
    /// not depend on which other tensors exist).
    pub fn build(&self) -> Result<LlamaModel> {
        let seed = self.seed;
        let mut fill = |t: &TensorRequest<'_>| -> Vec<u8> {
            if t.ggml_type != lfm2_ggml::dtype::GgmlType::F32 as u32 {
                return Vec::new(); // wrong length -> reported as an error by the loader wrapper
            }
            tensor_values(seed, t.name, t.n_bytes / 4)
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect()
        };
        let model = LlamaModel::from_metadata(&self.metadata(), &mut fill)?;
        if model.architecture() != self.arch.name() {
            return Err(LlamaError::FromMetadata(format!(
                "built a {} model, asked for {}",
                model.architecture(),
                self.arch.name()
            ))
            .into());
        }
        Ok(model)
    }
}

/// Deterministic weights for one tensor: a value range per kind of tensor so the network stays
/// well-conditioned (norm gains near 1, decaying recurrent state, scale tensors exactly 1).
fn tensor_values(seed: u64, name: &str, n: usize) -> Vec<f32> {
    let mut state = seed ^ 0x9e37_79b9_7f4a_7c15;
    for b in name.bytes() {
        state = (state ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let x = state.wrapping_mul(0x2545_f491_4f6c_dd1d);
        ((x >> 40) as f32) / ((1u64 << 23) as f32) - 1.0 // uniform in [-1, 1)
    };
    let f: fn(f32) -> f32 = if name.ends_with(".scale") || name.ends_with(".input_scale") {
        |_| 1.0 // per-tensor matmul scales: multiplied into every product
    } else if name.contains("norm") {
        |u| 1.0 + 0.1 * u
    } else if name.ends_with(".ssm_a") {
        |u| -(0.5 + 0.5 * u.abs()) // A = -exp(A_log) < 0: the state decays
    } else if name.contains("conv") {
        |u| 0.3 * u
    } else if name.contains("token_embd") {
        |u| 0.5 * u // embeddings large enough that tokens are told apart after the norms
    } else {
        |u| 0.05 * u
    };
    (0..n).map(|_| f(next())).collect()
}
