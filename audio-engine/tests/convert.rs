//! Converter and package loader: a tiny Hugging Face checkpoint converted at every output type,
//! each file checked for the published names, keys and per-tensor types, values checked against
//! the checkpoint, the LFM2 files loaded by llama.cpp itself, and every typed load error provoked.

#[path = "common/scratch.rs"]
mod scratch;

use std::path::{Path, PathBuf};

use audio_engine::ggml::dtype::{f16_to_f32, f32_to_f16};
use audio_engine::ggml::gguf::{GgufFile, GgufValue, GgufWriter};
use audio_engine::ggml::{quant, GgmlType};
use audio_engine::lfm2_audio::internals::package::{ModelPackage, PackagePaths};
use audio_engine::lfm2_audio::internals::package::{Quant, UnknownQuant};
use audio_engine::lfm2_audio::LoadError;
use audio_tooling::convert::{convert, convert_files, ConvertError, NoProgress, Parts, Progress};
use audio_tooling::safetensors::SafeTensorsWriter;
use lfm2_llm::llama::LlamaModel;
use serde_json::json;

const MODEL: &str = "Tiny-Audio";
const H: usize = 256; // backbone width: Q6_K fits the tied embedding
const VOCAB: usize = 288;
const DH: usize = 64; // detokenizer width: Q6_K does not fit, Q8_0 does
const D: usize = 64; // depthformer width
const CB: usize = 2; // codebooks
const AV: usize = 17; // audio vocabulary per codebook (16 codes + end of audio)

/// A fresh scratch directory (removed with the process's scratch root at exit).
fn tmp(name: &str) -> PathBuf {
    scratch::dir(&format!("convert-test-{name}"))
}

/// Deterministic values in [-1, 1).
struct Rng(u64);
impl Rng {
    fn vals(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| {
                self.0 = self
                    .0
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }
}

fn add(w: &mut SafeTensorsWriter, rng: &mut Rng, name: &str, shape: &[usize]) {
    let n = shape.iter().product();
    w.add_f32(name, shape, &rng.vals(n));
}

fn lfm2_layers(
    w: &mut SafeTensorsWriter,
    rng: &mut Rng,
    h: usize,
    ff: usize,
    kv: usize,
    hd: usize,
) {
    // layer 0: short conv; layer 1: attention.
    add(w, rng, "lfm.layers.0.conv.conv.weight", &[h, 1, 3]);
    add(w, rng, "lfm.layers.0.conv.in_proj.weight", &[3 * h, h]);
    add(w, rng, "lfm.layers.0.conv.out_proj.weight", &[h, h]);
    add(w, rng, "lfm.layers.1.self_attn.q_proj.weight", &[h, h]);
    add(
        w,
        rng,
        "lfm.layers.1.self_attn.k_proj.weight",
        &[kv * hd, h],
    );
    add(
        w,
        rng,
        "lfm.layers.1.self_attn.v_proj.weight",
        &[kv * hd, h],
    );
    add(w, rng, "lfm.layers.1.self_attn.out_proj.weight", &[h, h]);
    add(w, rng, "lfm.layers.1.self_attn.q_layernorm.weight", &[hd]);
    add(w, rng, "lfm.layers.1.self_attn.k_layernorm.weight", &[hd]);
    for l in 0..2 {
        add(
            w,
            rng,
            &format!("lfm.layers.{l}.feed_forward.w1.weight"),
            &[ff, h],
        );
        add(
            w,
            rng,
            &format!("lfm.layers.{l}.feed_forward.w3.weight"),
            &[ff, h],
        );
        add(
            w,
            rng,
            &format!("lfm.layers.{l}.feed_forward.w2.weight"),
            &[h, ff],
        );
        add(
            w,
            rng,
            &format!("lfm.layers.{l}.operator_norm.weight"),
            &[h],
        );
        add(w, rng, &format!("lfm.layers.{l}.ffn_norm.weight"), &[h]);
    }
    add(w, rng, "lfm.embedding_norm.weight", &[h]);
}

/// GPT-2's byte-to-character table.
fn byte_chars() -> Vec<char> {
    let mut bs: Vec<u32> = (b'!' as u32..=b'~' as u32)
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut cs = bs.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !bs.contains(&b) {
            bs.push(b);
            cs.push(256 + n);
            n += 1;
        }
    }
    let mut out = vec![' '; 256];
    for (b, c) in bs.iter().zip(cs) {
        out[*b as usize] = char::from_u32(c).unwrap();
    }
    out
}

