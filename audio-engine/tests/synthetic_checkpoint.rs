//! The synthetic tiny checkpoint: deterministic bytes, and the published checkpoint's tensor
//! layout (names, ranks, dtypes) at the tiny dims.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

mod common;

use audio_tooling::safetensors::{Dtype, SafeTensors};
use audio_tooling::synthetic::{
    tiny_input_signal, write_tiny_checkpoint, TinyConfig, DEFAULT_SEED, INPUT_SIGNAL_SAMPLES,
};

const FILES: [&str; 7] = [
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "audio_detokenizer/config.json",
    "audio_detokenizer/model.safetensors",
];

/// The default checkpoint, written once (see `common::lfm2_tiny`).
fn shared() -> &'static Path {
    common::lfm2_tiny::checkpoint_dir()
}

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("synthetic_checkpoint_{name}"));
    let _ = fs::remove_dir_all(&d);
    d
}

/// Name pattern of a tensor: layer / codebook indices replaced by N (as the pattern file has).
fn pattern(name: &str) -> String {
    let parts: Vec<&str> = name.split('.').collect();
    let mut out = Vec::with_capacity(parts.len());
    for (i, p) in parts.iter().enumerate() {
        let container = i > 0 && (parts[i - 1] == "layers" || parts[i - 1] == "depth_embeddings");
        out.push(if container && p.parse::<usize>().is_ok() {
            "N"
        } else {
            p
        });
    }
    out.join(".")
}

/// The published patterns: name -> (rank, dtype).
fn published() -> BTreeMap<String, (usize, Dtype)> {
    let text = include_str!("fixtures/lfm2_tiny/hf-state-dict-patterns.txt");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split_whitespace();
            let name = it.next().expect("name").to_owned();
            let shape = it.next().expect("shape");
            let rank = shape
                .trim_matches(|c| c == '[' || c == ']')
                .split(',')
                .filter(|s| !s.is_empty())
                .count();
            let dtype = match it.next().expect("dtype") {
                "float32" => Dtype::F32,
                "int64" => Dtype::I64,
                other => panic!("dtype {other}"),
            };
            (name, (rank, dtype))
        })
        .collect()
}

#[test]
fn same_seed_same_bytes_other_seed_other_values() {
    let a = shared();
    let b = scratch("b");
    let c = scratch("c");
    write_tiny_checkpoint(&b, DEFAULT_SEED).unwrap();
    write_tiny_checkpoint(&c, DEFAULT_SEED + 1).unwrap();
    for f in FILES {
        let fa = fs::read(a.join(f)).unwrap();
        assert!(!fa.is_empty(), "{f} is empty");
        assert!(
            fa == fs::read(b.join(f)).unwrap(),
            "{f} differs for equal seeds"
        );
    }
    for f in ["model.safetensors", "audio_detokenizer/model.safetensors"] {
        let fa = SafeTensors::open(a.join(f)).unwrap();
        let fc = SafeTensors::open(c.join(f)).unwrap();
        // Same layout, but every random tensor changes with the seed.
        assert_eq!(
            fa.names().collect::<Vec<_>>(),
            fc.names().collect::<Vec<_>>()
        );
        for name in fa.names() {
            let (ta, tc) = (fa.tensor(name).unwrap(), fc.tensor(name).unwrap());
            assert_eq!(ta.shape, tc.shape, "{name}");
            let fixed = matches!(
                name,
                "codebook_offsets" | "audio_loss_weights" | "istft.window"
            ) || name.ends_with("num_batches_tracked");
            assert_eq!(ta.data == tc.data, fixed, "{name}: seed dependence");
        }
    }
    // Configs and tokenizer do not depend on the seed.
    assert_eq!(
        fs::read(a.join("config.json")).unwrap(),
        fs::read(c.join("config.json")).unwrap()
    );
}

