//! FastConformer encoder + adapter: the mmproj converter, the ggml graphs, and their agreement
//! with liquid-audio; plus the F32 depthwise convolution op the subsampling uses.

#[path = "common/scratch.rs"]
mod scratch_dirs;

use std::path::{Path, PathBuf};

use audio_engine::ggml::gguf::{GgufFile, GgufWriter};
use audio_engine::ggml::{Backend, Context, GgmlType, GraphAllocator};
use audio_engine::lfm2_audio::internals::encoder::{AudioEncoder, EncoderOutput};
use audio_engine::lfm2_audio::internals::features::log_mel;
use audio_engine::lfm2_audio::internals::load_error::LoadError;
use audio_engine::lfm2_audio::internals::package::Quant;
use audio_engine::lfm2_audio::internals::weights::WeightFile;
use audio_tooling::convert::mmproj::convert_mmproj;
use audio_tooling::convert::{ConvertError, HfCheckpoint, Progress};
use audio_tooling::safetensors::{Dtype, SafeTensors, SafeTensorsWriter};
use audio_tooling::synthetic::{tiny_input_signal, write_tiny_checkpoint, DEFAULT_SEED};

fn cpu() -> Backend {
    let be = Backend::cpu().expect("CPU backend");
    be.set_n_threads(2).expect("threads");
    be
}

/// `max |a - b| / max |b|`.
fn rel_err(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    let num = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).abs())
        .fold(0.0, f64::max);
    let den = b.iter().map(|&y| f64::from(y).abs()).fold(0.0, f64::max);
    num / den
}

struct Count(usize);

impl Progress for Count {
    fn tensor(&mut self, _file: &Path, _tensor: &str, done: usize, total: usize) {
        assert!(done <= total);
        self.0 += 1;
    }
}

fn open_checkpoint(dir: &Path) -> HfCheckpoint {
    let config = std::fs::read_to_string(dir.join("config.json")).expect("config.json");
    HfCheckpoint {
        dir: dir.to_path_buf(),
        config: serde_json::from_str(&config).expect("config.json is JSON"),
        model: SafeTensors::open(dir.join("model.safetensors")).expect("model.safetensors"),
    }
}

fn convert(dir: &Path, ty: Quant, out: &Path) -> usize {
    let ckpt = open_checkpoint(dir);
    let mut count = Count(0);
    convert_mmproj(&ckpt, out, "Tiny", ty, &mut count).expect("convert_mmproj");
    count.0
}

// ---------------------------------------------------------------------------------------------
// conv_2d_dw_direct against plain Rust
// ---------------------------------------------------------------------------------------------

