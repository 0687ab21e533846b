//! Bounds-checked parsing of the GGUF header, metadata and tensor infos.
//!
//! Every count and length is checked against the bytes that remain before
//! anything is allocated for it, so a corrupt header cannot trigger a huge
//! allocation, and every failure names the item and its file offset.

use std::collections::HashMap;

use super::error::{GgufErrorKind, Result};
use super::format::{GGUF_MAGIC, MAX_ARRAY_NESTING};
use super::metadata::GgufMetadata;
use super::tensor_info::TensorInfo;
use super::value::{GgufArray, GgufValue, GgufValueType};
use crate::dtype::{DtypeError, GgmlType};

/// Upper bound on capacity reserved from a stored count. Larger collections grow
/// as elements are actually parsed, so memory stays proportional to real data.
const MAX_PREALLOC: usize = 1 << 16;

/// Smallest encoded key/value pair: key length, type id, one value byte. (An
/// empty key is invalid, but counting it lets the reader report that precisely.)
const MIN_KV_SIZE: u64 = 8 + 4 + 1;
/// Smallest encoded tensor info: name length, n_dims, type id, offset.
const MIN_TENSOR_INFO_SIZE: u64 = 8 + 4 + 4 + 8;

/// Everything in a GGUF file except the tensor data.
pub(crate) struct Parsed {
    pub version: u32,
    pub metadata: GgufMetadata,
    pub tensors: Vec<TensorInfo>,
    pub tensor_index: HashMap<String, usize>,
    pub alignment: u64,
    pub data_offset: u64,
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

type What<'w> = &'w dyn Fn() -> String;

impl<'a> Cursor<'a> {
    fn offset(&self) -> u64 {
        self.pos as u64
    }

    fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    fn take(&mut self, n: u64, what: What) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(GgufErrorKind::Truncated {
                what: what(),
                offset: self.offset(),
                needed: n,
                available: self.remaining(),
            }
            .into());
        }
        // n <= remaining <= usize::MAX, so the cast is lossless.
        let bytes = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(bytes)
    }

    fn bytes<const N: usize>(&mut self, what: What) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N as u64, what)?);
        Ok(out)
    }

    fn u32(&mut self, what: What) -> Result<u32> {
        self.bytes(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: What) -> Result<u64> {
        self.bytes(what).map(u64::from_le_bytes)
    }

    fn string(&mut self, what: What) -> Result<String> {
        let at = self.offset();
        let len = self.u64(what)?;
        if len > self.remaining() {
            return Err(GgufErrorKind::StringTooLong {
                what: what(),
                len,
                offset: at,
                available: self.remaining(),
            }
            .into());
        }
        let bytes = self.take(len, what)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(GgufErrorKind::InvalidUtf8 {
                what: what(),
                offset: at + 8,
            }
            .into()),
        }
    }

    /// Reads a count of items each at least `min_size` bytes long and checks
    /// that they could fit in the rest of the file.
    fn count(&mut self, min_size: u64, what: What) -> Result<usize> {
        let at = self.offset();
        let count = self.u64(&|| format!("count of {}", what()))?;
        let max = self.remaining() / min_size;
        if count > max {
            return Err(GgufErrorKind::CountTooLarge {
                what: what(),
                count,
                offset: at,
                max,
            }
            .into());
        }
        // count <= remaining <= usize::MAX.
        Ok(count as usize)
    }

    fn value_type(&mut self, key: &str) -> Result<GgufValueType> {
        let at = self.offset();
        let id = self.u32(&|| format!("value type of key '{key}'"))?;
        GgufValueType::from_u32(id).ok_or_else(|| {
            GgufErrorKind::InvalidValueType {
                key: key.to_owned(),
                type_id: id,
                offset: at,
            }
            .into()
        })
    }
}

fn check_bool(key: &str, byte: u8, offset: u64) -> Result<bool> {
    match byte {
        0 => Ok(false),
        1 => Ok(true),
        value => Err(GgufErrorKind::InvalidBool {
            key: key.to_owned(),
            value,
            offset,
        }
        .into()),
    }
}

