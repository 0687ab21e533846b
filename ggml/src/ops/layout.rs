//! Tensor creation, views, reshapes, copies, concatenation and row gathers/scatters.

use ggml_sys as sys;

use super::super::context::Context;
use super::super::dtype::GgmlType;
use super::super::error::{GgmlError, Result};
use super::super::quant;
use super::super::tensor::Tensor;
use super::{
    c_int, check_finite, check_new_shape, checked_nelements, divides, expect_contiguous,
    expect_rows_dense, expect_type, fmt_ne, rows_dense, FLOATS,
};

/// `ggml_nbytes` for a prospective shape and strides, or `None` on overflow.
fn strided_nbytes(ty: GgmlType, ne: [i64; 4], nb: [usize; 4]) -> Option<usize> {
    if ne.iter().any(|&n| n <= 0) {
        return Some(0);
    }
    let block = ty.block_size();
    let mut total = if block == 1 {
        ty.type_size()
    } else {
        (ne[0] as usize).checked_mul(nb[0])? / block
    };
    let start = if block == 1 { 0 } else { 1 };
    for i in start..4 {
        total = total.checked_add((ne[i] as usize - 1).checked_mul(nb[i])?)?;
    }
    Some(total)
}

/// Bytes ggml reserves for a fresh tensor of this shape (its view-bounds check uses this).
fn packed_size(ty: GgmlType, ne: [i64; 4]) -> Result<usize> {
    let dims: Vec<u64> = ne.iter().map(|&d| d.max(0) as u64).collect();
    Ok(ty.tensor_size(&dims)?)
}

/// Checks that a view of `a` with shape `ne`, strides `nb` and byte `offset` stays inside the
/// memory of `a`'s root tensor (the tensor that owns the data).
fn check_view(
    op: &'static str,
    a: Tensor<'_>,
    ne: [i64; 4],
    nb: [usize; 4],
    offset: usize,
) -> Result<()> {
    let ty = a.ty();
    checked_nelements(op, &ne)?;
    if ne[0] % ty.block_size() as i64 != 0 {
        return Err(GgmlError::shape(
            op,
            format!("ne[0] = {} is not a multiple of {ty}'s block size", ne[0]),
        ));
    }
    let packed = packed_size(ty, ne)?;
    let span =
        strided_nbytes(ty, ne, nb).ok_or_else(|| GgmlError::arg(op, "view strides overflow"))?;
    let hdr = a.header();
    let (root_bytes, abs_offset) = if hdr.view_src.is_null() {
        (a.nbytes(), offset)
    } else {
        // SAFETY: a view's source outlives the view's handle (same lifetime bound), and
        // `ggml_nbytes` only reads its metadata.
        let root = unsafe { sys::ggml_nbytes(hdr.view_src) };
        (root, hdr.view_offs.saturating_add(offset))
    };
    let need = packed.max(span);
    let past_end = match abs_offset.checked_add(need) {
        Some(end) => end > root_bytes,
        None => true,
    };
    if need > 0 && past_end {
        return Err(GgmlError::oob(format!(
            "{op}: view {} with strides {nb:?} at offset {abs_offset} needs {need} bytes of a \
             {root_bytes}-byte tensor",
            fmt_ne(ne)
        )));
    }
    Ok(())
}

/// Checks a reshape of `a` to `ne`.
fn check_reshape(op: &'static str, a: Tensor<'_>, ne: &[i64]) -> Result<()> {
    expect_contiguous(op, "source", a)?;
    let n = checked_nelements(op, ne)?;
    if n != a.nelements() {
        return Err(GgmlError::shape(
            op,
            format!("{} elements cannot be reshaped to {ne:?}", a.nelements()),
        ));
    }
    let block = a.ty().block_size() as i64;
    if ne[0] % block != 0 {
        return Err(GgmlError::shape(
            op,
            format!(
                "ne[0] = {} is not a multiple of the block size {block}",
                ne[0]
            ),
        ));
    }
    Ok(())
}

