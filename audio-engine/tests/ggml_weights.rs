//! Shared weights: a `WeightStore` outlives every borrow, its `Param`s bind into graph contexts
//! on several threads and backend instances at once with identical results, and nothing can
//! write a weight (direct writes, copies into it or into a view of it, in-place ops).

use audio_engine::ggml::{
    Backend, Context, GgmlError, GgmlType, GraphAllocator, Param, TensorSpec, WeightStore,
};

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A store with `w` [4, 3] (W x maps 4 -> 3) and `b` [3].
fn store(backend: &Backend) -> WeightStore {
    let w: Vec<f32> = (0..12).map(|i| i as f32 * 0.25 - 1.0).collect();
    let b = [0.5f32, -0.5, 2.0];
    let (wb, bb) = (f32_bytes(&w), f32_bytes(&b));
    WeightStore::new(
        backend,
        &[
            TensorSpec {
                name: "w",
                ty: GgmlType::F32,
                ne: &[4, 3],
                data: Some(&wb),
            },
            TensorSpec {
                name: "b",
                ty: GgmlType::F32,
                ne: &[3],
                data: Some(&bb),
            },
        ],
    )
    .unwrap()
}

/// `W x + b` for `x` [4] on `backend`, in a context of its own.
fn linear(backend: &Backend, w: &Param, b: &Param, x: &[f32]) -> Vec<f32> {
    let ctx = Context::metadata(16).unwrap();
    let xin = ctx.new_tensor_1d(GgmlType::F32, 4).unwrap();
    xin.set_input();
    let y = ctx
        .add(ctx.mul_mat(ctx.param(w), xin).unwrap(), ctx.param(b))
        .unwrap();
    y.set_output();
    let mut g = ctx.new_graph(16).unwrap();
    g.build_forward_expand(y).unwrap();
    GraphAllocator::new(backend)
        .unwrap()
        .alloc_graph(&g)
        .unwrap();
    xin.set_f32(x).unwrap();
    backend.compute(&g).unwrap();
    y.get_f32().unwrap()
}

#[test]
fn params_outlive_the_store_handle_and_compute_on_many_threads() {
    let load = Backend::cpu().unwrap();
    let s = store(&load);
    assert_eq!((s.len(), s.has_data()), (2, true));
    let (w, b) = (s.get("w").unwrap(), s.get("b").unwrap());
    assert_eq!(
        (w.ne(), w.ty(), w.name()),
        ([4, 3, 1, 1], GgmlType::F32, "w".into())
    );
    assert!(s.get("nope").is_none());
    // The handles keep the store alive.
    drop(s);
    let x = [1.0f32, 2.0, -1.0, 0.5];
    let want = linear(&load, &w, &b, &x);
    let expect: Vec<f32> = (0..3)
        .map(|r| {
            (0..4)
                .map(|c| (r * 4 + c) as f32 * 0.25 - 1.0)
                .zip(x)
                .map(|(a, v)| a * v)
                .sum::<f32>()
                + [0.5, -0.5, 2.0][r]
        })
        .collect();
    assert_eq!(want, expect);

    // Four threads, each with its own backend instance, share the weights.
    std::thread::scope(|sc| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (w, b) = (w.clone(), b.clone());
                let be = load.new_instance().unwrap();
                be.set_n_threads(1).unwrap();
                sc.spawn(move || (0..50).map(|_| linear(&be, &w, &b, &x)).collect::<Vec<_>>())
            })
            .collect();
        for h in handles {
            for got in h.join().unwrap() {
                assert_eq!(got, want);
            }
        }
    });
}

#[test]
fn weights_cannot_be_written() {
    let be = Backend::cpu().unwrap();
    let s = store(&be);
    let w = s.get("w").unwrap();
    let ctx = Context::metadata(32).unwrap();
    let t = ctx.param(&w);
    let ro =
        |r: Result<(), GgmlError>| assert!(matches!(r, Err(GgmlError::ReadOnly { .. })), "{r:?}");
    ro(t.set_f32(&[0.0; 12]));
    ro(t.set_zero());
    ro(t.set_name("renamed"));
    assert_eq!(w.name(), "w");
    // Flags of a weight are left alone.
    t.set_input();
    t.set_output();
    // A write through a view of the weight.
    let v = ctx.view_1d(t, 4, 0).unwrap();
    ro(v.set_f32(&[1.0; 4]));
    // Reads are fine.
    assert_eq!(t.get_f32().unwrap()[1], -0.75);

    // A graph that copies into the weight, or into a view of it, is refused at compute.
    for into_view in [false, true] {
        let ctx = Context::metadata(32).unwrap();
        let t = ctx.param(&w);
        let src = ctx.new_tensor_1d(GgmlType::F32, 4).unwrap();
        src.set_input();
        let dst = if into_view {
            ctx.view_1d(t, 4, 16).unwrap()
        } else {
            ctx.reshape_1d(t, 12).unwrap()
        };
        let src = if into_view {
            src
        } else {
            ctx.concat(src, ctx.new_tensor_1d(GgmlType::F32, 8).unwrap(), 0)
                .unwrap()
        };
        let c = ctx.cpy(src, dst).unwrap();
        let mut g = ctx.new_graph(16).unwrap();
        g.build_forward_expand(c).unwrap();
        GraphAllocator::new(&be).unwrap().alloc_graph(&g).unwrap();
        assert!(matches!(be.compute(&g), Err(GgmlError::ReadOnly { .. })));
    }
    assert_eq!(w.name(), "w");
    let ctx = Context::metadata(8).unwrap();
    assert_eq!(ctx.param(&w).get_f32().unwrap()[0], -1.0);
}

#[test]
fn a_store_without_data_describes_but_does_not_compute() {
    let s = WeightStore::describe(&[TensorSpec {
        name: "w",
        ty: GgmlType::Q8_0,
        ne: &[64, 2],
        data: None,
    }])
    .unwrap();
    assert!(!s.has_data());
    let w = s.get("w").unwrap();
    assert_eq!((w.ty(), w.n_dims()), (GgmlType::Q8_0, 2));
    let be = Backend::cpu().unwrap();
    let ctx = Context::metadata(16).unwrap();
    let x = ctx.new_tensor_1d(GgmlType::F32, 64).unwrap();
    let y = ctx.mul_mat(ctx.param(&w), x).unwrap();
    let mut g = ctx.new_graph(16).unwrap();
    g.build_forward_expand(y).unwrap();
    let alloc = GraphAllocator::new(&be).unwrap();
    assert!(matches!(
        alloc.alloc_graph(&g),
        Err(GgmlError::NotAllocated { .. })
    ));

    // Names must be present and unique.
    let bad = |name: &'static str| {
        WeightStore::describe(&[
            TensorSpec {
                name: "a",
                ty: GgmlType::F32,
                ne: &[2],
                data: None,
            },
            TensorSpec {
                name,
                ty: GgmlType::F32,
                ne: &[2],
                data: None,
            },
        ])
    };
    assert!(bad("").is_err());
    assert!(bad("a").is_err());
    assert!(bad("b").is_ok());
}
