//! `Backend::compute_column_stable`: a matrix product gives each column the bits it gets alone,
//! at every width 1..=8, for F32, F16, Q8_0 and Q4_0 weights, repacked or not, at a realistic
//! width (2048 inputs, where ggml's multi-column kernels take over). What the batched decode
//! steps and frames rely on. Also prints which types the plain compute keeps stable on this
//! CPU (F32 and F16 are not: llamafile's tinyBLAS sums in another order than the one-column
//! dot).

use audio_engine::ggml::{
    cpu_variant, Backend, Context, GgmlType, GraphAllocator, LoadOptions, TensorSpec, WeightStore,
};
use std::sync::Mutex;

/// Held by each test for its whole run. why: the kernel's call counters are per process, and
/// libtest runs this binary's tests side by side, so the other test's products would count
/// as this one's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const K: i64 = 2048;
const ROWS: i64 = 256;

/// `w x` for the columns of `x`, as bits; `stable` picks the column-stable compute.
fn product(ty: GgmlType, repack: bool, stable: bool, w: &[u8], x: &[f32]) -> Vec<u32> {
    let be = Backend::cpu().unwrap().with_weight_repack(repack);
    be.set_n_threads(2).unwrap();
    product_on(&be, &be, ty, (K, ROWS), stable, w, x)
}

/// `w x` computed on `be` for a weight `[k, rows]` of type `ty` placed as `place` places
/// weights (a handle of the same backend), as bits.
fn product_on(
    place: &Backend,
    be: &Backend,
    ty: GgmlType,
    (k, rows): (i64, i64),
    stable: bool,
    w: &[u8],
    x: &[f32],
) -> Vec<u32> {
    let cols = x.len() as i64 / k;
    let spec = TensorSpec {
        name: "w",
        ty,
        ne: &[k, rows],
        data: Some(w),
    };
    let opts = LoadOptions {
        mapping: None,
        may_repack: &|_| true,
    };
    let store = WeightStore::load(place, &[spec], opts).unwrap();
    if ty == GgmlType::Q4_0 && place.weight_repack() {
        // the VNNI kernel's test compares kernels on repacked weights only
        assert_eq!(store.placement().repacked, 1, "the weight is repacked");
    }
    let ctx = Context::metadata(16).unwrap();
    let xt = ctx.new_tensor_2d(GgmlType::F32, k, cols).unwrap();
    xt.set_input();
    let y = ctx
        .mul_mat(ctx.param(&store.get("w").unwrap()), xt)
        .unwrap();
    y.set_output();
    let mut g = ctx.new_graph(16).unwrap();
    g.build_forward_expand(y).unwrap();
    GraphAllocator::new(be).unwrap().alloc_graph(&g).unwrap();
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
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
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

/// `w x` for a repacked `Q4_0` weight `[k, rows]` on `threads` threads, with or without the VNNI
/// column kernel, as bits (plain compute: with it, the kernel takes two columns and more, and
/// one on CPUs with AMX). The weight is placed as a backend with the kernel places it either
/// way (in `CPU_REPACK`, passing over AMX), so that without it ggml's kernels for the same
/// layout compute.
fn q4_0_product(vnni: bool, threads: usize, k: i64, rows: i64, w: &[u8], x: &[f32]) -> Vec<u32> {
    let place = Backend::cpu()
        .unwrap()
        .with_weight_repack(true)
        .with_vnni_q4_0(true);
    assert!(
        place.vnni_q4_0(),
        "the kernel is built (checked by the caller)"
    );
    let be = place.clone().with_vnni_q4_0(vnni);
    be.set_n_threads(threads).unwrap();
    product_on(&place, &be, GgmlType::Q4_0, (k, rows), false, w, x)
}

/// Vendor patch 0007: the AVX-512 VNNI column kernel (from `vnni_q4_0_min_columns()` columns:
/// two, or one on CPUs with AMX; below that ggml's gemv) gives every column of a repacked
/// `Q4_0` product the bits ggml's own kernels give it (its one-column gemv below four columns,
/// its four-column gemm above), at every width, thread count and row tail (rows a multiple of
/// 16, and 8 more), and so each column its bits alone; on its AMX tiles too.
#[test]
fn vnni_q4_0_kernel_gives_ggml_bits_at_every_width() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !audio_engine::ggml::vnni_q4_0_built() {
        println!(
            "SKIPPED: this build has no VNNI Q4_0 kernel (CPU variant {})",
            cpu_variant()
        );
        return;
    }
    // On builds for CPUs with AMX-INT8 the kernel computes wide products on AMX tiles: the
    // same bits, checked here too.
    let amx_from = audio_engine::ggml::vnni_q4_0_amx_min_columns();
    println!("AMX tiles from {amx_from} columns (0: not built)");
    for (k, rows) in [(2048_i64, 264_i64), (8192, 64)] {
        let wf: Vec<f32> = (0..k * rows)
            .map(|i| (((i * 7919) % 2003) as f32 - 1001.0) / 3000.0)
            .collect();
        let w = audio_engine::ggml::quant::quantize(GgmlType::Q4_0, &wf, k as usize).unwrap();
        // 31-33 and 81 (a prefill block): around and past the kernel's AMX threshold
        let widths = [1_i64, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 32, 33, 81];
        let max = *widths.iter().max().unwrap();
        let x: Vec<f32> = (0..k * max)
            .map(|i| (((i * 104_729) % 1999) as f32 - 999.0) / 500.0)
            .collect();
        let n = rows as usize;
        let col = |j: usize| &x[j * k as usize..(j + 1) * k as usize];
        let alone: Vec<Vec<u32>> = (0..max as usize)
            .map(|j| q4_0_product(true, 1, k, rows, &w, col(j)))
            .collect();
        for threads in [1, 2] {
            for &cols in &widths {
                let xs = &x[..(cols * k) as usize];
                let calls = audio_engine::ggml::vnni_q4_0_calls();
                let amx_calls = audio_engine::ggml::vnni_q4_0_amx_calls();
                let ours = q4_0_product(true, threads, k, rows, &w, xs);
                let ran = audio_engine::ggml::vnni_q4_0_calls() > calls;
                assert_eq!(
                    ran,
                    cols as usize >= audio_engine::ggml::vnni_q4_0_min_columns(),
                    "k {k} rows {rows} width {cols} threads {threads}: whether the VNNI kernel ran"
                );
                let amx = audio_engine::ggml::vnni_q4_0_amx_calls() > amx_calls;
                assert_eq!(
                    amx,
                    amx_from > 0 && cols as usize >= amx_from,
                    "k {k} rows {rows} width {cols} threads {threads}: whether the kernel's AMX \
                     tiles ran (from {amx_from} columns; 0: not built)"
                );
                let ggml = q4_0_product(false, threads, k, rows, &w, xs);
                assert!(
                    ours == ggml,
                    "k {k} rows {rows} width {cols} threads {threads}: the VNNI kernel's bits \
                     differ from ggml's"
                );
                for j in 0..cols as usize {
                    assert!(
                        ours[j * n..(j + 1) * n] == alone[j][..],
                        "k {k} rows {rows} width {cols} threads {threads}: column {j} differs \
                         from its bits alone"
                    );
                }
            }
        }
    }
}