#[test]
fn layout_matches_the_published_checkpoint() {
    let dir = shared();
    let cfg = TinyConfig::default();
    let main = SafeTensors::open(dir.join("model.safetensors")).unwrap();
    let detok = SafeTensors::open(dir.join("audio_detokenizer/model.safetensors")).unwrap();
    let want = published();

    let mut seen = BTreeSet::new();
    let mut shapes: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (prefix, file) in [("", &main), ("audio_detokenizer/", &detok)] {
        for name in file.names() {
            let full = format!("{prefix}{name}");
            let pat = pattern(&full);
            let t = file.tensor(name).unwrap();
            let (rank, dtype) = want
                .get(&pat)
                .unwrap_or_else(|| panic!("{full}: not in the published checkpoint"));
            assert_eq!(t.shape.len(), *rank, "{full}: rank");
            assert_eq!(t.dtype, *dtype, "{full}: dtype");
            seen.insert(pat);
            shapes.insert(full, t.shape.to_vec());
        }
    }
    let missing: Vec<_> = want.keys().filter(|k| !seen.contains(*k)).collect();
    assert!(
        missing.is_empty(),
        "patterns absent from the tiny checkpoint: {missing:?}"
    );

    // Dims, written out here independently of the generator.
    let c = &cfg;
    let shape = |n: &str| {
        shapes
            .get(n)
            .unwrap_or_else(|| panic!("{n} missing"))
            .clone()
    };
    let (h, hd, d) = (c.hidden, c.hidden / c.n_heads, c.enc_d_model);
    assert_eq!(shape("lfm.embed_tokens.weight"), [c.vocab_size, h]);
    for i in 0..c.n_layers {
        let p = format!("lfm.layers.{i}");
        if c.attn_layers.contains(&i) {
            assert_eq!(
                shape(&format!("{p}.self_attn.q_proj.weight")),
                [c.n_heads * hd, h]
            );
            assert_eq!(
                shape(&format!("{p}.self_attn.k_proj.weight")),
                [c.n_kv_heads * hd, h]
            );
            assert_eq!(shape(&format!("{p}.self_attn.k_layernorm.weight")), [hd]);
            assert!(!shapes.contains_key(&format!("{p}.conv.in_proj.weight")));
        } else {
            assert_eq!(shape(&format!("{p}.conv.in_proj.weight")), [3 * h, h]);
            assert_eq!(
                shape(&format!("{p}.conv.conv.weight")),
                [h, 1, c.conv_l_cache]
            );
            assert!(!shapes.contains_key(&format!("{p}.self_attn.q_proj.weight")));
        }
        assert_eq!(shape(&format!("{p}.feed_forward.w2.weight")), [h, 256]);
    }
    let ch = c.enc_subsampling_channels;
    assert_eq!(shape("conformer.pre_encode.conv.0.weight"), [ch, 1, 3, 3]);
    assert_eq!(shape("conformer.pre_encode.conv.6.weight"), [ch, ch, 1, 1]);
    assert_eq!(shape("conformer.pre_encode.out.weight"), [d, ch * 128 / 8]);
    assert_eq!(
        shape("conformer.layers.1.self_attn.pos_bias_u"),
        [c.enc_heads, d / c.enc_heads]
    );
    assert_eq!(
        shape("conformer.layers.1.conv.depthwise_conv.weight"),
        [d, 1, 9]
    );
    assert_eq!(
        shape("conformer.layers.1.conv.pointwise_conv1.weight"),
        [2 * d, d, 1]
    );
    assert_eq!(
        shape("conformer.layers.1.feed_forward2.linear1.weight"),
        [4 * d, d]
    );
    assert!(!shapes.contains_key(&format!(
        "conformer.layers.{}.norm_out.weight",
        c.enc_layers
    )));
    assert_eq!(shape("audio_adapter.model.1.weight"), [h, d]);
    assert_eq!(shape("audio_adapter.model.3.weight"), [h, h]);
    assert_eq!(shape("audio_embedding.embedding.weight"), [8 * 2049, h]);
    let dd = c.depth_dim;
    assert_eq!(shape("depth_linear.weight"), [8 * dd, h]);
    // 32 query heads, 8 KV heads: q + k + v widths.
    assert_eq!(
        shape("depthformer.layers.1.operator.qkv_proj.weight"),
        [dd + 2 * 8 * (dd / 32), dd]
    );
    assert_eq!(
        shape("depthformer.layers.0.operator.bounded_attention.q_layernorm.weight"),
        [dd / 32]
    );
    assert_eq!(shape("depth_embeddings.7.to_logits.weight"), [2049, dd]);
    assert!(!shapes.contains_key("depth_embeddings.8.embedding.weight"));
    assert_eq!(shape("audio_detokenizer/emb.emb.weight"), [8 * 2048, 512]);
    assert_eq!(shape("audio_detokenizer/lin.weight"), [1282, 512]);
    assert_eq!(shape("audio_detokenizer/istft.window"), [1280]);

    // Buffers with fixed meaning.
    let offsets = main.tensor("codebook_offsets").unwrap();
    let offsets: Vec<i64> = offsets
        .data
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(offsets, (0..8).map(|i| i * 2049).collect::<Vec<i64>>());
    let var = main
        .f32("conformer.layers.0.conv.batch_norm.running_var")
        .unwrap();
    assert!(var.iter().all(|&v| v > 0.4), "running_var must be positive");
    let window = detok.f32("istft.window").unwrap();
    assert_eq!(window[0], 0.0);
    assert_eq!(window[640], 1.0);
    assert!((window[320] - 0.5).abs() < 1e-7 && (window[1] - window[1279]).abs() < 1e-9);
    // Norm scales are 1 + noise, not all ones.
    let n = main.f32("lfm.layers.0.operator_norm.weight").unwrap();
    assert!(n.iter().all(|&v| (0.79..1.21).contains(&v)));
    assert!(n.iter().any(|&v| (v - 1.0).abs() > 0.05));
    // The backbone's final norm has scales of both signs (magnitude 1 ± 0.2).
    let n = main.f32("lfm.embedding_norm.weight").unwrap();
    assert!(n.iter().all(|&v| (0.79..1.21).contains(&v.abs())));
    assert!(n.iter().any(|&v| v < 0.0) && n.iter().any(|&v| v > 0.0));
}

