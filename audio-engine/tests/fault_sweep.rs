//! The fault sweep: each of the four GGUF files of the tiny package (F32, and Q4_0, whose
//! matrices are repacked), damaged in many ways (truncated at many offsets; bytes of the header,
//! of every metadata key and value and of every tensor info flipped; bytes flipped at evenly
//! spread offsets of the whole header and metadata region; some in the tensor data), then the
//! package is loaded and a short ASR run (with a short S2S too when the damaged file is the
//! vocoder or the detokenizer, which ASR does not use). Every case must end in a typed error or a valid result: never a panic, an abort (a
//! ggml assert included) or a hang, and each within [`CASE_BOUND`].
//!
//! The cases run in a child process per file (`fault_sweep_child`), so an abort is reported
//! with the case that caused it instead of killing this test binary, and a case that goes
//! quiet for [`QUIET_LIMIT`] is killed and reported as a hang.

mod common;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use audio_engine::lfm2_audio::internals::package::{ModelPackage, PackagePaths, Quant};
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{AsrOptions, EngineError, Lfm2Audio, ModelOptions, S2sOptions};

use common::child::{self, report};
use common::lfm2_tiny::input_signal;
use common::package::package;

/// Longest one case may take (load and runs): a case takes well under a second.
const CASE_BOUND: Duration = Duration::from_secs(10);
/// How long the child may print nothing before it is killed as hung.
const QUIET_LIMIT: Duration = Duration::from_secs(60);
/// ASR steps per case.
const ASR_STEPS: usize = 2;
/// S2S steps per case: past the first frames, so the depthformer and detokenizer run.
const S2S_STEPS: usize = 9;

/// The four files, by the name the tests and the child use.
const FILES: [&str; 4] = ["backbone", "mmproj", "vocoder", "tokenizer"];

fn file_of<'p>(p: &'p PackagePaths, which: &str) -> &'p Path {
    match which {
        "backbone" => &p.backbone,
        "mmproj" => &p.mmproj,
        "vocoder" => &p.vocoder,
        "tokenizer" => &p.tokenizer,
        other => panic!("no file {other}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Where the fields of a GGUF file are (a walker of the format, independent of the engine's
// reader, so the sweep knows what it damages)
// ---------------------------------------------------------------------------------------------

/// What a field holds, which decides how it is damaged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The magic.
    Magic,
    /// A `u32` type id (the version, a value type, an array's element type, a tensor type).
    Type,
    /// A `u64` count or length (tensor and pair counts, string lengths, array counts, dims).
    Size,
    /// A tensor's data offset.
    Offset,
    /// The first byte of a string (a key, a tensor name, a string value).
    FirstByte,
    /// A scalar metadata value.
    Value,
}

/// One field of the header, a metadata pair or a tensor info.
#[derive(Debug, Clone)]
struct Field {
    offset: usize,
    len: usize,
    kind: Kind,
    what: String,
}

/// The fields of a valid GGUF file, in file order, and where its tensor data starts.
struct Layout {
    fields: Vec<Field>,
    /// Start of each metadata pair and each tensor info.
    items: Vec<usize>,
    /// End of the tensor infos (the data follows after alignment padding).
    infos_end: usize,
    data_offset: usize,
}

struct Walker<'a> {
    b: &'a [u8],
    pos: usize,
    fields: Vec<Field>,
}

impl Walker<'_> {
    fn field(&mut self, len: usize, kind: Kind, what: String) -> u64 {
        let mut v = [0u8; 8];
        v[..len].copy_from_slice(&self.b[self.pos..self.pos + len]);
        self.fields.push(Field {
            offset: self.pos,
            len,
            kind,
            what,
        });
        self.pos += len;
        u64::from_le_bytes(v)
    }

    fn peek_u64(&self) -> u64 {
        u64::from_le_bytes(self.b[self.pos..self.pos + 8].try_into().unwrap())
    }

    /// A string: its length field and its first byte are recorded.
    fn string(&mut self, what: &str) -> String {
        let n = self.field(8, Kind::Size, format!("{what} length")) as usize;
        if n > 0 {
            self.fields.push(Field {
                offset: self.pos,
                len: 1,
                kind: Kind::FirstByte,
                what: format!("{what} first byte"),
            });
        }
        let s = String::from_utf8_lossy(&self.b[self.pos..self.pos + n]).into_owned();
        self.pos += n;
        s
    }

    fn scalar_size(ty: u32) -> usize {
        match ty {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            10..=12 => 8,
            t => panic!("value type {t}"),
        }
    }

    /// A value of type `ty`; its fields are recorded when `record` (an array records its first
    /// two elements only).
    fn value(&mut self, ty: u32, what: &str, record: bool) {
        match ty {
            8 if record => {
                self.string(&format!("{what} string"));
            }
            8 => self.pos += 8 + self.peek_u64() as usize,
            9 => {
                let (elem, n) = if record {
                    let e = self.field(4, Kind::Type, format!("{what} element type")) as u32;
                    (
                        e,
                        self.field(8, Kind::Size, format!("{what} count")) as usize,
                    )
                } else {
                    let e = u32::from_le_bytes(self.b[self.pos..self.pos + 4].try_into().unwrap());
                    self.pos += 4;
                    let n = self.peek_u64() as usize;
                    self.pos += 8;
                    (e, n)
                };
                for i in 0..n {
                    self.value(elem, &format!("{what}[{i}]"), record && i < 2);
                }
            }
            t if record => {
                self.field(Self::scalar_size(t), Kind::Value, format!("{what} value"));
            }
            t => self.pos += Self::scalar_size(t),
        }
    }
}

