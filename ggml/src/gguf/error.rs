//! The GGUF error type.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::dtype::DtypeError;

/// Result alias for GGUF operations.
pub type Result<T, E = GgufError> = std::result::Result<T, E>;

/// Formats an optional file offset as a message suffix.
fn at(offset: &Option<u64>) -> String {
    match offset {
        Some(o) => format!(" at offset {o}"),
        None => String::new(),
    }
}

/// What went wrong, without the file it happened in; see [`GgufError::kind`].
///
/// Offsets are absolute byte offsets into the file unless a variant says otherwise.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GgufErrorKind {
    /// Reading, writing, mapping or renaming failed.
    #[error("I/O error: {0}")]
    Io(io::Error),
    /// The file ends before an item that the header promised.
    #[error("truncated file: {what} at offset {offset} needs {needed} bytes but only {available} remain")]
    Truncated {
        /// The item being read, e.g. `"value of key 'general.name'"`.
        what: String,
        /// Where the item starts.
        offset: u64,
        /// Bytes the item needs.
        needed: u64,
        /// Bytes left in the file.
        available: u64,
    },
    /// The file changed size after it was mapped (truncated by another process): loading from
    /// the mapping would crash with `SIGBUS`.
    #[error("the file changed after it was opened ({mapped} bytes mapped): {cause}")]
    FileChanged {
        /// Bytes mapped at open.
        mapped: u64,
        /// What the check found.
        #[source]
        cause: io::Error,
    },
    /// The file does not start with `GGUF`.
    #[error("not a GGUF file: magic is \"{}\", expected \"GGUF\"", .found.escape_ascii())]
    BadMagic {
        /// The first four bytes.
        found: [u8; 4],
    },
    /// A format version this reader does not support (only 2 and 3 are).
    #[error("unsupported GGUF version {version} (supported: 2 and 3)")]
    UnsupportedVersion {
        /// The version field.
        version: u32,
    },
    /// The version field reads as byte-swapped: the file is big-endian.
    #[error(
        "GGUF version field {version:#010x} looks byte-swapped: big-endian files are not supported"
    )]
    ByteSwapped {
        /// The version field as read little-endian.
        version: u32,
    },
    /// A tensor, key or array-element count cannot fit in the rest of the file.
    #[error("count of {what} ({count}) at offset {offset} is more than the rest of the file can hold (at most {max})")]
    CountTooLarge {
        /// What is being counted, e.g. `"tensors"`, `"elements of key 'x'"`.
        what: String,
        /// The stored count.
        count: u64,
        /// Where the count is stored.
        offset: u64,
        /// The largest count the remaining bytes could hold.
        max: u64,
    },
    /// A string whose length prefix runs past the end of the file.
    #[error(
        "{what}: string length {len} at offset {offset} exceeds the {available} remaining bytes"
    )]
    StringTooLong {
        /// The string being read.
        what: String,
        /// The stored length.
        len: u64,
        /// Where the length prefix is stored.
        offset: u64,
        /// Bytes left after the prefix.
        available: u64,
    },
    /// A string that is not valid UTF-8.
    #[error("{what}: string at offset {offset} is not valid UTF-8")]
    InvalidUtf8 {
        /// The string being read.
        what: String,
        /// Where the string's bytes start.
        offset: u64,
    },
    /// A metadata key that is the empty string.
    #[error("empty metadata key{}", at(.offset))]
    EmptyKey {
        /// Where the key is stored, when reading.
        offset: Option<u64>,
    },
    /// A metadata key that occurs twice.
    #[error("duplicate metadata key '{key}'{}", at(.offset))]
    DuplicateKey {
        /// The key.
        key: String,
        /// Where the second occurrence is stored, when reading.
        offset: Option<u64>,
    },
    /// A value type id outside the GGUF set.
    #[error("key '{key}': invalid value type id {type_id} at offset {offset}")]
    InvalidValueType {
        /// The key whose value is being read.
        key: String,
        /// The stored type id.
        type_id: u32,
        /// Where the type id is stored.
        offset: u64,
    },
    /// A bool stored as something other than 0 or 1.
    #[error("key '{key}': bool at offset {offset} has value {value}, expected 0 or 1")]
    InvalidBool {
        /// The key whose value is being read.
        key: String,
        /// The stored byte.
        value: u8,
        /// Where the byte is stored.
        offset: u64,
    },
    /// Arrays nested deeper than the reader allows.
    #[error("key '{key}': arrays nested deeper than {max} levels{}", at(.offset))]
    NestingTooDeep {
        /// The key whose value is being read or written.
        key: String,
        /// Where the too-deep array starts, when reading.
        offset: Option<u64>,
        /// The nesting limit.
        max: usize,
    },
    /// `general.alignment` is zero or not a power of two.
    #[error("general.alignment is {alignment}, expected a non-zero power of two")]
    InvalidAlignment {
        /// The stored alignment.
        alignment: u64,
    },
    /// A tensor name that occurs twice.
    #[error("duplicate tensor name '{name}'{}", at(.offset))]
    DuplicateTensor {
        /// The tensor name.
        name: String,
        /// Where the second occurrence is stored, when reading.
        offset: Option<u64>,
    },
    /// A tensor name the writer refuses (empty, or too long for ggml).
    #[error("invalid tensor name '{name}': {reason}")]
    InvalidTensorName {
        /// The tensor name.
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A tensor with more dimensions than ggml supports (4), or none when writing.
    #[error("tensor '{tensor}' has {n_dims} dimensions, expected 1 to 4{}", at(.offset))]
    BadDimCount {
        /// The tensor name.
        tensor: String,
        /// The dimension count.
        n_dims: u64,
        /// Where the count is stored, when reading.
        offset: Option<u64>,
    },
    /// A negative dimension.
    #[error("tensor '{tensor}': dimension {dim} is {value} at offset {offset}, expected >= 0")]
    InvalidDim {
        /// The tensor name.
        tensor: String,
        /// Which dimension (0 = fastest).
        dim: usize,
        /// The stored value, read as signed.
        value: i64,
        /// Where the value is stored.
        offset: u64,
    },
    /// A tensor type id that ggml does not know (or removed).
    #[error("tensor '{tensor}': unknown ggml type id {type_id} at offset {offset}")]
    UnknownTensorType {
        /// The tensor name.
        tensor: String,
        /// The stored type id.
        type_id: u32,
        /// Where the id is stored.
        offset: u64,
    },
    /// A shape that the tensor's type cannot store (row not a multiple of the
    /// block size, size overflow), or a failed element conversion.
    #[error("tensor '{tensor}': {cause}")]
    TensorDtype {
        /// The tensor name.
        tensor: String,
        /// The underlying problem.
        cause: DtypeError,
    },
    /// A tensor offset that is not a multiple of the file's alignment.
    #[error("tensor '{tensor}': data offset {offset} (relative to the data section) is not a multiple of the alignment {alignment}")]
    MisalignedTensor {
        /// The tensor name.
        tensor: String,
        /// The stored offset, relative to the data section.
        offset: u64,
        /// The file's alignment.
        alignment: u64,
    },
    /// Tensor data that extends past the end of the file.
    #[error("tensor '{tensor}': data at offset {start} with size {size} extends past the end of the file ({file_size} bytes)")]
    TensorOutOfBounds {
        /// The tensor name.
        tensor: String,
        /// Absolute offset of the data.
        start: u64,
        /// Size of the data in bytes.
        size: u64,
        /// Size of the file.
        file_size: u64,
    },
    /// Two tensors whose data ranges overlap.
    #[error("tensor '{tensor}' (data at offset {start}) overlaps tensor '{other}'")]
    TensorOverlap {
        /// The tensor that starts later.
        tensor: String,
        /// Its absolute data offset.
        start: u64,
        /// The tensor it overlaps.
        other: String,
    },
    /// Tensor data whose length does not match its type and shape.
    #[error(
        "tensor '{tensor}': data is {found} bytes, expected {expected} for its type and shape"
    )]
    TensorDataSize {
        /// The tensor name.
        tensor: String,
        /// Bytes the type and shape require.
        expected: u64,
        /// Bytes supplied.
        found: u64,
    },
    /// Producing or writing a tensor's data failed.
    #[error("tensor '{tensor}': writing data failed: {cause}")]
    TensorIo {
        /// The tensor name.
        tensor: String,
        /// The I/O error.
        cause: io::Error,
    },
    /// A required metadata key is absent.
    #[error("missing metadata key '{key}'")]
    MissingKey {
        /// The key.
        key: String,
    },
    /// A metadata value of another type than requested.
    #[error("metadata key '{key}' has type {found}, expected {expected}")]
    WrongType {
        /// The key.
        key: String,
        /// The requested type.
        expected: &'static str,
        /// The stored type, e.g. `"array[string]"`.
        found: String,
    },
    /// An integer value that does not fit the requested integer type.
    #[error("metadata key '{key}': value {value} does not fit in {target}")]
    IntegerOutOfRange {
        /// The key.
        key: String,
        /// The stored value.
        value: i128,
        /// The requested type.
        target: &'static str,
    },
    /// A required tensor is absent.
    #[error("missing tensor '{name}'")]
    MissingTensor {
        /// The tensor name.
        name: String,
    },
}

