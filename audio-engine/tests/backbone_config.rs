//! The LFM2 backbone config and tensor tree are read from GGUF metadata and shapes, agree with
//! llama.cpp's own loader, and every malformed file is a typed error naming the file and the
//! tensor or key.

use std::path::{Path, PathBuf};

use audio_engine::ggml::gguf::{GgufFile, GgufValue, GgufWriter};
use audio_engine::ggml::GgmlType;
use audio_engine::lfm2_audio::internals::backbone_config::{
    LayerKind, Lfm2Backbone, Lfm2Config, LoadError, Mixer,
};
use audio_engine::lfm2_audio::internals::nn::QkvProjection;
use lfm2_llm::LlmModel;

const HIDDEN: u64 = 64;
const FF: u64 = 96;
const VOCAB: u64 = 96;
const HEADS: u32 = 4;
const KV: u32 = 2;
const L: u64 = 3;
/// conv / attn / conv / attn.
const KV_PER_LAYER: [u32; 4] = [0, KV, 0, KV];

/// The synthetic backbone, as lists the failure tests edit before writing.
struct Spec {
    kvs: Vec<(String, GgufValue)>,
    tensors: Vec<(String, GgmlType, Vec<u64>)>,
}

impl Spec {
    fn new() -> Spec {
        let kvs: Vec<(String, GgufValue)> = vec![
            ("general.architecture".into(), "lfm2".into()),
            ("general.name".into(), "tiny-lfm2-backbone".into()),
            // why: llama.cpp accepts a vocab without tokens when the model is "none" and the size
            // is given; the synthetic file has no tokenizer.
            ("tokenizer.ggml.model".into(), "none".into()),
            ("lfm2.vocab_size".into(), (VOCAB as u32).into()),
            ("lfm2.context_length".into(), 4096u32.into()),
            ("lfm2.embedding_length".into(), (HIDDEN as u32).into()),
            ("lfm2.block_count".into(), 4u32.into()),
            ("lfm2.feed_forward_length".into(), (FF as u32).into()),
            ("lfm2.attention.head_count".into(), HEADS.into()),
            (
                "lfm2.attention.head_count_kv".into(),
                KV_PER_LAYER.to_vec().into(),
            ),
            (
                "lfm2.attention.layer_norm_rms_epsilon".into(),
                1e-5f32.into(),
            ),
            ("lfm2.rope.freq_base".into(), 1e6f32.into()),
            ("lfm2.shortconv.l_cache".into(), (L as u32).into()),
        ];
        let hd = HIDDEN / u64::from(HEADS);
        let kv = u64::from(KV) * hd;
        let f = GgmlType::F32;
        let mut tensors = vec![
            ("token_embd.weight".to_owned(), f, vec![HIDDEN, VOCAB]),
            ("token_embd_norm.weight".to_owned(), f, vec![HIDDEN]),
        ];
        for (i, &kvh) in KV_PER_LAYER.iter().enumerate() {
            let mut t =
                |s: &str, shape: Vec<u64>| tensors.push((format!("blk.{i}.{s}.weight"), f, shape));
            t("attn_norm", vec![HIDDEN]);
            t("ffn_norm", vec![HIDDEN]);
            t("ffn_gate", vec![HIDDEN, FF]);
            t("ffn_up", vec![HIDDEN, FF]);
            t("ffn_down", vec![FF, HIDDEN]);
            if kvh == 0 {
                t("shortconv.in_proj", vec![HIDDEN, 3 * HIDDEN]);
                t("shortconv.conv", vec![L, HIDDEN]);
                t("shortconv.out_proj", vec![HIDDEN, HIDDEN]);
            } else {
                t("attn_q", vec![HIDDEN, HIDDEN]);
                t("attn_k", vec![HIDDEN, kv]);
                t("attn_v", vec![HIDDEN, kv]);
                t("attn_output", vec![HIDDEN, HIDDEN]);
                t("attn_q_norm", vec![hd]);
                t("attn_k_norm", vec![hd]);
            }
        }
        Spec { kvs, tensors }
    }

    fn tensor_mut(&mut self, name: &str) -> &mut (String, GgmlType, Vec<u64>) {
        self.tensors.iter_mut().find(|t| t.0 == name).unwrap()
    }

    fn kv_mut(&mut self, key: &str) -> &mut GgufValue {
        &mut self.kvs.iter_mut().find(|k| k.0 == key).unwrap().1
    }