/// Whether the CPU backend can convert `src` elements to `dst` elements (`ggml_compute_forward_dup`).
fn check_copy_types(
    op: &'static str,
    a: Tensor<'_>,
    dst_ty: GgmlType,
    dst_ne0: i64,
    dst_contiguous: bool,
) -> Result<()> {
    let src = a.ty();
    let float = |t: GgmlType| FLOATS.contains(&t);
    let plain = (float(src) && float(dst_ty))
        || (src == GgmlType::F32 && dst_ty == GgmlType::I32)
        || (src == GgmlType::I32 && dst_ty == GgmlType::F32);
    let ok = if src == dst_ty {
        !src.is_quantized() || rows_dense(a)
    } else if plain {
        true
    } else if float(src) && dst_ty.is_quantized() {
        quant::cpu_can_quantize(dst_ty)
            && a.is_contiguous()
            && dst_contiguous
            && a.ne()[0] % dst_ty.block_size() as i64 == 0
    } else if src.is_quantized() && dst_ty == GgmlType::F32 {
        quant::can_dequantize(src) && (dst_ne0 % src.block_size() as i64 == 0 || dst_contiguous)
    } else {
        false
    };
    if ok {
        Ok(())
    } else {
        Err(GgmlError::ty(
            op,
            src,
            format!("cannot copy {src} to {dst_ty} with this layout"),
        ))
    }
}

