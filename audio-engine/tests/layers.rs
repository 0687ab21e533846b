//! The folders of `lfm2_audio` are layers: a file imports only from its own folder and the
//! layers below it (ARCHITECTURE.md). This test reads every source file's paths into the crate
//! (`crate::lfm2_audio::x`, `super::` chains that climb to `lfm2_audio`, brace groups) outside
//! comments and fails on an import that runs upward, unless it is one of [`KNOWN_UPWARD`]: the
//! upward imports the tree still has, each to be removed (issue #21). That list may only
//! shrink: an entry that no longer occurs fails too, so that removing an import also removes
//! its permission. With no upward import, the folders cannot form an import circle.
//!
//! The same holds for the tooling crate's folders (`tooling/src`, [`TOOLING_LAYERS`]) and the
//! libllama crate's (`llm/src`, [`LLM_LAYERS`]), and the crates themselves are layers: the
//! product code (the engine library, the C library, the server) names neither
//! ([`products_name_no_tooling`]). The safe ggml layer (lfm2-ggml, `ggml/src`) has no import
//! circle of more than two files, and its only pairs are [`GGML_PAIRS`]
//! ([`ggml_has_no_circle_over_two_files`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom first: a unit may import the units listed before it.
const LAYERS: [&str; 12] = [
    // reading audio files (WAV, resampling)
    "io",
    // ggml graphs of the components, typed weights, sampling, the package reader
    "model",
    // tokenizer, chat prompt
    "text",
    // the engine's error type: it wraps the stages' own errors, defined in the layers before
    // it, and the layers after it return it
    "error",
    // the request limits (each a capacity error, checked by the layers after it)
    "limits",
    // the loaded model: components, tokenizer and schedulers on one device
    "engine",
    // the input side: a request's audio read and encoded into the backbone's rows
    "audio_in",
    // the reply loop, steps, schedule, threads, streams
    "generation",
    // ASR, TTS, S2S on a loaded model
    "tasks",
    // conversations, prefill-block cache, prefill ahead, encoder-output reuse
    "session",
    // the one request model: Job, Outcome, Session::run
    "api",
    // the facade (`mod.rs`)
    "mod",
];

/// The libllama crate's files (lfm2-llm, `llm/src`), bottom first.
const LLM_LAYERS: [&str; 7] = [
    // libllama's tokenizer alone (`vocab_only`)
    "llama_vocab",
    // the safe handles over llama-sys: models, contexts, batches, memory
    "llama",
    // the text-model API's error (wraps libllama's)
    "error",
    // token sampling
    "sampler",
    // the multi-sequence decoder
    "decoder",
    // random models written as GGUF
    "random",
    // the crate root
    "lib",
];

/// The tooling crate's folders (lfm2-audio-tooling, `tooling/src`), bottom first.
const TOOLING_LAYERS: [&str; 6] = [
    // the safetensors container, read and written
    "safetensors",
    // deterministic synthetic checkpoints (written as safetensors)
    "synthetic",
    // checkpoint -> the four GGUF files (reads safetensors)
    "convert",
    // the bench's backbone anchors
    "step_anchor",
    // the demo package: a synthetic checkpoint, converted
    "demo",
    // the crate root
    "lib",
];

/// Upward imports that remain, as (importing unit, imported unit). Remove an entry when its
/// import is gone; never add one.
const KNOWN_UPWARD: &[(&str, &str)] = &[];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lfm2_audio")
}

/// The workspace's root folder.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The unit of a file: its folder under `lfm2_audio`, or the stem of a file directly in it.
fn unit_of(rel: &Path) -> String {
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_owned()
}