fn layout(b: &[u8]) -> Layout {
    let mut w = Walker {
        b,
        pos: 0,
        fields: Vec::new(),
    };
    w.field(4, Kind::Magic, "magic".into());
    w.field(4, Kind::Type, "version".into());
    let n_tensors = w.field(8, Kind::Size, "tensor count".into()) as usize;
    let n_kv = w.field(8, Kind::Size, "metadata count".into()) as usize;
    let mut items = Vec::new();
    let mut alignment = 32usize;
    for _ in 0..n_kv {
        items.push(w.pos);
        let key = w.string("key");
        let ty = w.field(4, Kind::Type, format!("type of {key}")) as u32;
        if key == "general.alignment" {
            alignment = u32::from_le_bytes(b[w.pos..w.pos + 4].try_into().unwrap()) as usize;
        }
        w.value(ty, &key, true);
    }
    for _ in 0..n_tensors {
        items.push(w.pos);
        let name = w.string("tensor name");
        let n_dims = w.field(4, Kind::Type, format!("{name} n_dims")) as usize;
        for d in 0..n_dims {
            w.field(8, Kind::Size, format!("{name} dim {d}"));
        }
        w.field(4, Kind::Type, format!("{name} type"));
        w.field(8, Kind::Offset, format!("{name} offset"));
    }
    let infos_end = w.pos;
    Layout {
        fields: w.fields,
        items,
        infos_end,
        data_offset: infos_end.next_multiple_of(alignment),
    }
}

// ---------------------------------------------------------------------------------------------
// The cases
// ---------------------------------------------------------------------------------------------

/// One way to damage a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Damage {
    /// Keep the first `n` bytes.
    Truncate(usize),
    /// XOR the byte at `at` with `mask`.
    Flip { at: usize, mask: u8 },
}

