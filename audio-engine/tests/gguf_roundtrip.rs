//! GGUF writer/reader round trips, corrupt-file handling, and the reference
//! quantizers.

use std::path::PathBuf;

use audio_engine::ggml::dtype::{self, GgmlType};
use audio_engine::ggml::gguf::{
    GgufArray, GgufErrorKind, GgufFile, GgufValue, GgufValueType, GgufWriter, TensorData,
};

// ---------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "audio-engine-gguf-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }

    fn entries(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Deterministic pseudo-random floats in [-1, 1).
fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn kind(bytes: Vec<u8>) -> GgufErrorKind {
    GgufFile::from_bytes(bytes)
        .expect_err("corrupt file must be rejected")
        .into_kind()
}

/// Emits raw GGUF structures so tests can build files the writer refuses to.
#[derive(Default)]
struct Raw(Vec<u8>);

impl Raw {
    fn header(version: u32, n_tensors: u64, n_kv: u64) -> Self {
        let mut r = Raw::default();
        r.bytes(b"GGUF").u32(version).u64(n_tensors).u64(n_kv);
        r
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64).bytes(s.as_bytes())
    }
    fn kv_u32(&mut self, key: &str, v: u32) -> &mut Self {
        self.str(key).u32(GgufValueType::U32 as u32).u32(v)
    }
    fn tensor(&mut self, name: &str, shape: &[i64], ty: GgmlType, offset: u64) -> &mut Self {
        self.str(name).u32(shape.len() as u32);
        for &d in shape {
            self.bytes(&d.to_le_bytes());
        }
        self.u32(ty as u32).u64(offset)
    }
    fn pad_to(&mut self, align: usize) -> &mut Self {
        let len = self.0.len().next_multiple_of(align);
        self.0.resize(len, 0);
        self
    }
    fn zeros(&mut self, n: usize) -> &mut Self {
        self.0.resize(self.0.len() + n, 0);
        self
    }
    fn done(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.0)
    }
}

/// A file with one key and two F32 tensors of 8 elements, default alignment.
fn valid_raw() -> Vec<u8> {
    let mut r = Raw::header(3, 2, 1);
    r.kv_u32("k", 7)
        .tensor("a", &[8], GgmlType::F32, 0)
        .tensor("b", &[8], GgmlType::F32, 32)
        .pad_to(32)
        .zeros(64);
    r.done()
}

// ---------------------------------------------------------------------------
// round trip
// ---------------------------------------------------------------------------

fn every_metadata_type() -> Vec<(&'static str, GgufValue)> {
    vec![
        ("t.u8", GgufValue::U8(200)),
        ("t.i8", GgufValue::I8(-100)),
        ("t.u16", GgufValue::U16(60_000)),
        ("t.i16", GgufValue::I16(-30_000)),
        ("t.u32", GgufValue::U32(4_000_000_000)),
        ("t.i32", GgufValue::I32(-2_000_000_000)),
        ("t.u64", GgufValue::U64(u64::MAX)),
        ("t.i64", GgufValue::I64(i64::MIN)),
        ("t.f32", GgufValue::F32(-1.5e-7)),
        ("t.f64", GgufValue::F64(std::f64::consts::PI)),
        ("t.bool.true", GgufValue::Bool(true)),
        ("t.bool.false", GgufValue::Bool(false)),
        ("t.str", "LFM2 — audio ✓".into()),
        ("t.str.empty", "".into()),
        ("t.arr.u8", vec![0u8, 1, 255].into()),
        ("t.arr.i8", vec![-128i8, 0, 127].into()),
        ("t.arr.u16", vec![1u16, 65535].into()),
        ("t.arr.i16", vec![-1i16, 32767].into()),
        ("t.arr.u32", vec![1u32, 2, 3].into()),
        ("t.arr.i32", vec![-1i32, 0, 1 << 30].into()),
        ("t.arr.u64", vec![u64::MAX, 0].into()),
        ("t.arr.i64", vec![i64::MIN, i64::MAX].into()),
        ("t.arr.f32", vec![0.25f32, -0.0, f32::INFINITY].into()),
        ("t.arr.f64", vec![1e300f64, -2.5].into()),
        ("t.arr.bool", vec![true, false, true].into()),
        ("t.arr.str", vec!["<s>", "", "▁hello", "\n"].into()),
        ("t.arr.empty", GgufValue::Array(GgufArray::F32(vec![]))),
        (
            "t.arr.nested",
            vec![
                GgufArray::from(vec![1i32, 2]),
                GgufArray::from(vec!["x", "y", "z"]),
                GgufArray::from(vec![GgufArray::from(vec![true]), GgufArray::U8(vec![])]),
                GgufArray::Array(vec![]),
            ]
            .into(),
        ),
    ]
}

struct Tensors {
    f32_vals: Vec<f32>,
    f32_bytes: Vec<u8>,
    f16_bytes: Vec<u8>,
    q8_bytes: Vec<u8>,
    q4_bytes: Vec<u8>,
    q4_source: Vec<f32>,
}

fn make_tensors() -> Tensors {
    let f32_vals = noise(8 * 3, 1);
    let f16_src = noise(16 * 2, 2);
    let mut f16_bytes = vec![0u8; f16_src.len() * 2];
    dtype::f32_to_f16_bytes(&f16_src, &mut f16_bytes).unwrap();
    let q8_src = noise(64 * 2, 3);
    let mut q8_bytes = vec![0u8; GgmlType::Q8_0.tensor_size(&[64, 2]).unwrap()];
    dtype::quantize_q8_0(&q8_src, &mut q8_bytes).unwrap();
    let q4_source = noise(32 * 3 * 2, 4);
    let mut q4_bytes = vec![0u8; GgmlType::Q4_0.tensor_size(&[32, 3, 2]).unwrap()];
    dtype::quantize_q4_0(&q4_source, &mut q4_bytes).unwrap();
    Tensors {
        f32_bytes: dtype::f32_to_le_bytes(&f32_vals),
        f32_vals,
        f16_bytes,
        q8_bytes,
        q4_bytes,
        q4_source,
    }
}

