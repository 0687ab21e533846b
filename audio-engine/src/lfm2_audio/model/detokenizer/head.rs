//! The detokenizer's output head, `dense_2`: `hidden -> n_fft + 2` (log-magnitudes and phases),
//! as a two-node ggml graph on the stream's backend, so a quantized head runs as llama.cpp
//! would run it and a device backend keeps the matmul on the device.

use crate::ggml::{Backend, Context, GgmlType, GraphAllocator};

use super::super::nn::Linear;
use super::DetokenizerError;

/// Tensors plus nodes of the head graph (input, matmul, bias add) with room to spare.
const GRAPH_SIZE: usize = 16;

/// `dense_2.weight @ hidden + dense_2.bias` for `rows` rows of `hidden` (row-major,
/// `rows x width`); returns `rows x out` values, row-major.
pub(super) fn run(
    head: &Linear,
    backend: &Backend,
    alloc: &GraphAllocator,
    hidden: &[f32],
    rows: usize,
) -> Result<Vec<f32>, DetokenizerError> {
    let width = head.weight.ne()[0];
    let ctx = Context::metadata_with_graph(GRAPH_SIZE, GRAPH_SIZE)?;
    let x = ctx.new_tensor_2d(GgmlType::F32, width, rows as i64)?;
    x.set_name("detok_head_in")?;
    x.set_input();
    let y = head.forward(&ctx, x)?;
    y.set_name("detok_head_out")?;
    y.set_output();
    let mut g = ctx.new_graph(GRAPH_SIZE)?;
    g.build_forward_expand(y)?;
    alloc.alloc_graph(&g)?;
    x.set_f32(hidden)?;
    alloc.compute(backend, &g)?;
    Ok(y.get_f32()?)
}
