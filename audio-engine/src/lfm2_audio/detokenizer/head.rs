//! The detokenizer's output head, `dense_2`: `hidden -> n_fft + 2` (log-magnitudes and phases),
//! as a two-node ggml graph on the backbone's backend, so a quantized head runs as llama.cpp
//! would run it and a device backend keeps the matmul on the device.

use crate::ggml::{Context, GgmlType, GraphAllocator};

use super::super::backbone::Backbone;
use super::super::package::{DENSE_2, DENSE_2_BIAS};
use super::DetokenizerError;

/// Tensors plus nodes of the head graph (input, matmul, bias add) with room to spare.
const GRAPH_SIZE: usize = 16;

/// `dense_2.weight @ hidden + dense_2.bias` for `rows` rows of `hidden` (row-major,
/// `rows x width`); returns `rows x out` values, row-major.
pub(super) fn run(
    bb: &Backbone,
    alloc: &GraphAllocator,
    hidden: &[f32],
    rows: usize,
) -> Result<Vec<f32>, DetokenizerError> {
    let ctx = Context::metadata_with_graph(GRAPH_SIZE, GRAPH_SIZE)?;
    let view = bb.weights().view_in(&ctx);
    let w = view.get(DENSE_2)?;
    let b = view.get(DENSE_2_BIAS)?;
    let width = w.ne()[0];
    let x = ctx.new_tensor_2d(GgmlType::F32, width, rows as i64)?;
    x.set_name("detok_head_in")?;
    x.set_input();
    let y = ctx.add(ctx.mul_mat(w, x)?, b)?;
    y.set_name("detok_head_out")?;
    y.set_output();
    let mut g = ctx.new_graph(GRAPH_SIZE)?;
    g.build_forward_expand(y)?;
    alloc.alloc_graph(&g)?;
    x.set_f32(hidden)?;
    bb.backend().compute(&g)?;
    Ok(y.get_f32()?)
}