#[test]
fn round_trip_every_value_type_and_tensor_type() {
    let scratch = Scratch::new("roundtrip");
    let t = make_tensors();
    let kvs = every_metadata_type();

    let build = || {
        let mut w = GgufWriter::new();
        w.add_kv("general.architecture", "test").unwrap();
        w.set_alignment(64).unwrap();
        for (k, v) in &kvs {
            w.add_kv(*k, v.clone()).unwrap();
        }
        w.add_tensor("f32", GgmlType::F32, &[8, 3], &t.f32_bytes)
            .unwrap();
        w.add_tensor("f16", GgmlType::F16, &[16, 2], t.f16_bytes.clone())
            .unwrap();
        w.add_tensor("q8_0", GgmlType::Q8_0, &[64, 2], t.q8_bytes.as_slice())
            .unwrap();
        let q4 = t.q4_source.clone();
        w.add_tensor(
            "blk.0.q4_0",
            GgmlType::Q4_0,
            &[32, 3, 2],
            TensorData::deferred(move |out| {
                // Quantized while writing: one row at a time.
                let mut row = [0u8; 18];
                for chunk in q4.chunks(32) {
                    dtype::quantize_q4_0(chunk, &mut row).unwrap();
                    out.write_all(&row)?;
                }
                Ok(())
            }),
        )
        .unwrap();
        w
    };

    let path = scratch.path("model.gguf");
    let n = build().write_to_path(&path).unwrap();
    let mut in_memory = Vec::new();
    build().write(&mut in_memory).unwrap();
    let on_disk = std::fs::read(&path).unwrap();
    assert_eq!(n as usize, on_disk.len());
    assert_eq!(on_disk, in_memory, "output must be deterministic");
    assert_eq!(scratch.entries(), ["model.gguf"], "no temporary files left");

    let f = GgufFile::open(&path).unwrap();
    assert_eq!(f.path(), Some(path.as_path()));
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 64);
    assert_eq!(f.data_offset() % 64, 0);

    // Metadata: same entries, same order.
    let mut expected: Vec<(String, GgufValue)> = vec![
        ("general.architecture".into(), "test".into()),
        ("general.alignment".into(), GgufValue::U32(64)),
    ];
    expected.extend(kvs.iter().map(|(k, v)| (k.to_string(), v.clone())));
    let got: Vec<(String, GgufValue)> = f
        .metadata()
        .iter()
        .map(|(k, v)| (k.to_owned(), v.clone()))
        .collect();
    assert_eq!(got, expected);

    // Tensors: order, shapes, types, aligned offsets, bytes.
    let names: Vec<&str> = f.tensors().iter().map(|t| t.name()).collect();
    assert_eq!(names, ["f32", "f16", "q8_0", "blk.0.q4_0"]);
    let expect = [
        ("f32", GgmlType::F32, vec![8u64, 3], &t.f32_bytes),
        ("f16", GgmlType::F16, vec![16, 2], &t.f16_bytes),
        ("q8_0", GgmlType::Q8_0, vec![64, 2], &t.q8_bytes),
        ("blk.0.q4_0", GgmlType::Q4_0, vec![32, 3, 2], &t.q4_bytes),
    ];
    for (name, ty, shape, bytes) in expect {
        let info = f.tensor(name).unwrap();
        assert_eq!(info.ggml_type(), ty);
        assert_eq!(info.shape(), shape.as_slice());
        assert_eq!(info.offset() % 64, 0);
        assert_eq!(info.file_offset() % 64, 0);
        assert_eq!(f.tensor_data(info), bytes.as_slice(), "{name}");
    }
    let q4 = f.tensor("blk.0.q4_0").unwrap();
    assert_eq!(q4.ne(), [32, 3, 2, 1]);
    assert_eq!(q4.n_elements(), 192);
    assert_eq!(q4.n_bytes(), 6 * 18);

    assert_eq!(
        f.tensor_to_f32(f.tensor("f32").unwrap()).unwrap(),
        t.f32_vals
    );
    assert!(f.tensor("missing").is_none());
    assert!(matches!(
        f.require_tensor("missing").unwrap_err().kind(),
        GgufErrorKind::MissingTensor { .. }
    ));

    // The same bytes parse identically from memory.
    let g = GgufFile::from_bytes(on_disk).unwrap();
    assert_eq!(g.metadata(), f.metadata());
    assert_eq!(g.tensors(), f.tensors());
}

