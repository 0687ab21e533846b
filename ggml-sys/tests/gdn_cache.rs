//! `ggml_gated_delta_net_cache` (ggml-sys/upstream/patches/0001) against the path llama.cpp's graph takes
//! without it, byte for byte, on the CPU:
//!
//! - gathered: `ggml_get_rows(cache, rows_in)` -> `ggml_gated_delta_net(K)` -> write-back
//!   `ggml_cpy` of the min(T, K) state planes into the cache rows `slot*mem_size + head + seq`,
//!   exactly as `src/models/delta-net-base.cpp` emits it (a 2D view for K == 1, a 3D view with
//!   the plane stride for K > 1);
//! - in place: `ggml_gated_delta_net_cache(cache view, rows_in, rows_out, K, mem_size)`.
//!
//! On identical inputs the attention scores and the WHOLE cache tensor must be identical, the
//! rows outside `rows_out` untouched and the cache really modified. A negative control (the
//! gathered path without its write-back) shows that the comparison does see a difference.

use ggml_sys as sys;
use std::ffi::c_void;
use std::ptr;

/// Heads of v (and of the state).
const H_V: i64 = 4;
/// Cells per snapshot plane; the cache holds K planes.
const MEM_SIZE: i64 = 17;
/// First cell of the ubatch.
const HEAD: i64 = 1;

#[derive(Clone, Copy, Debug, PartialEq)]
enum RowsIn {
    /// The sequence's own cell, in this plane (0: the live state, 1..K-1: a rollback snapshot).
    Plane(i64),
    /// A cell outside the ubatch (a fresh sequence copied from elsewhere).
    OtherCell,
}

#[derive(Clone, Copy, Debug)]
struct Case {
    s_v: i64,
    k: i64,
    t: i64,
    n_seqs: i64,
    rows_in: RowsIn,
    kda: bool,
    hk_half: bool,
    n_threads: i32,
}

impl Case {
    fn h_k(&self) -> i64 {
        if self.hk_half {
            H_V / 2
        } else {
            H_V
        }
    }
    /// Floats per state (one cache row).
    fn d(&self) -> i64 {
        self.s_v * self.s_v * H_V
    }
    fn n_snap(&self) -> i64 {
        self.t.min(self.k)
    }
    fn n_rows(&self) -> i64 {
        MEM_SIZE * self.k
    }
    fn attn_elems(&self) -> i64 {
        self.s_v * H_V * self.t * self.n_seqs
    }
    fn rows_in(&self) -> Vec<i32> {
        (0..self.n_seqs)
            .map(|s| match self.rows_in {
                RowsIn::Plane(p) => (p * MEM_SIZE + HEAD + s) as i32,
                RowsIn::OtherCell => (HEAD + self.n_seqs + s) as i32,
            })
            .collect()
    }
    /// Row of snapshot slot j of sequence s at `j*n_seqs + s`: the plane-j row of its cell.
    fn rows_out(&self) -> Vec<i64> {
        (0..self.n_snap())
            .flat_map(|j| (0..self.n_seqs).map(move |s| j * MEM_SIZE + HEAD + s))
            .collect()
    }
}