impl Context {
    /// A new tensor of type `ty` with 1 to 4 dimensions `ne` (innermost first).
    pub fn new_tensor(&self, ty: GgmlType, ne: &[i64]) -> Result<Tensor<'_>> {
        check_new_shape("new_tensor", ty, ne)?;
        let n_dims = ne.len() as i32;
        let id = ty as u32;
        // SAFETY: the context is live; `ne` has `n_dims` (1..=4) entries, all non-negative, whose
        // product and byte size do not overflow, and ne[0] is a whole number of blocks, which
        // rules out every assert in `ggml_new_tensor_impl`; `build` checked the pool has room.
        self.build(|ctx| unsafe { sys::ggml_new_tensor(ctx, id, n_dims, ne.as_ptr()) })
    }

    /// A new 1-d tensor.
    pub fn new_tensor_1d(&self, ty: GgmlType, ne0: i64) -> Result<Tensor<'_>> {
        self.new_tensor(ty, &[ne0])
    }

    /// A new 2-d tensor (`ne0` columns, `ne1` rows).
    pub fn new_tensor_2d(&self, ty: GgmlType, ne0: i64, ne1: i64) -> Result<Tensor<'_>> {
        self.new_tensor(ty, &[ne0, ne1])
    }

    /// A new 3-d tensor.
    pub fn new_tensor_3d(&self, ty: GgmlType, ne0: i64, ne1: i64, ne2: i64) -> Result<Tensor<'_>> {
        self.new_tensor(ty, &[ne0, ne1, ne2])
    }

    /// A new 4-d tensor.
    pub fn new_tensor_4d(
        &self,
        ty: GgmlType,
        ne0: i64,
        ne1: i64,
        ne2: i64,
        ne3: i64,
    ) -> Result<Tensor<'_>> {
        self.new_tensor(ty, &[ne0, ne1, ne2, ne3])
    }

    /// A new tensor with the type and shape of `a` (no data is copied).
    pub fn dup_tensor<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        self.new_tensor(a.ty(), &a.ne())
    }

    /// A 1-d F32 tensor computed as `start, start + step, ...` below `stop`.
    pub fn arange(&self, start: f32, stop: f32, step: f32) -> Result<Tensor<'_>> {
        check_finite("arange", "start", start)?;
        check_finite("arange", "stop", stop)?;
        check_finite("arange", "step", step)?;
        if stop <= start || step <= 0.0 {
            return Err(GgmlError::arg(
                "arange",
                format!("need start < stop and step > 0 (got {start}, {stop}, {step})"),
            ));
        }
        let steps = ((stop - start) / step).ceil();
        if !(steps >= 1.0 && steps < (1u64 << 40) as f32) {
            return Err(GgmlError::arg("arange", "too many steps"));
        }
        // SAFETY: the context is live; stop > start (ggml's assert) and the step count is a
        // positive, bounded element count.
        self.build(|ctx| unsafe { sys::ggml_arange(ctx, start, stop, step) })
    }

    /// A 1-d view of `ne0` elements of `a`, starting `offset` bytes into `a`'s data.
    pub fn view_1d<'a>(&'a self, a: Tensor<'a>, ne0: i64, offset: usize) -> Result<Tensor<'a>> {
        let ty = a.ty();
        let row = ty.row_size(ne0.max(0) as u64)?;
        let nb = [ty.type_size(), row, row, row];
        check_view("view_1d", a, [ne0, 1, 1, 1], nb, offset)?;
        // SAFETY: `a` is live; the view lies inside the root tensor's data (checked above).
        self.build(|ctx| unsafe { sys::ggml_view_1d(ctx, a.as_ptr(), ne0, offset) })
    }

    /// A 2-d view of `a` with row stride `nb1` bytes, starting `offset` bytes into `a`'s data.
    pub fn view_2d<'a>(
        &'a self,
        a: Tensor<'a>,
        ne0: i64,
        ne1: i64,
        nb1: usize,
        offset: usize,
    ) -> Result<Tensor<'a>> {
        let ts = a.ty().type_size();
        let nb2 = nb1.saturating_mul(ne1.max(0) as usize);
        check_view("view_2d", a, [ne0, ne1, 1, 1], [ts, nb1, nb2, nb2], offset)?;
        // SAFETY: `a` is live; the view lies inside the root tensor's data (checked above).
        self.build(|ctx| unsafe { sys::ggml_view_2d(ctx, a.as_ptr(), ne0, ne1, nb1, offset) })
    }

    /// A 3-d view of `a` with strides `nb1`, `nb2` bytes, starting `offset` bytes into its data.
    #[allow(clippy::too_many_arguments)]
    pub fn view_3d<'a>(
        &'a self,
        a: Tensor<'a>,
        ne0: i64,
        ne1: i64,
        ne2: i64,
        nb1: usize,
        nb2: usize,
        offset: usize,
    ) -> Result<Tensor<'a>> {
        let ts = a.ty().type_size();
        let nb3 = nb2.saturating_mul(ne2.max(0) as usize);
        check_view(
            "view_3d",
            a,
            [ne0, ne1, ne2, 1],
            [ts, nb1, nb2, nb3],
            offset,
        )?;
        // SAFETY: `a` is live; the view lies inside the root tensor's data (checked above).
        self.build(|ctx| unsafe {
            sys::ggml_view_3d(ctx, a.as_ptr(), ne0, ne1, ne2, nb1, nb2, offset)
        })
    }

    /// A 4-d view of `a` with strides `nb1..nb3` bytes, starting `offset` bytes into its data.
    #[allow(clippy::too_many_arguments)]
    pub fn view_4d<'a>(
        &'a self,
        a: Tensor<'a>,
        ne: [i64; 4],
        nb1: usize,
        nb2: usize,
        nb3: usize,
        offset: usize,
    ) -> Result<Tensor<'a>> {
        let ts = a.ty().type_size();
        check_view("view_4d", a, ne, [ts, nb1, nb2, nb3], offset)?;
        // SAFETY: `a` is live; the view lies inside the root tensor's data (checked above).
        self.build(|ctx| unsafe {
            sys::ggml_view_4d(
                ctx,
                a.as_ptr(),
                ne[0],
                ne[1],
                ne[2],
                ne[3],
                nb1,
                nb2,
                nb3,
                offset,
            )
        })
    }

    /// `a` (contiguous) viewed as a 1-d tensor of `ne0` elements.
    pub fn reshape_1d<'a>(&'a self, a: Tensor<'a>, ne0: i64) -> Result<Tensor<'a>> {
        check_reshape("reshape_1d", a, &[ne0])?;
        // SAFETY: `a` is live and contiguous and the element counts match (ggml's asserts).
        self.build(|ctx| unsafe { sys::ggml_reshape_1d(ctx, a.as_ptr(), ne0) })
    }

    /// `a` (contiguous) viewed with shape `[ne0, ne1]`.
    pub fn reshape_2d<'a>(&'a self, a: Tensor<'a>, ne0: i64, ne1: i64) -> Result<Tensor<'a>> {
        check_reshape("reshape_2d", a, &[ne0, ne1])?;
        // SAFETY: `a` is live and contiguous and the element counts match (ggml's asserts).
        self.build(|ctx| unsafe { sys::ggml_reshape_2d(ctx, a.as_ptr(), ne0, ne1) })
    }

    /// `a` (contiguous) viewed with shape `[ne0, ne1, ne2]`.
    pub fn reshape_3d<'a>(
        &'a self,
        a: Tensor<'a>,
        ne0: i64,
        ne1: i64,
        ne2: i64,
    ) -> Result<Tensor<'a>> {
        check_reshape("reshape_3d", a, &[ne0, ne1, ne2])?;
        // SAFETY: `a` is live and contiguous and the element counts match (ggml's asserts).
        self.build(|ctx| unsafe { sys::ggml_reshape_3d(ctx, a.as_ptr(), ne0, ne1, ne2) })
    }

    /// `a` (contiguous) viewed with shape `ne`.
    pub fn reshape_4d<'a>(&'a self, a: Tensor<'a>, ne: [i64; 4]) -> Result<Tensor<'a>> {
        check_reshape("reshape_4d", a, &ne)?;
        // SAFETY: `a` is live and contiguous and the element counts match (ggml's asserts).
        self.build(|ctx| unsafe {
            sys::ggml_reshape_4d(ctx, a.as_ptr(), ne[0], ne[1], ne[2], ne[3])
        })
    }

    /// A view of `a` with its dimensions permuted: dimension `i` of `a` becomes dimension
    /// `axes[i]` of the result.
    pub fn permute<'a>(&'a self, a: Tensor<'a>, axes: [usize; 4]) -> Result<Tensor<'a>> {
        let mut seen = [false; 4];
        for &ax in &axes {
            if ax >= 4 || seen[ax] {
                return Err(GgmlError::arg(
                    "permute",
                    format!("axes {axes:?} are not a permutation of 0..4"),
                ));
            }
            seen[ax] = true;
        }
        let [a0, a1, a2, a3] = axes.map(|x| x as i32);
        // SAFETY: `a` is live and the axes are a permutation of 0..4 (ggml's asserts).
        self.build(|ctx| unsafe { sys::ggml_permute(ctx, a.as_ptr(), a0, a1, a2, a3) })
    }

    /// A view of `a` with its first two dimensions swapped.
    pub fn transpose<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        // SAFETY: `a` is live; transposition has no preconditions.
        self.build(|ctx| unsafe { sys::ggml_transpose(ctx, a.as_ptr()) })
    }

    /// A contiguous copy of `a` (materialises views, permutations and transpositions).
    pub fn cont<'a>(&'a self, a: Tensor<'a>) -> Result<Tensor<'a>> {
        check_copy_types("cont", a, a.ty(), a.ne()[0], true)?;
        // SAFETY: `a` is live; `ggml_cont` has no preconditions and the CPU kernel supports
        // the type (checked above).
        self.build(|ctx| unsafe { sys::ggml_cont(ctx, a.as_ptr()) })
    }

    /// A contiguous copy of `a` with the new shape `ne` (same element count).
    pub fn cont_4d<'a>(&'a self, a: Tensor<'a>, ne: [i64; 4]) -> Result<Tensor<'a>> {
        check_new_shape("cont_4d", a.ty(), &ne)?;
        if checked_nelements("cont_4d", &ne)? != a.nelements() {
            return Err(GgmlError::shape(
                "cont_4d",
                format!(
                    "{} elements cannot be laid out as {}",
                    a.nelements(),
                    fmt_ne(ne)
                ),
            ));
        }
        check_copy_types("cont_4d", a, a.ty(), ne[0], true)?;
        // SAFETY: `a` is live and the element counts match (ggml's assert).
        self.build(|ctx| unsafe { sys::ggml_cont_4d(ctx, a.as_ptr(), ne[0], ne[1], ne[2], ne[3]) })
    }

    /// Copies `a` into `b` (same element count, converting the type); returns a view of `b`
    /// that performs the copy when computed.
    pub fn cpy<'a>(&'a self, a: Tensor<'a>, b: Tensor<'a>) -> Result<Tensor<'a>> {
        if a.nelements() != b.nelements() {
            return Err(GgmlError::shape(
                "cpy",
                format!("{} vs {}", fmt_ne(a.ne()), fmt_ne(b.ne())),
            ));
        }
        check_copy_types("cpy", a, b.ty(), b.ne()[0], b.is_contiguous())?;
        // SAFETY: `a` and `b` are live and have equal element counts (ggml's assert).
        self.build(|ctx| unsafe { sys::ggml_cpy(ctx, a.as_ptr(), b.as_ptr()) })
    }

    /// `a` converted to type `ty` (a new contiguous tensor).
    pub fn cast<'a>(&'a self, a: Tensor<'a>, ty: GgmlType) -> Result<Tensor<'a>> {
        check_new_shape("cast", ty, &a.ne())?;
        check_copy_types("cast", a, ty, a.ne()[0], true)?;
        let id = ty as u32;
        // SAFETY: `a` is live; the new shape is valid for `ty` (checked above).
        self.build(|ctx| unsafe { sys::ggml_cast(ctx, a.as_ptr(), id) })
    }

    /// `a` and `b` joined along dimension `dim` (all other dimensions must match).
    pub fn concat<'a>(&'a self, a: Tensor<'a>, b: Tensor<'a>, dim: usize) -> Result<Tensor<'a>> {
        if dim >= 4 {
            return Err(GgmlError::arg("concat", format!("dim {dim} out of range")));
        }
        if a.ty() != b.ty() {
            return Err(GgmlError::ty(
                "concat",
                b.ty(),
                format!("both tensors must be {}", a.ty()),
            ));
        }
        expect_rows_dense("concat", "first tensor", a)?;
        expect_rows_dense("concat", "second tensor", b)?;
        let (na, nb) = (a.ne(), b.ne());
        let mut out = na;
        for d in 0..4 {
            if d == dim {
                out[d] = na[d]
                    .checked_add(nb[d])
                    .ok_or_else(|| GgmlError::arg("concat", "size overflows"))?;
            } else if na[d] != nb[d] {
                return Err(GgmlError::shape(
                    "concat",
                    format!("{} and {} differ outside dim {dim}", fmt_ne(na), fmt_ne(nb)),
                ));
            }
        }
        check_new_shape("concat", a.ty(), &out)?;
        let dim = dim as i32;
        // SAFETY: `a` and `b` are live, of one type, equal outside `dim` < 4 (ggml's asserts),
        // with dense rows (the CPU kernels' asserts).
        self.build(|ctx| unsafe { sys::ggml_concat(ctx, a.as_ptr(), b.as_ptr(), dim) })
    }

    /// Gathers rows of `a` (`[n_embd, n_rows_a, ne2, ne3]`) by the I32 indices in `idx`
    /// (`[n, ne2, ne3]`); the result is `[n_embd, n, ne2, ne3]`, F32 (or I32 for I32 `a`).
    ///
    /// Index values are checked against `n_rows_a` when the graph is computed, if `idx` is a
    /// graph input rather than computed.
    pub fn get_rows<'a>(&'a self, a: Tensor<'a>, idx: Tensor<'a>) -> Result<Tensor<'a>> {
        expect_type("get_rows", "indices", idx, &[GgmlType::I32])?;
        let (na, ni) = (a.ne(), idx.ne());
        if na[2] != ni[1] || na[3] != ni[2] || ni[3] != 1 {
            return Err(GgmlError::shape(
                "get_rows",
                format!(
                    "data {} and indices {} do not match",
                    fmt_ne(na),
                    fmt_ne(ni)
                ),
            ));
        }
        let ty = a.ty();
        let ok = matches!(
            ty,
            GgmlType::F32 | GgmlType::I32 | GgmlType::F16 | GgmlType::BF16
        ) || (ty.is_quantized() && quant::can_dequantize(ty));
        if !ok {
            return Err(GgmlError::ty(
                "get_rows",
                ty,
                "rows cannot be converted to F32",
            ));
        }
        expect_rows_dense("get_rows", "data", a)?;
        // SAFETY: `a` and `idx` are live and satisfy every assert of `ggml_get_rows` (checked).
        self.build(|ctx| unsafe { sys::ggml_get_rows(ctx, a.as_ptr(), idx.as_ptr()) })
    }

    /// Scatters the rows of `src` (`[n_embd, n, ne2, ne3]`, F32 or F16) into `dst`
    /// (`[n_embd, n_rows, ne2, ne3]`) at the rows given by `idx` (`[n, ...]`, I64 or I32,
    /// broadcast over dims 2 and 3); returns a view of `dst` that performs the writes.
    pub fn set_rows<'a>(
        &'a self,
        dst: Tensor<'a>,
        src: Tensor<'a>,
        idx: Tensor<'a>,
    ) -> Result<Tensor<'a>> {
        expect_type("set_rows", "source", src, &[GgmlType::F32, GgmlType::F16])?;
        expect_type("set_rows", "indices", idx, &[GgmlType::I64, GgmlType::I32])?;
        let (na, nb, nc) = (dst.ne(), src.ne(), idx.ne());
        let ok = na[0] == nb[0]
            && na[2] == nb[2]
            && na[3] == nb[3]
            && nb[1] == nc[0]
            && divides(nc[1], nb[2])
            && divides(nc[2], nb[3])
            && nc[3] == 1;
        if !ok {
            return Err(GgmlError::shape(
                "set_rows",
                format!(
                    "destination {}, source {} and indices {} do not match",
                    fmt_ne(na),
                    fmt_ne(nb),
                    fmt_ne(nc)
                ),
            ));
        }
        let dty = dst.ty();
        let convertible = dty == GgmlType::F32 || quant::cpu_can_quantize(dty);
        if !convertible {
            return Err(GgmlError::ty(
                "set_rows",
                dty,
                "rows cannot be converted to this type",
            ));
        }
        expect_rows_dense("set_rows", "destination", dst)?;
        expect_rows_dense("set_rows", "source", src)?;
        // SAFETY: all three tensors are live and satisfy every assert of `ggml_set_rows`.
        self.build(|ctx| unsafe {
            sys::ggml_set_rows(ctx, dst.as_ptr(), src.as_ptr(), idx.as_ptr())
        })
    }

    /// `a` padded with zeros at the end of each dimension (`pad[i]` elements on dimension `i`).
    pub fn pad<'a>(&'a self, a: Tensor<'a>, pad: [i64; 4]) -> Result<Tensor<'a>> {
        self.pad_ext(a, [(0, pad[0]), (0, pad[1]), (0, pad[2]), (0, pad[3])])
    }

    /// `a` padded with zeros: `pad[i] = (before, after)` elements on dimension `i`.
    pub fn pad_ext<'a>(&'a self, a: Tensor<'a>, pad: [(i64, i64); 4]) -> Result<Tensor<'a>> {
        expect_type("pad", "input", a, &[GgmlType::F32])?;
        let ne = a.ne();
        let mut out = [0i64; 4];
        let mut p = [0i32; 8];
        for i in 0..4 {
            let (lp, rp) = pad[i];
            if lp < 0 || rp < 0 {
                return Err(GgmlError::arg("pad", "padding must be non-negative"));
            }
            p[2 * i] = c_int("pad", "padding", lp)?;
            p[2 * i + 1] = c_int("pad", "padding", rp)?;
            out[i] = ne[i]
                .checked_add(lp)
                .and_then(|n| n.checked_add(rp))
                .ok_or_else(|| GgmlError::arg("pad", "size overflows"))?;
        }
        check_new_shape("pad", a.ty(), &out)?;
        // SAFETY: `a` is live, F32 (the CPU kernel's type), and the padded shape is valid.
        self.build(|ctx| unsafe {
            sys::ggml_pad_ext(
                ctx,
                a.as_ptr(),
                p[0],
                p[1],
                p[2],
                p[3],
                p[4],
                p[5],
                p[6],
                p[7],
            )
        })
    }

    /// `a` tiled to the shape of `b` (each dimension of `b` must be a multiple of `a`'s).
    pub fn repeat<'a>(&'a self, a: Tensor<'a>, b: Tensor<'a>) -> Result<Tensor<'a>> {
        if !super::can_repeat(a.ne(), b.ne()) {
            return Err(GgmlError::shape(
                "repeat",
                format!("{} cannot be tiled to {}", fmt_ne(a.ne()), fmt_ne(b.ne())),
            ));
        }
        expect_type(
            "repeat",
            "input",
            a,
            &[
                GgmlType::F32,
                GgmlType::F16,
                GgmlType::BF16,
                GgmlType::I16,
                GgmlType::I32,
            ],
        )?;
        expect_rows_dense("repeat", "input", a)?;
        // SAFETY: `a` and `b` are live, `a` can be repeated to `b`'s shape (ggml's assert) and
        // has dense rows of a type the CPU kernel handles.
        self.build(|ctx| unsafe { sys::ggml_repeat(ctx, a.as_ptr(), b.as_ptr()) })
    }
}