fn rand_vec(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

#[test]
fn conv_2d_dw_direct_matches_reference() {
    let (w, h, c, kw, kh) = (9usize, 7usize, 3usize, 3usize, 3usize);
    let (s, p) = (2usize, 1usize);
    let kernel = rand_vec(1, kw * kh * c);
    let data = rand_vec(2, w * h * c);
    let ctx = Context::metadata(8).unwrap();
    let a = ctx
        .new_tensor(GgmlType::F32, &[kw as i64, kh as i64, 1, c as i64])
        .unwrap();
    let b = ctx
        .new_tensor(GgmlType::F32, &[w as i64, h as i64, c as i64, 1])
        .unwrap();
    a.set_input();
    b.set_input();
    let r = ctx
        .conv_2d_dw_direct(a, b, [s as i64, s as i64], [p as i64, p as i64], [1, 1])
        .unwrap();
    let (ow, oh) = ((w + 2 * p - kw) / s + 1, (h + 2 * p - kh) / s + 1);
    assert_eq!(r.ne(), [ow as i64, oh as i64, c as i64, 1]);
    r.set_output();
    let be = cpu();
    let mut g = ctx.new_graph(16).unwrap();
    g.build_forward_expand(r).unwrap();
    let alloc = GraphAllocator::new(&be).unwrap();
    alloc.alloc_graph(&g).unwrap();
    a.set_f32(&kernel).unwrap();
    b.set_f32(&data).unwrap();
    be.compute(&g).unwrap();
    let got = r.get_f32().unwrap();
    let mut want = vec![0f32; ow * oh * c];
    for ch in 0..c {
        for y in 0..oh {
            for x in 0..ow {
                let mut acc = 0f64;
                for j in 0..kh {
                    for i in 0..kw {
                        let (sx, sy) =
                            ((x * s + i) as i64 - p as i64, (y * s + j) as i64 - p as i64);
                        if sx < 0 || sy < 0 || sx >= w as i64 || sy >= h as i64 {
                            continue;
                        }
                        acc += f64::from(kernel[i + kw * (j + kh * ch)])
                            * f64::from(data[sx as usize + w * (sy as usize + h * ch)]);
                    }
                }
                want[x + ow * (y + oh * ch)] = acc as f32;
            }
        }
    }
    assert!(rel_err(&got, &want) < 1e-6, "{}", rel_err(&got, &want));

    // a non-square kernel with ne[2] != 1 is refused, not aborted
    let bad = ctx.new_tensor(GgmlType::F32, &[3, 3, 2, c as i64]).unwrap();
    assert!(ctx
        .conv_2d_dw_direct(bad, b, [1, 1], [0, 0], [1, 1])
        .is_err());
}

/// The channels-fastest depthwise convolution gives the bits of the WHCN one on the same data
/// (transposed), for channel counts around the SIMD width and the subsampling's stride/padding.
#[test]
fn conv_2d_dw_direct_cwhn_equals_the_whcn_kernel_bit_for_bit() {
    let (w, h, kw, kh) = (11usize, 9usize, 3usize, 3usize);
    for (c, s, p) in [
        (2usize, 2usize, 1usize),
        (7, 2, 1),
        (8, 1, 0),
        (19, 2, 1),
        (32, 1, 1),
    ] {
        let kernel = rand_vec(10 + c as u64, kw * kh * c);
        let data = rand_vec(20 + c as u64, w * h * c); // [W, H, C]
        let mut cwhn = vec![0f32; data.len()]; // [C, W, H]
        for ch in 0..c {
            for y in 0..h {
                for x in 0..w {
                    cwhn[ch + c * (x + w * y)] = data[x + w * (y + h * ch)];
                }
            }
        }
        let ctx = Context::metadata(32).unwrap();
        let k = ctx
            .new_tensor(GgmlType::F32, &[kw as i64, kh as i64, 1, c as i64])
            .unwrap();
        let d = ctx
            .new_tensor(GgmlType::F32, &[w as i64, h as i64, c as i64, 1])
            .unwrap();
        let dc = ctx
            .new_tensor(GgmlType::F32, &[c as i64, w as i64, h as i64, 1])
            .unwrap();
        for t in [k, d, dc] {
            t.set_input();
        }
        let (si, pi) = ([s as i64; 2], [p as i64; 2]);
        let r = ctx.conv_2d_dw_direct(k, d, si, pi, [1, 1]).unwrap();
        let rc = ctx.conv_2d_dw_direct_cwhn(k, dc, si, pi, [1, 1]).unwrap();
        let (ow, oh) = ((w + 2 * p - kw) / s + 1, (h + 2 * p - kh) / s + 1);
        assert_eq!(rc.ne(), [c as i64, ow as i64, oh as i64, 1]);
        assert!(rc.is_contiguous());
        let rc = ctx.cont(rc).unwrap();
        r.set_output();
        rc.set_output();
        let be = cpu();
        let mut g = ctx.new_graph(32).unwrap();
        g.build_forward_expand(r).unwrap();
        g.build_forward_expand(rc).unwrap();
        let alloc = GraphAllocator::new(&be).unwrap();
        alloc.alloc_graph(&g).unwrap();
        k.set_f32(&kernel).unwrap();
        d.set_f32(&data).unwrap();
        dc.set_f32(&cwhn).unwrap();
        be.compute(&g).unwrap();
        let (whcn, got) = (r.get_f32().unwrap(), rc.get_f32().unwrap());
        for ch in 0..c {
            for y in 0..oh {
                for x in 0..ow {
                    let (a, b) = (whcn[x + ow * (y + oh * ch)], got[ch + c * (x + ow * y)]);
                    assert_eq!(
                        a.to_bits(),
                        b.to_bits(),
                        "C {c}: ({x}, {y}, {ch}): {a} vs {b}"
                    );
                }
            }
        }
    }
    // Data with one channel, or a kernel of the wrong shape, is refused, not aborted.
    let ctx = Context::metadata(8).unwrap();
    let one = ctx.new_tensor(GgmlType::F32, &[1, 5, 5, 1]).unwrap();
    let k1 = ctx.new_tensor(GgmlType::F32, &[3, 3, 1, 1]).unwrap();
    assert!(ctx
        .conv_2d_dw_direct_cwhn(k1, one, [1, 1], [0, 0], [1, 1])
        .is_err());
    let d4 = ctx.new_tensor(GgmlType::F32, &[4, 5, 5, 1]).unwrap();
    let bad = ctx.new_tensor(GgmlType::F32, &[3, 3, 2, 4]).unwrap();
    assert!(ctx
        .conv_2d_dw_direct_cwhn(bad, d4, [1, 1], [0, 0], [1, 1])
        .is_err());
}

#[test]
fn conv_2d_direct_matches_reference() {
    let (w, h, ic, oc, kw, kh) = (10usize, 6usize, 2usize, 3usize, 3usize, 3usize);
    let (s, p) = (2usize, 1usize);
    let kernel = rand_vec(3, kw * kh * ic * oc);
    let data = rand_vec(4, w * h * ic);
    let ctx = Context::metadata(8).unwrap();
    let a = ctx
        .new_tensor(GgmlType::F32, &[kw as i64, kh as i64, ic as i64, oc as i64])
        .unwrap();
    let b = ctx
        .new_tensor(GgmlType::F32, &[w as i64, h as i64, ic as i64, 1])
        .unwrap();
    a.set_input();
    b.set_input();
    let r = ctx
        .conv_2d_direct(a, b, [s as i64, s as i64], [p as i64, p as i64], [1, 1])
        .unwrap();
    let (ow, oh) = ((w + 2 * p - kw) / s + 1, (h + 2 * p - kh) / s + 1);
    assert_eq!(r.ne(), [ow as i64, oh as i64, oc as i64, 1]);
    r.set_output();
    let be = cpu();
    let mut g = ctx.new_graph(16).unwrap();
    g.build_forward_expand(r).unwrap();
    let alloc = GraphAllocator::new(&be).unwrap();
    alloc.alloc_graph(&g).unwrap();
    a.set_f32(&kernel).unwrap();
    b.set_f32(&data).unwrap();
    be.compute(&g).unwrap();
    let got = r.get_f32().unwrap();
    let mut want = vec![0f32; ow * oh * oc];
    for o in 0..oc {
        for y in 0..oh {
            for x in 0..ow {
                let mut acc = 0f64;
                for c in 0..ic {
                    for j in 0..kh {
                        for i in 0..kw {
                            let sx = (x * s + i) as i64 - p as i64;
                            let sy = (y * s + j) as i64 - p as i64;
                            if sx < 0 || sy < 0 || sx >= w as i64 || sy >= h as i64 {
                                continue;
                            }
                            acc += f64::from(kernel[i + kw * (j + kh * (c + ic * o))])
                                * f64::from(data[sx as usize + w * (sy as usize + h * c)]);
                        }
                    }
                }
                want[x + ow * (y + oh * o)] = acc as f32;
            }
        }
    }
    // F32 patches: far below the ~1e-3 an F16 im2col would give
    assert!(rel_err(&got, &want) < 1e-6, "{}", rel_err(&got, &want));
    let bad = ctx
        .new_tensor(GgmlType::F32, &[3, 3, 5, oc as i64])
        .unwrap();
    assert!(ctx.conv_2d_direct(bad, b, [1, 1], [0, 0], [1, 1]).is_err());
}

// ---------------------------------------------------------------------------------------------
// The tiny synthetic checkpoint: conversion, loading, encoding, typed errors
// ---------------------------------------------------------------------------------------------

/// A fresh scratch directory for one test.
fn scratch(tag: &str) -> PathBuf {
    scratch_dirs::dir(&format!("encoder-test-{tag}"))
}

fn encode_file(be: &Backend, path: &Path, mel: &[f32], n_frames: usize) -> EncoderOutput {
    let enc = AudioEncoder::load(WeightFile::open(path, be).expect("open mmproj")).expect("load");
    enc.encode(be, mel, n_frames).expect("encode")
}

/// Mel features, their frame count, conformer and adapter outputs.
type Reference = (Vec<f32>, usize, Vec<f32>, Vec<f32>);

/// liquid-audio's outputs for the tiny checkpoint (seed [`DEFAULT_SEED`]) made by the reference
/// script: `mel` `[128, frames]`, `encoder_out` `[frames/8, d_model]`, `adapter_out`
/// `[frames/8, hidden]`. `None` while the fixture is not in the tree.
fn fixture_reference() -> Option<Reference> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/lfm2_tiny/reference.safetensors");
    let st = SafeTensors::open(path).ok()?;
    let n_frames = st.tensor("mel").ok()?.shape[1];
    Some((
        st.f32("mel").ok()?,
        n_frames,
        st.f32("encoder_out").ok()?,
        st.f32("adapter_out").ok()?,
    ))
}

