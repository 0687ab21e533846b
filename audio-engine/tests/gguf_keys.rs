//! Every GGUF metadata key the loaders read and the converter writes is spelled as the pinned
//! llama.cpp tree spells it: `src/llama-arch.cpp` (general, tokenizer and `%s.*` keys, `%s` =
//! `lfm2`) and `tools/mtmd/clip-impl.h` (`clip.*` keys, `%s` = `audio`), read from the patched
//! tree the build compiled (`ggml_sys::PATCHED_TREE`). The few keys that tree does not define are
//! listed by name below with the reason.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use audio_engine::ggml::gguf::{GgufFile, GgufValue, GgufWriter};
use audio_engine::lfm2_audio::internals::gguf_keys;
use audio_engine::lfm2_audio::internals::package::Quant;
use audio_engine::lfm2_audio::internals::package::{ModelPackage, PackagePaths};
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{AsrOptions, EngineError, Lfm2Audio, LoadError, ModelOptions};

/// Written by the vocoder converter of llama.cpp's LFM2.5-Audio runner (PR #18641,
/// `tools/liquid-audio/convert_vocoder_to_gguf.py`), which was never released: the pinned tree
/// has no table for the vocoder file.
const VOCODER_PR: &str = "vocoder file only: PR #18641's convert_vocoder_to_gguf.py";

/// Keys accepted although the pinned tree's C/C++ tables do not spell them, each with why.
const NOT_IN_TREE: &[(&str, &str)] = &[
    ("depthformer_n_layer", VOCODER_PR),
    ("depthformer_n_embd", VOCODER_PR),
    (
        "interleaved_n_text",
        "vocoder file only: optional schedule key of PR #18641's runner (EN default 6)",
    ),
    (
        "interleaved_n_audio",
        "vocoder file only: optional schedule key of PR #18641's runner (EN default 12)",
    ),
    (
        "depthformer_rope_theta",
        "vocoder file only: optional override the loader reads (default 1e6); nothing writes it",
    ),
    (
        "depthformer_norm_eps",
        "vocoder file only: optional override the loader reads (default 1e-5); nothing writes it",
    ),
    (
        "general.size_label",
        "gguf-py metadata (Keys.General.SIZE_LABEL) that upstream's converter writes; \
         llama.cpp never reads it, so its C++ tables do not list it",
    ),
    (
        "general.languages",
        "gguf-py metadata (Keys.General.LANGUAGES) from the model card; not read by llama.cpp",
    ),
    (
        "clip.audio.head_count",
        "legacy: this project's converter wrote the encoder head count so before it matched \
         upstream; read only as a fallback",
    ),
];

fn tree() -> PathBuf {
    PathBuf::from(ggml_sys::PATCHED_TREE)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The first double-quoted string of `line`.
fn quoted(line: &str) -> Option<&str> {
    let start = line.find('"')? + 1;
    let len = line[start..].find('"')?;
    Some(&line[start..start + len])
}

/// Keys of `src/llama-arch.cpp`'s `LLM_KV_NAMES` table (`{ LLM_KV_X, "name" }` lines), with the
/// architecture placeholder filled in as `lfm2`.
fn llama_arch_keys(src: &str) -> BTreeSet<String> {
    src.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("{ LLM_KV_"))
        .filter_map(quoted)
        .map(|k| k.replace("%s", "lfm2"))
        .collect()
}

/// Keys of `tools/mtmd/clip-impl.h` (`#define KEY_X "name"` lines), with the modality
/// placeholder filled in as `audio`.
fn clip_keys(src: &str) -> BTreeSet<String> {
    src.lines()
        .filter(|l| l.starts_with("#define KEY_"))
        .filter_map(quoted)
        .map(|k| k.replace("%s", "audio"))
        .collect()
}

fn upstream_keys() -> BTreeSet<String> {
    let arch = llama_arch_keys(&read(&tree().join("src/llama-arch.cpp")));
    let clip = clip_keys(&read(&tree().join("tools/mtmd/clip-impl.h")));
    // why: a parser that silently stopped matching would make every check below pass vacuously
    // for nothing; both tables hold well over these counts.
    assert!(
        arch.len() > 150,
        "llama-arch.cpp: only {} keys parsed",
        arch.len()
    );
    assert!(
        clip.len() > 40,
        "clip-impl.h: only {} keys parsed",
        clip.len()
    );
    arch.union(&clip).cloned().collect()
}