/// splitmix64, for reproducible inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next() >> 40) as f32 / (1u64 << 24) as f32)
    }
    fn fill(&mut self, n: i64, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

struct Inputs {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    g: Vec<f32>,
    beta: Vec<f32>,
    cache: Vec<f32>,
}

fn make_inputs(c: &Case, seed: u64, cache: &[f32]) -> Inputs {
    let mut rng = Rng(seed);
    let qk_n = c.s_v * c.h_k() * c.t * c.n_seqs;
    let mut unit_rows = |n: i64| {
        // l2-normalised per head, as the models feed q and k
        let mut x = rng.fill(n, -1.0, 1.0);
        for row in x.chunks_mut(c.s_v as usize) {
            let inv = 1.0 / (row.iter().map(|e| e * e).sum::<f32>() + 1e-6).sqrt();
            row.iter_mut().for_each(|e| *e *= inv);
        }
        x
    };
    let q = unit_rows(qk_n);
    let k = unit_rows(qk_n);
    let v = rng.fill(c.s_v * H_V * c.t * c.n_seqs, -1.0, 1.0);
    let g_n = if c.kda { c.s_v } else { 1 } * H_V * c.t * c.n_seqs;
    // -softplus: a decay exp(g) in (0, 1)
    let g = rng
        .fill(g_n, -2.0, 2.0)
        .into_iter()
        .map(|x| -(x.exp().ln_1p()))
        .collect();
    let beta = rng
        .fill(H_V * c.t * c.n_seqs, -2.0, 2.0)
        .into_iter()
        .map(|x| 1.0 / (1.0 + (-x).exp()))
        .collect();
    Inputs {
        q,
        k,
        v,
        g,
        beta,
        cache: cache.to_vec(),
    }
}

/// Owns a ggml context, and with it every tensor and graph built in it.
struct Context(*mut sys::ggml_context);

impl Context {
    fn new(mem_size: usize, no_alloc: bool) -> Context {
        let params = sys::ggml_init_params {
            mem_size,
            mem_buffer: ptr::null_mut(),
            no_alloc,
        };
        // SAFETY: plain constructor; a null result (allocation failure) is checked below.
        let ctx = unsafe { sys::ggml_init(params) };
        assert!(!ctx.is_null(), "ggml_init failed");
        Context(ctx)
    }

    fn tensor(&self, ty: sys::ggml_type, ne: &[i64]) -> *mut sys::ggml_tensor {
        // SAFETY: the context is live; ne has 1..=4 entries and ggml copies them.
        let t = unsafe { sys::ggml_new_tensor(self.0, ty, ne.len() as i32, ne.as_ptr()) };
        assert!(!t.is_null());
        t
    }

    /// A new tensor holding `data` (allocating contexts only).
    fn filled<T: Copy>(&self, ty: sys::ggml_type, ne: &[i64], data: &[T]) -> *mut sys::ggml_tensor {
        let t = self.tensor(ty, ne);
        // SAFETY: t was just allocated in this context with room for nbytes, which must equal
        // the size of `data` (asserted); the two regions cannot overlap.
        unsafe {
            assert_eq!(sys::ggml_nbytes(t), std::mem::size_of_val(data));
            ptr::copy_nonoverlapping(
                data.as_ptr() as *const u8,
                (*t).data as *mut u8,
                sys::ggml_nbytes(t),
            );
        }
        t
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: the context came from ggml_init and is freed once; nothing built in it outlives
        // the guard (results are copied out before it drops).
        unsafe { sys::ggml_free(self.0) }
    }
}

/// A ggml CPU threadpool, kept for the whole test: a pool made and joined for every graph costs
/// more than the graphs here, where threads can outnumber the cores.
struct Pool(*mut sys::ggml_threadpool, i32);

impl Pool {
    fn new(n_threads: i32) -> Pool {
        // SAFETY: plain constructors; a null pool is checked.
        let pool = unsafe {
            let mut params = sys::ggml_threadpool_params_default(n_threads);
            params.poll = 0; // sleep between graphs rather than spin
            sys::ggml_threadpool_new(&mut params)
        };
        assert!(!pool.is_null(), "ggml_threadpool_new failed");
        Pool(pool, n_threads)
    }

    /// Computes `gf` on this pool's threads.
    fn compute(&self, gf: *mut sys::ggml_cgraph) {
        // SAFETY: gf is a live graph; the plan's work buffer outlives the compute call.
        unsafe {
            let mut plan = sys::ggml_graph_plan(gf, self.1, self.0);
            let mut work = vec![0u8; plan.work_size];
            plan.work_data = work.as_mut_ptr();
            assert_eq!(
                sys::ggml_graph_compute(gf, &mut plan),
                sys::GGML_STATUS_SUCCESS,
                "graph compute failed"
            );
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: the pool came from ggml_threadpool_new and is freed once, after its last graph.
        unsafe { sys::ggml_threadpool_free(self.0) }
    }
}

/// `n` floats from the start of an allocated tensor.
fn read_f32(t: *const sys::ggml_tensor, n: i64) -> Vec<f32> {
    let mut out = vec![0.0f32; n as usize];
    // SAFETY: t is a live, allocated tensor of at least n floats (callers pass at most nelements).
    unsafe {
        assert!(n as usize * 4 <= sys::ggml_nbytes(t));
        ptr::copy_nonoverlapping((*t).data as *const f32, out.as_mut_ptr(), n as usize);
    }
    out
}

fn as_bytes(v: &[f32]) -> &[u8] {
    // SAFETY: f32 has no padding and every byte of it is a valid u8; same lifetime and length.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

/// Rows of `d` floats that are not byte-identical.
fn rows_differing(a: &[f32], b: &[f32], d: usize) -> usize {
    assert_eq!(a.len(), b.len());
    a.chunks(d)
        .zip(b.chunks(d))
        .filter(|(x, y)| as_bytes(x) != as_bytes(y))
        .count()
}

fn bytes_differing(a: &[f32], b: &[f32]) -> usize {
    assert_eq!(a.len(), b.len());
    let (a, b) = (as_bytes(a), as_bytes(b));
    if a == b {
        0
    } else {
        a.iter().zip(b).filter(|(x, y)| x != y).count()
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Path {
    Gathered { write_back: bool },
    InPlace,
}

struct Output {
    attn: Vec<f32>,
    cache: Vec<f32>,
}

/// The input tensors of both paths, in `ctx`.
struct Tensors {
    q: *mut sys::ggml_tensor,
    k: *mut sys::ggml_tensor,
    v: *mut sys::ggml_tensor,
    g: *mut sys::ggml_tensor,
    beta: *mut sys::ggml_tensor,
    cache: *mut sys::ggml_tensor,
    rows_in: *mut sys::ggml_tensor,
    rows_out: *mut sys::ggml_tensor,
}

fn input_tensors(ctx: &Context, c: &Case, inp: &Inputs) -> Tensors {
    let f32t = sys::GGML_TYPE_F32;
    let g_ne0 = if c.kda { c.s_v } else { 1 };
    Tensors {
        q: ctx.filled(f32t, &[c.s_v, c.h_k(), c.t, c.n_seqs], &inp.q),
        k: ctx.filled(f32t, &[c.s_v, c.h_k(), c.t, c.n_seqs], &inp.k),
        v: ctx.filled(f32t, &[c.s_v, H_V, c.t, c.n_seqs], &inp.v),
        g: ctx.filled(f32t, &[g_ne0, H_V, c.t, c.n_seqs], &inp.g),
        beta: ctx.filled(f32t, &[1, H_V, c.t, c.n_seqs], &inp.beta),
        cache: ctx.filled(f32t, &[c.d(), c.n_rows()], &inp.cache),
        rows_in: ctx.filled(sys::GGML_TYPE_I32, &[c.n_seqs], &c.rows_in()),
        rows_out: ctx.filled(sys::GGML_TYPE_I64, &[c.n_snap() * c.n_seqs], &c.rows_out()),
    }
}

/// The cache op on a view of the whole cache.
fn cache_op(ctx: &Context, c: &Case, t: &Tensors) -> *mut sys::ggml_tensor {
    // SAFETY: every tensor lives in ctx (or, for the scheduler test, in a live context of the
    // same lifetime); shapes and types are the ones ggml_gated_delta_net_cache asserts.
    unsafe {
        let states = sys::ggml_view_2d(ctx.0, t.cache, c.d(), c.n_rows(), (*t.cache).nb[1], 0);
        sys::ggml_gated_delta_net_cache(
            ctx.0, t.q, t.k, t.v, t.g, t.beta, states, t.rows_in, t.rows_out, c.k, MEM_SIZE,
        )
    }
}

/// Builds and runs one path on the CPU; returns the attention scores and the cache afterwards.
fn run(c: &Case, inp: &Inputs, path: Path, pools: &[Pool]) -> Output {
    let data_bytes = 4 * (inp.q.len() * 2 + inp.v.len() * 2 + inp.g.len() + inp.beta.len())
        + 4 * inp.cache.len()
        + 4 * (c.d() * c.n_seqs * (c.k + 1)) as usize;
    // SAFETY: size queries without side effects.
    let overhead = unsafe { 64 * sys::ggml_tensor_overhead() + sys::ggml_graph_overhead() };
    let ctx = Context::new(2 * data_bytes + overhead + (1 << 20), false);
    let t = input_tensors(&ctx, c, inp);
    let (gf, out) = build(&ctx, c, &t, path);
    let pool = pools.iter().find(|p| p.1 == c.n_threads);
    pool.expect("a pool for every thread count").compute(gf);
    Output {
        attn: read_f32(out, c.attn_elems()),
        cache: read_f32(t.cache, c.d() * c.n_rows()),
    }
}

/// The graph of one path over the tensors `t` (all in `ctx`, or the cache in a live context of
/// the same lifetime): the in-place op, or llama.cpp's gathered path. Returns the graph and the
/// node holding the attention scores.
fn build(
    ctx: &Context,
    c: &Case,
    t: &Tensors,
    path: Path,
) -> (*mut sys::ggml_cgraph, *mut sys::ggml_tensor) {
    let fs = 4usize;
    let (s_v, d, n_seqs) = (c.s_v, c.d(), c.n_seqs);
    // SAFETY: all tensors and the graph live in ctx (the cache in a context that outlives it);
    // the views stay inside their tensors (offsets and strides as llama.cpp's graph computes
    // them).
    unsafe {
        let gf = sys::ggml_new_graph(ctx.0);
        let out = match path {
            Path::InPlace => {
                let out = cache_op(ctx, c, t);
                sys::ggml_build_forward_expand(gf, out);
                out
            }
            Path::Gathered { write_back } => {
                let s = sys::ggml_get_rows(ctx.0, t.cache, t.rows_in);
                let s = sys::ggml_reshape_4d(ctx.0, s, s_v, s_v, H_V, n_seqs);
                let out = sys::ggml_gated_delta_net(ctx.0, t.q, t.k, t.v, t.g, t.beta, s, c.k);
                sys::ggml_build_forward_expand(gf, out);
                let attn_bytes = c.attn_elems() as usize * fs;
                let row = (*t.cache).nb[1];
                if write_back && c.k == 1 {
                    // !keep: cpy(new_state, view_2d(cache, D, n_seqs, nb1, head*row))
                    let new_state = sys::ggml_view_4d(
                        ctx.0,
                        out,
                        s_v,
                        s_v,
                        H_V,
                        n_seqs,
                        s_v as usize * fs,
                        (s_v * s_v) as usize * fs,
                        d as usize * fs,
                        attn_bytes,
                    );
                    let dst =
                        sys::ggml_view_2d(ctx.0, t.cache, d, n_seqs, row, HEAD as usize * row);
                    sys::ggml_build_forward_expand(gf, sys::ggml_cpy(ctx.0, new_state, dst));
                } else if write_back {
                    // keep: the min(T, K) planes into view_3d(cache, D, n_seqs, n_written,
                    // nb1, mem_size*row, head*row)
                    let n_written = c.n_snap();
                    let src = sys::ggml_view_3d(
                        ctx.0,
                        out,
                        d,
                        n_seqs,
                        n_written,
                        d as usize * fs,
                        (d * n_seqs) as usize * fs,
                        attn_bytes,
                    );
                    let dst = sys::ggml_view_3d(
                        ctx.0,
                        t.cache,
                        d,
                        n_seqs,
                        n_written,
                        row,
                        MEM_SIZE as usize * row,
                        HEAD as usize * row,
                    );
                    sys::ggml_build_forward_expand(gf, sys::ggml_cpy(ctx.0, src, dst));
                }
                out
            }
        };
        (gf, out)
    }
}

fn matrix() -> Vec<Case> {
    let mut cases = Vec::new();
    for s_v in [16, 32] {
        for k in [1, 3] {
            for t in [1, 3] {
                for n_seqs in [1, 4, 8] {
                    let rows_in = (0..k).map(RowsIn::Plane).chain([RowsIn::OtherCell]);
                    for rows_in in rows_in {
                        for kda in [false, true] {
                            for hk_half in [false, true] {
                                for n_threads in [1, 4] {
                                    cases.push(Case {
                                        s_v,
                                        k,
                                        t,
                                        n_seqs,
                                        rows_in,
                                        kda,
                                        hk_half,
                                        n_threads,
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    cases
}

/// The initial cache of every case with this (S_v, K): generated once, cloned per case.
fn initial_cache(c: &Case) -> Vec<f32> {
    Rng(0xcac4e ^ ((c.s_v as u64) << 8) ^ c.k as u64).fill(c.d() * c.n_rows(), -0.5, 0.5)
}

#[test]
fn in_place_equals_gathered_byte_for_byte() {
    let cases = matrix();
    let mut failures = Vec::new();
    let (mut attn_diff, mut cache_diff, mut control_diff, mut control_seen) =
        (0usize, 0usize, 0usize, 0usize);
    let mut caches: Vec<((i64, i64), Vec<f32>)> = Vec::new();
    let pools = [Pool::new(1), Pool::new(4)];
    // the gathered path, with and without write-back, of the current case on one thread: the
    // reference of the in-place op on 1 and on 4 threads (the thread count changes no float of
    // either path: one thread computes each (head, sequence) pair)
    let mut reference: Option<(String, Inputs, Output, Output)> = None;
    let mut n_refs = 0u64;

    for c in &cases {
        let base = Case { n_threads: 1, ..*c };
        let key = format!("{base:?}");
        if reference.as_ref().is_none_or(|r| r.0 != key) {
            let cache_key = (c.s_v, c.k);
            if !caches.iter().any(|(k, _)| *k == cache_key) {
                caches.push((cache_key, initial_cache(c)));
            }
            let cache0 = &caches.iter().find(|(k, _)| *k == cache_key).unwrap().1;
            n_refs += 1;
            let inp = make_inputs(&base, 0x5eed_0000 + n_refs, cache0);
            let gathered = run(&base, &inp, Path::Gathered { write_back: true }, &pools);
            let control = run(&base, &inp, Path::Gathered { write_back: false }, &pools);
            reference = Some((key, inp, gathered, control));
        }
        let (_, inp, gathered, control) = reference.as_ref().unwrap();
        let in_place = run(c, inp, Path::InPlace, &pools);

        let da = bytes_differing(&in_place.attn, &gathered.attn);
        let dc = bytes_differing(&in_place.cache, &gathered.cache);
        attn_diff += da;
        cache_diff += dc;
        let mut why = Vec::new();
        if da != 0 {
            why.push(format!("{da} attention bytes differ"));
        }
        if dc != 0 {
            why.push(format!("{dc} cache bytes differ"));
        }
        if as_bytes(&in_place.cache) == as_bytes(&inp.cache) {
            why.push("the cache was not modified".to_string());
        }
        // rows outside rows_out untouched, rows in it rewritten
        let d = c.d() as usize;
        let rows_out = c.rows_out();
        for r in 0..c.n_rows() {
            let (after, before) = (
                &in_place.cache[r as usize * d..][..d],
                &inp.cache[r as usize * d..][..d],
            );
            let same = as_bytes(after) == as_bytes(before);
            match (rows_out.contains(&r), same) {
                (false, false) => why.push(format!("untouched row {r} was modified")),
                (true, true) => why.push(format!("row {r} of rows_out was not written")),
                _ => {}
            }
        }
        // negative control: without the write-back the gathered cache must differ from the
        // in-place one (it is the initial cache), and the comparison must say so, in the rows the
        // op writes
        let rows_differing = rows_differing(&in_place.cache, &control.cache, d);
        control_diff += rows_differing;
        if as_bytes(&in_place.cache) != as_bytes(&control.cache) && rows_differing == rows_out.len()
        {
            control_seen += 1;
        } else {
            why.push(format!(
                "negative control: {rows_differing} rows differ, expected {}",
                rows_out.len()
            ));
        }
        if as_bytes(&control.attn) != as_bytes(&gathered.attn) {
            why.push("the gathered attention depends on the write-back".to_string());
        }
        if !why.is_empty() {
            failures.push(format!("{c:?}: {}", why.join(", ")));
        }
    }

    println!(
        "gdn_cache: {} cases (S_v {{16,32}} x K {{1,3}} x T {{1,3}} x n_seqs {{1,4,8}} x rows_in in every plane \
         and another cell x scalar/KDA gate x H_k = H_v, H_v/2 x 1/4 threads): {} attention bytes and {} cache \
         bytes differ from the gathered path; negative control (gathered path without write-back): the comparison sees its cache differ in {}/{} cases \
         ({} rows, every row the op writes)",
        cases.len(),
        attn_diff,
        cache_diff,
        control_seen,
        cases.len(),
        control_diff
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// The node's layout, as the GPU backends and llama.cpp rely on it.
#[test]
fn node_layout() {
    let c = Case {
        s_v: 16,
        k: 3,
        t: 2,
        n_seqs: 4,
        rows_in: RowsIn::Plane(1),
        kda: false,
        hk_half: true,
        n_threads: 1,
    };
    let inp = make_inputs(&c, 1, &initial_cache(&c));
    let ctx = Context::new(16 << 20, false);
    let t = input_tensors(&ctx, &c, &inp);
    let out = cache_op(&ctx, &c, &t);
    // SAFETY: out is a live tensor of ctx; reading its header fields only.
    unsafe {
        let o = &*out;
        assert_eq!(o.op, sys::GGML_OP_GATED_DELTA_NET);
        assert_eq!(o.type_, sys::GGML_TYPE_F32);
        assert_eq!(
            o.ne,
            [c.s_v * H_V, c.t * c.n_seqs, 1, 1],
            "attention scores only"
        );
        assert_eq!(
            &o.op_params[..4],
            &[c.k as i32, 0, 1, MEM_SIZE as i32],
            "K, -, cache flag, mem_size"
        );
        assert_eq!(&o.src[..5], &[t.q, t.k, t.v, t.g, t.beta]);
        assert_eq!((*o.src[5]).view_src, t.cache, "src[5] is the cache view");
        assert_eq!(o.src[6], t.rows_in);
        assert_eq!(o.src[7], t.rows_out);
    }
}

/// Owns a backend, a buffer or a scheduler.
struct Guard<T: Copy>(T, unsafe extern "C" fn(T));

impl<T: Copy> Drop for Guard<T> {
    fn drop(&mut self) {
        // SAFETY: each guard wraps a live handle with its own free function, freed once; guards
        // are declared so that the scheduler drops before the buffers and the backend.
        unsafe { (self.1)(self.0) }
    }
}

/// Through ggml_backend_sched, as llama.cpp runs it: the cache pre-allocated in a backend buffer,
/// the rest allocated by the scheduler. The op must run on the cache's backend and update the
/// cache in place exactly as when computed directly.
#[test]
fn through_the_scheduler() {
    let cpu = cpu_backend();
    let pools = [Pool::new(4)];
    let mut n = 0;
    for c in matrix()
        .into_iter()
        .filter(|c| c.s_v == 16 && c.n_seqs == 4 && c.n_threads == 4 && !c.hk_half)
    {
        let inp = make_inputs(&c, 0xabc + n, &initial_cache(&c));
        let direct = run(&c, &inp, Path::InPlace, &pools);
        let scheduled = run_scheduled(&c, &inp, Path::InPlace, &[cpu.0]);
        assert!(
            scheduled.elsewhere.is_empty(),
            "the op runs where the cache is"
        );
        assert_eq!(
            bytes_differing(&scheduled.out.attn, &direct.attn),
            0,
            "{c:?}"
        );
        assert_eq!(
            bytes_differing(&scheduled.out.cache, &direct.cache),
            0,
            "{c:?}"
        );
        n += 1;
    }
    println!(
        "gdn_cache: {n} cases through ggml_backend_sched, identical to the direct computation"
    );
    assert!(n > 0);
}

/// Copies the case's inputs into the backend tensors of `t`, `q`'s data into `q` (`t.q`, or
/// another tensor the graph reads it from); tensors the scheduler did not allocate (the
/// gathered path reads no `rows_out`) are skipped.
///
/// # Safety
/// Every tensor of `t` and `q` is live; the allocated ones have the case's shapes.
unsafe fn set_inputs(t: &Tensors, q: *mut sys::ggml_tensor, c: &Case, inp: &Inputs) {
    let set = |t: *mut sys::ggml_tensor, p: *const c_void| {
        // SAFETY: t is live (the caller's contract); when allocated it holds nbytes, which the
        // case's data fills exactly.
        unsafe {
            if !(*t).buffer.is_null() {
                sys::ggml_backend_tensor_set(t, p, 0, sys::ggml_nbytes(t))
            }
        }
    };
    set(q, inp.q.as_ptr() as _);
    set(t.k, inp.k.as_ptr() as _);
    set(t.v, inp.v.as_ptr() as _);
    set(t.g, inp.g.as_ptr() as _);
    set(t.beta, inp.beta.as_ptr() as _);
    set(t.cache, inp.cache.as_ptr() as _);
    set(t.rows_in, c.rows_in().as_ptr() as _);
    set(t.rows_out, c.rows_out().as_ptr() as _);
}

/// A scheduler over `backends` (the first preferred; `op_offload` as ggml names it).
fn scheduler(
    backends: &[sys::ggml_backend_t],
    op_offload: bool,
) -> Guard<sys::ggml_backend_sched_t> {
    let mut backends = backends.to_vec();
    // SAFETY: the backends are live (callers keep their guards beyond the scheduler's); ggml
    // copies the array; a null scheduler is checked.
    let sched = unsafe {
        sys::ggml_backend_sched_new(
            backends.as_mut_ptr(),
            ptr::null_mut(),
            backends.len() as i32,
            256,
            false,
            op_offload,
        )
    };
    assert!(!sched.is_null());
    Guard(sched, sys::ggml_backend_sched_free)
}

/// What one path computed through a scheduler, and where its nodes ran.
struct Scheduled {
    out: Output,
    /// The ops of the compute nodes placed on another backend than the first.
    elsewhere: Vec<String>,
}

/// Runs one path through a scheduler over `backends` (the first preferred, as the engine and
/// llama.cpp order them): the cache in a buffer of the first backend, the rest allocated by the
/// scheduler. Returns the attention scores, the cache afterwards and the nodes placed elsewhere.
fn run_scheduled(
    c: &Case,
    inp: &Inputs,
    path: Path,
    backends: &[sys::ggml_backend_t],
) -> Scheduled {
    // SAFETY: size queries.
    let overhead = unsafe { 64 * sys::ggml_tensor_overhead() + sys::ggml_graph_overhead() };
    let cache_ctx = Context::new(overhead, true);
    let ctx = Context::new(overhead, true);
    let t = Tensors {
        cache: cache_ctx.tensor(sys::GGML_TYPE_F32, &[c.d(), c.n_rows()]),
        ..input_tensors_unallocated(&ctx, c)
    };
    // SAFETY: cache_ctx holds only the cache, allocated here in a buffer of backends[0] that the
    // guard frees after the scheduler; the graph and all its tensors live in ctx, which outlives
    // the scheduler guard; data is copied in and out with the sizes of the tensors.
    unsafe {
        let buf = sys::ggml_backend_alloc_ctx_tensors(cache_ctx.0, backends[0]);
        assert!(!buf.is_null());
        let _buf = Guard(buf, sys::ggml_backend_buffer_free);
        let (gf, out) = build(&ctx, c, &t, path);

        let sched = scheduler(backends, true);
        assert!(sys::ggml_backend_sched_alloc_graph(sched.0, gf));
        set_inputs(&t, t.q, c, inp);
        assert_eq!(
            sys::ggml_backend_sched_graph_compute(sched.0, gf),
            sys::GGML_STATUS_SUCCESS
        );
        let mut elsewhere = Vec::new();
        for i in 0..sys::ggml_graph_n_nodes(gf) {
            let node = sys::ggml_graph_node(gf, i);
            let layout_only = [
                sys::GGML_OP_NONE,
                sys::GGML_OP_VIEW,
                sys::GGML_OP_RESHAPE,
                sys::GGML_OP_PERMUTE,
                sys::GGML_OP_TRANSPOSE,
            ];
            if !layout_only.contains(&(*node).op)
                && sys::ggml_backend_sched_get_tensor_backend(sched.0, node) != backends[0]
            {
                let name = std::ffi::CStr::from_ptr(sys::ggml_op_name((*node).op));
                elsewhere.push(name.to_string_lossy().into_owned());
            }
        }

        let mut attn = vec![0.0f32; c.attn_elems() as usize];
        let mut cache = vec![0.0f32; (c.d() * c.n_rows()) as usize];
        sys::ggml_backend_tensor_get(out, attn.as_mut_ptr() as _, 0, attn.len() * 4);
        sys::ggml_backend_tensor_get(t.cache, cache.as_mut_ptr() as _, 0, cache.len() * 4);
        Scheduled {
            out: Output { attn, cache },
            elsewhere,
        }
    }
}

/// The op's inputs without data (the scheduler allocates them); the cache is filled in by the
/// caller.
fn input_tensors_unallocated(ctx: &Context, c: &Case) -> Tensors {
    let f32t = sys::GGML_TYPE_F32;
    let g_ne0 = if c.kda { c.s_v } else { 1 };
    let t = Tensors {
        q: ctx.tensor(f32t, &[c.s_v, c.h_k(), c.t, c.n_seqs]),
        k: ctx.tensor(f32t, &[c.s_v, c.h_k(), c.t, c.n_seqs]),
        v: ctx.tensor(f32t, &[c.s_v, H_V, c.t, c.n_seqs]),
        g: ctx.tensor(f32t, &[g_ne0, H_V, c.t, c.n_seqs]),
        beta: ctx.tensor(f32t, &[1, H_V, c.t, c.n_seqs]),
        cache: ptr::null_mut(),
        rows_in: ctx.tensor(sys::GGML_TYPE_I32, &[c.n_seqs]),
        rows_out: ctx.tensor(sys::GGML_TYPE_I64, &[c.n_snap() * c.n_seqs]),
    };
    for x in [t.q, t.k, t.v, t.g, t.beta, t.rows_in, t.rows_out] {
        // SAFETY: x is a live tensor of ctx; this only sets a flag.
        unsafe { sys::ggml_set_input(x) };
    }
    t
}

/// The Vulkan backend of ggml's registry (device 0), or `None` when there is no Vulkan device.
/// Lavapipe (a CPU-type device) is listed only with `GGML_VK_VISIBLE_DEVICES`, set here when
/// unset; this is the only test of the file that reaches the registry.
#[cfg(feature = "vulkan")]
fn vulkan_backend() -> Option<Guard<sys::ggml_backend_t>> {
    if std::env::var_os("GGML_VK_VISIBLE_DEVICES").is_none() {
        std::env::set_var("GGML_VK_VISIBLE_DEVICES", "0");
    }
    // SAFETY: registry lookups by a NUL-terminated name; a null registry or device is checked.
    unsafe {
        let reg = sys::ggml_backend_reg_by_name(c"Vulkan".as_ptr());
        assert!(!reg.is_null(), "built with `vulkan` but no Vulkan registry");
        if sys::ggml_backend_reg_dev_count(reg) == 0 {
            return None;
        }
        let dev = sys::ggml_backend_reg_dev_get(reg, 0);
        let be = sys::ggml_backend_dev_init(dev, ptr::null());
        assert!(!be.is_null(), "Vulkan device 0 does not start");
        Some(Guard(be, sys::ggml_backend_free))
    }
}

/// ggml's CPU backend.
fn cpu_backend() -> Guard<sys::ggml_backend_t> {
    // SAFETY: creates the CPU backend; null is checked.
    let cpu = unsafe { sys::ggml_backend_cpu_init() };
    assert!(!cpu.is_null());
    Guard(cpu, sys::ggml_backend_free)
}

/// The Vulkan backend and the CPU's, or `None` (said on stdout) without a Vulkan device.
#[cfg(feature = "vulkan")]
fn vulkan_and_cpu() -> Option<(Guard<sys::ggml_backend_t>, Guard<sys::ggml_backend_t>)> {
    let Some(vk) = vulkan_backend() else {
        let why = "gdn_cache: skipped, no Vulkan device";
        // why: scripts/vulkan-check.sh sets LFM2E_REQUIRE_DEVICE after installing lavapipe for
        // these tests; there a missing device is a failure.
        let required = matches!(std::env::var("LFM2E_REQUIRE_DEVICE").as_deref(), Ok(v) if !v.is_empty() && v != "0");
        assert!(!required, "{why} (LFM2E_REQUIRE_DEVICE is set)");
        println!("{why}");
        return None;
    };
    Some((vk, cpu_backend()))
}

/// The cache form on a scheduler with Vulkan first and the CPU as fallback, the cache in a CPU
/// buffer: Vulkan has a kernel for it (0006), but the scheduler runs the op where its cache is
/// (0001), so it runs on the CPU; its `q` comes from a Vulkan buffer (through a scale by 1), so
/// data crosses from the device. Attention scores and the whole cache must be byte-identical to
/// the direct CPU computation.
#[cfg(feature = "vulkan")]
#[test]
fn through_the_scheduler_with_the_cache_on_the_cpu_runs_on_the_cpu() {
    let Some((vk, cpu)) = vulkan_and_cpu() else {
        return;
    };
    let pools = [Pool::new(4)];
    let mut n = 0;
    for c in matrix()
        .into_iter()
        .filter(|c| c.s_v == 16 && c.n_seqs == 4 && c.n_threads == 4 && !c.hk_half && !c.kda)
    {
        let inp = make_inputs(&c, 0xbee + n, &initial_cache(&c));
        let direct = run(&c, &inp, Path::InPlace, &pools);

        // SAFETY: size queries.
        let overhead = unsafe { 64 * sys::ggml_tensor_overhead() + sys::ggml_graph_overhead() };
        let cache_ctx = Context::new(overhead, true);
        let dev_ctx = Context::new(overhead, true);
        let ctx = Context::new(overhead, true);
        let q_dev = dev_ctx.tensor(sys::GGML_TYPE_F32, &[c.s_v, c.h_k(), c.t, c.n_seqs]);
        let mut t = Tensors {
            cache: cache_ctx.tensor(sys::GGML_TYPE_F32, &[c.d(), c.n_rows()]),
            ..input_tensors_unallocated(&ctx, &c)
        };
        // SAFETY: the cache lives in a CPU buffer and q_dev in a Vulkan buffer, both freed by
        // guards declared before the scheduler's (so dropped after it); the graph and the other
        // tensors live in ctx, which outlives them all; data is copied in and out with the
        // sizes of the tensors.
        unsafe {
            let buf = sys::ggml_backend_alloc_ctx_tensors(cache_ctx.0, cpu.0);
            assert!(!buf.is_null());
            let _buf = Guard(buf, sys::ggml_backend_buffer_free);
            let dev_buf = sys::ggml_backend_alloc_ctx_tensors(dev_ctx.0, vk.0);
            assert!(!dev_buf.is_null());
            let _dev_buf = Guard(dev_buf, sys::ggml_backend_buffer_free);
            let scaled = sys::ggml_scale(ctx.0, q_dev, 1.0);
            t.q = scaled;
            let out = cache_op(&ctx, &c, &t);
            let gf = sys::ggml_new_graph(ctx.0);
            sys::ggml_build_forward_expand(gf, out);

            let sched = scheduler(&[vk.0, cpu.0], false);
            assert!(sys::ggml_backend_sched_alloc_graph(sched.0, gf));
            set_inputs(&t, q_dev, &c, &inp);
            assert_eq!(
                sys::ggml_backend_sched_graph_compute(sched.0, gf),
                sys::GGML_STATUS_SUCCESS
            );
            // ggml places the scale with its only consumer, on the CPU (the scheduler expands
            // CPU assignments up the graph); either way q_dev crosses from the Vulkan buffer.
            let scale_on = sys::ggml_backend_sched_get_tensor_backend(sched.0, scaled);
            assert!(scale_on == vk.0 || scale_on == cpu.0);
            assert_eq!(
                sys::ggml_backend_sched_get_tensor_backend(sched.0, out),
                cpu.0,
                "the cache op runs on the CPU, where the cache is"
            );

            let mut attn = vec![0.0f32; c.attn_elems() as usize];
            let mut cache = vec![0.0f32; (c.d() * c.n_rows()) as usize];
            sys::ggml_backend_tensor_get(out, attn.as_mut_ptr() as _, 0, attn.len() * 4);
            sys::ggml_backend_tensor_get(t.cache, cache.as_mut_ptr() as _, 0, cache.len() * 4);
            assert_eq!(bytes_differing(&attn, &direct.attn), 0, "{c:?}");
            assert_eq!(bytes_differing(&cache, &direct.cache), 0, "{c:?}");
        }
        n += 1;
    }
    println!(
        "gdn_cache: {n} cases with Vulkan first and the cache on the CPU: the op ran on the CPU, \
         identical to the \
         direct computation"
    );
    assert!(n > 0);
}

/// On Vulkan (ggml-sys/upstream/patches/0006), the cache in a device buffer: the in-place op runs on the
/// device and equals, byte for byte, llama.cpp's gathered path computed there (get_rows, the
/// upstream kernel, the write-back copies) over the whole matrix and S_v 64 and 128; rows outside
/// rows_out stay untouched. Both agree with the CPU within float rounding: the device sums each
/// column across lanes in another order.
#[cfg(feature = "vulkan")]
#[test]
fn on_vulkan_in_place_equals_gathered_byte_for_byte() {
    let Some((vk, cpu)) = vulkan_and_cpu() else {
        return;
    };
    let pools = [Pool::new(1)];
    let wide = [64, 128].into_iter().flat_map(|s_v| {
        [false, true].map(|kda| Case {
            s_v,
            k: 3,
            t: 3,
            n_seqs: 4,
            rows_in: RowsIn::Plane(1),
            kda,
            hk_half: true,
            n_threads: 1,
        })
    });
    let cases: Vec<Case> = matrix()
        .into_iter()
        .filter(|c| c.n_threads == 1)
        .chain(wide)
        .collect();
    let (mut failures, mut max_attn, mut max_cache) = (Vec::new(), 0f32, 0f32);
    let max_abs = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max)
    };
    for (n, c) in cases.iter().enumerate() {
        let inp = make_inputs(c, 0x7c_0000 + n as u64, &initial_cache(c));
        let in_place = run_scheduled(c, &inp, Path::InPlace, &[vk.0, cpu.0]);
        let gathered = run_scheduled(c, &inp, Path::Gathered { write_back: true }, &[vk.0, cpu.0]);
        let on_cpu = run(c, &inp, Path::InPlace, &pools);
        let mut why = Vec::new();
        for (path, s) in [("in place", &in_place), ("gathered", &gathered)] {
            if !s.elsewhere.is_empty() {
                why.push(format!("{path}: {:?} ran off the device", s.elsewhere));
            }
        }
        let (da, dc) = (
            bytes_differing(&in_place.out.attn, &gathered.out.attn),
            bytes_differing(&in_place.out.cache, &gathered.out.cache),
        );
        if da + dc != 0 {
            why.push(format!(
                "{da} attention and {dc} cache bytes differ from the gathered path"
            ));
        }
        let d = c.d() as usize;
        let rows_out = c.rows_out();
        for r in 0..c.n_rows() {
            let after = &in_place.out.cache[r as usize * d..][..d];
            let same = as_bytes(after) == as_bytes(&inp.cache[r as usize * d..][..d]);
            match (rows_out.contains(&r), same) {
                (false, false) => why.push(format!("untouched row {r} was modified")),
                (true, true) => why.push(format!("row {r} of rows_out was not written")),
                _ => {}
            }
        }
        let (ea, ec) = (
            max_abs(&in_place.out.attn, &on_cpu.attn),
            max_abs(&in_place.out.cache, &on_cpu.cache),
        );
        (max_attn, max_cache) = (max_attn.max(ea), max_cache.max(ec));
        if ea > 1e-5 || ec > 1e-5 {
            why.push(format!(
                "max |device - CPU|: attention {ea:e}, cache {ec:e}"
            ));
        }
        if !why.is_empty() {
            failures.push(format!("{c:?}: {}", why.join(", ")));
        }
    }
    println!(
        "gdn_cache on Vulkan: {} cases, every node on the device; in place = gathered byte for \
         byte; max |device - CPU| attention {max_attn:e}, cache {max_cache:e}",
        cases.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
