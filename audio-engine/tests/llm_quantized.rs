//! libllama decodes several sequences at once on the quantized backbones our converter writes
//! (the tiny package's `Q8_0` and `Q4_0` LFM2 files), every sequence's logits finite and the
//! whole run reproducible.
//!
//! why: on CPUs with AMX-INT8, ggml puts these weights in its AMX buffer type, and its AMX
//! matrix product, given LFM2's per-sequence activations (one plane per sequence), read a 2D
//! weight past its end from the second plane on (SIGSEGV on the full-size backbone) and wrote
//! those planes' results at the wrong place (here: the second run's logits for sequences 1 and
//! 2 differed from the first's in 5120 of 7680 values). Vendor patch 0009. Elsewhere this checks
//! the other kernels the same way.

mod common;

use audio_engine::lfm2_audio::internals::package::Quant;
use lfm2_llm::{Decoder, DecoderConfig, LlmModel, Sampler};

use common::package::package;

/// Three sequences joined with different prompts, then four steps: every sequence's logits after
/// each step, as bits.
fn decode(model: &LlmModel) -> Vec<u32> {
    // one thread: libtest runs other tests beside this one
    let cfg = DecoderConfig {
        n_seq_max: 3,
        n_threads: 1,
        ..DecoderConfig::default()
    };
    let mut dec = Decoder::new(model, cfg).unwrap();
    let seqs = [
        dec.join(&[1, 2, 3], Sampler::greedy()).unwrap(),
        dec.join(&[9, 8], Sampler::greedy()).unwrap(),
        dec.join(&[4, 5, 6, 7], Sampler::greedy()).unwrap(),
    ];
    let mut bits = Vec::new();
    for _ in 0..4 {
        dec.step().unwrap();
        for &s in &seqs {
            let logits = dec.logits(s).unwrap();
            assert!(
                logits.iter().all(|v| v.is_finite()),
                "non-finite logits for sequence {s:?}"
            );
            bits.extend(logits.iter().map(|v| v.to_bits()));
        }
    }
    bits
}

#[test]
fn quantized_backbones_decode_several_sequences() {
    for ty in [Quant::Q8_0, Quant::Q4_0] {
        let path = package(ty).backbone;
        let model = LlmModel::load(&path).unwrap();
        let first = decode(&model);
        assert!(
            first.iter().any(|&b| b != first[0]),
            "{ty:?}: constant logits"
        );
        let second = decode(&model);
        let differ = first.iter().zip(&second).filter(|(a, b)| a != b).count();
        assert_eq!(
            differ,
            0,
            "{ty:?}: a second run differs in {differ} of {} logits",
            first.len()
        );
    }
}