/// The keys of `keys` that neither the pinned tree nor [`NOT_IN_TREE`] spell.
fn unknown<'a>(
    keys: impl IntoIterator<Item = &'a str>,
    upstream: &BTreeSet<String>,
) -> Vec<String> {
    keys.into_iter()
        .filter(|k| !upstream.contains(*k) && !NOT_IN_TREE.iter().any(|(n, _)| n == k))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_key_the_loaders_read_is_spelled_as_upstream() {
    let upstream = upstream_keys();
    let bad = unknown(gguf_keys::ALL.iter().copied(), &upstream);
    assert!(
        bad.is_empty(),
        "keys not spelled in the pinned tree: {bad:?}"
    );
}

#[test]
fn exceptions_are_real_and_needed() {
    let upstream = upstream_keys();
    for (key, why) in NOT_IN_TREE {
        assert!(
            !upstream.contains(*key),
            "{key} is listed as missing upstream ({why}) but the tree spells it"
        );
        assert!(
            gguf_keys::ALL.contains(key),
            "{key} is listed as an exception but no loader or converter uses it"
        );
    }
    // Each legacy spelling stands in for a key the tree does spell.
    for (key, legacy) in gguf_keys::FALLBACKS {
        assert!(
            upstream.contains(*key),
            "fallback target {key} is not upstream's"
        );
        assert!(gguf_keys::LEGACY.contains(legacy));
    }
}

#[test]
fn the_parsers_find_known_keys() {
    // why: guards the table parsers themselves; one known key per table and placeholder.
    let upstream = upstream_keys();
    for k in [
        "general.architecture",
        "tokenizer.ggml.pre",
        "lfm2.shortconv.l_cache",
        "lfm2.attention.sliding_window",
        "clip.audio.attention.head_count",
        "clip.projector_type",
    ] {
        assert!(upstream.contains(k), "{k} not parsed");
    }
    assert!(!upstream.contains("clip.audio.head_count"));
}

/// Every key in the metadata of the four files our converter writes at `ty`.
fn written_keys(ty: Quant) -> Vec<(PathBuf, String)> {
    let p = common::package::package(ty);
    [&p.backbone, &p.mmproj, &p.vocoder, &p.tokenizer]
        .into_iter()
        .flat_map(|path| {
            let g = GgufFile::open(path).unwrap();
            g.metadata()
                .keys()
                .map(|k| (path.clone(), k.to_owned()))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn every_key_the_converter_writes_is_spelled_as_upstream() {
    let upstream = upstream_keys();
    for ty in [Quant::F32, Quant::Q4_0] {
        let written = written_keys(ty);
        assert!(
            written.len() > 40,
            "{ty:?}: only {} keys written",
            written.len()
        );
        for (file, key) in &written {
            assert!(
                gguf_keys::ALL.contains(&key.as_str()),
                "{}: {key} is written but not in gguf_keys::ALL",
                file.display()
            );
            assert!(
                !gguf_keys::LEGACY.contains(&key.as_str()),
                "{}: the converter writes the legacy key {key}",
                file.display()
            );
            let bad = unknown([key.as_str()], &upstream);
            assert!(
                bad.is_empty(),
                "{}: {key} is not upstream's",
                file.display()
            );
        }
    }
}

/// Rust string literals in `src` outside comments that look like GGUF metadata keys.
fn key_literals(src: &str) -> Vec<String> {
    const PREFIXES: &[&str] = &[
        "general.",
        "tokenizer.ggml.",
        "tokenizer.chat",
        "clip.",
        "lfm2.",
        "depthformer_",
        "interleaved_n_",
    ];
    let mut found = Vec::new();
    for line in src.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(start) = rest.find('"') {
            let tail = &rest[start + 1..];
            let Some(len) = tail.find('"') else { break };
            let lit = &tail[..len];
            if PREFIXES.iter().any(|p| lit.starts_with(p)) {
                found.push(lit.to_owned());
            }
            rest = &tail[len + 1..];
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn keys_are_spelled_only_in_gguf_keys() {
    // why: the spelling checks above see only what goes through `gguf_keys`; a key typed as a
    // literal somewhere else would escape them.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lfm2_audio");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 20);
    let mut stray = Vec::new();
    for f in files {
        if f.ends_with("gguf_keys.rs") || f.components().any(|c| c.as_os_str() == "synthetic") {
            continue;
        }
        for lit in key_literals(&read(&f)) {
            stray.push(format!("{}: {lit}", f.display()));
        }
    }
    assert!(
        stray.is_empty(),
        "key literals outside gguf_keys.rs: {stray:#?}"
    );
    assert_eq!(
        key_literals("let a = \"clip.audio.x\"; // \"lfm2.y\""),
        ["clip.audio.x"]
    );
}

/// Copies `src` to `dst` with metadata `remove`d and `set` added (tensors unchanged).
fn rewrite_metadata(src: &Path, dst: &Path, remove: &[&str], set: &[(&str, GgufValue)]) {
    let g = GgufFile::open(src).unwrap();
    let mut md = g.metadata().clone();
    for k in remove {
        assert!(md.remove(k).is_some(), "{}: no {k}", src.display());
    }
    for (k, v) in set {
        md.set(*k, v.clone()).unwrap();
    }
    let mut w = GgufWriter::new();
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
    let _ = std::fs::remove_file(dst);
    w.write_to_path(dst).unwrap();
}

/// The F32 package copied into a fresh directory named `name`.
fn package_copy(name: &str) -> PackagePaths {
    let p = common::package::package(Quant::F32);
    let dir = common::scratch::dir(&format!("gguf-keys-{name}"));
    let q = PackagePaths::new(&dir, &p.model, p.quant);
    for (a, b) in [
        (&p.backbone, &q.backbone),
        (&p.mmproj, &q.mmproj),
        (&p.vocoder, &q.vocoder),
        (&p.tokenizer, &q.tokenizer),
    ] {
        std::fs::copy(a, b).unwrap();
    }
    q
}

fn load(p: &PackagePaths) -> Result<Lfm2Audio, EngineError> {
    let opts = ModelOptions {
        n_threads: 1,
        ..ModelOptions::default()
    };
    Lfm2Audio::from_package(ModelPackage::open_paths(p.clone())?, opts)
}

fn asr_tokens(m: &Lfm2Audio) -> Vec<u32> {
    let opts = AsrOptions {
        max_new_tokens: 12,
        ..AsrOptions::default()
    };
    m.asr(&common::lfm2_tiny::input_signal(), &opts)
        .unwrap()
        .tokens
}

#[test]
fn the_older_head_count_spelling_still_loads() {
    let reference = load(&common::package::package(Quant::F32)).unwrap();
    let p = package_copy("legacy-heads");
    let heads = GgufFile::open(&p.mmproj)
        .unwrap()
        .metadata()
        .get(gguf_keys::CLIP_AUDIO_HEAD_COUNT)
        .cloned()
        .expect("our converter writes upstream's key");
    let tmp = p.mmproj.with_extension("tmp");
    rewrite_metadata(
        &p.mmproj,
        &tmp,
        &[gguf_keys::CLIP_AUDIO_HEAD_COUNT],
        &[(gguf_keys::LEGACY_CLIP_AUDIO_HEAD_COUNT, heads)],
    );
    std::fs::rename(&tmp, &p.mmproj).unwrap();
    let legacy = load(&p).unwrap();
    assert_eq!(asr_tokens(&legacy), asr_tokens(&reference));

    // Neither spelling: the error names upstream's.
    rewrite_metadata(
        &p.mmproj,
        &tmp,
        &[gguf_keys::LEGACY_CLIP_AUDIO_HEAD_COUNT],
        &[],
    );
    std::fs::rename(&tmp, &p.mmproj).unwrap();
    match load(&p) {
        Err(EngineError::Load(LoadError::MissingKey { file, key })) => {
            assert_eq!(key, gguf_keys::CLIP_AUDIO_HEAD_COUNT);
            assert_eq!(file, p.mmproj);
        }
        other => panic!("expected MissingKey, got {other:?}"),
    }
}

#[test]
fn a_vocoder_without_schedule_keys_uses_the_en_schedule() {
    let p = package_copy("no-schedule");
    let with_keys = load(&p).unwrap();
    assert!(
        with_keys.description().contains("from the vocoder"),
        "{}",
        with_keys.description()
    );
    let tmp = p.vocoder.with_extension("tmp");
    // Other values than EN's in the file, so that the fallback is visible.
    rewrite_metadata(
        &p.vocoder,
        &tmp,
        &[],
        &[
            (gguf_keys::INTERLEAVED_N_TEXT, GgufValue::U32(3)),
            (gguf_keys::INTERLEAVED_N_AUDIO, GgufValue::U32(5)),
        ],
    );
    std::fs::rename(&tmp, &p.vocoder).unwrap();
    assert_eq!(load(&p).unwrap().interleave(), (3, 5));

    rewrite_metadata(
        &p.vocoder,
        &tmp,
        &[
            gguf_keys::INTERLEAVED_N_TEXT,
            gguf_keys::INTERLEAVED_N_AUDIO,
        ],
        &[],
    );
    std::fs::rename(&tmp, &p.vocoder).unwrap();
    let m = load(&p).unwrap();
    assert_eq!(m.interleave(), (6, 12));
    let d = m.description();
    assert!(d.contains("6 text / 12 frames"), "{d}");
    assert!(d.contains("EN default"), "{d}");
    assert!(d.contains("interleaved_n_text"), "{d}");
}