/// A tiny checkpoint in the layout liquid-audio loads.
fn tiny_checkpoint(dir: &Path) {
    let mut rng = Rng(7);
    let cfg = json!({
        "architectures": ["Lfm2AudioForConditionalGeneration"],
        "codebooks": CB,
        "interleaved_n_text": 6,
        "interleaved_n_audio": 12,
        "lfm": {
            "architectures": ["Lfm2ForCausalLM"],
            "hidden_size": H, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "layer_types": ["conv", "full_attention"],
            "block_ff_dim": 768, "intermediate_size": 768, "block_auto_adjust_ff_dim": true,
            "block_ffn_dim_multiplier": 1.0, "block_multiple_of": 256, "conv_L_cache": 3,
            "norm_eps": 1e-5, "rope_theta": 1000000.0, "max_position_embeddings": 1024,
            "vocab_size": VOCAB
        },
        "depthformer": {"layers": 2, "dim": D},
        "encoder": {"d_model": 32}
    });
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();

    // Tokenizer: 8 special tokens, 256 byte tokens, 3 merges, the rest holes.
    let specials = [
        "<|pad|>",
        "<|startoftext|>",
        "<|endoftext|>",
        "<|reserved_0|>",
        "<|reserved_1|>",
        "<|reserved_2|>",
        "<|im_start|>",
        "<|im_end|>",
    ];
    let mut vocab = serde_json::Map::new();
    for (i, c) in byte_chars().into_iter().enumerate() {
        vocab.insert(c.to_string(), json!(8 + i));
    }
    for (i, t) in ["Ġt", "he", "Ġthe"].iter().enumerate() {
        vocab.insert(t.to_string(), json!(264 + i));
    }
    let added: Vec<_> = specials
        .iter()
        .enumerate()
        .map(|(i, s)| json!({"id": i, "content": s, "special": true, "normalized": false}))
        .collect();
    let tok = json!({
        "added_tokens": added,
        "post_processor": {"type": "TemplateProcessing", "single": [
            {"SpecialToken": {"id": "<|startoftext|>", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}}]},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab, "merges": [["Ġ", "t"], ["h", "e"], ["Ġt", "he"]]}
    });
    std::fs::write(dir.join("tokenizer.json"), tok.to_string()).unwrap();
    let tok_cfg = json!({"bos_token": "<|startoftext|>", "eos_token": "<|im_end|>", "pad_token": "<|pad|>",
        "add_bos_token": true, "add_eos_token": false, "chat_template": "{{ messages }}"});
    std::fs::write(dir.join("tokenizer_config.json"), tok_cfg.to_string()).unwrap();

    let mut w = SafeTensorsWriter::new();
    add(&mut w, &mut rng, "lfm.embed_tokens.weight", &[VOCAB, H]);
    lfm2_layers(&mut w, &mut rng, H, 512, 2, 64);
    w.add_i64("codebook_offsets", &[CB], &[0, 2049]);
    add(&mut w, &mut rng, "audio_loss_weights", &[CB]);
    for l in 0..2 {
        let p = |s: &str| format!("depthformer.layers.{l}.{s}");
        add(
            &mut w,
            &mut rng,
            &p("operator.qkv_proj.weight"),
            &[D + 2 * 2 * 16, D],
        );
        add(&mut w, &mut rng, &p("operator.out_proj.weight"), &[D, D]);
        add(
            &mut w,
            &mut rng,
            &p("operator.bounded_attention.q_layernorm.weight"),
            &[16],
        );
        add(
            &mut w,
            &mut rng,
            &p("operator.bounded_attention.k_layernorm.weight"),
            &[16],
        );
        add(&mut w, &mut rng, &p("feed_forward.w1.weight"), &[96, D]);
        add(&mut w, &mut rng, &p("feed_forward.w3.weight"), &[96, D]);
        add(&mut w, &mut rng, &p("feed_forward.w2.weight"), &[D, 96]);
        add(&mut w, &mut rng, &p("operator_norm.weight"), &[D]);
        add(&mut w, &mut rng, &p("ffn_norm.weight"), &[D]);
    }
    add(&mut w, &mut rng, "depth_linear.weight", &[CB * D, H]);
    add(&mut w, &mut rng, "depth_linear.bias", &[CB * D]);
    for c in 0..CB {
        add(
            &mut w,
            &mut rng,
            &format!("depth_embeddings.{c}.embedding.weight"),
            &[AV, D],
        );
        add(
            &mut w,
            &mut rng,
            &format!("depth_embeddings.{c}.embedding_norm.weight"),
            &[D],
        );
        add(
            &mut w,
            &mut rng,
            &format!("depth_embeddings.{c}.to_logits.weight"),
            &[AV, D],
        );
    }
    add(
        &mut w,
        &mut rng,
        "audio_embedding.embedding.weight",
        &[CB * AV, H],
    );
    add(
        &mut w,
        &mut rng,
        "audio_embedding.embedding_norm.weight",
        &[H],
    );
    add(
        &mut w,
        &mut rng,
        "audio_embedding.to_logits.weight",
        &[CB * AV, H],
    );
    w.write(dir.join("model.safetensors")).unwrap();

    let dd = dir.join("audio_detokenizer");
    std::fs::create_dir_all(&dd).unwrap();
    let dcfg = json!({
        "architectures": ["Lfm25AudioTokenizer"],
        "hidden_size": DH, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 2,
        "layer_types": ["conv", "sliding_attention"], "block_ff_dim": 192, "block_auto_adjust_ff_dim": true,
        "block_ffn_dim_multiplier": 1.0, "block_multiple_of": 32, "conv_L_cache": 3, "norm_eps": 1e-5,
        "rope_theta": 1000000.0, "max_position_embeddings": 512, "vocab_size": 32,
        "sliding_window": 30, "output_size": 18
    });
    std::fs::write(dd.join("config.json"), dcfg.to_string()).unwrap();
    let mut w = SafeTensorsWriter::new();
    add(&mut w, &mut rng, "emb.emb.weight", &[CB * 16, DH]);
    add(&mut w, &mut rng, "lfm.embed_tokens.weight", &[32, DH]);
    lfm2_layers(&mut w, &mut rng, DH, 128, 2, 32);
    add(&mut w, &mut rng, "lin.weight", &[18, DH]);
    add(&mut w, &mut rng, "lin.bias", &[18]);
    add(&mut w, &mut rng, "istft.window", &[16]);
    w.write(dd.join("model.safetensors")).unwrap();
}

