//! The one matrix product smart-turn needs, over `matrixmultiply` (single-threaded f32 with
//! runtime AVX2/FMA/AVX-512 dispatch), behind a safe function that checks every bound.

/// A matrix view: `data[r * row_stride + c * col_stride]` is element `(r, c)`.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<'a> View<'a> {
    /// A dense row-major `rows x cols` matrix.
    pub fn rows(data: &'a [f32], rows: usize, cols: usize) -> View<'a> {
        View {
            data,
            rows,
            cols,
            row_stride: cols,
            col_stride: 1,
        }
    }

    /// The transpose (no copy).
    pub fn t(self) -> View<'a> {
        View {
            data: self.data,
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
        }
    }

    /// Whether every element it names lies in `data`.
    fn in_bounds(&self) -> bool {
        if self.rows == 0 || self.cols == 0 {
            return true;
        }
        let last = (self.rows - 1)
            .checked_mul(self.row_stride)
            .and_then(|r| (self.cols - 1).checked_mul(self.col_stride).map(|c| (r, c)))
            .and_then(|(r, c)| r.checked_add(c));
        last.is_some_and(|l| l < self.data.len())
    }
}

/// `out[r * out_stride + c] = sum_k a(r, k) * b(k, c)` (overwriting), for `a` `m x k` and `b`
/// `k x n`; `out` holds rows of `out_stride >= n` elements.
///
/// # Panics
/// When the shapes disagree or a view or `out` is too short (a bug in this module's callers,
/// whose shapes are the model's own constants, never input).
pub(crate) fn matmul(a: View, b: View, out: &mut [f32], out_stride: usize) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert_eq!(b.rows, k, "inner dimensions");
    assert!(a.in_bounds() && b.in_bounds(), "a view past its data");
    assert!(out_stride >= n, "output rows overlap");
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        (m - 1) * out_stride + n <= out.len(),
        "output past its buffer"
    );
    if k == 0 {
        for row in out.chunks_mut(out_stride).take(m) {
            row[..n].fill(0.0);
        }
        return;
    }
    #[allow(unsafe_code)]
    // SAFETY: the asserts above check that every element sgemm reads, (r, c) of a and b at
    // r * row_stride + c * col_stride, lies inside its slice, and that every element it writes,
    // r * out_stride + c for r < m, c < n, lies inside `out`, which is borrowed mutably, so
    // nothing else aliases it; beta = 0 means out's old values are never read as numbers
    // (matrixmultiply documents that with beta 0, C need not be initialized).
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.data.as_ptr(),
            a.row_stride as isize,
            a.col_stride as isize,
            b.data.as_ptr(),
            b.row_stride as isize,
            b.col_stride as isize,
            0.0,
            out.as_mut_ptr(),
            out_stride as isize,
            1,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_against_a_plain_loop() {
        let (m, k, n) = (5, 7, 3);
        let a: Vec<f32> = (0..m * k).map(|i| (i % 11) as f32 - 5.0).collect();
        let b: Vec<f32> = (0..n * k).map(|i| (i % 7) as f32 * 0.5).collect();
        // b stored as n x k: use its transpose.
        let mut out = vec![f32::NAN; m * 4];
        matmul(View::rows(&a, m, k), View::rows(&b, n, k).t(), &mut out, 4);
        for r in 0..m {
            for c in 0..n {
                let want: f32 = (0..k).map(|i| a[r * k + i] * b[c * k + i]).sum();
                assert_eq!(out[r * 4 + c], want);
            }
        }
    }
}