    /// Writes the file to a fresh temp path; small pseudo-random F32 data (zeros when quantized).
    fn write(&self, tag: &str) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("backbone-config-{tag}-{}.gguf", std::process::id()));
        let mut w = GgufWriter::new();
        for (k, v) in &self.kvs {
            w.add_kv(k.clone(), v.clone()).unwrap();
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for (name, ty, shape) in &self.tensors {
            let n: u64 = shape.iter().product();
            let data = if *ty == GgmlType::F32 {
                (0..n)
                    .flat_map(|_| {
                        // why: a tiny LCG keeps the test free of dependencies; values in ±0.05 keep
                        // llama.cpp's forward pass finite should anything run it.
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        (((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1).to_le_bytes()
                    })
                    .collect()
            } else {
                vec![0u8; ty.row_size(n).unwrap()]
            };
            w.add_tensor(name.clone(), *ty, shape, data).unwrap();
        }
        w.write_to_path(&path).unwrap();
        path
    }
}

/// Loads `spec` through [`Lfm2Backbone::open`] and removes the file.
fn load(spec: &Spec, tag: &str) -> (PathBuf, Result<Lfm2Backbone, LoadError>) {
    let path = spec.write(tag);
    let r = Lfm2Backbone::open(&path);
    let _ = std::fs::remove_file(&path);
    (path, r)
}

#[test]
fn synthetic_backbone_loads_and_validates() {
    let (_, r) = load(&Spec::new(), "ok");
    let b = r.unwrap();
    let c = &b.config;
    assert_eq!(c.hidden_size, 64);
    assert_eq!(c.num_hidden_layers, 4);
    assert_eq!(c.num_attention_heads, 4);
    assert_eq!(c.num_key_value_heads, vec![0, 2, 0, 2]);
    assert_eq!(c.head_dim, 16);
    assert_eq!(c.intermediate_size, 96);
    assert_eq!(c.vocab_size, 96);
    assert_eq!(c.conv_L_cache, 3);
    assert_eq!(c.norm_eps, 1e-5);
    assert_eq!(c.rope_theta, 1e6);
    assert_eq!(c.max_position_embeddings, 4096);
    assert_eq!(
        c.layer_kinds(),
        vec![
            LayerKind::Conv,
            LayerKind::Attention,
            LayerKind::Conv,
            LayerKind::Attention
        ]
    );
    assert_eq!(c.attention_layers(), vec![1, 3]);

    // The typed layers, bound from llama.cpp's names.
    let be = audio_engine::ggml::Backend::cpu().unwrap();
    let unused = b.unused_tensors().unwrap();
    let bb = audio_engine::lfm2_audio::internals::backbone::Backbone::load(b, &be).unwrap();
    let t = bb.layers();
    assert_eq!(t.token_embd.name(), "token_embd.weight");
    assert_eq!(t.output_norm.weight.name(), "token_embd_norm.weight");
    // Tied head.
    assert!(t.head.same_as(&t.token_embd));
    assert_eq!(t.layers[2].ffn.down.weight.name(), "blk.2.ffn_down.weight");
    assert!(
        matches!(&t.layers[0].mixer, Mixer::Conv(c) if c.conv.name() == "blk.0.shortconv.conv.weight")
    );
    assert!(matches!(&t.layers[3].mixer, Mixer::Attention(a)
        if a.k_norm.weight.name() == "blk.3.attn_k_norm.weight"
            && matches!(&a.qkv, QkvProjection::Separate { v, .. } if v.weight.name() == "blk.3.attn_v.weight")));
    let kinds: Vec<_> = t.layers.iter().map(|l| l.kind()).collect();
    assert_eq!(kinds, bb.config().layer_kinds());
    // Every tensor in the file is accounted for by the tree.
    assert_eq!(unused, Vec::<String>::new());
}

#[test]
fn integer_keys_are_read_leniently_and_scalar_kv_broadcasts() {
    let mut spec = Spec::new();
    *spec.kv_mut("lfm2.block_count") = GgufValue::I64(4);
    *spec.kv_mut("lfm2.embedding_length") = GgufValue::U64(HIDDEN);
    *spec.kv_mut("lfm2.attention.head_count") = GgufValue::U16(HEADS as u16);
    *spec.kv_mut("lfm2.attention.head_count_kv") = vec![0i32, 2, 0, 2].into();
    *spec.kv_mut("lfm2.rope.freq_base") = GgufValue::F64(1e6);
    let (_, r) = load(&spec, "lenient");
    let c = r.unwrap().config;
    assert_eq!(
        (c.num_hidden_layers, c.hidden_size, c.num_attention_heads),
        (4, 64, 4)
    );
    assert_eq!(c.num_key_value_heads, vec![0, 2, 0, 2]);

    // A scalar head_count_kv applies to every layer, so all are attention layers.
    let mut spec = Spec::new();
    *spec.kv_mut("lfm2.attention.head_count_kv") = GgufValue::U32(KV);
    let path = spec.write("scalar");
    let bytes = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    // From bytes: the config reads the same without a path.
    let gguf = GgufFile::from_bytes(bytes).unwrap();
    let c = Lfm2Config::from_gguf(&gguf).unwrap();
    assert_eq!(c.layer_kinds(), vec![LayerKind::Attention; 4]);
}

fn assert_names(err: &LoadError, path: &Path, what: &str) {
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains(what), "{msg}");
}