/// Every case for a file, with a description naming what is damaged.
fn cases(good: &[u8]) -> Vec<(Damage, String)> {
    let l = layout(good);
    let len = good.len();
    let mut out: Vec<(Damage, String)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut add = |d: Damage, what: String| {
        if seen.insert(d) {
            out.push((d, what));
        }
    };

    // Truncations: inside the fixed header byte by byte, at the start of every metadata pair
    // and tensor info and inside it, at the end of the infos, and across the data.
    for n in 0..24 {
        add(
            Damage::Truncate(n),
            format!("truncated to {n} bytes (header)"),
        );
    }
    for &at in &l.items {
        add(
            Damage::Truncate(at),
            format!("truncated at the item at {at}"),
        );
        add(
            Damage::Truncate(at + 9),
            format!("truncated inside the item at {at}"),
        );
    }
    for n in [l.infos_end, l.data_offset] {
        add(
            Damage::Truncate(n),
            format!("truncated at {n} (end of the infos)"),
        );
    }
    for k in 1..16 {
        let n = l.data_offset + (len - l.data_offset) * k / 16;
        add(Damage::Truncate(n), format!("truncated at {n} (data)"));
    }
    add(Damage::Truncate(len - 1), "last byte cut".into());

    // Every recorded field, damaged by what it holds: a near value (a type F32 -> F16, a
    // dimension or count off by one or by 256, an offset off alignment) and a far one (a huge
    // count, an unknown type, an aligned offset 32 bytes off).
    for f in &l.fields {
        let low = f.offset;
        let top = f.offset + f.len - 1;
        let masks: &[(usize, u8)] = match f.kind {
            Kind::Magic => &[(0, 0x01), (3, 0x20)],
            Kind::Type => &[(0, 0x01), (0, 0x0e)],
            Kind::Size => &[(0, 0x01), (1, 0x01), (usize::MAX, 0x80)],
            Kind::Value => &[(0, 0x01), (usize::MAX, 0x80)],
            Kind::Offset => &[(0, 0x01), (0, 0x20)],
            Kind::FirstByte => &[(0, 0x01)],
        };
        for &(byte, mask) in masks {
            let at = if byte == usize::MAX { top } else { low + byte };
            add(
                Damage::Flip { at, mask },
                format!("{} ^ {mask:#04x} at {at}", f.what),
            );
        }
    }

    // Evenly spread flips across the header and metadata region (mostly inside strings: key
    // names, token texts, merges), and a few in the tensor data.
    let spread = 256;
    for k in 0..spread {
        let at = l.infos_end * k / spread;
        add(
            Damage::Flip { at, mask: 0xff },
            format!("byte {at} of the metadata region inverted"),
        );
    }
    for k in 0..16 {
        let at = l.data_offset + (len - l.data_offset) * (2 * k + 1) / 32;
        add(
            Damage::Flip { at, mask: 0xff },
            format!("data byte {at} inverted"),
        );
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The child: runs every case of one file
// ---------------------------------------------------------------------------------------------

/// How a case ended.
fn classify(e: &EngineError) -> &'static str {
    if e.is_invalid_request() {
        "invalid-request"
    } else if e.is_capacity() {
        "capacity"
    } else {
        match e {
            EngineError::Load(_) | EngineError::Tokenizer(_) => "load-error",
            EngineError::Invariant(_) | EngineError::WorkerPanicked => "internal",
            _ => "run-error",
        }
    }
}

/// How a case ended: its class and, for an error, the error's message.
type Outcome = (&'static str, String);

/// Loads the package with the damaged file and runs the tasks. `Err` is a finding.
fn run_case(paths: &PackagePaths, which: &str, samples: &[f32]) -> Result<Outcome, String> {
    let pkg = match ModelPackage::open_paths(paths.clone()) {
        Ok(p) => p,
        Err(e) => return typed(&EngineError::Load(e), "open-error"),
    };
    let opts = ModelOptions {
        n_threads: 1,
        ..ModelOptions::default()
    };
    let model = match Lfm2Audio::from_package(pkg, opts) {
        Ok(m) => m,
        Err(e) => return typed(&e, "load-error"),
    };
    let asr = AsrOptions {
        max_new_tokens: ASR_STEPS,
        ..AsrOptions::default()
    };
    match model.asr(samples, &asr) {
        Ok(r) => {
            if r.tokens.is_empty() || r.tokens.len() > ASR_STEPS {
                return Err(format!("ASR gave {} tokens", r.tokens.len()));
            }
        }
        Err(e) => return typed(&e, classify(&e)),
    }
    if which == "vocoder" || which == "tokenizer" {
        let s2s = S2sOptions {
            max_new_tokens: S2S_STEPS,
            ..S2sOptions::default()
        };
        match model.s2s(samples, &s2s) {
            Ok(r) => {
                if r.steps.is_empty() || r.steps.len() > S2S_STEPS {
                    return Err(format!("S2S gave {} steps", r.steps.len()));
                }
                if let Some(i) = r.audio.iter().position(|s| !s.is_finite()) {
                    return Err(format!(
                        "S2S audio sample {i} of {} is {}",
                        r.audio.len(),
                        r.audio[i]
                    ));
                }
            }
            Err(e) => return typed(&e, classify(&e)),
        }
    }
    Ok(("ok", String::new()))
}

/// An error is acceptable when it is typed and says something; an internal error (a broken
/// invariant) is a finding.
fn typed(e: &EngineError, class: &'static str) -> Result<Outcome, String> {
    let msg = e.chain();
    if msg.is_empty() {
        return Err("an error without a message".into());
    }
    if classify(e) == "internal" {
        return Err(format!("internal error: {msg}"));
    }
    Ok((class, msg))
}

/// Writes `bytes` at `at` of the file at `path` (in place).
fn patch(path: &Path, at: usize, bytes: &[u8]) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(at as u64)).unwrap();
    f.write_all(bytes).unwrap();
}