/// `src` without comments (line, block, doc) and string literals' contents.
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first path segment of each item of the brace group that `s` starts with (`{a::X, b}`).
fn group_heads(s: &str) -> Vec<String> {
    let (mut depth, mut heads, mut item_start) = (0, Vec::new(), true);
    for (i, c) in s.char_indices() {
        match c {
            '{' => {
                depth += 1;
                item_start = depth == 1;
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => item_start = true,
            c if c.is_whitespace() => {}
            _ if item_start && depth == 1 => {
                heads.push(ident_at(&s[i..]).to_owned());
                item_start = false;
            }
            _ => {}
        }
    }
    heads
}

/// The units of `lfm2_audio` that the code of the file at `rel` names.
fn imported_units(rel: &Path, code: &str) -> BTreeSet<String> {
    imported_units_of(rel, code, "crate::lfm2_audio::", &LAYERS)
}

/// The units of `layers` that the code of the file at `rel` (under the module that `prefix`
/// names from the crate root) names.
fn imported_units_of(rel: &Path, code: &str, prefix: &str, layers: &[&str]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut add = |rest: &str| {
        if rest.starts_with('{') {
            out.extend(group_heads(rest));
        } else {
            out.insert(ident_at(rest).to_owned());
        }
    };
    let mut at = 0;
    while let Some(i) = code[at..].find(prefix) {
        let before = code[..at + i].chars().next_back();
        at += i + prefix.len();
        // why: `audio_engine::x` holds `engine::`-like tails of other crates' paths; only a
        // path that starts at `crate` counts.
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        add(&code[at..]);
    }
    // `super::` chains that climb to `lfm2_audio`: a file `a/b.rs` is module `a::b`, so two
    // `super`s reach `lfm2_audio`; `a/mod.rs` is module `a`, one.
    let mut depth = rel.components().count();
    if rel.file_name().is_some_and(|f| f == "mod.rs") {
        depth -= 1;
    }
    if depth > 0 {
        let chain = "super::".repeat(depth);
        let mut at = 0;
        while let Some(i) = code[at..].find(&chain) {
            let before = code[..at + i].chars().next_back();
            at += i + chain.len();
            if before.is_some_and(|c| c == ':') || code[at..].starts_with("super::") {
                continue;
            }
            add(&code[at..]);
        }
    }
    out.retain(|u| layers.contains(&u.as_str()));
    out
}

#[test]
fn lfm2_audio_imports_run_only_downward() {
    check_layers(&root(), "crate::lfm2_audio::", &LAYERS, KNOWN_UPWARD, 50);
}

#[test]
fn tooling_imports_run_only_downward() {
    check_layers(
        &workspace().join("tooling/src"),
        "crate::",
        &TOOLING_LAYERS,
        &[],
        5,
    );
}

#[test]
fn llm_imports_run_only_downward() {
    check_layers(&workspace().join("llm/src"), "crate::", &LLM_LAYERS, &[], 2);
}

/// Every import between the units of the files under `root` runs down `layers`, except the
/// `known` ones (each of which must still occur); the scan must find more than `min` files and
/// edges.
fn check_layers(root: &Path, prefix: &str, layers: &[&str], known: &[(&str, &str)], min: usize) {
    let mut files = Vec::new();
    sources(root, &mut files);
    files.sort();
    let layer = |u: &str| {
        layers
            .iter()
            .position(|l| *l == u)
            .unwrap_or_else(|| panic!("unit `{u}` is in no layer: add it to the layers"))
    };
    // (from, to) -> the files with that import.
    let mut upward: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut edges = 0;
    for f in &files {
        let rel = f.strip_prefix(root).unwrap();
        let from = unit_of(rel);
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        for to in imported_units_of(rel, &code, prefix, layers) {
            if to == from {
                continue;
            }
            edges += 1;
            if layer(&to) > layer(&from) {
                upward
                    .entry((from.clone(), to))
                    .or_default()
                    .push(rel.display().to_string());
            }
        }
    }
    assert!(
        files.len() > min && edges > min,
        "the scan found too little"
    );
    let known: BTreeSet<(String, String)> = known
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let new: Vec<String> = upward
        .iter()
        .filter(|(k, _)| !known.contains(*k))
        .map(|((a, b), files)| format!("{a} -> {b} ({})", files.join(", ")))
        .collect();
    assert!(
        new.is_empty(),
        "imports that run upward (a layer may import only the layers below it):\n{}",
        new.join("\n")
    );
    let gone: Vec<String> = known
        .iter()
        .filter(|k| !upward.contains_key(*k))
        .map(|(a, b)| format!("{a} -> {b}"))
        .collect();
    assert!(
        gone.is_empty(),
        "these upward imports are gone: remove them from KNOWN_UPWARD:\n{}",
        gone.join("\n")
    );
}

/// The pairs of files in the safe ggml layer that import each other: a context makes its tensors,
/// a tensor borrows its context. May only shrink, like [`KNOWN_UPWARD`].
const GGML_PAIRS: &[(&str, &str)] = &[("context", "tensor")];

/// The safe ggml layer's files (a folder, `gguf/` or `ops/`, counts as one unit) import one
/// another in no circle of more than two, and in pairs only as [`GGML_PAIRS`] says. Names the
/// crate root re-exports (`crate::Tensor`) count as imports of the file that defines them.
#[test]
fn ggml_has_no_circle_over_two_files() {
    let root = workspace().join("ggml/src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    files.sort();
    let units: BTreeSet<String> = files
        .iter()
        .map(|f| unit_of(f.strip_prefix(&root).unwrap()))
        .filter(|u| u != "lib")
        .collect();
    // The root's re-exports (`pub use unit::{A, B};`): name -> the unit that defines it.
    let lib = code_only(&std::fs::read_to_string(root.join("lib.rs")).unwrap());
    let mut owner: BTreeMap<String, String> =
        units.iter().map(|u| (u.clone(), u.clone())).collect();
    for stmt in lib.split(';') {
        let Some(at) = stmt.find("pub use ") else {
            continue;
        };
        let path = stmt[at + "pub use ".len()..].trim();
        let unit = ident_at(path).to_owned();
        if !units.contains(&unit) {
            continue;
        }
        let rest = path[unit.len()..].trim_start_matches("::");
        let names = if rest.starts_with('{') {
            group_heads(rest)
        } else {
            vec![ident_at(rest).to_owned()]
        };
        for name in names {
            owner.entry(name).or_insert_with(|| unit.clone());
        }
    }
    let names: Vec<&str> = owner.keys().map(String::as_str).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap();
        let from = unit_of(rel);
        if from == "lib" {
            continue; // the root re-exports every unit
        }
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        let to = imported_units_of(rel, &code, "crate::", &names)
            .into_iter()
            .map(|n| owner[&n].clone())
            .filter(|t| *t != from)
            .collect::<Vec<_>>();
        edges.entry(from).or_default().extend(to);
    }
    let n_edges: usize = edges.values().map(BTreeSet::len).sum();
    assert!(
        units.len() > 20 && n_edges > 40,
        "the scan found too little"
    );
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_owned()];
        while let Some(u) = todo.pop() {
            for v in edges.get(&u).into_iter().flatten() {
                if seen.insert(v.clone()) {
                    todo.push(v.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        units.iter().map(|u| (u, reach(u))).collect();
    let mut circles: BTreeSet<Vec<String>> = BTreeSet::new();
    for u in &units {
        let mut circle: Vec<String> = units
            .iter()
            .filter(|v| *v == u || (reached[u].contains(*v) && reached[v].contains(u)))
            .cloned()
            .collect();
        circle.sort();
        if circle.len() > 1 {
            circles.insert(circle);
        }
    }
    let big: Vec<&Vec<String>> = circles.iter().filter(|c| c.len() > 2).collect();
    assert!(
        big.is_empty(),
        "import circles of more than two files in ggml: {big:?}"
    );
    let pairs: BTreeSet<Vec<String>> = GGML_PAIRS
        .iter()
        .map(|(a, b)| vec![a.to_string(), b.to_string()])
        .collect();
    assert_eq!(
        circles, pairs,
        "the pairs of ggml files that import each other are not GGML_PAIRS (a new one is an \
         import to remove; a gone one is an entry to remove)"
    );
}

/// The product code (the engine library, the C library, the server) names neither the tooling
/// crate nor the libllama one: the one exception is the server's demo package, behind its
/// feature `demo` (`serve/src/load.rs`).
#[test]
fn products_name_no_tooling() {
    let ws = workspace();
    let mut files = Vec::new();
    for dir in ["audio-engine/src", "src", "serve/src"] {
        sources(&ws.join(dir), &mut files);
    }
    assert!(files.len() > 100, "the scan found too little");
    let allowed = [ws.join("serve/src/load.rs")];
    let mut named = Vec::new();
    for f in &files {
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        if (code.contains("audio_tooling") && !allowed.contains(f)) || code.contains("lfm2_llm") {
            named.push(f.strip_prefix(&ws).unwrap().display().to_string());
        }
    }
    assert!(
        named.is_empty(),
        "product code names the tooling or libllama crate: {named:?}"
    );
    // why the raw text: `code_only` blanks the feature's name.
    let load = std::fs::read_to_string(&allowed[0]).unwrap();
    for (i, _) in load.match_indices("audio_tooling") {
        let before = &load[..i];
        let gate = before.rfind("#[cfg(feature = \"demo\")]");
        assert!(
            gate.is_some_and(|g| !before[g..].contains(';')),
            "serve/src/load.rs names the tooling crate outside its `demo` arm"
        );
    }
}

#[test]
fn the_scanner_sees_groups_comments_and_super_chains() {
    let code = code_only(
        "use crate::lfm2_audio::{model::X, text::{a, b}};\n// use crate::lfm2_audio::error;\n\
         /* crate::lfm2_audio::limits */ let s = \"crate::lfm2_audio::tasks\";\n\
         use super::super::session::Y;\nuse super::super::super::generation;",
    );
    let got = imported_units(Path::new("io/x.rs"), &code);
    let want: BTreeSet<String> = ["model", "text", "session"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(got, want);
    let got = imported_units(Path::new("io/mod.rs"), "use super::error::E;");
    assert!(got.contains("error"));
}