#[test]
fn missing_tensor_is_named() {
    let mut spec = Spec::new();
    spec.tensors.retain(|t| t.0 != "blk.1.attn_k_norm.weight");
    let (path, r) = load(&spec, "missing-tensor");
    let err = r.unwrap_err();
    assert!(
        matches!(&err, LoadError::MissingTensor { file, tensor }
        if file == &path && tensor == "blk.1.attn_k_norm.weight"),
        "{err}"
    );
    assert_names(&err, &path, "blk.1.attn_k_norm.weight");
}

#[test]
fn wrong_shape_is_named_with_both_shapes() {
    let mut spec = Spec::new();
    spec.tensor_mut("blk.2.shortconv.conv.weight").2 = vec![HIDDEN, L];
    let (path, r) = load(&spec, "bad-shape");
    let err = r.unwrap_err();
    match &err {
        LoadError::BadShape {
            file,
            tensor,
            expected,
            found,
        } => {
            assert_eq!(file, &path);
            assert_eq!(tensor, "blk.2.shortconv.conv.weight");
            assert_eq!(expected, &vec![L, HIDDEN]);
            assert_eq!(found, &vec![HIDDEN, L]);
        }
        other => panic!("expected BadShape, got {other}"),
    }
    assert_names(&err, &path, "blk.2.shortconv.conv.weight");

    // The k projection's width follows the per-layer KV head count.
    let mut spec = Spec::new();
    spec.tensor_mut("blk.3.attn_k.weight").2 = vec![HIDDEN, HIDDEN];
    let (_, r) = load(&spec, "bad-k");
    assert!(
        matches!(r.unwrap_err(), LoadError::BadShape { tensor, expected, .. }
        if tensor == "blk.3.attn_k.weight" && expected == vec![HIDDEN, 32])
    );
}

#[test]
fn wrong_architecture_is_named() {
    let mut spec = Spec::new();
    *spec.kv_mut("general.architecture") = "qwen35".into();
    let (path, r) = load(&spec, "wrong-arch");
    let err = r.unwrap_err();
    assert!(
        matches!(&err, LoadError::WrongArchitecture { file, found, .. } if file == &path && found == "qwen35"),
        "{err}"
    );
    assert_names(&err, &path, "qwen35");
}

#[test]
fn missing_key_is_named() {
    let mut spec = Spec::new();
    spec.kvs.retain(|k| k.0 != "lfm2.shortconv.l_cache");
    let (path, r) = load(&spec, "missing-key");
    let err = r.unwrap_err();
    assert!(
        matches!(&err, LoadError::MissingKey { file, key } if file == &path && key == "lfm2.shortconv.l_cache"),
        "{err}"
    );
    assert_names(&err, &path, "lfm2.shortconv.l_cache");
}

#[test]
fn quantized_norm_is_a_bad_type() {
    let mut spec = Spec::new();
    spec.tensor_mut("blk.0.ffn_norm.weight").1 = GgmlType::Q8_0;
    let (path, r) = load(&spec, "q8-norm");
    let err = r.unwrap_err();
    assert!(
        matches!(&err, LoadError::BadType { file, tensor, found }
        if file == &path && tensor == "blk.0.ffn_norm.weight" && *found == GgmlType::Q8_0),
        "{err}"
    );
    assert_names(&err, &path, "blk.0.ffn_norm.weight");

    // Matrices may be quantized.
    let mut spec = Spec::new();
    spec.tensor_mut("blk.0.ffn_up.weight").1 = GgmlType::Q8_0;
    spec.tensor_mut("token_embd.weight").1 = GgmlType::Q4_0;
    load(&spec, "q8-matrix").1.unwrap();
}

#[test]
fn missing_file_is_named() {
    let path = Path::new("/nonexistent/backbone-Q8_0.gguf");
    let err = Lfm2Backbone::open(path).unwrap_err();
    assert!(
        matches!(&err, LoadError::MissingFile { file } if file == path),
        "{err}"
    );
    assert_names(&err, path, "not found");
}

#[test]
fn config_agrees_with_llama_cpp() {
    let spec = Spec::new();
    let path = spec.write("llama");
    let ours = Lfm2Backbone::open(&path);
    let llama = LlmModel::load(&path);
    let _ = std::fs::remove_file(&path);
    let c = ours.unwrap().config;
    let llama = llama.unwrap();
    assert_eq!(llama.architecture(), "lfm2");
    assert_eq!(llama.n_layer(), c.num_hidden_layers as usize);
    assert_eq!(llama.n_embd(), c.hidden_size as usize);
    assert_eq!(llama.n_vocab(), c.vocab_size as usize);
}
