//! Weights in the CPU's extra buffer types (repacked for its SIMD kernels) and in place in the
//! file mapping: where `WeightStore::load` puts each tensor, that graphs misusing a repacked
//! weight are refused with a typed error, that F32 weights are not copied, that a file shrunk
//! before load is an error, and that with repacking on every identity still holds (offline =
//! streamed, cached = uncached = a fresh session) while repack on and off both give valid
//! output.

mod common;

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use audio_engine::ggml::gguf::{GgufErrorKind, GgufFile};
use audio_engine::ggml::{
    Backend, Context, GgmlError, GgmlType, GraphAllocator, LoadOptions, TensorSpec, WeightStore,
};
use audio_engine::lfm2_audio::conversation::{Artifact, ArtifactKind, QUESTION_ID};
use audio_engine::lfm2_audio::internals::load_error::LoadError;
use audio_engine::lfm2_audio::internals::package::{PackagePaths, Quant};
use audio_engine::lfm2_audio::internals::sampling::SamplerConfig;
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::internals::weights::{open_gguf, WeightFile};
use audio_engine::lfm2_audio::{
    ModelOptions, ReplyEvent, S2sOptions, S2sRequest, Session, SessionOptions, TurnResult,
};

use common::lfm2_tiny::input_signal;
use common::package::{engine_with, package, uncached_session};

/// why: the memory test reads the process's resident set; the other tests must not allocate
/// meanwhile, and two tests computing at once on two cores slow each other down.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether this CPU has a repack kernel for `Q4_0` (AVX2 on x86_64, as ggml's CPU backend
/// decides); prints why not otherwise.
fn q4_0_repacks() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            return true;
        }
        println!("skipped: this x86_64 CPU has no AVX2, so ggml has no Q4_0 repack kernel");
        false
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        println!("skipped: the Q4_0 repack check is written for x86_64 with AVX2");
        false
    }
}

fn cpu(repack: bool) -> Backend {
    let b = Backend::cpu().unwrap().with_weight_repack(repack);
    b.set_n_threads(1).unwrap();
    b
}

fn files(p: &PackagePaths) -> [&std::path::Path; 3] {
    [&p.backbone, &p.mmproj, &p.vocoder]
}

#[test]
fn q4_0_matrices_land_in_the_extra_buffer_and_the_rest_in_place() {
    let _g = serial();
    let p = package(Quant::Q4_0);
    let mut repacked = 0;
    for path in files(&p) {
        let on = WeightFile::open(path, &cpu(true)).unwrap();
        let off = WeightFile::open(path, &cpu(false)).unwrap();
        let (a, b) = (on.store().placement(), off.store().placement());
        println!("{}: on {a:?}\n    off {b:?}", path.display());
        // Nothing is copied on the CPU: what is not repacked is used in place.
        assert_eq!(a.copied, 0);
        assert_eq!(b.copied, 0);
        assert_eq!(b.repacked, 0);
        assert_eq!(a.repacked + a.in_place, on.store().len());
        assert_eq!(b.in_place, off.store().len());
        // Row tables stay plain.
        for name in on.store().names() {
            let w = on.store().get(name).unwrap();
            if audio_engine::lfm2_audio::internals::weights::is_row_table(name) {
                assert!(!w.is_repacked(), "{name} is read by get_rows");
            }
            if w.is_repacked() {
                assert_eq!(w.ty(), GgmlType::Q4_0, "{name}");
            }
        }
        repacked += a.repacked;
    }
    if q4_0_repacks() {
        assert!(
            repacked > 0,
            "no Q4_0 matrix of the tiny package was repacked"
        );
    }
}

/// A Q4_0 `[64, 16]` matrix (16 rows: a multiple of the AVX2 kernel's 8).
fn q4_0_store(backend: &Backend) -> (WeightStore, Vec<f32>) {
    let w: Vec<f32> = (0..64 * 16)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 64.0)
        .collect();
    let q = audio_engine::ggml::quant::quantize(GgmlType::Q4_0, &w, 64).unwrap();
    let store = WeightStore::load(
        backend,
        &[TensorSpec {
            name: "w",
            ty: GgmlType::Q4_0,
            ne: &[64, 16],
            data: Some(&q),
        }],
        LoadOptions {
            mapping: None,
            may_repack: &|_| true,
        },
    )
    .unwrap();
    (store, w)
}