fn read_value(c: &mut Cursor, key: &str, ty: GgufValueType) -> Result<GgufValue> {
    let what = || format!("value of key '{key}'");
    Ok(match ty {
        GgufValueType::U8 => GgufValue::U8(u8::from_le_bytes(c.bytes(&what)?)),
        GgufValueType::I8 => GgufValue::I8(i8::from_le_bytes(c.bytes(&what)?)),
        GgufValueType::U16 => GgufValue::U16(u16::from_le_bytes(c.bytes(&what)?)),
        GgufValueType::I16 => GgufValue::I16(i16::from_le_bytes(c.bytes(&what)?)),
        GgufValueType::U32 => GgufValue::U32(u32::from_le_bytes(c.bytes(&what)?)),
        GgufValueType::I32 => GgufValue::I32(i32::from_le_bytes(c.bytes(&what)?)),
        GgufValueType::U64 => GgufValue::U64(u64::from_le_bytes(c.bytes(&what)?)),
        GgufValueType::I64 => GgufValue::I64(i64::from_le_bytes(c.bytes(&what)?)),
        GgufValueType::F32 => GgufValue::F32(f32::from_le_bytes(c.bytes(&what)?)),
        GgufValueType::F64 => GgufValue::F64(f64::from_le_bytes(c.bytes(&what)?)),
        GgufValueType::Bool => {
            let at = c.offset();
            let [b] = c.bytes(&what)?;
            GgufValue::Bool(check_bool(key, b, at)?)
        }
        GgufValueType::String => GgufValue::String(c.string(&what)?),
        GgufValueType::Array => GgufValue::Array(read_array(c, key, 1)?),
    })
}

fn read_array(c: &mut Cursor, key: &str, depth: usize) -> Result<GgufArray> {
    let start = c.offset();
    if depth > MAX_ARRAY_NESTING {
        return Err(GgufErrorKind::NestingTooDeep {
            key: key.to_owned(),
            offset: Some(start),
            max: MAX_ARRAY_NESTING,
        }
        .into());
    }
    let ty = c.value_type(key)?;
    let what = || format!("elements of key '{key}'");
    let n = c.count(ty.min_encoded_size(), &what)?;

    macro_rules! fixed {
        ($variant:ident, $t:ty) => {{
            const SIZE: usize = std::mem::size_of::<$t>();
            // count() guarantees n * SIZE <= remaining.
            let bytes = c.take((n * SIZE) as u64, &what)?;
            GgufArray::$variant(
                bytes
                    .chunks_exact(SIZE)
                    .map(|b| {
                        let mut a = [0u8; SIZE];
                        a.copy_from_slice(b);
                        <$t>::from_le_bytes(a)
                    })
                    .collect(),
            )
        }};
    }

    Ok(match ty {
        GgufValueType::U8 => fixed!(U8, u8),
        GgufValueType::I8 => fixed!(I8, i8),
        GgufValueType::U16 => fixed!(U16, u16),
        GgufValueType::I16 => fixed!(I16, i16),
        GgufValueType::U32 => fixed!(U32, u32),
        GgufValueType::I32 => fixed!(I32, i32),
        GgufValueType::U64 => fixed!(U64, u64),
        GgufValueType::I64 => fixed!(I64, i64),
        GgufValueType::F32 => fixed!(F32, f32),
        GgufValueType::F64 => fixed!(F64, f64),
        GgufValueType::Bool => {
            let at = c.offset();
            let bytes = c.take(n as u64, &what)?;
            let mut out = Vec::with_capacity(n);
            for (i, &b) in bytes.iter().enumerate() {
                out.push(check_bool(key, b, at + i as u64)?);
            }
            GgufArray::Bool(out)
        }
        GgufValueType::String => {
            let mut out = Vec::with_capacity(n.min(MAX_PREALLOC));
            for _ in 0..n {
                out.push(c.string(&what)?);
            }
            GgufArray::String(out)
        }
        GgufValueType::Array => {
            let mut out = Vec::with_capacity(n.min(MAX_PREALLOC));
            for _ in 0..n {
                out.push(read_array(c, key, depth + 1)?);
            }
            GgufArray::Array(out)
        }
    })
}

fn read_header(c: &mut Cursor) -> Result<u32> {
    let magic: [u8; 4] = c.bytes(&|| "magic".to_owned())?;
    if &magic != GGUF_MAGIC {
        return Err(GgufErrorKind::BadMagic { found: magic }.into());
    }
    let version = c.u32(&|| "version".to_owned())?;
    // A big-endian v2/v3 file reads as 0x0N000000 here.
    if version != 0 && version & 0xffff == 0 {
        return Err(GgufErrorKind::ByteSwapped { version }.into());
    }
    // v1 used 32-bit counts and lengths; v2 and v3 differ only in endianness support.
    if !(2..=3).contains(&version) {
        return Err(GgufErrorKind::UnsupportedVersion { version }.into());
    }
    Ok(version)
}