/// The tiny checkpoint has no encoder (the mmproj converter has its own tests): an mmproj with
/// the published markers and the audio-code embedding, so the package opens.
fn stub_mmproj(path: &Path) {
    let mut w = GgufWriter::new();
    w.add_kv("general.architecture", "clip").unwrap();
    w.add_kv("clip.projector_type", "lfm2a").unwrap();
    let data = vec![0u8; 4 * H * CB * AV];
    w.add_tensor(
        "a.position_embd.weight",
        GgmlType::F32,
        &[H as u64, (CB * AV) as u64],
        data,
    )
    .unwrap();
    w.write_to_path(path).unwrap();
}

struct Count(usize, Vec<PathBuf>);
impl Progress for Count {
    fn tensor(&mut self, file: &Path, _tensor: &str, done: usize, total: usize) {
        assert!(done >= 1 && done <= total);
        self.0 += 1;
        if !self.1.iter().any(|f| f == file) {
            self.1.push(file.to_path_buf());
        }
    }
}

/// Converts `ckpt` at `ty` into `out` (the mmproj stubbed: the tiny checkpoint has no encoder).
fn package(ckpt: &Path, out: &Path, ty: Quant) -> PackagePaths {
    let parts = Parts {
        mmproj: false,
        ..Parts::ALL
    };
    let mut count = Count(0, Vec::new());
    let paths = convert_files(ckpt, out, MODEL, ty, parts, &mut count).unwrap();
    assert_eq!(count.1.len(), 3, "progress reported for three files");
    assert!(count.0 > 40);
    stub_mmproj(&paths.mmproj);
    paths
}

fn ty_of(g: &GgufFile, name: &str) -> GgmlType {
    g.tensor(name)
        .unwrap_or_else(|| panic!("no tensor {name}"))
        .ggml_type()
}

