//! GGUF bytes: the reader (header, metadata, tensor infos, every tensor's data dequantized),
//! then the four LFM2-Audio loaders' validation (backbone + its BPE tokenizer, mmproj markers,
//! vocoder config, detokenizer config and head) on the same bytes as a file. Any bytes must give
//! a typed error or a file whose every accessor works.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use audio_engine::ggml::dtype::GgmlType;
use audio_engine::ggml::gguf::{GgufArray, GgufFile, GgufValue, GgufWriter};
use audio_engine::lfm2_audio::internals::backbone_config::{Lfm2Backbone, Lfm2Config};
use audio_engine::lfm2_audio::internals::package::{
    open_backbone, open_detokenizer, open_mmproj, open_vocoder,
};
use audio_engine::lfm2_audio::internals::tokenizer::Tokenizer;
use audio_engine::lfm2_audio::internals::vocoder_config::VocoderConfig;
use lfm2_engine_fuzz::{demo, write_seeds_if_asked};
use libfuzzer_sys::fuzz_target;

/// A small file with every value type, a nested array and one tensor per common type.
fn generic() -> Vec<u8> {
    let mut w = GgufWriter::new();
    let kv: Vec<(&str, GgufValue)> = vec![
        ("general.architecture", "lfm2".into()),
        ("general.name", "fuzz seed".into()),
        ("t.u8", 7u8.into()),
        ("t.i8", (-7i8).into()),
        ("t.u16", 700u16.into()),
        ("t.i16", (-700i16).into()),
        ("t.u32", 70_000u32.into()),
        ("t.i32", (-70_000i32).into()),
        ("t.f32", 0.5f32.into()),
        ("t.bool", true.into()),
        ("t.u64", (1u64 << 40).into()),
        ("t.i64", (-1i64 << 40).into()),
        ("t.f64", 0.25f64.into()),
        ("t.strs", vec!["a", "bc", ""].into()),
        ("t.i32s", vec![1i32, -2, 3].into()),
        ("t.f32s", vec![1.0f32, 2.0].into()),
    ];
    for (k, v) in kv {
        w.add_kv(k, v).unwrap();
    }
    w.add_kv(
        "t.nested",
        vec![GgufArray::from(vec![1u32, 2]), GgufArray::from(vec![3u32])],
    )
    .unwrap();
    let f32s: Vec<u8> = (0..8).flat_map(|i| (i as f32).to_le_bytes()).collect();
    w.add_tensor("a.f32", GgmlType::F32, &[4, 2], f32s).unwrap();
    w.add_tensor("b.f16", GgmlType::F16, &[4], vec![0x3cu8; 8])
        .unwrap();
    w.add_tensor("c.q8", GgmlType::Q8_0, &[32], vec![1u8; 34])
        .unwrap();
    w.add_tensor("d.q4", GgmlType::Q4_0, &[32], vec![2u8; 18])
        .unwrap();
    let mut out = Vec::new();
    w.write(&mut out).unwrap();
    out
}

/// One demo-package file's metadata (tokenizer vocabulary included) over at most the first few
/// of its tensors, so the loaders get past the keys they check first.
fn from_demo(path: &std::path::Path, max_bytes: usize) -> Vec<u8> {
    let src = GgufFile::open(path).unwrap();
    let mut w = GgufWriter::new();
    w.extend_metadata(src.metadata()).unwrap();
    let mut used = 0;
    for t in src.tensors() {
        let data = src.tensor_data(t);
        if used + data.len() > max_bytes {
            continue;
        }
        used += data.len();
        w.add_tensor(t.name(), t.ggml_type(), t.shape(), data.to_vec())
            .unwrap();
    }
    let mut out = Vec::new();
    w.write(&mut out).unwrap();
    out
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let p = demo();
    vec![
        ("generic.gguf".into(), generic()),
        ("backbone.gguf".into(), from_demo(&p.backbone, 2048)),
        ("mmproj.gguf".into(), from_demo(&p.mmproj, 2048)),
        ("vocoder.gguf".into(), from_demo(&p.vocoder, 2048)),
        ("detokenizer.gguf".into(), from_demo(&p.tokenizer, 2048)),
    ]
}

/// The per-process file the loaders open (they take paths).
fn scratch() -> &'static PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        lfm2_engine_fuzz::scratch_dir().join(format!("fuzz-gguf-{}.gguf", std::process::id()))
    })
}

fuzz_target!(
    init: { write_seeds_if_asked(seeds) },
    |data: &[u8]| {
        let Ok(file) = GgufFile::from_bytes(data.to_vec()) else {
            return;
        };
        // Every accessor of a file the reader accepted must work.
        for (k, v) in file.metadata().iter() {
            let _ = (k.len(), v.value_type(), v.type_description(), v.as_integer());
            let _ = file.get_integer::<i64>(k);
        }
        for t in file.tensors() {
            assert_eq!(file.tensor_data(t).len(), t.n_bytes(), "tensor {}", t.name());
            let _ = (t.ne(), t.n_dims(), t.file_offset());
            let _ = file.tensor_to_f32(t);
        }
        let _ = Lfm2Config::from_gguf(&file);
        let _ = VocoderConfig::from_gguf(&file);
        if let Ok(tok) = Tokenizer::from_gguf(&file) {
            let _ = tok.encode("hello <|im_start|> world", true);
        }
        let _ = Lfm2Backbone::from_gguf(file);
        // The path-taking loaders, on the same bytes.
        let path = scratch();
        std::fs::write(path, data).unwrap();
        let _ = open_backbone(path);
        let _ = open_mmproj(path);
        let _ = open_vocoder(path);
        let _ = open_detokenizer(path);
        let _ = std::fs::remove_file(path);
    }
);
