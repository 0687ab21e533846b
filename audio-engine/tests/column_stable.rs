//! `Backend::compute_column_stable`: a matrix product gives each column the bits it gets alone,
//! at every width 1..=8, for F32, F16, Q8_0 and Q4_0 weights, repacked or not, at a realistic
//! width (2048 inputs, where ggml's multi-column kernels take over). What the batched decode
//! steps and frames rely on. Also prints which types the plain compute keeps stable on this
//! CPU (F32 and F16 are not: llamafile's tinyBLAS sums in another order than the one-column
//! dot).

use audio_engine::ggml::{
    cpu_variant, Backend, Context, GgmlType, GraphAllocator, LoadOptions, TensorSpec, WeightStore,
};

const K: i64 = 2048;
const ROWS: i64 = 256;

/// `w x` for the columns of `x`, as bits; `stable` picks the column-stable compute.
fn product(ty: GgmlType, repack: bool, stable: bool, w: &[u8], x: &[f32]) -> Vec<u32> {
    let cols = x.len() as i64 / K;
    let be = Backend::cpu().unwrap().with_weight_repack(repack);
    be.set_n_threads(2).unwrap();
    let spec = TensorSpec {
        name: "w",
        ty,
        ne: &[K, ROWS],
        data: Some(w),
    };
    let opts = LoadOptions {
        mapping: None,
        may_repack: &|_| true,
    };
    let store = WeightStore::load(&be, &[spec], opts).unwrap();
    let ctx = Context::metadata(16).unwrap();
    let xt = ctx.new_tensor_2d(GgmlType::F32, K, cols).unwrap();
    xt.set_input();
    let y = ctx
        .mul_mat(ctx.param(&store.get("w").unwrap()), xt)
        .unwrap();
    y.set_output();
    let mut g = ctx.new_graph(16).unwrap();
    g.build_forward_expand(y).unwrap();
    GraphAllocator::new(&be).unwrap().alloc_graph(&g).unwrap();
    xt.set_f32(x).unwrap();
    if stable {
        be.compute_column_stable(&g).unwrap();
    } else {
        be.compute(&g).unwrap();
    }
    y.get_f32().unwrap().iter().map(|v| v.to_bits()).collect()
}

/// The widths at which some column differs from the same column alone.
fn unstable_widths(ty: GgmlType, repack: bool, stable: bool, w: &[u8], x: &[f32]) -> Vec<usize> {
    let k = K as usize;
    let n = ROWS as usize;
    let alone: Vec<Vec<u32>> = (0..8)
        .map(|j| product(ty, repack, stable, w, &x[j * k..(j + 1) * k]))
        .collect();
    (2..=8)
        .filter(|&cols| {
            let y = product(ty, repack, stable, w, &x[..cols * k]);
            (0..cols).any(|j| y[j * n..(j + 1) * n] != alone[j][..])
        })
        .collect()
}

#[test]
fn every_column_gets_its_bits_alone_at_every_width() {
    let wf: Vec<f32> = (0..K * ROWS)
        .map(|i| (((i * 7919) % 2003) as f32 - 1001.0) / 3000.0)
        .collect();
    let x: Vec<f32> = (0..K * 8)
        .map(|i| (((i * 104_729) % 1999) as f32 - 999.0) / 500.0)
        .collect();
    println!("CPU variant {}", cpu_variant());
    for ty in [GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0] {
        let w = audio_engine::ggml::quant::quantize(ty, &wf, K as usize).unwrap();
        for repack in [false, true] {
            assert_eq!(
                unstable_widths(ty, repack, true, &w, &x),
                Vec::<usize>::new(),
                "{ty:?} (repack {repack}): column-stable compute changed a column's bits"
            );
            println!(
                "{ty:?} repack {repack}: plain compute differs at widths {:?}",
                unstable_widths(ty, repack, false, &w, &x)
            );
        }
    }
}