fn values(g: &GgufFile, name: &str) -> Vec<f32> {
    g.tensor_to_f32(g.tensor(name).unwrap()).unwrap()
}

fn ckpt_values(ckpt: &Path, file: &str, name: &str) -> Vec<f32> {
    audio_tooling::safetensors::SafeTensors::open(ckpt.join(file))
        .unwrap()
        .f32(name)
        .unwrap()
}

fn round_f16(v: &[f32]) -> Vec<f32> {
    v.iter().map(|x| f16_to_f32(f32_to_f16(*x))).collect()
}

#[test]
fn names_keys_types_and_values_as_published() {
    let ckpt = tmp("ckpt-a");
    tiny_checkpoint(&ckpt);
    for ty in Quant::ALL {
        let out = tmp(&format!("out-{ty}"));
        let paths = package(&ckpt, &out, ty);
        assert_eq!(
            paths.backbone.file_name().unwrap(),
            format!("Tiny-Audio-{}.gguf", ty.file_suffix()).as_str()
        );
        assert_eq!(
            paths.vocoder.file_name().unwrap(),
            format!("vocoder-Tiny-Audio-{}.gguf", ty.file_suffix()).as_str()
        );
        let pkg = ModelPackage::open(&out).unwrap_or_else(|e| panic!("{ty}: {e}"));
        assert_eq!(pkg.paths.quant, ty);
        let bb = &pkg.backbone.gguf;
        let md = bb.metadata();
        assert_eq!(
            md.get("general.architecture").unwrap().as_str(),
            Some("lfm2")
        );
        assert_eq!(
            md.get("tokenizer.ggml.model").unwrap().as_str(),
            Some("gpt2")
        );
        assert_eq!(md.get("tokenizer.ggml.pre").unwrap().as_str(), Some("lfm2"));
        assert_eq!(
            md.get("general.file_type"),
            Some(&GgufValue::U32(ty.llama_ftype()))
        );
        assert_eq!(
            md.get("lfm2.feed_forward_length"),
            Some(&GgufValue::U32(512))
        );
        assert_eq!(
            md.get("lfm2.attention.head_count_kv"),
            Some(&GgufValue::from(vec![0i32, 2]))
        );
        assert_eq!(md.get("lfm2.shortconv.l_cache"), Some(&GgufValue::U32(3)));
        assert_eq!(
            md.get("lfm2.vocab_size"),
            Some(&GgufValue::U32(VOCAB as u32))
        );
        assert_eq!(
            md.get("tokenizer.ggml.bos_token_id"),
            Some(&GgufValue::U32(1))
        );
        assert_eq!(
            md.get("tokenizer.ggml.eos_token_id"),
            Some(&GgufValue::U32(7))
        );
        assert_eq!(
            md.get("tokenizer.ggml.padding_token_id"),
            Some(&GgufValue::U32(0))
        );
        assert_eq!(
            md.get("tokenizer.ggml.add_bos_token"),
            Some(&GgufValue::Bool(true))
        );
        assert_eq!(
            md.get("tokenizer.ggml.add_eos_token"),
            Some(&GgufValue::Bool(false))
        );
        assert_eq!(
            md.get("tokenizer.chat_template").unwrap().as_str(),
            Some("{{ messages }}")
        );
        let GgufValue::Array(tokens) = md.get("tokenizer.ggml.tokens").unwrap() else {
            panic!()
        };
        assert_eq!(tokens.len(), VOCAB);
        let types = md
            .get("tokenizer.ggml.token_type")
            .unwrap()
            .as_array()
            .unwrap()
            .to_integers()
            .unwrap();
        assert_eq!(
            (types[1], types[8], types[266], types[287]),
            (3, 1, 1, 5),
            "control, normal, merged, hole"
        );
        let merges = md.get("tokenizer.ggml.merges").unwrap();
        assert_eq!(merges, &GgufValue::from(vec!["Ġ t", "h e", "Ġt he"]));
        // llama-quantize moves the two keys it re-sets to the end.
        let last: Vec<&str> = md.keys().collect();
        if ty.is_quantized() {
            assert_eq!(
                &last[last.len() - 2..],
                ["general.quantization_version", "general.file_type"]
            );
        }

        let matrix = ty.matrix_type();
        let embd = match ty {
            Quant::Q4_0 => GgmlType::Q6_K,
            _ => matrix,
        };
        assert_eq!(ty_of(bb, "token_embd.weight"), embd);
        for n in [
            "blk.0.shortconv.in_proj.weight",
            "blk.1.attn_k.weight",
            "blk.1.ffn_down.weight",
        ] {
            assert_eq!(ty_of(bb, n), matrix, "{ty} {n}");
        }
        for n in [
            "token_embd_norm.weight",
            "blk.0.attn_norm.weight",
            "blk.1.attn_q_norm.weight",
            "blk.0.shortconv.conv.weight",
        ] {
            assert_eq!(ty_of(bb, n), GgmlType::F32, "{ty} {n}");
        }
        assert_eq!(
            bb.tensor("blk.0.shortconv.conv.weight").unwrap().shape(),
            [3, H as u64]
        );
        assert_eq!(
            bb.tensor("blk.1.attn_k.weight").unwrap().shape(),
            [H as u64, 128]
        );

        // Values: F32 exact; F16 the checkpoint rounded; Q* ggml's quantizer on the F16 values.
        let conv = ckpt_values(&ckpt, "model.safetensors", "lfm.layers.0.conv.conv.weight");
        assert_eq!(values(bb, "blk.0.shortconv.conv.weight"), conv);
        let w2 = ckpt_values(
            &ckpt,
            "model.safetensors",
            "lfm.layers.1.feed_forward.w2.weight",
        );
        let t = bb.tensor("blk.1.ffn_down.weight").unwrap();
        match ty {
            Quant::F32 => assert_eq!(values(bb, "blk.1.ffn_down.weight"), w2),
            Quant::F16 => assert_eq!(values(bb, "blk.1.ffn_down.weight"), round_f16(&w2)),
            _ => {
                let want = quant::quantize(matrix, &round_f16(&w2), 512).unwrap();
                assert_eq!(
                    bb.tensor_data(t),
                    want.as_slice(),
                    "{ty}: bytes as llama-quantize writes"
                );
            }
        }

        // Vocoder: Hugging Face names, `attention` shortened, 1-D and biases F32.
        let vc = &pkg.vocoder;
        assert_eq!(
            vc.gguf.metadata().get("depthformer_n_layer"),
            Some(&GgufValue::U32(2))
        );
        assert_eq!(
            vc.gguf.metadata().get("depthformer_n_embd"),
            Some(&GgufValue::U32(D as u32))
        );
        assert_eq!(vc.config.codebooks, CB as u32);
        assert_eq!(vc.config.audio_vocab, AV as u32);
        assert_eq!(
            (vc.config.head_dim, vc.config.n_head, vc.config.n_head_kv),
            (16, 4, 2)
        );
        assert_eq!(vc.config.interleaved_n_text, Some(6));
        assert!(
            vc.gguf.tensor("lin.weight").is_none()
                && vc.gguf.tensor("lfm.embed_tokens.weight").is_none()
        );
        assert_eq!(
            ty_of(
                &vc.gguf,
                "depthformer.layers.1.operator.attention.q_layernorm.weight"
            ),
            GgmlType::F32
        );
        assert_eq!(ty_of(&vc.gguf, "depth_linear.bias"), GgmlType::F32);
        assert_eq!(ty_of(&vc.gguf, "istft.window"), GgmlType::F32);
        assert_eq!(ty_of(&vc.gguf, "depth_linear.weight"), matrix);
        assert_eq!(ty_of(&vc.gguf, "emb.emb.weight"), matrix);
        let win = ckpt_values(&ckpt, "audio_detokenizer/model.safetensors", "istft.window");
        assert_eq!(values(&vc.gguf, "istft.window"), win);
        let dl = ckpt_values(&ckpt, "model.safetensors", "depth_linear.weight");
        if ty.is_quantized() {
            // The vocoder script quantizes the checkpoint's values directly.
            let want = quant::quantize(matrix, &dl, H).unwrap();
            assert_eq!(
                vc.gguf
                    .tensor_data(vc.gguf.tensor("depth_linear.weight").unwrap()),
                want.as_slice()
            );
        } else if ty == Quant::F32 {
            assert_eq!(values(&vc.gguf, "depth_linear.weight"), dl);
        }

        // Detokenizer: lfm2 with the window, the head, no vocabulary.
        let dt = &pkg.detokenizer;
        let dmd = dt.lfm2.gguf.metadata();
        assert_eq!(dt.sliding_window, 30);
        assert_eq!(dt.n_embd_out, 18);
        assert_eq!(
            dmd.get("tokenizer.ggml.model").unwrap().as_str(),
            Some("none")
        );
        assert_eq!(
            dmd.get("lfm2.attention.head_count_kv"),
            Some(&GgufValue::from(vec![0i32, 2]))
        );
        assert_eq!(
            dmd.get("lfm2.feed_forward_length"),
            Some(&GgufValue::U32(128))
        );
        assert_eq!(ty_of(&dt.lfm2.gguf, "dense_2.bias"), GgmlType::F32);
        assert_eq!(ty_of(&dt.lfm2.gguf, "dense_2.weight"), matrix);
        // 64 columns: Q6_K does not fit, so llama-quantize falls back to Q8_0.
        let dembd = if ty.is_quantized() {
            GgmlType::Q8_0
        } else {
            matrix
        };
        assert_eq!(ty_of(&dt.lfm2.gguf, "token_embd.weight"), dembd);
        assert!(dt.lfm2.gguf.tensor("emb.emb.weight").is_none());
        let bias = ckpt_values(&ckpt, "audio_detokenizer/model.safetensors", "lin.bias");
        assert_eq!(values(&dt.lfm2.gguf, "dense_2.bias"), bias);
    }
}