#[test]
fn configs_and_tokenizer_carry_the_tiny_dims_and_special_ids() {
    let dir = shared();
    let cfg = TinyConfig::default();
    let read = |f: &str| -> serde_json::Value {
        serde_json::from_slice(&fs::read(dir.join(f)).unwrap()).unwrap()
    };
    let config = read("config.json");
    assert_eq!(config["lfm"]["hidden_size"], cfg.hidden);
    assert_eq!(config["lfm"]["layer_types"][1], "full_attention");
    assert_eq!(config["lfm"]["layer_types"][0], "conv");
    assert_eq!(config["encoder"]["d_model"], cfg.enc_d_model);
    assert_eq!(config["depthformer"]["dim"], cfg.depth_dim);
    assert_eq!(config["interleaved_n_audio"], 12);
    let detok = read("audio_detokenizer/config.json");
    assert_eq!(detok["layer_types"][1], "sliding_attention");
    assert_eq!(detok["sliding_window"], 30);

    let tok = read("tokenizer.json");
    let vocab = tok["model"]["vocab"].as_object().unwrap();
    assert_eq!(vocab.len(), cfg.vocab_size);
    let ids: Vec<u64> = vocab.values().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!(
        ids.iter().copied().collect::<BTreeSet<_>>(),
        (0..cfg.vocab_size as u64).collect()
    );
    for (id, name) in [
        (0, "<|pad|>"),
        (1, "<|startoftext|>"),
        (2, "<|endoftext|>"),
        (6, "<|im_start|>"),
        (7, "<|im_end|>"),
        (128, "<|audio_start|>"),
        (129, "<|text_start|>"),
        (130, "<|text_end|>"),
    ] {
        assert_eq!(vocab[name], id, "{name}");
        let added = tok["added_tokens"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .unwrap();
        assert_eq!(added["content"], name);
        assert_eq!(added["special"], true);
    }
    // Byte tokens: 'A' and the byte-level space 'Ġ'.
    assert_eq!(vocab["A"], 131 + 65);
    assert_eq!(vocab["\u{120}"], 131 + 32);
    assert_eq!(tok["pre_tokenizer"]["pretokenizers"][0]["type"], "Split");
    assert_eq!(
        tok["pre_tokenizer"]["pretokenizers"][1]["type"],
        "ByteLevel"
    );
    let merges = tok["model"]["merges"].as_array().unwrap();
    assert!(merges.len() >= cfg.vocab_size - 387);
}

#[test]
fn input_signal_is_deterministic_and_audible() {
    let s = tiny_input_signal();
    assert_eq!(s.len(), INPUT_SIGNAL_SAMPLES);
    assert_eq!(s, tiny_input_signal());
    let peak = s.iter().fold(0f32, |m, v| m.max(v.abs()));
    assert!(peak > 0.3 && peak <= 1.0, "peak {peak}");
    // Exact 16-bit values.
    assert!(s.iter().all(|v| (v * 32768.0).fract() == 0.0));
    // Spot values pin the formula (tests/reference/make_reference.py regenerates it in Python).
    let at = |i: usize| (s[i] * 32768.0) as i32;
    let spots: Vec<i32> = [0, 1, 2, 3, 4000, 12000, 23999]
        .iter()
        .map(|&i| at(i))
        .collect();
    assert_eq!(spots, [408, -721, -932, 773, -4749, 6671, -15419]);
}

#[test]
fn reference_fixture_matches_the_checkpoint_and_makes_sense() {
    use common::lfm2_tiny::{self, Step};
    // Digests of the regenerated checkpoint equal those the fixture was made from.
    let _ = lfm2_tiny::checkpoint_dir();
    let r = lfm2_tiny::reference();
    let cfg = lfm2_tiny::config();
    assert_eq!(r.meta("liquid_audio_version"), "1.3.0");
    assert_eq!(r.meta("seed"), DEFAULT_SEED.to_string());
    assert_eq!(r.f32("input_signal"), lfm2_tiny::input_signal());

    // 24000 samples: floor(n/160)+1 = 151 feature frames, ceil(151/8) = 19 embeddings.
    assert_eq!(r.shape("mel"), [128, 151]);
    assert_eq!(r.shape("encoder_out"), [19, cfg.enc_d_model]);
    assert_eq!(r.shape("adapter_out"), [19, cfg.hidden]);
    let prompt = r.prompt("asr");
    let l = prompt.len();
    assert_eq!(prompt.iter().filter(|t| t.is_none()).count(), 19);
    let tok: serde_json::Value =
        serde_json::from_slice(&fs::read(shared().join("tokenizer.json")).unwrap()).unwrap();
    let id = |s: &str| Some(tok["model"]["vocab"][s].as_u64().unwrap() as u32);
    // <|startoftext|><|im_start|>system\n ... <|im_start|>assistant\n
    assert_eq!(prompt[..4], [Some(1), Some(6), id("system"), id("\u{10A}")]);
    assert_eq!(prompt[l - 3..], [Some(6), id("assistant"), id("\u{10A}")]);
    assert_eq!(r.shape("asr_prefill_logits"), [l, cfg.vocab_size]);
    assert_eq!(r.shape("asr_prefill_embeds"), [l, cfg.hidden]);
    // The audio rows of the prefill input are the adapter output.
    let emb = r.f32("asr_prefill_embeds");
    let first_audio = prompt.iter().position(|t| t.is_none()).unwrap();
    let h = cfg.hidden;
    assert_eq!(
        emb[first_audio * h..(first_audio + 19) * h],
        r.f32("adapter_out")[..]
    );

    // Greedy ASR: the first token is the argmax of the last prefill position.
    let asr = r.asr_tokens();
    let logits = r.f32("asr_prefill_logits");
    let last = &logits[(l - 1) * cfg.vocab_size..];
    let argmax = (0..last.len())
        .max_by(|&a, &b| last[a].total_cmp(&last[b]))
        .unwrap();
    assert_eq!(argmax as u32, asr[0]);
    assert!(
        asr.iter().collect::<BTreeSet<_>>().len() > asr.len() / 2,
        "{asr:?}"
    );
    assert_eq!(r.meta("asr_stop"), "max_steps");
    assert!(r.f32("asr_margins").iter().all(|&m| m > 0.0));

    // S2S: 6 text steps, then 12 frames, repeated.
    let steps = r.s2s_steps();
    assert_eq!(steps.len(), 48);
    for (i, s) in steps.iter().enumerate() {
        let text = (i % 18) < cfg.interleaved_n_text;
        assert_eq!(matches!(s, Step::Text(_)), text, "step {i}: {s:?}");
    }
    let frames: Vec<[u32; 8]> = steps
        .iter()
        .filter_map(|s| match s {
            Step::Audio(c) => Some(*c),
            Step::Text(_) => None,
        })
        .collect();
    assert_eq!(r.shape("s2s_depth_margins"), [frames.len(), 8]);
    // The first frame's codes are the argmax of the stored depthformer logits.
    let dl = r.f32("s2s_depth_logits");
    for (cb, row) in dl.chunks_exact(2049).enumerate() {
        let am = (0..2049)
            .max_by(|&a, &b| row[a].total_cmp(&row[b]))
            .unwrap();
        assert_eq!(am as u32, frames[0][cb], "codebook {cb}");
    }
    // The detokenizer ran on the first 8 frames (codebook-major).
    let codes = r.i64("detok_codes");
    for t in 0..8 {
        for cb in 0..8 {
            assert_eq!(codes[cb * 8 + t] as u32, frames[t][cb]);
        }
    }
    assert_eq!(r.shape("detok_spec"), [48, 1282]);
    assert_eq!(r.shape("detok_waveform"), [1920 * 8]);
}