fn read_tensor_info(c: &mut Cursor, index: usize) -> Result<TensorInfo> {
    let name = c.string(&|| format!("name of tensor #{index}"))?;
    let dims_at = c.offset();
    let n_dims = c.u32(&|| format!("dimension count of tensor '{name}'"))?;
    if n_dims > 4 {
        return Err(GgufErrorKind::BadDimCount {
            tensor: name,
            n_dims: n_dims.into(),
            offset: Some(dims_at),
        }
        .into());
    }
    let mut ne = [1u64; 4];
    for (dim, slot) in ne.iter_mut().enumerate().take(n_dims as usize) {
        let at = c.offset();
        let value = i64::from_le_bytes(c.bytes(&|| format!("dimension {dim} of tensor '{name}'"))?);
        *slot = u64::try_from(value).map_err(|_| GgufErrorKind::InvalidDim {
            tensor: name.clone(),
            dim,
            value,
            offset: at,
        })?;
    }
    let type_at = c.offset();
    let type_id = c.u32(&|| format!("type of tensor '{name}'"))?;
    let Some(ty) = GgmlType::from_u32(type_id) else {
        return Err(GgufErrorKind::UnknownTensorType {
            tensor: name,
            type_id,
            offset: type_at,
        }
        .into());
    };
    let dtype_err = |cause| GgufErrorKind::TensorDtype {
        tensor: name.clone(),
        cause,
    };
    // ggml indexes elements with int64_t.
    ne.iter()
        .try_fold(1i64, |acc, &n| acc.checked_mul(i64::try_from(n).ok()?))
        .ok_or_else(|| dtype_err(DtypeError::SizeOverflow { ty }))?;
    let n_bytes = ty.tensor_size(&ne).map_err(dtype_err)?;
    let offset = c.u64(&|| format!("data offset of tensor '{name}'"))?;
    Ok(TensorInfo::new(
        name,
        n_dims as usize,
        ne,
        ty,
        offset,
        n_bytes,
    ))
}

/// Parses and validates a whole GGUF file held in `buf`.
pub(crate) fn parse(buf: &[u8]) -> Result<Parsed> {
    let mut c = Cursor { buf, pos: 0 };
    let version = read_header(&mut c)?;
    let n_tensors = c.count(MIN_TENSOR_INFO_SIZE, &|| "tensors".to_owned())?;
    let n_kv = c.count(MIN_KV_SIZE, &|| "metadata entries".to_owned())?;

    let mut metadata = GgufMetadata::new();
    for i in 0..n_kv {
        let key_at = c.offset();
        let key = c.string(&|| format!("key #{i}"))?;
        if key.is_empty() {
            return Err(GgufErrorKind::EmptyKey {
                offset: Some(key_at),
            }
            .into());
        }
        if metadata.contains_key(&key) {
            return Err(GgufErrorKind::DuplicateKey {
                key,
                offset: Some(key_at),
            }
            .into());
        }
        let ty = c.value_type(&key)?;
        let value = read_value(&mut c, &key, ty)?;
        metadata.push_unchecked(key, value);
    }
    let alignment = metadata.alignment()?;

    let mut tensors = Vec::with_capacity(n_tensors.min(MAX_PREALLOC));
    let mut tensor_index = HashMap::with_capacity(n_tensors.min(MAX_PREALLOC));
    for i in 0..n_tensors {
        let name_at = c.offset();
        let info = read_tensor_info(&mut c, i)?;
        if tensor_index.contains_key(info.name()) {
            return Err(GgufErrorKind::DuplicateTensor {
                name: info.name().to_owned(),
                offset: Some(name_at),
            }
            .into());
        }
        tensor_index.insert(info.name().to_owned(), i);
        tensors.push(info);
    }

    // The data section starts at the next multiple of the alignment; offset and
    // alignment are both far below u64::MAX, so this cannot overflow.
    let data_offset = c.offset().next_multiple_of(alignment);
    let file_size = buf.len() as u64;
    for t in &mut tensors {
        if t.offset() % alignment != 0 {
            return Err(GgufErrorKind::MisalignedTensor {
                tensor: t.name().to_owned(),
                offset: t.offset(),
                alignment,
            }
            .into());
        }
        let start = data_offset.saturating_add(t.offset());
        let size = t.n_bytes() as u64;
        if start.saturating_add(size) > file_size {
            return Err(GgufErrorKind::TensorOutOfBounds {
                tensor: t.name().to_owned(),
                start,
                size,
                file_size,
            }
            .into());
        }
        t.set_file_offset(start);
    }
    check_overlaps(&tensors)?;

    Ok(Parsed {
        version,
        metadata,
        tensors,
        tensor_index,
        alignment,
        data_offset,
    })
}

fn check_overlaps(tensors: &[TensorInfo]) -> Result<()> {
    let mut order: Vec<&TensorInfo> = tensors.iter().filter(|t| t.n_bytes() > 0).collect();
    order.sort_by_key(|t| t.file_offset());
    let mut furthest: Option<&TensorInfo> = None;
    for t in order {
        if let Some(prev) = furthest {
            let prev_end = prev.file_offset() + prev.n_bytes() as u64;
            if t.file_offset() < prev_end {
                return Err(GgufErrorKind::TensorOverlap {
                    tensor: t.name().to_owned(),
                    start: t.file_offset(),
                    other: prev.name().to_owned(),
                }
                .into());
            }
        }
        furthest = Some(t);
    }
    Ok(())
}