#[test]
fn llama_cpp_loads_backbone_and_detokenizer() {
    let ckpt = tmp("ckpt-b");
    tiny_checkpoint(&ckpt);
    for ty in [Quant::F16, Quant::Q4_0] {
        let out = tmp(&format!("llama-{ty}"));
        let paths = package(&ckpt, &out, ty);
        let m = LlamaModel::load(&paths.backbone).unwrap_or_else(|e| panic!("{ty} backbone: {e}"));
        assert_eq!((m.n_vocab(), m.n_embd(), m.n_layer()), (VOCAB, H, 2));
        assert_eq!(m.architecture(), "lfm2");
        let d =
            LlamaModel::load(&paths.tokenizer).unwrap_or_else(|e| panic!("{ty} detokenizer: {e}"));
        assert_eq!((d.n_embd(), d.n_layer()), (DH, 2));
    }
}

/// Copies `src` to `dst`, dropping tensor `drop` and giving tensor `reshape.0` shape `reshape.1`,
/// and overriding metadata `set`.
fn rewrite(
    src: &Path,
    dst: &Path,
    drop: Option<&str>,
    reshape: Option<(&str, Vec<u64>)>,
    set: Option<(&str, GgufValue)>,
) {
    let g = GgufFile::open(src).unwrap();
    let mut w = GgufWriter::new();
    w.extend_metadata(g.metadata()).unwrap();
    if let Some((k, v)) = set {
        w.set_kv(k, v).unwrap();
    }
    for t in g.tensors() {
        if Some(t.name()) == drop {
            continue;
        }
        let shape = match &reshape {
            Some((n, s)) if *n == t.name() => s.clone(),
            _ => t.shape().to_vec(),
        };
        w.add_tensor(t.name(), t.ggml_type(), &shape, g.tensor_data(t).to_vec())
            .unwrap();
    }
    drop_file(dst);
    w.write_to_path(dst).unwrap();
}