#[test]
fn typed_getters() {
    let mut w = GgufWriter::new();
    for (k, v) in every_metadata_type() {
        w.add_kv(k, v).unwrap();
    }
    let mut bytes = Vec::new();
    w.write(&mut bytes).unwrap();
    let f = GgufFile::from_bytes(bytes).unwrap();

    assert_eq!(f.get_u32("t.u32").unwrap(), 4_000_000_000);
    assert_eq!(f.get_i32("t.i32").unwrap(), -2_000_000_000);
    assert_eq!(f.get_u64("t.u64").unwrap(), u64::MAX);
    assert_eq!(f.get_i64("t.i64").unwrap(), i64::MIN);
    assert_eq!(f.get_f32("t.f32").unwrap(), -1.5e-7);
    assert_eq!(f.get_f64("t.f64").unwrap(), std::f64::consts::PI);
    assert!(f.get_bool("t.bool.true").unwrap());
    assert_eq!(f.get_str("t.str").unwrap(), "LFM2 — audio ✓");
    assert_eq!(f.get_str_array("t.arr.str").unwrap()[2], "▁hello");
    assert_eq!(f.get_i32_array("t.arr.i32").unwrap(), [-1, 0, 1 << 30]);
    assert_eq!(f.get_u32_array("t.arr.u32").unwrap(), [1, 2, 3]);
    assert_eq!(f.get_f32_array("t.arr.f32").unwrap()[0], 0.25);
    assert!(f.get_f32_array("t.arr.empty").unwrap().is_empty());
    assert_eq!(f.get_array("t.arr.nested").unwrap().len(), 4);
    assert_eq!(f.get_as::<&[u8]>("t.arr.u8").unwrap(), [0, 1, 255]);
    assert_eq!(f.get_as::<i16>("t.i16").unwrap(), -30_000);

    // Lenient integers: any integer type, converted losslessly.
    assert_eq!(f.get_integer::<u64>("t.u8").unwrap(), 200);
    assert_eq!(f.get_integer::<i8>("t.i8").unwrap(), -100);
    assert_eq!(f.get_integer::<usize>("t.u32").unwrap(), 4_000_000_000);
    assert_eq!(f.get_integer::<i128>("t.i64").unwrap(), i64::MIN as i128);
    assert_eq!(f.get_integer_array::<i64>("t.arr.u16").unwrap(), [1, 65535]);
    assert_eq!(f.get_integer_opt::<u32>("absent").unwrap(), None);
    match f.get_integer::<u32>("t.i32").unwrap_err().into_kind() {
        GgufErrorKind::IntegerOutOfRange { key, value, target } => {
            assert_eq!(
                (key.as_str(), value, target),
                ("t.i32", -2_000_000_000, "u32")
            );
        }
        other => panic!("{other:?}"),
    }

    // Errors name the key and both types.
    match f.get_u32("t.i32").unwrap_err().into_kind() {
        GgufErrorKind::WrongType {
            key,
            expected,
            found,
        } => assert_eq!(
            (key.as_str(), expected, found.as_str()),
            ("t.i32", "u32", "i32")
        ),
        other => panic!("{other:?}"),
    }
    match f.get_str_array("t.arr.u32").unwrap_err().into_kind() {
        GgufErrorKind::WrongType {
            expected, found, ..
        } => assert_eq!((expected, found.as_str()), ("array[string]", "array[u32]")),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        f.get_integer::<i64>("t.f32").unwrap_err().kind(),
        GgufErrorKind::WrongType { .. }
    ));
    match f.get_f32("nope").unwrap_err().into_kind() {
        GgufErrorKind::MissingKey { key } => assert_eq!(key, "nope"),
        other => panic!("{other:?}"),
    }
    assert_eq!(f.get_opt::<&str>("nope").unwrap(), None);
    assert!(f.get_opt::<&str>("t.u8").is_err());
}

#[test]
fn default_alignment_and_empty_file_contents() {
    let mut bytes = Vec::new();
    GgufWriter::new().write(&mut bytes).unwrap();
    // Header only: magic, version, two zero counts, padded to 32.
    assert_eq!(bytes.len(), 32);
    let f = GgufFile::from_bytes(bytes).unwrap();
    assert_eq!(f.alignment(), 32);
    assert!(f.tensors().is_empty() && f.metadata().is_empty());

    let f = GgufFile::from_bytes(valid_raw()).unwrap();
    // 24-byte header, 17-byte key/value, two 33-byte tensor infos: 107 -> 128.
    assert_eq!(f.data_offset(), 128);
    assert_eq!(f.tensor("b").unwrap().file_offset(), 160);
}

#[test]
fn reads_version_2() {
    let mut bytes = valid_raw();
    bytes[4..8].copy_from_slice(&2u32.to_le_bytes());
    assert_eq!(GgufFile::from_bytes(bytes).unwrap().version(), 2);
}

#[test]
fn zero_dim_and_zero_size_tensors() {
    let mut r = Raw::header(3, 2, 0);
    r.tensor("scalar", &[], GgmlType::F32, 0)
        .tensor("empty", &[0, 5], GgmlType::Q8_0, 32)
        .pad_to(32)
        .zeros(32);
    let f = GgufFile::from_bytes(r.done()).unwrap();
    let s = f.tensor("scalar").unwrap();
    assert_eq!((s.n_dims(), s.n_elements(), s.n_bytes()), (0, 1, 4));
    assert_eq!(f.tensor("empty").unwrap().n_bytes(), 0);
}

// ---------------------------------------------------------------------------
// corrupt files
// ---------------------------------------------------------------------------

