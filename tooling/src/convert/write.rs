//! Writing one GGUF file from planned tensors: values are read, rounded and encoded only when
//! the writer streams each tensor, so a 1.5B checkpoint never sits in memory twice.

use std::cell::RefCell;
use std::io;
use std::path::{Path, PathBuf};

use crate::safetensors::SafeTensors;
use audio_engine::ggml::gguf::{GgufMetadata, GgufWriter, TensorData};
use audio_engine::ggml::GgmlType;

use super::quantize::{encode, round_through_f16};
use super::{ConvertError, Progress, Result};

/// One tensor to write: where its values come from and how they are stored.
#[derive(Debug, Clone)]
pub(crate) struct Planned<'a> {
    /// The source file.
    pub src: &'a SafeTensors,
    /// The name in the source file.
    pub src_name: String,
    /// The GGUF name.
    pub name: String,
    /// The GGUF shape, ggml order.
    pub shape: Vec<u64>,
    /// The stored type.
    pub ty: GgmlType,
    /// Round the values through F16 first (what `llama-quantize` reads from the F16 file).
    pub via_f16: bool,
}

/// The ggml shape of a PyTorch shape: reversed, with PyTorch dimension 1 dropped when `squeeze1`
/// and it is 1 (`Tensor.squeeze(1)`, which the converters apply to conv kernels).
pub(crate) fn ggml_shape(torch: &[usize], squeeze1: bool) -> Vec<u64> {
    let mut dims: Vec<usize> = torch.to_vec();
    if squeeze1 && dims.len() > 1 && dims[1] == 1 {
        dims.remove(1);
    }
    if dims.is_empty() {
        // why: a 0-d tensor is written as one element, as gguf-py does.
        dims.push(1);
    }
    dims.iter().rev().map(|&d| d as u64).collect()
}

/// Writes `metadata` and `tensors` to `path`, reporting each tensor to `progress`.
pub(crate) fn write_gguf(
    path: &Path,
    metadata: &GgufMetadata,
    tensors: Vec<Planned<'_>>,
    progress: &mut dyn Progress,
) -> Result<()> {
    let total = tensors.len();
    let progress = RefCell::new(progress);
    let done = RefCell::new(0usize);
    let file: PathBuf = path.to_path_buf();
    let mut w = GgufWriter::new();
    w.extend_metadata(metadata)?;
    for t in tensors {
        let (progress, done, file) = (&progress, &done, &file);
        let shape = t.shape.clone();
        let (name, ty) = (t.name.clone(), t.ty);
        let data = TensorData::deferred(move |out| {
            let mut values = t
                .src
                .f32(&t.src_name)
                .map_err(|e| io::Error::other(e.to_string()))?;
            if t.via_f16 {
                round_through_f16(&mut values);
            }
            let n_per_row = t.shape.first().copied().unwrap_or(1) as usize;
            let bytes = encode(t.ty, &values, n_per_row)
                .map_err(|e| io::Error::other(format!("encoding '{}' as {}: {e}", t.name, t.ty)))?;
            out.write_all(&bytes)?;
            let mut n = done.borrow_mut();
            *n += 1;
            progress.borrow_mut().tensor(file, &t.name, *n, total);
            Ok(())
        });
        w.add_tensor(name, ty, &shape, data)?;
    }
    w.write_to_path(path)
        .map_err(|e| ConvertError::Gguf(e.with_path(path)))?;
    Ok(())
}

/// gguf-py's `size_label` for a dense model: e.g. `553M`, `1.5B`.
pub(crate) fn size_label(n: u64) -> String {
    let n = n as f64;
    let (scaled, suffix) = if n > 1e12 {
        (n * 1e-12, "T")
    } else if n > 1e9 {
        (n * 1e-9, "B")
    } else if n > 1e6 {
        (n * 1e-6, "M")
    } else {
        (n * 1e-3, "K")
    };
    let int_digits = format!("{}", scaled.round() as u64)
        .trim_start_matches('0')
        .len();
    let fix = 2usize.saturating_sub(int_digits);
    format!("{scaled:.fix$}{suffix}")
}

/// The parameter count gguf-py labels a file with: every written tensor's elements.
pub(crate) fn param_count(plan: &[Planned<'_>]) -> u64 {
    plan.iter().map(|t| t.shape.iter().product::<u64>()).sum()
}

#[cfg(test)]
mod tests {
    use super::size_label;

    #[test]
    fn size_labels() {
        assert_eq!(size_label(553_000_000), "553M");
        assert_eq!(size_label(1_470_000_000), "1.5B");
        assert_eq!(size_label(12_345), "12K");
    }
}
