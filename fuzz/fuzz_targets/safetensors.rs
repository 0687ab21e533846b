//! Safetensors bytes (the Hugging Face checkpoints the converter reads): the 8-byte header
//! length, the JSON header's entries and `__metadata__`, then every tensor's bytes and its f32
//! conversion. Any bytes must give a typed `SafeTensorsError` or tensors whose views fit.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use audio_tooling::safetensors::{SafeTensors, SafeTensorsWriter};
use lfm2_engine_fuzz::write_seeds_if_asked;
use libfuzzer_sys::fuzz_target;

fn written(f: impl FnOnce(&mut SafeTensorsWriter)) -> Vec<u8> {
    let mut w = SafeTensorsWriter::new();
    f(&mut w);
    let path = std::env::temp_dir().join(format!("fuzz-st-seed-{}", std::process::id()));
    w.write(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    bytes
}

/// A header by hand: dtypes the writer never produces (F16, BF16, I32, ...).
fn by_hand(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    vec![
        (
            "f32_i64_meta.safetensors".into(),
            written(|w| {
                w.metadata("format", "pt");
                w.add_f32("a.weight", &[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
                w.add_f32("b.bias", &[3], &[1.0, -1.0, 0.5]);
                w.add_i64("c.index", &[2], &[7, -7]);
            }),
        ),
        ("empty.safetensors".into(), written(|_| {})),
        (
            "f16_bf16.safetensors".into(),
            by_hand(
                r#"{"__metadata__":{"k":"v"},"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[1,2],"data_offsets":[4,8]},"s":{"dtype":"F32","shape":[],"data_offsets":[8,12]}}"#,
                &[0, 0x3c, 0, 0xc0, 0x80, 0x3f, 0, 0x40, 0, 0, 0x80, 0x3f],
            ),
        ),
        (
            "ints.safetensors".into(),
            by_hand(
                r#"{"i":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},"u":{"dtype":"BOOL","shape":[0],"data_offsets":[8,8]}}"#,
                &[1, 0, 0, 0, 2, 0, 0, 0],
            ),
        ),
    ]
}

/// The per-process file the reader maps (it takes a path).
fn scratch() -> &'static PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        lfm2_engine_fuzz::scratch_dir().join(format!("fuzz-st-{}.safetensors", std::process::id()))
    })
}

fuzz_target!(
    init: { write_seeds_if_asked(seeds) },
    |data: &[u8]| {
        let path = scratch();
        std::fs::write(path, data).unwrap();
        let opened = SafeTensors::open(path);
        // why: leave nothing behind in /dev/shm; the map outlives the name.
        let _ = std::fs::remove_file(path);
        let Ok(st) = opened else {
            return;
        };
        let _ = st.metadata().len();
        let names: Vec<String> = st.names().map(str::to_owned).collect();
        for name in &names {
            assert!(st.contains(name));
            let t = st.tensor(name).expect("a listed tensor");
            assert_eq!(t.data.len(), t.numel() * t.dtype.size(), "tensor {name}");
            let _ = st.f32(name);
        }
    }
);