fn drop_file(p: &Path) {
    let _ = std::fs::remove_file(p);
}

#[test]
fn typed_errors_name_file_and_tensor() {
    let ckpt = tmp("ckpt-c");
    tiny_checkpoint(&ckpt);
    let out = tmp("errors");
    let paths = package(&ckpt, &out, Quant::F32);
    let keep = tmp("errors-keep");
    let saved = |p: &Path| keep.join(p.file_name().unwrap());
    for p in [
        &paths.backbone,
        &paths.mmproj,
        &paths.vocoder,
        &paths.tokenizer,
    ] {
        std::fs::copy(p, saved(p)).unwrap();
    }
    let restore = |p: &Path| std::fs::copy(saved(p), p).map(drop).unwrap();
    ModelPackage::open(&out).unwrap();

    // Missing file.
    drop_file(&paths.vocoder);
    match ModelPackage::open(&out) {
        Err(LoadError::MissingFile { file }) => assert_eq!(file, paths.vocoder),
        other => panic!("{other:?}"),
    }
    restore(&paths.vocoder);

    // Missing tensor (vocoder and detokenizer).
    let name = "depthformer.layers.1.feed_forward.w3.weight";
    rewrite(
        &saved(&paths.vocoder),
        &paths.vocoder,
        Some(name),
        None,
        None,
    );
    match ModelPackage::open(&out) {
        Err(LoadError::MissingTensor { file, tensor }) => {
            assert_eq!((file, tensor.as_str()), (paths.vocoder.clone(), name))
        }
        other => panic!("{other:?}"),
    }
    restore(&paths.vocoder);
    rewrite(
        &saved(&paths.tokenizer),
        &paths.tokenizer,
        Some("dense_2.weight"),
        None,
        None,
    );
    match ModelPackage::open(&out) {
        Err(LoadError::MissingTensor { file, tensor }) => assert_eq!(
            (file, tensor.as_str()),
            (paths.tokenizer.clone(), "dense_2.weight")
        ),
        other => panic!("{other:?}"),
    }
    restore(&paths.tokenizer);

    // Bad shape: a depth embedding with the wrong vocabulary.
    let name = "depth_embeddings.1.to_logits.weight";
    rewrite(
        &saved(&paths.vocoder),
        &paths.vocoder,
        None,
        Some((name, vec![AV as u64, D as u64])),
        None,
    );
    match ModelPackage::open(&out) {
        Err(LoadError::BadShape {
            file,
            tensor,
            expected,
            found,
        }) => {
            assert_eq!((file, tensor.as_str()), (paths.vocoder.clone(), name));
            assert_eq!(
                (expected, found),
                (vec![D as u64, AV as u64], vec![AV as u64, D as u64])
            );
        }
        other => panic!("{other:?}"),
    }
    restore(&paths.vocoder);
    // ... and in the backbone, through Lfm2Backbone.
    let name = "blk.1.attn_v.weight";
    rewrite(
        &saved(&paths.backbone),
        &paths.backbone,
        None,
        Some((name, vec![128, H as u64])),
        None,
    );
    match ModelPackage::open(&out) {
        Err(LoadError::BadShape { file, tensor, .. }) => {
            assert_eq!((file, tensor.as_str()), (paths.backbone.clone(), name))
        }
        other => panic!("{other:?}"),
    }
    restore(&paths.backbone);

    // Wrong architecture: mmproj and backbone.
    rewrite(
        &saved(&paths.mmproj),
        &paths.mmproj,
        None,
        None,
        Some(("general.architecture", "llama".into())),
    );
    match ModelPackage::open(&out) {
        Err(LoadError::WrongArchitecture {
            file,
            found,
            expected,
        }) => {
            assert_eq!(
                (file, found.as_str(), expected.as_str()),
                (paths.mmproj.clone(), "llama", "clip")
            )
        }
        other => panic!("{other:?}"),
    }
    restore(&paths.mmproj);
    rewrite(
        &saved(&paths.backbone),
        &paths.backbone,
        None,
        None,
        Some(("general.architecture", "qwen2".into())),
    );
    assert!(
        matches!(ModelPackage::open(&out), Err(LoadError::WrongArchitecture { file, .. }) if file == paths.backbone)
    );
    restore(&paths.backbone);

    // Missing key: the detokenizer's window, the vocoder's width.
    let g = GgufFile::open(saved(&paths.tokenizer)).unwrap();
    let mut w = GgufWriter::new();
    let mut md = g.metadata().clone();
    md.remove("lfm2.attention.sliding_window");
    w.extend_metadata(&md).unwrap();
    for t in g.tensors() {
        w.add_tensor(
            t.name(),
            t.ggml_type(),
            t.shape(),
            g.tensor_data(t).to_vec(),
        )
        .unwrap();
    }
    drop_file(&paths.tokenizer);
    w.write_to_path(&paths.tokenizer).unwrap();
    match ModelPackage::open(&out) {
        Err(LoadError::MissingKey { file, key }) => assert_eq!(
            (file, key.as_str()),
            (paths.tokenizer.clone(), "lfm2.attention.sliding_window")
        ),
        other => panic!("{other:?}"),
    }
    restore(&paths.tokenizer);
    ModelPackage::open(&out).unwrap();

    // Several quantizations: the caller chooses.
    package(&ckpt, &out, Quant::Q8_0);
    match ModelPackage::open(&out) {
        Err(LoadError::AmbiguousPackage { found, .. }) => {
            assert_eq!(found, ["Tiny-Audio-F32", "Tiny-Audio-Q8_0"])
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        ModelPackage::open_quant(&out, Quant::Q8_0)
            .unwrap()
            .paths
            .quant,
        Quant::Q8_0
    );
    assert!(
        matches!(ModelPackage::open_quant(&out, Quant::Q4_0), Err(LoadError::NoPackage { wanted: Some(q), found, .. }) if q == "Q4_0" && found.len() == 2)
    );
    assert!(matches!(
        ModelPackage::open(tmp("empty")),
        Err(LoadError::NoPackage { .. })
    ));
}

#[test]
fn converter_errors_are_typed() {
    let ckpt = tmp("ckpt-d");
    tiny_checkpoint(&ckpt);
    let out = tmp("conv-errors");
    // No detokenizer weights.
    std::fs::rename(
        ckpt.join("audio_detokenizer/model.safetensors"),
        ckpt.join("moved.safetensors"),
    )
    .unwrap();
    match convert(&ckpt, &out, MODEL, Quant::F16, &mut NoProgress) {
        Err(ConvertError::MissingFile { file }) => {
            assert!(file.ends_with("audio_detokenizer/model.safetensors"))
        }
        other => panic!("{other:?}"),
    }
    std::fs::rename(
        ckpt.join("moved.safetensors"),
        ckpt.join("audio_detokenizer/model.safetensors"),
    )
    .unwrap();
    // The full conversion runs the mmproj step, which needs the encoder's config.
    match convert(&ckpt, &out, MODEL, Quant::F16, &mut NoProgress) {
        Err(ConvertError::BadConfig { file, reason }) => {
            assert!(
                file.ends_with("config.json") && reason.contains("encoder"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    // A backbone config without its `lfm` section.
    let cfg = std::fs::read_to_string(ckpt.join("config.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&cfg).unwrap();
    v.as_object_mut().unwrap().remove("lfm");
    std::fs::write(ckpt.join("config.json"), v.to_string()).unwrap();
    let parts = Parts {
        mmproj: false,
        ..Parts::ALL
    };
    match convert_files(&ckpt, &out, MODEL, Quant::F16, parts, &mut NoProgress) {
        Err(ConvertError::BadConfig { file, reason }) => {
            assert!(
                file.ends_with("config.json") && reason.contains("lfm"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    std::fs::write(ckpt.join("config.json"), cfg).unwrap();
    assert!(matches!(
        convert_files(&ckpt, &out, "a/b", Quant::F16, parts, &mut NoProgress),
        Err(ConvertError::BadArgument { .. })
    ));
    assert_eq!(
        "q5_k".parse::<Quant>(),
        Err(UnknownQuant("q5_k".to_owned()))
    );
    assert!(matches!(
        ConvertError::from("q5_k".parse::<Quant>().unwrap_err()),
        ConvertError::BadArgument { .. }
    ));
    assert_eq!("q4_0".parse::<Quant>().unwrap(), Quant::Q4_0);
    // An unmappable backbone tensor.
    let st = audio_tooling::safetensors::SafeTensors::open(ckpt.join("model.safetensors")).unwrap();
    let mut w = SafeTensorsWriter::new();
    for n in st.names() {
        let t = st.tensor(n).unwrap();
        if t.dtype == audio_tooling::safetensors::Dtype::I64 {
            continue;
        }
        w.add_f32(n, t.shape, &st.f32(n).unwrap());
    }
    w.add_f32("lfm.layers.0.mystery.weight", &[2, 2], &[0.0; 4]);
    drop(st);
    w.write(ckpt.join("model.safetensors")).unwrap();
    match convert_files(&ckpt, &out, MODEL, Quant::F16, parts, &mut NoProgress) {
        Err(ConvertError::BadTensor { tensor, .. }) => {
            assert_eq!(tensor, "lfm.layers.0.mystery.weight")
        }
        other => panic!("{other:?}"),
    }
}