fn compute<'a>(
    backend: &Backend,
    ctx: &'a Context,
    y: audio_engine::ggml::Tensor<'a>,
) -> Result<Vec<f32>, GgmlError> {
    y.set_output();
    let mut g = ctx.new_graph(16).unwrap();
    g.build_forward_expand(y).unwrap();
    GraphAllocator::new(backend)
        .unwrap()
        .alloc_graph(&g)
        .unwrap();
    for t in g.tensors() {
        if t.name() == "x" {
            t.set_f32(&vec![0.25f32; 64 * 3])?;
        }
        if t.name() == "ids" {
            t.set_i32(&[1, 3])?;
        }
    }
    backend.compute(&g)?;
    y.get_f32()
}

#[test]
fn a_repacked_weight_is_only_usable_as_a_matrix_product_weight() {
    let _g = serial();
    if !q4_0_repacks() {
        return;
    }
    let be = cpu(true);
    let (store, _) = q4_0_store(&be);
    let (plain, _) = q4_0_store(&cpu(false));
    assert_eq!(store.placement().repacked, 1);
    assert_eq!(plain.placement().repacked, 0);
    let w = store.get("w").unwrap();
    assert!(w.is_repacked());

    // A matrix product computes, and agrees with the plain kernel to rounding.
    let mm = |s: &WeightStore| {
        let ctx = Context::metadata(16).unwrap();
        let x = ctx.new_tensor_2d(GgmlType::F32, 64, 3).unwrap();
        x.set_name("x").unwrap();
        x.set_input();
        let y = ctx.mul_mat(ctx.param(&s.get("w").unwrap()), x).unwrap();
        compute(&be, &ctx, y).unwrap()
    };
    let (a, b) = (mm(&store), mm(&plain));
    let scale = b.iter().fold(0f32, |m, v| m.max(v.abs()));
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() <= 0.02 * scale, "{x} vs {y}");
    }

    // A row lookup, a view and a read-back are refused, naming the node and the weight.
    let ctx = Context::metadata(16).unwrap();
    let ids = ctx.new_tensor_1d(GgmlType::I32, 2).unwrap();
    ids.set_name("ids").unwrap();
    ids.set_input();
    let rows = ctx.get_rows(ctx.param(&w), ids).unwrap();
    rows.set_name("rows").unwrap();
    match compute(&be, &ctx, rows) {
        Err(GgmlError::RepackedWeight { node, weight, .. }) => {
            assert_eq!((node.as_str(), weight.as_str()), ("rows", "w"));
        }
        other => panic!("get_rows on a repacked weight: {other:?}"),
    }
    let ctx = Context::metadata(16).unwrap();
    let x = ctx.new_tensor_2d(GgmlType::F32, 64, 3).unwrap();
    x.set_name("x").unwrap();
    x.set_input();
    let half = ctx
        .view_2d(ctx.param(&w), 64, 8, ctx.param(&w).nb()[1], 0)
        .unwrap();
    let y = ctx.mul_mat(half, x).unwrap();
    let err = compute(&be, &ctx, y).unwrap_err();
    assert!(matches!(err, GgmlError::RepackedWeight { .. }), "{err}");
    println!("{err}");
    let ctx = Context::metadata(4).unwrap();
    assert!(ctx.param(&w).get_bytes().is_err());
}