fn child_run(which: &str) {
    let dir = PathBuf::from(std::env::var("LFM2_SWEEP_DIR").expect("LFM2_SWEEP_DIR"));
    let model = std::env::var("LFM2_SWEEP_MODEL").expect("LFM2_SWEEP_MODEL");
    let quant: Quant = std::env::var("LFM2_SWEEP_QUANT")
        .expect("LFM2_SWEEP_QUANT")
        .parse()
        .unwrap();
    let good_paths = PackagePaths::new(&dir, &model, quant);
    let good = std::fs::read(file_of(&good_paths, which)).unwrap();
    let scratch = common::scratch::dir(&format!("fault-sweep-{which}"));
    // why: the files are large (the vocoder is 70 MB), so a flip is made in place in one full
    // copy and undone after its case, and a truncation writes only the bytes it keeps. No
    // model of an earlier case is alive when a file changes (each is dropped first).
    let flipped = scratch.join("flipped.gguf");
    let truncated = scratch.join("truncated.gguf");
    std::fs::write(&flipped, &good).unwrap();
    let with = |damaged: &Path| {
        let mut p = good_paths.clone();
        let f = damaged.to_path_buf();
        match which {
            "backbone" => p.backbone = f,
            "mmproj" => p.mmproj = f,
            "vocoder" => p.vocoder = f,
            _ => p.tokenizer = f,
        }
        p
    };
    let (flipped_paths, truncated_paths) = (with(&flipped), with(&truncated));
    let samples = input_signal()[..8_000].to_vec();
    let cases = cases(&good);
    let mut findings = Vec::new();
    for (i, &(damage, ref what)) in cases.iter().enumerate() {
        let paths = match damage {
            Damage::Truncate(n) => {
                std::fs::write(&truncated, &good[..n]).unwrap();
                &truncated_paths
            }
            Damage::Flip { at, mask } => {
                patch(&flipped, at, &[good[at] ^ mask]);
                &flipped_paths
            }
        };
        report(&format!("case {i} {what}"));
        let t = Instant::now();
        let r = catch_unwind(AssertUnwindSafe(|| run_case(paths, which, &samples)));
        let ms = t.elapsed().as_millis();
        if let Damage::Flip { at, .. } = damage {
            patch(&flipped, at, &good[at..at + 1]);
        }
        let outcome = match r {
            Ok(Ok((class, msg))) => format!("{class} {}", msg.replace('\n', " ")),
            Ok(Err(finding)) => {
                findings.push(format!("case {i} ({what}): {finding}"));
                "finding".to_owned()
            }
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                findings.push(format!("case {i} ({what}): panic: {msg}"));
                "panic".to_owned()
            }
        };
        report(&format!("done {i} {ms} {outcome}"));
    }
    report(&format!("summary {} cases", cases.len()));
    assert!(findings.is_empty(), "findings:\n{}", findings.join("\n"));
}

/// The child side: runs only when started by [`sweep`] (or by the harness self-tests, whose
/// roles make it abort or hang in its first case).
#[test]
fn fault_sweep_child() {
    match child::child_role().as_deref() {
        None => {}
        Some("selftest-abort") => {
            report("case 0 self-test: abort");
            std::process::abort();
        }
        Some("selftest-hang") => {
            report("case 0 self-test: hang");
            std::thread::sleep(Duration::from_secs(3600));
        }
        Some(which) => child_run(which),
    }
}

// ---------------------------------------------------------------------------------------------
// The parent side: one test per file
// ---------------------------------------------------------------------------------------------