#[test]
fn truncated_files() {
    assert!(matches!(kind(vec![]), GgufErrorKind::Truncated { .. }));
    let full = valid_raw();
    // Counts are checked against the bytes left, so a cut header reports them.
    assert!(matches!(
        kind(full[..30].to_vec()),
        GgufErrorKind::CountTooLarge { offset: 8, .. }
    ));
    match kind(full[..10].to_vec()) {
        GgufErrorKind::Truncated {
            what,
            offset,
            needed,
            available,
        } => {
            assert_eq!(
                (what.as_str(), offset, needed, available),
                ("count of tensors", 8, 8, 2)
            );
        }
        other => panic!("{other:?}"),
    }
    // Cut inside a value.
    let mut r = Raw::header(3, 0, 1);
    let kv_only = r.kv_u32("k", 7).done();
    match kind(kv_only[..38].to_vec()) {
        GgufErrorKind::Truncated {
            what,
            offset,
            needed,
            available,
        } => assert_eq!(
            (what.as_str(), offset, needed, available),
            ("value of key 'k'", 37, 4, 1)
        ),
        other => panic!("{other:?}"),
    }
    // Cut inside the last tensor's data.
    match kind(full[..full.len() - 1].to_vec()) {
        GgufErrorKind::TensorOutOfBounds {
            tensor,
            start,
            size,
            file_size,
        } => assert_eq!(
            (tensor.as_str(), start, size, file_size),
            ("b", 160, 32, 191)
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn huge_counts_are_rejected_without_allocating() {
    let mut bytes = valid_raw();
    bytes[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    match kind(bytes) {
        GgufErrorKind::CountTooLarge {
            what,
            count,
            offset,
            ..
        } => {
            assert_eq!((what.as_str(), count, offset), ("tensors", u64::MAX, 8));
        }
        other => panic!("{other:?}"),
    }
    let mut bytes = valid_raw();
    bytes[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert!(matches!(
        kind(bytes),
        GgufErrorKind::CountTooLarge { offset: 16, .. }
    ));

    // An array claiming 2^60 strings.
    let mut r = Raw::header(3, 0, 1);
    r.str("tokenizer.ggml.tokens")
        .u32(GgufValueType::Array as u32)
        .u32(GgufValueType::String as u32)
        .u64(1 << 60)
        .str("a");
    match kind(r.done()) {
        GgufErrorKind::CountTooLarge { what, .. } => {
            assert!(what.contains("tokenizer.ggml.tokens"))
        }
        other => panic!("{other:?}"),
    }

    // A string claiming 2^62 bytes.
    let mut r = Raw::header(3, 0, 1);
    r.str("general.name")
        .u32(GgufValueType::String as u32)
        .u64(1 << 62)
        .str("x");
    match kind(r.done()) {
        GgufErrorKind::StringTooLong {
            what, len, offset, ..
        } => {
            assert_eq!((len, offset), (1 << 62, 24 + 8 + 12 + 4));
            assert!(what.contains("general.name"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_magic_and_versions() {
    let mut bytes = valid_raw();
    bytes[..4].copy_from_slice(b"GGML");
    assert!(matches!(kind(bytes), GgufErrorKind::BadMagic { found } if &found == b"GGML"));
    for v in [0u32, 1, 4, 99] {
        let mut bytes = valid_raw();
        bytes[4..8].copy_from_slice(&v.to_le_bytes());
        match kind(bytes) {
            GgufErrorKind::UnsupportedVersion { version } => assert_eq!(version, v),
            other => panic!("{other:?}"),
        }
    }
    let mut bytes = valid_raw();
    bytes[4..8].copy_from_slice(&3u32.to_be_bytes());
    assert!(matches!(kind(bytes), GgufErrorKind::ByteSwapped { .. }));
}

#[test]
fn misaligned_and_out_of_bounds_tensors() {
    let mut r = Raw::header(3, 1, 0);
    r.tensor("w", &[4], GgmlType::F32, 16).pad_to(32).zeros(64);
    match kind(r.done()) {
        GgufErrorKind::MisalignedTensor {
            tensor,
            offset,
            alignment,
        } => assert_eq!((tensor.as_str(), offset, alignment), ("w", 16, 32)),
        other => panic!("{other:?}"),
    }
    // Aligned under a custom alignment of 16.
    let mut r = Raw::header(3, 1, 1);
    r.kv_u32("general.alignment", 16)
        .tensor("w", &[4], GgmlType::F32, 16)
        .pad_to(16)
        .zeros(32);
    assert_eq!(GgufFile::from_bytes(r.done()).unwrap().alignment(), 16);

    let mut r = Raw::header(3, 1, 0);
    r.tensor("w", &[4], GgmlType::F32, u64::MAX - 31).pad_to(32);
    assert!(matches!(
        kind(r.done()),
        GgufErrorKind::TensorOutOfBounds { .. }
    ));

    let mut r = Raw::header(3, 2, 0);
    r.tensor("a", &[16], GgmlType::F32, 0)
        .tensor("b", &[8], GgmlType::F32, 32)
        .pad_to(32)
        .zeros(64);
    match kind(r.done()) {
        GgufErrorKind::TensorOverlap { tensor, other, .. } => {
            assert_eq!((tensor.as_str(), other.as_str()), ("b", "a"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn duplicates() {
    let mut r = Raw::header(3, 2, 0);
    r.tensor("w", &[8], GgmlType::F32, 0)
        .tensor("w", &[8], GgmlType::F32, 32)
        .pad_to(32)
        .zeros(64);
    match kind(r.done()) {
        GgufErrorKind::DuplicateTensor { name, offset } => {
            assert_eq!((name.as_str(), offset), ("w", Some(24 + 33)));
        }
        other => panic!("{other:?}"),
    }
    let mut r = Raw::header(3, 0, 2);
    r.kv_u32("a.b", 1).kv_u32("a.b", 2);
    assert!(matches!(
        kind(r.done()),
        GgufErrorKind::DuplicateKey { key, offset: Some(43) } if key == "a.b"
    ));
}

#[test]
fn bad_values_and_tensor_infos() {
    // Unknown value type.
    let mut r = Raw::header(3, 0, 1);
    r.str("k").u32(13).u32(0);
    assert!(matches!(
        kind(r.done()),
        GgufErrorKind::InvalidValueType {
            type_id: 13,
            offset: 33,
            ..
        }
    ));
    // Bool that is neither 0 nor 1.
    let mut r = Raw::header(3, 0, 1);
    r.str("k").u32(GgufValueType::Bool as u32).bytes(&[2]);
    assert!(matches!(
        kind(r.done()),
        GgufErrorKind::InvalidBool { value: 2, .. }
    ));
    // Empty key.
    let mut r = Raw::header(3, 0, 1);
    r.str("").u32(GgufValueType::U8 as u32).bytes(&[0]);
    assert!(matches!(
        kind(r.done()),
        GgufErrorKind::EmptyKey { offset: Some(24) }
    ));
    // Invalid UTF-8 in a key.
    let mut r = Raw::header(3, 0, 1);
    r.u64(2).bytes(&[0xc3, 0x28]).u32(0).bytes(&[0]);
    assert!(matches!(
        kind(r.done()),
        GgufErrorKind::InvalidUtf8 { offset: 32, .. }
    ));
    // general.alignment of the wrong type, and not a power of two.
    let mut r = Raw::header(3, 0, 1);
    r.str("general.alignment")
        .u32(GgufValueType::U64 as u32)
        .u64(32);
    assert!(matches!(kind(r.done()), GgufErrorKind::WrongType { .. }));
    let mut r = Raw::header(3, 0, 1);
    r.kv_u32("general.alignment", 48);
    assert!(matches!(
        kind(r.done()),
        GgufErrorKind::InvalidAlignment { alignment: 48 }
    ));
    // Arrays nested too deep.
    let mut r = Raw::header(3, 0, 1);
    r.str("deep").u32(GgufValueType::Array as u32);
    for _ in 0..40 {
        r.u32(GgufValueType::Array as u32).u64(1);
    }
    r.u32(GgufValueType::U8 as u32).u64(0);
    assert!(matches!(
        kind(r.done()),
        GgufErrorKind::NestingTooDeep { .. }
    ));

    // Tensor infos.
    let one = |shape: &[i64], type_id: u32| {
        let mut r = Raw::header(3, 1, 0);
        r.str("t").u32(shape.len() as u32);
        for &d in shape {
            r.bytes(&d.to_le_bytes());
        }
        r.u32(type_id).u64(0).pad_to(32).zeros(4096);
        kind(r.done())
    };
    assert!(matches!(
        one(&[1; 5], 0),
        GgufErrorKind::BadDimCount { n_dims: 5, .. }
    ));
    assert!(matches!(
        one(&[4, -1], 0),
        GgufErrorKind::InvalidDim {
            dim: 1,
            value: -1,
            ..
        }
    ));
    assert!(matches!(
        one(&[4], 4),
        GgufErrorKind::UnknownTensorType { type_id: 4, .. }
    ));
    match one(&[33], GgmlType::Q8_0 as u32) {
        GgufErrorKind::TensorDtype { tensor, cause } => {
            assert_eq!(tensor, "t");
            assert!(matches!(
                cause,
                dtype::DtypeError::NotBlockMultiple { n_elements: 33, .. }
            ));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        one(&[i64::MAX, 4], 0),
        GgufErrorKind::TensorDtype { .. }
    ));
}

#[test]
fn errors_from_open_carry_the_path() {
    let scratch = Scratch::new("corrupt");
    let path = scratch.path("bad.gguf");
    let mut bytes = valid_raw();
    bytes[0] = b'X';
    std::fs::write(&path, bytes).unwrap();
    let err = GgufFile::open(&path).unwrap_err();
    assert_eq!(err.path(), Some(path.as_path()));
    assert!(matches!(err.kind(), GgufErrorKind::BadMagic { .. }));
    let msg = err.to_string();
    assert!(
        msg.starts_with(&path.display().to_string()) && msg.contains("magic"),
        "{msg}"
    );

    let missing = scratch.path("absent.gguf");
    let err = GgufFile::open(&missing).unwrap_err();
    assert!(matches!(err.kind(), GgufErrorKind::Io(_)));
    assert_eq!(err.path(), Some(missing.as_path()));

    std::fs::write(&path, valid_raw()).unwrap();
    let f = GgufFile::open(&path).unwrap();
    let err = f.get_str("k").unwrap_err();
    assert_eq!(err.path(), Some(path.as_path()));
    assert!(err.to_string().contains("'k'"));
}

// ---------------------------------------------------------------------------
// writer validation
// ---------------------------------------------------------------------------

#[test]
fn writer_rejects_bad_input() {
    let four = [0u8; 16];
    let mut w = GgufWriter::new();
    assert!(matches!(
        w.add_tensor("a", GgmlType::F32, &[5], &four[..])
            .unwrap_err()
            .kind(),
        GgufErrorKind::TensorDataSize {
            expected: 20,
            found: 16,
            ..
        }
    ));
    w.add_tensor("a", GgmlType::F32, &[4], &four[..]).unwrap();
    assert!(matches!(
        w.add_tensor("a", GgmlType::F32, &[4], &four[..])
            .unwrap_err()
            .kind(),
        GgufErrorKind::DuplicateTensor { offset: None, .. }
    ));
    assert!(matches!(
        w.add_tensor("q", GgmlType::Q4_0, &[16], vec![0u8; 9])
            .unwrap_err()
            .kind(),
        GgufErrorKind::TensorDtype { .. }
    ));
    assert!(matches!(
        w.add_tensor("s", GgmlType::F32, &[], vec![])
            .unwrap_err()
            .kind(),
        GgufErrorKind::BadDimCount { n_dims: 0, .. }
    ));
    assert!(matches!(
        w.add_tensor("x".repeat(64), GgmlType::F32, &[1], vec![0u8; 4])
            .unwrap_err()
            .kind(),
        GgufErrorKind::InvalidTensorName { .. }
    ));
    w.add_tensor("x".repeat(63), GgmlType::F32, &[1], vec![0u8; 4])
        .unwrap();
    assert_eq!(w.tensor_count(), 2);

    w.add_kv("k", 1u32).unwrap();
    assert!(matches!(
        w.add_kv("k", 2u32).unwrap_err().kind(),
        GgufErrorKind::DuplicateKey { .. }
    ));
    w.set_kv("k", "replaced").unwrap();
    assert_eq!(w.metadata().get_str("k").unwrap(), "replaced");
    assert!(matches!(
        w.add_kv("", 1u8).unwrap_err().kind(),
        GgufErrorKind::EmptyKey { offset: None }
    ));
    assert!(matches!(
        w.set_alignment(24).unwrap_err().kind(),
        GgufErrorKind::InvalidAlignment { alignment: 24 }
    ));
    assert!(matches!(
        w.add_kv("general.alignment", 32u64).unwrap_err().kind(),
        GgufErrorKind::WrongType { .. }
    ));
    let mut deep = GgufArray::U8(vec![]);
    for _ in 0..20 {
        deep = GgufArray::Array(vec![deep]);
    }
    assert!(matches!(
        w.add_kv("deep", deep).unwrap_err().kind(),
        GgufErrorKind::NestingTooDeep { .. }
    ));
}

#[test]
fn failed_write_leaves_no_file() {
    let scratch = Scratch::new("atomic");
    let path = scratch.path("out.gguf");
    std::fs::write(&path, b"previous").unwrap();

    let mut w = GgufWriter::new();
    w.add_tensor(
        "short",
        GgmlType::F32,
        &[4],
        TensorData::deferred(|out| out.write_all(&[0u8; 12])),
    )
    .unwrap();
    let err = w.write_to_path(&path).unwrap_err();
    assert_eq!(err.path(), Some(path.as_path()));
    assert!(matches!(
        err.kind(),
        GgufErrorKind::TensorDataSize {
            expected: 16,
            found: 12,
            ..
        }
    ));

    let mut w = GgufWriter::new();
    w.add_tensor(
        "failing",
        GgmlType::F32,
        &[4],
        TensorData::deferred(|_| Err(std::io::Error::other("source went away"))),
    )
    .unwrap();
    let err = w.write_to_path(&path).unwrap_err();
    assert!(matches!(err.kind(), GgufErrorKind::TensorIo { tensor, .. } if tensor == "failing"));

    assert_eq!(std::fs::read(&path).unwrap(), b"previous");
    assert_eq!(scratch.entries(), ["out.gguf"]);
}

#[test]
fn rewrite_preserves_everything() {
    // Copying a file through the writer (metadata + borrowed tensor data)
    // reproduces it byte for byte.
    let original = valid_raw();
    let f = GgufFile::from_bytes(original.clone()).unwrap();
    let mut w = GgufWriter::new();
    w.extend_metadata(f.metadata()).unwrap();
    for t in f.tensors() {
        w.add_tensor(t.name(), t.ggml_type(), t.shape(), f.tensor_data(t))
            .unwrap();
    }
    let mut out = Vec::new();
    w.write(&mut out).unwrap();
    assert_eq!(out, original);
}

// ---------------------------------------------------------------------------
// quantization
// ---------------------------------------------------------------------------

fn block_scale(block: &[u8]) -> f32 {
    dtype::f16_to_f32(u16::from_le_bytes([block[0], block[1]]))
}

#[test]
fn q8_0_error_bound() {
    // Scales keep d = amax/127 a normal f16, where its relative error is 2^-11.
    for (seed, scale) in [(10, 1.0f32), (11, 0.05), (12, 300.0)] {
        let x: Vec<f32> = noise(32 * 64, seed).iter().map(|v| v * scale).collect();
        let mut q = vec![0u8; GgmlType::Q8_0.row_size(x.len() as u64).unwrap()];
        dtype::quantize_q8_0(&x, &mut q).unwrap();
        let mut y = vec![0.0; x.len()];
        dtype::dequantize_q8_0(&q, &mut y).unwrap();
        for (b, block) in q.chunks(34).enumerate() {
            let amax = x[b * 32..][..32].iter().fold(0.0f32, |m, v| m.max(v.abs()));
            // Half a step, plus the error of storing the scale as f16.
            let bound = amax / 127.0 * (0.5 + 127.0 / 2048.0) * 1.0001;
            assert!((block_scale(block) - amax / 127.0).abs() <= amax / 127.0 / 2048.0);
            for i in b * 32..b * 32 + 32 {
                assert!((x[i] - y[i]).abs() <= bound, "{} vs {}", x[i], y[i]);
            }
        }
    }
}

#[test]
fn q4_0_error_bound() {
    for (seed, scale) in [(20, 1.0f32), (21, 1e-2), (22, 50.0)] {
        let x: Vec<f32> = noise(32 * 64, seed).iter().map(|v| v * scale).collect();
        let mut q = vec![0u8; GgmlType::Q4_0.row_size(x.len() as u64).unwrap()];
        dtype::quantize_q4_0(&x, &mut q).unwrap();
        let mut y = vec![0.0; x.len()];
        dtype::dequantize_q4_0(&q, &mut y).unwrap();
        for b in 0..64 {
            let amax = x[b * 32..][..32].iter().fold(0.0f32, |m, v| m.max(v.abs()));
            // Steps of amax/8; the top value can be clamped by a full step.
            let bound = amax / 8.0 * (1.0 + 8.0 / 2048.0) * 1.0001;
            for i in b * 32..b * 32 + 32 {
                assert!((x[i] - y[i]).abs() <= bound, "{} vs {}", x[i], y[i]);
            }
        }
    }
}

#[test]
fn q8_0_golden_blocks() {
    // x = -16..16: amax 16, d = 16/127 (f16 0x3008), q = round((i - 16) * 127/16).
    let ramp: Vec<f32> = (0..32).map(|i| i as f32 - 16.0).collect();
    let mut q = [0u8; 34];
    dtype::quantize_q8_0(&ramp, &mut q).unwrap();
    let expect: [u8; 34] = [
        8, 48, 129, 137, 145, 153, 161, 169, 177, 185, 192, 200, 208, 216, 224, 232, 240, 248, 0,
        8, 16, 24, 32, 40, 48, 56, 64, 71, 79, 87, 95, 103, 111, 119,
    ];
    assert_eq!(q, expect);
    assert_eq!(q[2] as i8, -127);
    let mut y = [0.0f32; 32];
    dtype::dequantize_q8_0(&q, &mut y).unwrap();
    assert_eq!(y[0], -127.0 * dtype::f16_to_f32(0x3008));

    // Produced by ggml's quantize_row_q8_0_ref.
    let mut x: Vec<f32> = (0..32)
        .map(|i| {
            if i % 4 == 0 {
                0.5
            } else {
                -0.25 * (i % 3) as f32
            }
        })
        .collect();
    x[7] = 1.0;
    dtype::quantize_q8_0(&x, &mut q).unwrap();
    let expect: [u8; 34] = [
        8, 32, 64, 224, 192, 0, 64, 192, 0, 127, 64, 0, 224, 192, 64, 224, 192, 0, 64, 192, 0, 224,
        64, 0, 224, 192, 64, 224, 192, 0, 64, 192, 0, 224,
    ];
    assert_eq!(q, expect);

    // All zeros: zero scale, zero quants.
    dtype::quantize_q8_0(&[0.0; 32], &mut q).unwrap();
    assert_eq!(q, [0u8; 34]);
}

#[test]
fn q4_0_golden_blocks() {
    // x = -16..16: the largest magnitude is -16, so d = -16 / -8 = 2 (f16 0x4000)
    // and q = trunc((i - 16) / 2 + 8.5), clamped to 15; low nibbles hold x[0..16].
    let ramp: Vec<f32> = (0..32).map(|i| i as f32 - 16.0).collect();
    let mut q = [0u8; 18];
    dtype::quantize_q4_0(&ramp, &mut q).unwrap();
    let expect: [u8; 18] = [
        0x00, 0x40, 0x80, 0x91, 0x91, 0xa2, 0xa2, 0xb3, 0xb3, 0xc4, 0xc4, 0xd5, 0xd5, 0xe6, 0xe6,
        0xf7, 0xf7, 0xf8,
    ];
    assert_eq!(q, expect);
    let mut y = [0.0f32; 32];
    dtype::dequantize_q4_0(&q, &mut y).unwrap();
    let want: Vec<f32> = (0..32)
        .map(|i: i32| (((i + 1) / 2).min(15) - 8) as f32 * 2.0)
        .collect();
    assert_eq!(y.to_vec(), want);

    // Produced by ggml's quantize_row_q4_0_ref.
    let mut x: Vec<f32> = (0..32)
        .map(|i| {
            if i % 4 == 0 {
                0.5
            } else {
                -0.25 * (i % 3) as f32
            }
        })
        .collect();
    x[7] = 1.0;
    dtype::quantize_q4_0(&x, &mut q).unwrap();
    let expect: [u8; 18] = [
        0x00, 0xb0, 0x44, 0xca, 0x8c, 0xa8, 0x44, 0x8c, 0xa8, 0xc0, 0x44, 0xa8, 0xca, 0x8c, 0x44,
        0xca, 0x8c, 0xa8,
    ];
    assert_eq!(q, expect);

    // All zeros: d = 0 / -8 = -0.0 (f16 0x8000) and every quant is 8.
    dtype::quantize_q4_0(&[0.0; 32], &mut q).unwrap();
    let mut expect = [0x88u8; 18];
    expect[..2].copy_from_slice(&[0x00, 0x80]);
    assert_eq!(q, expect);
}

#[test]
fn q6_k_layout() {
    // Element e of a super-block uses scale e / 16; its 6-bit quant is split into
    // a nibble of ql and two bits of qh, interleaved in 128-element halves.
    let mut block = [0u8; 210];
    let mut s = 0x2545_f491_4f6c_dd1du64;
    for b in block[..208].iter_mut() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        *b = s as u8;
    }
    block[208..].copy_from_slice(&0x3800u16.to_le_bytes()); // d = 0.5
    let mut y = [0.0f32; 256];
    dtype::dequantize_q6_k(&block, &mut y).unwrap();
    for (e, &got) in y.iter().enumerate() {
        let (half, r) = (e / 128, e % 128);
        let (quarter, l) = (r / 32, r % 32);
        let ql = block[half * 64 + l + if quarter % 2 == 1 { 32 } else { 0 }];
        let low = if quarter < 2 { ql & 0xf } else { ql >> 4 };
        let high = (block[128 + half * 32 + l] >> (2 * quarter)) & 3;
        let q = i32::from(low | (high << 4)) - 32;
        let scale = block[192 + e / 16] as i8;
        assert_eq!(got, 0.5 * f32::from(scale) * q as f32, "element {e}");
    }

    // All-zero quant bits mean q = -32: y[e] = 0.5 * (e/16 - 8) * -32.
    let mut block = [0u8; 210];
    for (k, s) in block[192..208].iter_mut().enumerate() {
        *s = (k as i8 - 8) as u8;
    }
    block[208..].copy_from_slice(&0x3800u16.to_le_bytes());
    dtype::dequantize_q6_k(&block, &mut y).unwrap();
    assert_eq!(y[0], 128.0);
    assert_eq!(y[255], -112.0);
    assert_eq!(y[130], -16.0 * (130 / 16 - 8) as f32);
}

#[test]
fn dequantize_rejects_wrong_lengths() {
    let mut y = [0.0f32; 32];
    assert!(dtype::dequantize_q8_0(&[0u8; 33], &mut y).is_err());
    assert!(dtype::quantize_q4_0(&[0.0; 31], &mut [0u8; 18]).is_err());
    assert!(matches!(
        dtype::dequantize(GgmlType::Q4_K, &[0u8; 144], &mut [0.0; 256]),
        Err(dtype::DtypeError::Unsupported { .. })
    ));
}

#[test]
fn ggml_type_table() {
    let expect: &[(GgmlType, u32, &str, usize, usize)] = &[
        (GgmlType::F32, 0, "f32", 1, 4),
        (GgmlType::F16, 1, "f16", 1, 2),
        (GgmlType::Q4_0, 2, "q4_0", 32, 18),
        (GgmlType::Q4_1, 3, "q4_1", 32, 20),
        (GgmlType::Q5_0, 6, "q5_0", 32, 22),
        (GgmlType::Q5_1, 7, "q5_1", 32, 24),
        (GgmlType::Q8_0, 8, "q8_0", 32, 34),
        (GgmlType::Q8_1, 9, "q8_1", 32, 36),
        (GgmlType::Q2_K, 10, "q2_K", 256, 84),
        (GgmlType::Q3_K, 11, "q3_K", 256, 110),
        (GgmlType::Q4_K, 12, "q4_K", 256, 144),
        (GgmlType::Q5_K, 13, "q5_K", 256, 176),
        (GgmlType::Q6_K, 14, "q6_K", 256, 210),
        (GgmlType::Q8_K, 15, "q8_K", 256, 292),
        (GgmlType::IQ2_XXS, 16, "iq2_xxs", 256, 66),
        (GgmlType::IQ2_XS, 17, "iq2_xs", 256, 74),
        (GgmlType::IQ3_XXS, 18, "iq3_xxs", 256, 98),
        (GgmlType::IQ1_S, 19, "iq1_s", 256, 50),
        (GgmlType::IQ4_NL, 20, "iq4_nl", 32, 18),
        (GgmlType::IQ3_S, 21, "iq3_s", 256, 110),
        (GgmlType::IQ2_S, 22, "iq2_s", 256, 82),
        (GgmlType::IQ4_XS, 23, "iq4_xs", 256, 136),
        (GgmlType::I8, 24, "i8", 1, 1),
        (GgmlType::I16, 25, "i16", 1, 2),
        (GgmlType::I32, 26, "i32", 1, 4),
        (GgmlType::I64, 27, "i64", 1, 8),
        (GgmlType::F64, 28, "f64", 1, 8),
        (GgmlType::IQ1_M, 29, "iq1_m", 256, 56),
        (GgmlType::BF16, 30, "bf16", 1, 2),
        (GgmlType::TQ1_0, 34, "tq1_0", 256, 54),
        (GgmlType::TQ2_0, 35, "tq2_0", 256, 66),
        (GgmlType::MXFP4, 39, "mxfp4", 32, 17),
        (GgmlType::NVFP4, 40, "nvfp4", 64, 36),
        (GgmlType::Q1_0, 41, "q1_0", 128, 18),
        (GgmlType::Q2_0, 42, "q2_0", 64, 18),
    ];
    assert_eq!(expect.len(), GgmlType::ALL.len());
    for &(ty, id, name, block, size) in expect {
        assert_eq!(ty as u32, id);
        assert_eq!(GgmlType::from_u32(id), Some(ty));
        assert_eq!(ty.name(), name);
        assert_eq!((ty.block_size(), ty.type_size()), (block, size), "{name}");
    }
    assert_eq!(GgmlType::Q6_K.row_size(4096).unwrap(), 16 * 210);
    assert!(GgmlType::Q8_0.row_size(48).is_err());
}

#[test]
fn f16_tensor_decodes() {
    let vals = [0.0f32, 1.0, -2.5, 65504.0, 6.1035156e-5, 5.9604645e-8];
    let mut bytes = vec![0u8; vals.len() * 2];
    dtype::f32_to_f16_bytes(&vals, &mut bytes).unwrap();
    let mut w = GgufWriter::new();
    w.add_tensor("h", GgmlType::F16, &[6], bytes).unwrap();
    let mut bf = vec![0u8; 12];
    dtype::f32_to_bf16_bytes(&vals, &mut bf).unwrap();
    w.add_tensor("b", GgmlType::BF16, &[6], bf).unwrap();
    let mut out = Vec::new();
    w.write(&mut out).unwrap();
    let f = GgufFile::from_bytes(out).unwrap();
    assert_eq!(f.tensor_to_f32(f.tensor("h").unwrap()).unwrap(), vals);
    let b = f.tensor_to_f32(f.tensor("b").unwrap()).unwrap();
    assert_eq!(b[..3], vals[..3]);
}

#[test]
fn no_panic_on_any_single_byte_corruption_or_truncation() {
    let mut w = GgufWriter::new();
    w.add_kv("a", vec!["x", "yz"]).unwrap();
    w.add_kv(
        "b",
        vec![GgufArray::from(vec![1u16]), GgufArray::from(vec![true])],
    )
    .unwrap();
    w.add_kv("c", true).unwrap();
    w.add_tensor("t0", GgmlType::Q8_0, &[32, 2], vec![0u8; 68])
        .unwrap();
    w.add_tensor("t1", GgmlType::F16, &[4], vec![0u8; 8])
        .unwrap();
    let mut good = Vec::new();
    w.write(&mut good).unwrap();
    GgufFile::from_bytes(good.clone()).unwrap();

    for len in 0..good.len() {
        let _ = GgufFile::from_bytes(good[..len].to_vec());
    }
    for i in 0..good.len() {
        for v in [0x00, 0x01, 0x7f, 0x80, 0xff, good[i] ^ 0x10] {
            let mut bad = good.clone();
            bad[i] = v;
            if let Ok(f) = GgufFile::from_bytes(bad) {
                // Whatever parses must describe in-bounds data.
                for t in f.tensors() {
                    assert_eq!(f.tensor_data(t).len(), t.n_bytes());
                }
            }
        }
    }
}

#[test]
fn types_are_thread_safe() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<GgufFile>();
    send_sync::<audio_engine::ggml::gguf::GgufError>();
    send_sync::<dtype::DtypeError>();
}