#[test]
fn tiny_checkpoint_converts_loads_and_encodes() {
    let dir = scratch("tiny");
    let cfg = write_tiny_checkpoint(&dir.join("ckpt"), DEFAULT_SEED).expect("tiny checkpoint");
    let be = cpu();

    // F32 conversion: metadata and per-tensor types as convert_hf_to_gguf.py writes them
    let f32_path = dir.join("mmproj-f32.gguf");
    let n_written = convert(&dir.join("ckpt"), Quant::F32, &f32_path);
    let gguf = GgufFile::open(&f32_path).unwrap();
    assert_eq!(n_written, gguf.tensors().len());
    let md = gguf.metadata();
    assert_eq!(md.get_as::<&str>("general.architecture").unwrap(), "clip");
    assert_eq!(md.get_as::<&str>("clip.projector_type").unwrap(), "lfm2a");
    assert_eq!(
        md.get_as::<u32>("clip.audio.block_count").unwrap() as usize,
        cfg.enc_layers
    );
    assert_eq!(
        md.get_as::<u32>("clip.audio.projection_dim").unwrap() as usize,
        cfg.hidden
    );
    assert_eq!(
        md.get_as::<u32>("clip.audio.num_mel_bins").unwrap() as usize,
        cfg.n_mels
    );
    let pos = gguf
        .tensor("a.position_embd.weight")
        .expect("audio-code embedding");
    assert_eq!(
        pos.shape(),
        &[cfg.hidden as u64, (cfg.codebooks * cfg.audio_vocab) as u64]
    );
    assert!(gguf.tensor("a.blk.0.conv_norm.weight").is_some());
    assert!(
        gguf.tensor("blk.0.attn_q.weight").is_none()
            && gguf.tensors().iter().all(|t| !t.name().contains("depth"))
    );

    // F16 / Q8_0: matrices in the out type, convolutions, norms, biases and the code table F32
    let q8_path = dir.join("mmproj-q8_0.gguf");
    convert(&dir.join("ckpt"), Quant::Q8_0, &q8_path);
    let f16_path = dir.join("mmproj-f16.gguf");
    convert(&dir.join("ckpt"), Quant::F16, &f16_path);
    let q8 = GgufFile::open(&q8_path).unwrap();
    let ty = |name: &str| {
        q8.tensor(name)
            .unwrap_or_else(|| panic!("{name}"))
            .ggml_type()
    };
    assert_eq!(ty("a.blk.0.attn_q.weight"), GgmlType::Q8_0);
    assert_eq!(ty("mm.a.mlp.3.weight"), GgmlType::Q8_0);
    for name in [
        "a.blk.0.conv_pw1.weight",
        "a.blk.0.conv_dw.weight",
        "a.conv1d.0.weight",
        "a.blk.0.pos_bias_u",
        "a.blk.0.ffn_norm.weight",
        "a.position_embd.weight",
    ] {
        assert_eq!(ty(name), GgmlType::F32, "{name}");
    }

    // encode the fixture input's features (or the fixture's own mel when it is there)
    let reference = fixture_reference();
    let (mel, n_frames) = match &reference {
        Some((mel, n, _, _)) => (mel.clone(), *n),
        None => {
            let f = log_mel(&tiny_input_signal()).unwrap();
            (f.data().to_vec(), f.n_frames())
        }
    };
    let full = encode_file(&be, &f32_path, &mel, n_frames);
    assert_eq!(full.n_frames, n_frames.div_ceil(8));
    assert_eq!(full.conformer.len(), full.n_frames * cfg.enc_d_model);
    assert_eq!(full.adapter.len(), full.n_frames * cfg.hidden);
    assert!(full.adapter.iter().all(|v| v.is_finite()));
    if let Some((_, _, conf, adapter)) = &reference {
        let (ec, ea) = (
            rel_err(&full.conformer, conf),
            rel_err(&full.adapter, adapter),
        );
        println!("F32 vs liquid-audio: conformer {ec:.3e}, adapter {ea:.3e}");
        assert!(ec < 1e-4 && ea < 1e-4, "conformer {ec:e}, adapter {ea:e}");
    }
    // quantized files against the F32 file (measured: F16 ~2e-4..5e-4, Q8_0 ~1e-2)
    for (path, bound) in [(&f16_path, 3e-3), (&q8_path, 6e-2)] {
        let got = encode_file(&be, path, &mel, n_frames);
        let (ec, ea) = (
            rel_err(&got.conformer, &full.conformer),
            rel_err(&got.adapter, &full.adapter),
        );
        println!("{}: conformer {ec:.3e}, adapter {ea:.3e}", path.display());
        assert!(
            ec < bound && ea < bound,
            "{}: conformer {ec:e}, adapter {ea:e}",
            path.display()
        );
        assert!(ec > 0.0, "quantized weights must change the output");
    }

    // the encoder refuses malformed input instead of aborting
    let enc = AudioEncoder::load(WeightFile::open(&f32_path, &be).unwrap()).unwrap();
    assert!(enc.encode(&be, &mel[1..], n_frames).is_err());
    assert!(enc.encode(&be, &[], 0).is_err());
    let mut nan = mel.clone();
    nan[5] = f32::NAN;
    assert!(enc.encode(&be, &nan, n_frames).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Rewrites `src` to `dst` without `drop` and with `reshape` given a wrong shape.
fn rewrite_gguf(src: &Path, dst: &Path, drop: Option<&str>, reshape: Option<&str>) {
    let g = GgufFile::open(src).unwrap();
    let mut w = GgufWriter::new();
    w.extend_metadata(g.metadata()).unwrap();
    for t in g.tensors() {
        if Some(t.name()) == drop {
            continue;
        }
        let data = g.tensor_data(t).to_vec();
        let mut shape = t.shape().to_vec();
        if Some(t.name()) == reshape {
            // same bytes, rows and columns swapped
            shape.swap(0, 1);
        }
        w.add_tensor(t.name(), t.ggml_type(), &shape, data).unwrap();
    }
    w.write_to_path(dst).unwrap();
}

#[test]
fn load_errors_name_the_file_and_tensor() {
    let dir = scratch("errors");
    write_tiny_checkpoint(&dir.join("ckpt"), DEFAULT_SEED).unwrap();
    let good = dir.join("good.gguf");
    convert(&dir.join("ckpt"), Quant::F32, &good);
    let be = cpu();

    let missing = dir.join("missing.gguf");
    rewrite_gguf(&good, &missing, Some("a.blk.1.attn_q.weight"), None);
    match AudioEncoder::load(WeightFile::open(&missing, &be).unwrap()) {
        Err(LoadError::MissingTensor { file, tensor }) => {
            assert_eq!(file, missing);
            assert_eq!(tensor, "a.blk.1.attn_q.weight");
        }
        other => panic!("expected MissingTensor, got {other:?}"),
    }

    let misshapen = dir.join("misshapen.gguf");
    rewrite_gguf(&good, &misshapen, None, Some("a.blk.0.ffn_down.weight"));
    match AudioEncoder::load(WeightFile::open(&misshapen, &be).unwrap()) {
        Err(LoadError::BadShape {
            file,
            tensor,
            expected,
            found,
        }) => {
            assert_eq!(file, misshapen);
            assert_eq!(tensor, "a.blk.0.ffn_down.weight");
            assert_eq!(expected, vec![found[1], found[0]]);
        }
        other => panic!("expected BadShape, got {other:?}"),
    }
    let msg = AudioEncoder::load(WeightFile::open(&misshapen, &be).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("misshapen.gguf") && msg.contains("a.blk.0.ffn_down.weight"),
        "{msg}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn converter_names_a_missing_checkpoint_tensor() {
    let dir = scratch("convert-errors");
    let ckpt_dir = dir.join("ckpt");
    write_tiny_checkpoint(&ckpt_dir, DEFAULT_SEED).unwrap();
    // drop one BatchNorm statistic, which the converter needs to fold the norm
    let gone = "conformer.layers.0.conv.batch_norm.running_var";
    let src = SafeTensors::open(ckpt_dir.join("model.safetensors")).unwrap();
    let mut w = SafeTensorsWriter::new();
    for name in src.names().filter(|&n| n != gone) {
        let t = src.tensor(name).unwrap();
        match t.dtype {
            Dtype::I64 => {
                let v: Vec<i64> = t
                    .data
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                w.add_i64(name, t.shape, &v);
            }
            _ => w.add_f32(name, t.shape, &src.f32(name).unwrap()),
        }
    }
    drop(src);
    w.write(ckpt_dir.join("model.safetensors")).unwrap();
    let ckpt = open_checkpoint(&ckpt_dir);
    let err = convert_mmproj(
        &ckpt,
        &dir.join("out.gguf"),
        "Tiny",
        Quant::F32,
        &mut Count(0),
    )
    .unwrap_err();
    match err {
        ConvertError::BadTensor { file, tensor, .. } => {
            assert_eq!(file, ckpt_dir.join("model.safetensors"));
            assert_eq!(tensor, gone);
        }
        other => panic!("expected BadTensor, got {other:?}"),
    }
    assert!(!dir.join("out.gguf").exists(), "no partial output");
    let _ = std::fs::remove_dir_all(&dir);
}
