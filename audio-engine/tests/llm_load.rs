//! A model written to a GGUF file loads back through `LlmModel::load` and decodes to the same
//! bytes as the in-memory original; a bad path is a typed error, not a crash.

use lfm2_llm::{Decoder, DecoderConfig, LlmError, LlmModel, RandomModel, Sampler};

fn decode(model: &LlmModel) -> Vec<u32> {
    let cfg = DecoderConfig {
        n_seq_max: 2,
        n_ctx_per_seq: 256,
        n_batch: 32,
        n_threads: 2,
        n_rs_seq: 0,
    };
    let mut dec = Decoder::new(model, cfg).unwrap();
    let a = dec.join(&[1, 2, 3], Sampler::greedy()).unwrap();
    let b = dec.join(&[9, 8], Sampler::top_k(1.0, 10, 5)).unwrap();
    let mut bits = Vec::new();
    for _ in 0..4 {
        dec.step().unwrap();
        for s in [a, b] {
            bits.extend(dec.logits(s).unwrap().iter().map(|v| v.to_bits()));
        }
    }
    bits
}

#[test]
fn saved_gguf_loads_and_decodes_identically() {
    for spec in [RandomModel::tiny_qwen35(21), RandomModel::tiny_lfm2(22)] {
        let model = spec.build().unwrap();
        let path = std::env::temp_dir().join(format!(
            "llm-load-{}-{}.gguf",
            spec.arch.name(),
            std::process::id()
        ));
        model.save(&path).unwrap();
        let loaded = LlmModel::load(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(loaded.architecture(), spec.arch.name());
        assert_eq!(loaded.n_vocab(), model.n_vocab());
        assert_eq!(
            decode(&loaded),
            decode(&model),
            "{}: loaded model decodes differently",
            spec.arch.name()
        );
    }
}

#[test]
fn missing_file_is_a_typed_error() {
    let err = LlmModel::load(std::path::Path::new("/nonexistent/model.gguf")).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/model.gguf"), "{err}");
    let as_llm: LlmError = err.into();
    assert!(matches!(as_llm, LlmError::Llama(_)));

    let model = RandomModel::tiny_lfm2(1).build().unwrap();
    let err = model
        .save(std::path::Path::new("/nonexistent/dir/out.gguf"))
        .unwrap_err();
    assert!(err.to_string().contains("failed to write"), "{err}");
}