/// Reads a child's report: the outcome classes with their counts, the total and the slowest
/// case; `Err` names the case that crashed or hung, or what else went wrong.
fn analyse(label: &str, out: &child::Outcome, verbose: bool) -> Result<String, String> {
    let mut started_cases: BTreeMap<usize, String> = BTreeMap::new();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut slowest = (0u128, String::new());
    let mut total = None;
    for l in &out.lines {
        if let Some(rest) = l.strip_prefix("case ") {
            let (i, what) = rest.split_once(' ').unwrap_or((rest, ""));
            started_cases.insert(i.parse().unwrap_or(usize::MAX), what.to_owned());
        } else if let Some(rest) = l.strip_prefix("done ") {
            let mut it = rest.splitn(3, ' ');
            let i: usize = it.next().and_then(|v| v.parse().ok()).unwrap_or(usize::MAX);
            let ms: u128 = it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            let what = started_cases.remove(&i).unwrap_or_default();
            let outcome = it.next().unwrap_or_default();
            if verbose {
                println!("{label} case {i}: {what}: {outcome} ({ms} ms)");
            }
            let class = outcome.split(' ').next().unwrap_or_default().to_owned();
            *outcomes.entry(class).or_default() += 1;
            if ms > slowest.0 {
                slowest = (ms, what);
            }
        } else if let Some(rest) = l.strip_prefix("summary ") {
            total = rest.split(' ').next().and_then(|n| n.parse::<usize>().ok());
        }
    }
    let lines: Vec<&str> = out.stderr.lines().collect();
    let tail = lines[lines.len().saturating_sub(40)..].join("\n");
    if let Some((i, what)) = started_cases.iter().next() {
        return Err(format!(
            "{label}: case {i} ({what}) did not finish: the child {}\n{tail}",
            out.how()
        ));
    }
    if !out.success() {
        return Err(format!("{label}: the sweep's child {}\n{tail}", out.how()));
    }
    let total = total.ok_or_else(|| format!("{label}: the child reported no summary\n{tail}"))?;
    let done: usize = outcomes.values().sum();
    if done != total {
        return Err(format!("{label}: {done} of {total} cases reported"));
    }
    if slowest.0 > CASE_BOUND.as_millis() {
        return Err(format!(
            "{label}: case '{}' took {} ms, over the {} s bound",
            slowest.1,
            slowest.0,
            CASE_BOUND.as_secs()
        ));
    }
    // why: the sweep must reach the loaders and the runs, not only the reader.
    if outcomes.get("ok").copied().unwrap_or(0) == 0 {
        return Err(format!("{label}: no case loaded and ran: {outcomes:?}"));
    }
    Ok(format!(
        "{total} cases: {outcomes:?}; slowest {} ms ({})",
        slowest.0, slowest.1
    ))
}

fn sweep(quant: Quant, which: &str) {
    let label = format!("{which} ({quant})");
    let p = package(quant);
    let dir = p.backbone.parent().unwrap().to_path_buf();
    let started = Instant::now();
    let out = child::run(
        "fault_sweep_child",
        which,
        &[
            ("LFM2_SWEEP_DIR", dir.display().to_string()),
            ("LFM2_SWEEP_MODEL", p.model.clone()),
            ("LFM2_SWEEP_QUANT", quant.to_string()),
        ],
        QUIET_LIMIT,
    );
    // LFM2_SWEEP_VERBOSE=1 prints every case with its outcome (with --nocapture).
    let verbose = std::env::var_os("LFM2_SWEEP_VERBOSE").is_some();
    match analyse(&label, &out, verbose) {
        Ok(summary) => println!(
            "{label}: {summary}, in {:.1} s",
            started.elapsed().as_secs_f64()
        ),
        Err(e) => panic!("{e}"),
    }
}

/// The harness itself: a child that aborts in a case, or hangs in one, is a failure naming
/// that case (so the sweep's passes mean something).
#[test]
fn fault_sweep_reports_an_abort_and_a_hang_with_their_case() {
    let out = child::run("fault_sweep_child", "selftest-abort", &[], QUIET_LIMIT);
    let e = analyse("self-test", &out, false).unwrap_err();
    assert!(
        e.contains("case 0 (self-test: abort) did not finish") && e.contains("signal 6"),
        "{e}"
    );
    let out = child::run(
        "fault_sweep_child",
        "selftest-hang",
        &[],
        Duration::from_secs(2),
    );
    assert!(out.timed_out, "{out:?}");
    let e = analyse("self-test", &out, false).unwrap_err();
    assert!(
        e.contains("case 0 (self-test: hang) did not finish") && e.contains("going quiet"),
        "{e}"
    );
}

#[test]
fn fault_sweep_backbone() {
    sweep(Quant::F32, FILES[0]);
}

#[test]
fn fault_sweep_mmproj() {
    sweep(Quant::F32, FILES[1]);
}

#[test]
fn fault_sweep_vocoder() {
    sweep(Quant::F32, FILES[2]);
}

#[test]
fn fault_sweep_tokenizer() {
    sweep(Quant::F32, FILES[3]);
}

// The Q4_0 package: its matrices are repacked for the CPU's SIMD kernels where ggml has one
// (`CPU_REPACK`), another path from the file to ggml, with its own asserts.

#[test]
fn fault_sweep_q4_0_backbone() {
    sweep(Quant::Q4_0, FILES[0]);
}

#[test]
fn fault_sweep_q4_0_mmproj() {
    sweep(Quant::Q4_0, FILES[1]);
}

#[test]
fn fault_sweep_q4_0_vocoder() {
    sweep(Quant::Q4_0, FILES[2]);
}

#[test]
fn fault_sweep_q4_0_tokenizer() {
    sweep(Quant::Q4_0, FILES[3]);
}
