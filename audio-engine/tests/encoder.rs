//! FastConformer encoder + adapter: the mmproj converter, the ggml graphs, and their agreement
//! with liquid-audio; plus the F32 depthwise convolution op the subsampling uses.

use std::path::{Path, PathBuf};

use audio_engine::ggml::{Backend, Context, GgmlType, GraphAllocator};
use audio_engine::lfm2_audio::convert::mmproj::convert_mmproj;
use audio_engine::lfm2_audio::convert::{HfCheckpoint, OutType, Progress};
use audio_engine::lfm2_audio::encoder::AudioEncoder;
use audio_engine::lfm2_audio::safetensors::SafeTensors;
use audio_engine::lfm2_audio::weights::WeightFile;

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

fn convert(dir: &Path, ty: OutType, out: &Path) -> usize {
    let ckpt = open_checkpoint(dir);
    let mut count = Count(0);
    convert_mmproj(&ckpt, out, ty, &mut count).expect("convert_mmproj");
    count.0
}

/// Development check against a checkpoint and reference made by an ad hoc liquid-audio script
/// (set `ENCODER_DEV_DIR` to a directory with `ckpt/` and `ref.safetensors`).
#[test]
fn dev_reference() {
    let Ok(dir) = std::env::var("ENCODER_DEV_DIR") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let be = cpu();
    let reference = SafeTensors::open(dir.join("ref.safetensors")).unwrap();
    let mel = reference.f32("mel").unwrap();
    let n_frames = reference.tensor("mel").unwrap().shape[1];
    let want_conf = reference.f32("conformer").unwrap();
    let want_adapter = reference.f32("adapter").unwrap();
    for ty in [OutType::F32, OutType::F16, OutType::Q8_0] {
        let out = dir.join(format!("mmproj-{ty:?}.gguf"));
        convert(&dir.join("ckpt"), ty, &out);
        let enc = AudioEncoder::load(WeightFile::open(&out, &be).unwrap()).unwrap();
        let got = enc.encode(&be, &mel, n_frames).unwrap();
        println!(
            "{ty:?}: conformer {:.3e} adapter {:.3e}",
            rel_err(&got.conformer, &want_conf),
            rel_err(&got.adapter, &want_adapter)
        );
    }
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