fn vm_kb(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn f32_weights_are_used_in_place_without_a_copy() {
    let _g = serial();
    let p = package(Quant::F32);
    let be = cpu(true);
    let mut total = 0u64;
    let anon_before = vm_kb("RssAnon:");
    let mut loaded = Vec::new();
    for path in files(&p) {
        total += std::fs::metadata(path).unwrap().len();
        let f = WeightFile::open(path, &be).unwrap();
        let pl = f.store().placement();
        assert_eq!(pl.copied, 0, "{}: {pl:?}", path.display());
        assert_eq!(pl.repacked, 0, "{}: F32 is never repacked", path.display());
        assert_eq!(pl.in_place, f.store().len());
        // Used in place, and still read-only.
        let name = f.store().names().next().unwrap().to_owned();
        let ctx = Context::metadata(4).unwrap();
        let t = ctx.param(&f.store().get(&name).unwrap());
        assert!(matches!(
            t.set_bytes(0, &[0u8; 4]),
            Err(GgmlError::ReadOnly { .. })
        ));
        assert_eq!(
            t.get_bytes().unwrap(),
            f.gguf().tensor_data(f.gguf().tensor(&name).unwrap())
        );
        loaded.push(f);
    }
    let grown = vm_kb("RssAnon:").saturating_sub(anon_before) * 1024;
    println!("F32 files {total} bytes; anonymous memory grew {grown} bytes at load");
    if vm_kb("RssAnon:") > 0 {
        assert!(
            grown < total / 4,
            "loading {total} bytes of F32 weights grew anonymous memory by {grown}"
        );
    }
    drop(loaded);
}

#[test]
fn misaligned_tensor_data_is_copied_and_the_rest_used_in_place() {
    use audio_engine::ggml::gguf::GgufWriter;
    let _g = serial();
    let path = common::scratch::file("repack-align8.gguf");
    // general.alignment 8: a 2-element F32 tensor (8 bytes) puts the next one off 32 bytes.
    let mut w = GgufWriter::new();
    w.set_alignment(8).unwrap();
    let vals: Vec<Vec<f32>> = (0..4)
        .map(|i| (0..2).map(|j| (i * 2 + j) as f32).collect())
        .collect();
    let bytes: Vec<Vec<u8>> = vals
        .iter()
        .map(|v| v.iter().flat_map(|x| x.to_le_bytes()).collect())
        .collect();
    for (i, b) in bytes.iter().enumerate() {
        w.add_tensor(format!("t{i}"), GgmlType::F32, &[2], b.clone())
            .unwrap();
    }
    w.write_to_path(&path).unwrap();
    let f = WeightFile::open(&path, &cpu(true)).unwrap();
    let pl = f.store().placement();
    println!("{pl:?}");
    assert!(pl.copied > 0 && pl.in_place > 0, "{pl:?}");
    assert_eq!(pl.copied + pl.in_place, 4);
    for (i, v) in vals.iter().enumerate() {
        let ctx = Context::metadata(4).unwrap();
        let t = ctx.param(&f.store().get(&format!("t{i}")).unwrap());
        assert_eq!(&t.get_f32().unwrap(), v);
    }
    drop(f);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_file_shrunk_before_load_is_a_typed_error() {
    let _g = serial();
    let p = package(Quant::F32);
    let dir = common::scratch::dir("repack-shrunk");
    let copy = dir.join("backbone.gguf");
    std::fs::copy(&p.backbone, &copy).unwrap();
    let len = std::fs::metadata(&copy).unwrap().len();

    // Opened, then shrunk by another writer before the weights are loaded.
    let gguf = open_gguf(&copy).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&copy)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    match WeightFile::load(gguf, &cpu(true)) {
        Err(LoadError::Gguf(e)) => {
            assert!(matches!(e.kind(), GgufErrorKind::FileChanged { .. }), "{e}");
            println!("{e}");
        }
        other => panic!("expected a FileChanged error, got {other:?}"),
    }
    // Shrunk before it is opened: the tensors no longer fit, refused at open.
    assert!(GgufFile::open(&copy).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

fn question(i: usize) -> Vec<u8> {
    let n = 16_000 + 8_000 * i;
    let mut out = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
    for t in 0..n {
        let v = ((t * (5 + 3 * i)) % 300) as i32 - 150;
        w.write_sample((v * 80) as i16).unwrap();
    }
    w.finalize().unwrap();
    out.into_inner()
}

fn same(a: &TurnResult, b: &TurnResult) {
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(a.reply.text, b.reply.text);
    assert_eq!(a.reply.steps, b.reply.steps);
    assert_eq!(bits(&a.reply.audio), bits(&b.reply.audio));
    assert_eq!(a.artifact, b.artifact);
}

fn opts(repack: bool) -> ModelOptions {
    ModelOptions {
        repack,
        ..ModelOptions::default()
    }
}

#[test]
fn with_repacked_q4_0_weights_every_identity_holds() {
    let _g = serial();
    let e = engine_with(Quant::Q4_0, opts(true));
    let s2s = S2sOptions {
        max_new_tokens: 40,
        audio: SamplerConfig::s2s_audio(1234),
        ..Default::default()
    };
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();

    // Offline = streamed.
    let offline = e.s2s(&input_signal(), &s2s).unwrap();
    let mut stream = e.s2s_stream(input_signal(), &s2s).unwrap();
    let (mut text, mut audio) = (String::new(), Vec::new());
    while let Some(ev) = stream.next_event() {
        match ev {
            ReplyEvent::Text(t) => text.push_str(&t),
            ReplyEvent::Audio(a) => audio.extend(a),
        }
    }
    let streamed = stream.wait().unwrap();
    assert_eq!(text, offline.text);
    assert_eq!(bits(&audio), bits(&offline.audio));
    assert_eq!(streamed.steps, offline.steps);

    // Cached = uncached = fresh, over three turns (the third resumes prefill blocks).
    let mut cached = Session::new(e.clone(), SessionOptions::default());
    let mut plain = uncached_session(&e);
    let mut history: Vec<Artifact> = Vec::new();
    let mut last = None;
    for i in 0..3 {
        let req = S2sRequest {
            question: question(i).into(),
            history: history.clone(),
            return_codes: true,
            s2s: S2sOptions {
                max_new_tokens: 200,
                text: SamplerConfig::GREEDY,
                audio: SamplerConfig::s2s_audio(7),
                ..Default::default()
            },
        };
        let a = cached.s2s(&req).unwrap();
        let b = plain.s2s(&req).unwrap();
        same(&a, &b);
        println!(
            "turn {}: prompt {}, resumed {}",
            i + 1,
            a.reply.prompt_positions,
            cached.resumed_prefill_steps()
        );
        history.push(Artifact {
            id: QUESTION_ID.to_owned(),
            kind: ArtifactKind::Custom,
            payload: question(i),
            meta: BTreeMap::new(),
        });
        history.push(a.artifact.clone().unwrap());
        last = Some((req, a));
    }
    let (req, a) = last.unwrap();
    same(
        &Session::new(e.clone(), SessionOptions::default())
            .s2s(&req)
            .unwrap(),
        &a,
    );
}

#[test]
fn repack_on_and_off_both_give_valid_output() {
    let _g = serial();
    let s2s = S2sOptions {
        max_new_tokens: 24,
        text: SamplerConfig::GREEDY,
        audio: SamplerConfig::s2s_audio(5),
        ..Default::default()
    };
    let on = engine_with(Quant::Q4_0, opts(true))
        .s2s(&input_signal(), &s2s)
        .unwrap();
    let off = engine_with(Quant::Q4_0, opts(false))
        .s2s(&input_signal(), &s2s)
        .unwrap();
    for r in [&on, &off] {
        assert!(!r.steps.is_empty());
        assert!(r.audio.iter().all(|x| x.is_finite()));
    }
    println!(
        "repack on: {} steps, {:?}; off: {} steps, {:?}",
        on.steps.len(),
        on.text,
        off.steps.len(),
        off.text
    );
    // F32 has no repack kernel: the bytes do not depend on the setting.
    let f_on = engine_with(Quant::F32, opts(true))
        .s2s(&input_signal(), &s2s)
        .unwrap();
    let f_off = engine_with(Quant::F32, opts(false))
        .s2s(&input_signal(), &s2s)
        .unwrap();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(f_on.steps, f_off.steps);
    assert_eq!(bits(&f_on.audio), bits(&f_off.audio));
}

/// Times one full-size backbone-like matrix product (`Q4_0` `[2048, 8192]`, the shape of an
/// LFM2.5 feed-forward projection) for a decode step (1 column) and a prefill block (256
/// columns), repacked and plain, with 2 threads, in 3 alternating rounds (so a busy machine
/// slows both alike). Ignored by default (a measurement, not a check):
/// `cargo test -p lfm2-audio-engine --test repack -- --ignored --nocapture matmul_timing`.
#[test]
#[ignore]
fn matmul_timing() {
    let _g = serial();
    let (k, n) = (2048i64, 8192i64);
    let w: Vec<f32> = (0..k * n)
        .map(|i| ((i * 7919 % 2003) as f32 - 1001.0) / 2048.0)
        .collect();
    let q = audio_engine::ggml::quant::quantize(GgmlType::Q4_0, &w, k as usize).unwrap();
    drop(w);
    let setups: Vec<(bool, Backend, WeightStore)> = [false, true]
        .into_iter()
        .map(|repack| {
            let be = Backend::cpu().unwrap().with_weight_repack(repack);
            be.set_n_threads(2).unwrap();
            let store = WeightStore::load(
                &be,
                &[TensorSpec {
                    name: "w",
                    ty: GgmlType::Q4_0,
                    ne: &[k, n],
                    data: Some(&q),
                }],
                LoadOptions {
                    mapping: None,
                    may_repack: &|_| true,
                },
            )
            .unwrap();
            (repack, be, store)
        })
        .collect();
    for round in 0..3 {
        for (repack, be, store) in &setups {
            let p = store.get("w").unwrap();
            assert_eq!(p.is_repacked(), *repack && q4_0_repacks());
            for cols in [1i64, 256] {
                let ctx = Context::metadata(16).unwrap();
                let x = ctx.new_tensor_2d(GgmlType::F32, k, cols).unwrap();
                x.set_input();
                let y = ctx.mul_mat(ctx.param(&p), x).unwrap();
                y.set_output();
                let mut g = ctx.new_graph(16).unwrap();
                g.build_forward_expand(y).unwrap();
                GraphAllocator::new(be).unwrap().alloc_graph(&g).unwrap();
                x.set_f32(&vec![0.5f32; (k * cols) as usize]).unwrap();
                be.compute(&g).unwrap();
                let reps = if cols == 1 { 40 } else { 5 };
                let mut ms: Vec<f64> = (0..reps)
                    .map(|_| {
                        let t = std::time::Instant::now();
                        be.compute(&g).unwrap();
                        t.elapsed().as_secs_f64() * 1e3
                    })
                    .collect();
                ms.sort_by(f64::total_cmp);
                println!(
                    "round {round} repacked {:5}: [{k} x {n}] Q4_0 x [{k} x {cols}] F32: median {:.3} ms",
                    p.is_repacked(),
                    ms[ms.len() / 2]
                );
            }
        }
    }
}

/// Loads a 1 GiB F32 GGUF (16 matrices `[2048, 8192]`) in place (the default) and by copying
/// (`WeightStore::new`, what every load did before), printing the time and the growth of the
/// resident set (anonymous and file-backed). Ignored by default (a measurement):
/// `cargo test -p lfm2-audio-engine --test repack -- --ignored --nocapture f32_load_timing`.
#[test]
#[ignore]
fn f32_load_timing() {
    use audio_engine::ggml::gguf::{GgufWriter, TensorData};
    let _g = serial();
    let path = common::scratch::file("repack-f32.gguf");
    let (k, n) = (2048u64, 8192u64);
    let mut w = GgufWriter::new();
    for i in 0..16u32 {
        w.add_tensor(
            format!("blk.{i}.ffn.weight"),
            GgmlType::F32,
            &[k, n],
            TensorData::deferred(move |out| {
                let row: Vec<u8> = (0..k)
                    .flat_map(|j| ((j as f32 + i as f32) * 1e-3).to_le_bytes())
                    .collect();
                for _ in 0..n {
                    out.write_all(&row)?;
                }
                Ok(())
            }),
        )
        .unwrap();
    }
    w.write_to_path(&path).unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    // Page the file in, as a warm page cache would have it.
    let _ = std::fs::read(&path).map(|v| v.len());
    let be = cpu(true);
    for copy in [false, true] {
        let (anon, file) = (vm_kb("RssAnon:"), vm_kb("RssFile:"));
        let t = std::time::Instant::now();
        let f = WeightFile::open(&path, &be).unwrap();
        let copied = copy.then(|| {
            let g = f.gguf();
            let ne: Vec<Vec<i64>> = g
                .tensors()
                .iter()
                .map(|i| i.shape().iter().map(|&d| d as i64).collect())
                .collect();
            let specs: Vec<TensorSpec<'_>> = g
                .tensors()
                .iter()
                .zip(&ne)
                .map(|(i, ne)| TensorSpec {
                    name: i.name(),
                    ty: i.ggml_type(),
                    ne,
                    data: Some(g.tensor_data(i)),
                })
                .collect();
            WeightStore::new(&be, &specs).unwrap()
        });
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{} {size} bytes: {secs:.3} s, anonymous memory +{} MiB, file-backed +{} MiB, {:?}",
            if copy { "copied  " } else { "in place" },
            vm_kb("RssAnon:").saturating_sub(anon) / 1024,
            vm_kb("RssFile:").saturating_sub(file) / 1024,
            copied
                .as_ref()
                .map_or(f.store().placement(), |s| s.placement()),
        );
        drop(copied);
        drop(f);
    }
    let _ = std::fs::remove_file(&path);
}

/// Times a full-size package (the directory in `LFM2_FULL_DIR`, e.g. the bench's cached
/// synthetic Q4_0 package) with repacking on and off, in alternating rounds, 2 threads: load,
/// then an ASR request on 6 s of audio (encode, prefill, 16 greedy steps) and peak RSS.
/// Ignored by default (a measurement; skipped without the variable):
/// `LFM2_FULL_DIR=DIR cargo test -p lfm2-audio-engine --test repack -- --ignored --nocapture full_size`.
#[test]
#[ignore]
fn full_size_timing() {
    use audio_engine::lfm2_audio::{AsrOptions, Lfm2Audio};
    let _g = serial();
    let Some(dir) = std::env::var_os("LFM2_FULL_DIR") else {
        println!("skipped: set LFM2_FULL_DIR to a full-size package directory");
        return;
    };
    let audio: Vec<f32> = (0..96_000)
        .map(|t| ((t * 7 % 400) as f32 - 200.0) / 400.0 * 0.3)
        .collect();
    for round in 0..2 {
        for repack in [false, true] {
            let t = std::time::Instant::now();
            let e = Lfm2Audio::load(
                &dir,
                ModelOptions {
                    n_threads: 2,
                    repack,
                    ..ModelOptions::default()
                },
            )
            .unwrap();
            let load = t.elapsed().as_secs_f64();
            let rss = vm_kb("VmRSS:") / 1024;
            let opts = AsrOptions {
                max_new_tokens: 16,
                ..Default::default()
            };
            e.asr(&audio, &opts).unwrap();
            let r = e.asr(&audio, &opts).unwrap();
            let steps = r.tokens.len().max(1);
            println!(
                "round {round} repack {repack:5}: load {load:.2} s (RSS {rss} MiB after load), \
                 prompt {} positions: encode {:.0} ms, prefill {:.0} ms ({:.1} positions/s), \
                 {} steps {:.1} ms/step; RSS now {} MiB",
                r.prompt_positions,
                r.timings.encode.as_secs_f64() * 1e3,
                r.timings.prefill.as_secs_f64() * 1e3,
                r.prompt_positions as f64 / r.timings.prefill.as_secs_f64(),
                r.tokens.len(),
                r.timings.decode.as_secs_f64() * 1e3 / steps as f64,
                vm_kb("VmRSS:") / 1024,
            );
        }
    }
}

/// A repacked matrix product (`Q4_0` `[256, 64]` times 5 columns: the kernel's 4-column gemm
/// and its 1-column gemv) gives the same bits at 1, 2 and 4 threads. Also prints whether a
/// column's result depends on the batch it is computed in (the gemm and gemv paths).
#[test]
fn repacked_products_do_not_depend_on_the_thread_count() {
    let _g = serial();
    if !q4_0_repacks() {
        return;
    }
    let (k, n, cols) = (256i64, 64i64, 5i64);
    let w: Vec<f32> = (0..k * n)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 64.0)
        .collect();
    let q = audio_engine::ggml::quant::quantize(GgmlType::Q4_0, &w, k as usize).unwrap();
    let x: Vec<f32> = (0..k * cols)
        .map(|i| ((i * 13 % 29) as f32 - 14.0) / 16.0)
        .collect();
    let run = |threads: usize, cols: i64, x: &[f32]| {
        let be = Backend::cpu().unwrap().with_weight_repack(true);
        be.set_n_threads(threads).unwrap();
        let store = WeightStore::load(
            &be,
            &[TensorSpec {
                name: "w",
                ty: GgmlType::Q4_0,
                ne: &[k, n],
                data: Some(&q),
            }],
            LoadOptions {
                mapping: None,
                may_repack: &|_| true,
            },
        )
        .unwrap();
        assert_eq!(store.placement().repacked, 1);
        let ctx = Context::metadata(16).unwrap();
        let xt = ctx.new_tensor_2d(GgmlType::F32, k, cols).unwrap();
        xt.set_input();
        let y = ctx
            .mul_mat(ctx.param(&store.get("w").unwrap()), xt)
            .unwrap();
        y.set_output();
        let mut g = ctx.new_graph(16).unwrap();
        g.build_forward_expand(y).unwrap();
        GraphAllocator::new(&be).unwrap().alloc_graph(&g).unwrap();
        xt.set_f32(x).unwrap();
        be.compute(&g).unwrap();
        y.get_f32()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>()
    };
    let one = run(1, cols, &x);
    assert_eq!(run(2, cols, &x), one);
    assert_eq!(run(4, cols, &x), one);
    let last = run(1, 1, &x[(k * (cols - 1)) as usize..]);
    let first = run(1, 1, &x[..k as usize]);
    println!(
        "column 0 alone = in the batch: {}; column 4 alone = in the batch: {}",
        first[..] == one[..n as usize],
        last[..] == one[(n * (cols - 1)) as usize..]
    );
}
