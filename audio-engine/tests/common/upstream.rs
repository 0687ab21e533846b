//! The tiny checkpoint as llama.cpp's own converter writes it (`tests/fixtures/upstream/`).
//!
//! `tests/reference/make_upstream_fixtures.py` ran the `convert_hf_to_gguf.py` that
//! llama-cpp-python 0.3.36 vendors (llama.cpp 0c1e57098) on the checkpoint of
//! `synthetic::DEFAULT_SEED` for the backbone, the mmproj and the detokenizer at F32 and F16.
//! The six files (~53 MB) are committed split: `<file>.part` holds the bytes before the tensor
//! data and every tensor of at most 8 KiB; `manifest.json` lists each file's size and SHA-256
//! and each tensor's offset, length and SHA-256. [`rebuild`] takes the larger tensors from our
//! converter's file of the same checkpoint and type, checks each one's SHA-256 against
//! upstream's and the whole rebuilt file's SHA-256 against upstream's file, so a rebuilt file
//! is byte for byte upstream's (or the test fails naming the tensor that differs).

use std::path::Path;
use std::sync::{Mutex, OnceLock};

use audio_engine::ggml::gguf::GgufFile;
use audio_engine::lfm2_audio::internals::package::PackagePaths;
use audio_engine::lfm2_audio::internals::package::Quant;
use serde_json::Value;

use super::lfm2_tiny::reference;
use super::package::package;

/// The fixture directory.
pub const FIXTURE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/upstream");

/// `manifest.json`, parsed once; panics when it was made from another checkpoint than the
/// one the tests regenerate.
pub fn manifest() -> &'static Value {
    static M: OnceLock<Value> = OnceLock::new();
    M.get_or_init(|| {
        let p = Path::new(FIXTURE_DIR).join("manifest.json");
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let m: Value = serde_json::from_str(&text).unwrap();
        for key in ["digest_model", "digest_detokenizer", "digest_tokenizer"] {
            assert_eq!(
                m["checkpoint"][key].as_str(),
                Some(reference().meta(key)),
                "{key}: the upstream fixtures were made from another checkpoint than \
                 tests/fixtures/lfm2_tiny's; rerun tests/reference/make_upstream_fixtures.py"
            );
        }
        m
    })
}

/// The model name the fixtures were converted with (`--model-name`), also ours (`package`).
pub fn model_name() -> &'static str {
    manifest()["model_name"].as_str().unwrap()
}

/// SHA-256 of `data` as 64 hex digits (FIPS 180-4).
pub fn sha256(data: &[u8]) -> String {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut tail = data[data.len() / 64 * 64..].to_vec();
    tail.push(0x80);
    while tail.len() % 64 != 56 {
        tail.push(0);
    }
    tail.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    let blocks = data[..data.len() / 64 * 64]
        .chunks_exact(64)
        .chain(tail.chunks_exact(64));
    for block in blocks {
        let mut w = [0u32; 64];
        for (i, c) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes(c.try_into().unwrap());
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

/// Rebuilds upstream's `file` (a name in the manifest) from its part and `ours` (our
/// converter's file of the same kind, checkpoint and type) and writes it to `out`.
///
/// Panics naming the tensor when one of ours that the part does not hold differs from
/// upstream's, and when the rebuilt file is not upstream's.
pub fn rebuild(file: &str, ours: &Path, out: &Path) {
    let entry = &manifest()["files"][file];
    assert!(entry.is_object(), "{file} is not in the upstream manifest");
    let part_path = Path::new(FIXTURE_DIR).join(format!("{file}.part"));
    let part = std::fs::read(&part_path).unwrap_or_else(|e| panic!("{}: {e}", part_path.display()));
    assert_eq!(
        Some(sha256(&part).as_str()),
        entry["part_sha256"].as_str(),
        "{}",
        part_path.display()
    );
    let ours_gguf = GgufFile::open(ours).unwrap_or_else(|e| panic!("{}: {e}", ours.display()));
    let size = entry["size"].as_u64().unwrap() as usize;
    let head = entry["head_len"].as_u64().unwrap() as usize;
    let mut bytes = vec![0u8; size];
    bytes[..head].copy_from_slice(&part[..head]);
    let mut pos = head;
    for t in entry["tensors"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        let off = t["offset"].as_u64().unwrap() as usize;
        let n = t["nbytes"].as_u64().unwrap() as usize;
        let data: &[u8] = if t["stored"].as_bool().unwrap() {
            pos += n;
            &part[pos - n..pos]
        } else {
            let info = ours_gguf.tensor(name).unwrap_or_else(|| {
                panic!(
                    "{file}: upstream has tensor {name}, {} does not",
                    ours.display()
                )
            });
            ours_gguf.tensor_data(info)
        };
        assert!(
            data.len() == n && Some(sha256(data).as_str()) == t["sha256"].as_str(),
            "{file}: tensor {name} of {} differs from upstream's ({} bytes, upstream {n}); \
             our converter no longer writes upstream's bytes",
            ours.display(),
            data.len()
        );
        bytes[off..off + n].copy_from_slice(data);
    }
    assert_eq!(pos, part.len(), "{file}: part has unread bytes");
    assert_eq!(
        Some(sha256(&bytes).as_str()),
        entry["sha256"].as_str(),
        "{file}: the rebuilt file is not upstream's"
    );
    std::fs::write(out, bytes).unwrap();
}

/// Upstream's three files at `ty`, rebuilt in the process's scratch directory (once per test
/// process), in a package directory with our converter's vocoder (upstream has no released
/// vocoder converter): backbone, mmproj and tokenizer are upstream's.
pub fn mixed_package(ty: Quant) -> PackagePaths {
    static DIRS: OnceLock<Mutex<Vec<(Quant, PackagePaths)>>> = OnceLock::new();
    let mut d = DIRS.get_or_init(Default::default).lock().unwrap();
    if let Some((_, p)) = d.iter().find(|(t, _)| *t == ty) {
        return p.clone();
    }
    let ours = package(ty);
    assert_eq!(ours.model, model_name(), "our test package's model name");
    let dir = super::scratch::dir(&format!("upstream-pkg-{ty:?}"));
    let paths = PackagePaths::new(&dir, &ours.model, ty);
    for (theirs, mine) in [
        (&paths.backbone, &ours.backbone),
        (&paths.mmproj, &ours.mmproj),
        (&paths.tokenizer, &ours.tokenizer),
    ] {
        let name = theirs.file_name().unwrap().to_str().unwrap();
        rebuild(name, mine, theirs);
    }
    if std::fs::hard_link(&ours.vocoder, &paths.vocoder).is_err() {
        std::fs::copy(&ours.vocoder, &paths.vocoder).unwrap();
    }
    d.push((ty, paths.clone()));
    paths
}