/// A GGUF error: a [`GgufErrorKind`] plus the file it concerns, when known.
///
/// Displays as `"<path>: <kind>"`, or just the kind for in-memory data.
pub struct GgufError {
    repr: Box<Repr>,
}

struct Repr {
    path: Option<PathBuf>,
    kind: GgufErrorKind,
}

impl GgufError {
    /// What went wrong.
    pub fn kind(&self) -> &GgufErrorKind {
        &self.repr.kind
    }

    /// Consumes the error, returning what went wrong.
    pub fn into_kind(self) -> GgufErrorKind {
        self.repr.kind
    }

    /// The file the error concerns, when it came from one.
    pub fn path(&self) -> Option<&Path> {
        self.repr.path.as_deref()
    }

    /// Attaches `path`, unless a path is already attached.
    pub fn with_path(mut self, path: impl Into<PathBuf>) -> Self {
        if self.repr.path.is_none() {
            self.repr.path = Some(path.into());
        }
        self
    }
}

impl From<GgufErrorKind> for GgufError {
    fn from(kind: GgufErrorKind) -> Self {
        GgufError {
            repr: Box::new(Repr { path: None, kind }),
        }
    }
}

impl From<io::Error> for GgufError {
    fn from(e: io::Error) -> Self {
        GgufErrorKind::Io(e).into()
    }
}

impl fmt::Display for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr.path {
            Some(p) => write!(f, "{}: {}", p.display(), self.repr.kind),
            None => self.repr.kind.fmt(f),
        }
    }
}

impl fmt::Debug for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GgufError")
            .field("path", &self.repr.path)
            .field("kind", &self.repr.kind)
            .finish()
    }
}

// The kind's message is already part of Display, so it is not reported as a
// separate source (that would print it twice in error chains).
impl std::error::Error for GgufError {}
