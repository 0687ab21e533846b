//! The GGUF metadata value model.

/// The type tag of a GGUF metadata value (`enum gguf_type`), as stored in files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum GgufValueType {
    /// `u8`.
    U8 = 0,
    /// `i8`.
    I8 = 1,
    /// `u16`.
    U16 = 2,
    /// `i16`.
    I16 = 3,
    /// `u32`.
    U32 = 4,
    /// `i32`.
    I32 = 5,
    /// `f32`.
    F32 = 6,
    /// One byte, 0 or 1.
    Bool = 7,
    /// `u64` length + UTF-8 bytes.
    String = 8,
    /// Element type + `u64` count + elements.
    Array = 9,
    /// `u64`.
    U64 = 10,
    /// `i64`.
    I64 = 11,
    /// `f64`.
    F64 = 12,
}

impl GgufValueType {
    /// The type with GGUF id `id`, or `None` for an unknown id.
    pub const fn from_u32(id: u32) -> Option<Self> {
        use GgufValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// Short lowercase name, e.g. `"u32"`, `"string"`, `"array"`.
    pub const fn name(self) -> &'static str {
        use GgufValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }

    /// The fewest bytes one value of this type occupies in a file, used to bound
    /// counts by the bytes that remain.
    pub(crate) const fn min_encoded_size(self) -> u64 {
        use GgufValueType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 | String => 8,
            Array => 12,
        }
    }
}

/// A GGUF metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufValue {
    /// `u8`.
    U8(u8),
    /// `i8`.
    I8(i8),
    /// `u16`.
    U16(u16),
    /// `i16`.
    I16(i16),
    /// `u32`.
    U32(u32),
    /// `i32`.
    I32(i32),
    /// `u64`.
    U64(u64),
    /// `i64`.
    I64(i64),
    /// `f32`.
    F32(f32),
    /// `f64`.
    F64(f64),
    /// `bool`.
    Bool(bool),
    /// UTF-8 string.
    String(String),
    /// Homogeneous array.
    Array(GgufArray),
}

/// A homogeneous GGUF array. Nested arrays may each have their own element type.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufArray {
    /// `u8` elements.
    U8(Vec<u8>),
    /// `i8` elements.
    I8(Vec<i8>),
    /// `u16` elements.
    U16(Vec<u16>),
    /// `i16` elements.
    I16(Vec<i16>),
    /// `u32` elements.
    U32(Vec<u32>),
    /// `i32` elements.
    I32(Vec<i32>),
    /// `u64` elements.
    U64(Vec<u64>),
    /// `i64` elements.
    I64(Vec<i64>),
    /// `f32` elements.
    F32(Vec<f32>),
    /// `f64` elements.
    F64(Vec<f64>),
    /// `bool` elements.
    Bool(Vec<bool>),
    /// String elements.
    String(Vec<String>),
    /// Array elements. ggml's own reader rejects files containing these.
    Array(Vec<GgufArray>),
}

impl GgufValue {
    /// The value's type tag.
    pub fn value_type(&self) -> GgufValueType {
        match self {
            GgufValue::U8(_) => GgufValueType::U8,
            GgufValue::I8(_) => GgufValueType::I8,
            GgufValue::U16(_) => GgufValueType::U16,
            GgufValue::I16(_) => GgufValueType::I16,
            GgufValue::U32(_) => GgufValueType::U32,
            GgufValue::I32(_) => GgufValueType::I32,
            GgufValue::U64(_) => GgufValueType::U64,
            GgufValue::I64(_) => GgufValueType::I64,
            GgufValue::F32(_) => GgufValueType::F32,
            GgufValue::F64(_) => GgufValueType::F64,
            GgufValue::Bool(_) => GgufValueType::Bool,
            GgufValue::String(_) => GgufValueType::String,
            GgufValue::Array(_) => GgufValueType::Array,
        }
    }

    /// A readable type description for messages, e.g. `"u32"` or `"array[string]"`.
    pub fn type_description(&self) -> String {
        match self {
            GgufValue::Array(a) => a.type_description(),
            v => v.value_type().name().to_owned(),
        }
    }

    /// The value as an integer when it is one of the integer types (not bool).
    pub fn as_integer(&self) -> Option<i128> {
        Some(match *self {
            GgufValue::U8(v) => v.into(),
            GgufValue::I8(v) => v.into(),
            GgufValue::U16(v) => v.into(),
            GgufValue::I16(v) => v.into(),
            GgufValue::U32(v) => v.into(),
            GgufValue::I32(v) => v.into(),
            GgufValue::U64(v) => v.into(),
            GgufValue::I64(v) => v.into(),
            _ => return None,
        })
    }

    /// The string, when the value is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The array, when the value is one.
    pub fn as_array(&self) -> Option<&GgufArray> {
        match self {
            GgufValue::Array(a) => Some(a),
            _ => None,
        }
    }
}

impl GgufArray {
    /// The element type tag.
    pub fn element_type(&self) -> GgufValueType {
        match self {
            GgufArray::U8(_) => GgufValueType::U8,
            GgufArray::I8(_) => GgufValueType::I8,
            GgufArray::U16(_) => GgufValueType::U16,
            GgufArray::I16(_) => GgufValueType::I16,
            GgufArray::U32(_) => GgufValueType::U32,
            GgufArray::I32(_) => GgufValueType::I32,
            GgufArray::U64(_) => GgufValueType::U64,
            GgufArray::I64(_) => GgufValueType::I64,
            GgufArray::F32(_) => GgufValueType::F32,
            GgufArray::F64(_) => GgufValueType::F64,
            GgufArray::Bool(_) => GgufValueType::Bool,
            GgufArray::String(_) => GgufValueType::String,
            GgufArray::Array(_) => GgufValueType::Array,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            GgufArray::U8(v) => v.len(),
            GgufArray::I8(v) => v.len(),
            GgufArray::U16(v) => v.len(),
            GgufArray::I16(v) => v.len(),
            GgufArray::U32(v) => v.len(),
            GgufArray::I32(v) => v.len(),
            GgufArray::U64(v) => v.len(),
            GgufArray::I64(v) => v.len(),
            GgufArray::F32(v) => v.len(),
            GgufArray::F64(v) => v.len(),
            GgufArray::Bool(v) => v.len(),
            GgufArray::String(v) => v.len(),
            GgufArray::Array(v) => v.len(),
        }
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A readable type description, e.g. `"array[u32]"`, `"array[array]"`.
    pub fn type_description(&self) -> String {
        format!("array[{}]", self.element_type().name())
    }

    /// Levels of array nesting: 1 for an array of scalars.
    pub fn depth(&self) -> usize {
        match self {
            GgufArray::Array(v) => 1 + v.iter().map(GgufArray::depth).max().unwrap_or(0),
            _ => 1,
        }
    }

    /// The elements as integers when the element type is an integer type (not bool).
    pub fn to_integers(&self) -> Option<Vec<i128>> {
        fn conv<T: Copy + Into<i128>>(v: &[T]) -> Vec<i128> {
            v.iter().map(|&x| x.into()).collect()
        }
        Some(match self {
            GgufArray::U8(v) => conv(v),
            GgufArray::I8(v) => conv(v),
            GgufArray::U16(v) => conv(v),
            GgufArray::I16(v) => conv(v),
            GgufArray::U32(v) => conv(v),
            GgufArray::I32(v) => conv(v),
            GgufArray::U64(v) => conv(v),
            GgufArray::I64(v) => conv(v),
            _ => return None,
        })
    }
}

macro_rules! value_conversions {
    ($($variant:ident: $t:ty),* $(,)?) => {$(
        impl From<$t> for GgufValue {
            fn from(v: $t) -> Self {
                GgufValue::$variant(v)
            }
        }

        impl From<Vec<$t>> for GgufArray {
            fn from(v: Vec<$t>) -> Self {
                GgufArray::$variant(v)
            }
        }

        impl From<Vec<$t>> for GgufValue {
            fn from(v: Vec<$t>) -> Self {
                GgufValue::Array(GgufArray::$variant(v))
            }
        }

        impl<'a> FromGgufValue<'a> for $t {
            const EXPECTED: &'static str = GgufValueType::$variant.name();
            fn from_gguf_value(value: &'a GgufValue) -> Option<Self> {
                match value {
                    GgufValue::$variant(v) => Some(v.clone()),
                    _ => None,
                }
            }
        }

        impl<'a> FromGgufValue<'a> for &'a [$t] {
            const EXPECTED: &'static str = concat!("array[", stringify!($t), "]");
            fn from_gguf_value(value: &'a GgufValue) -> Option<Self> {
                match value {
                    GgufValue::Array(GgufArray::$variant(v)) => Some(v),
                    _ => None,
                }
            }
        }
    )*};
}

value_conversions!(
    U8: u8, I8: i8, U16: u16, I16: i16, U32: u32, I32: i32, U64: u64, I64: i64,
    F32: f32, F64: f64, Bool: bool,
);

impl From<&str> for GgufValue {
    fn from(v: &str) -> Self {
        GgufValue::String(v.to_owned())
    }
}

impl From<String> for GgufValue {
    fn from(v: String) -> Self {
        GgufValue::String(v)
    }
}

impl From<GgufArray> for GgufValue {
    fn from(v: GgufArray) -> Self {
        GgufValue::Array(v)
    }
}

impl From<Vec<String>> for GgufArray {
    fn from(v: Vec<String>) -> Self {
        GgufArray::String(v)
    }
}

impl From<Vec<&str>> for GgufArray {
    fn from(v: Vec<&str>) -> Self {
        GgufArray::String(v.into_iter().map(str::to_owned).collect())
    }
}

impl From<Vec<GgufArray>> for GgufArray {
    fn from(v: Vec<GgufArray>) -> Self {
        GgufArray::Array(v)
    }
}

impl From<Vec<String>> for GgufValue {
    fn from(v: Vec<String>) -> Self {
        GgufValue::Array(v.into())
    }
}

impl From<Vec<&str>> for GgufValue {
    fn from(v: Vec<&str>) -> Self {
        GgufValue::Array(v.into())
    }
}

impl From<Vec<GgufArray>> for GgufValue {
    fn from(v: Vec<GgufArray>) -> Self {
        GgufValue::Array(v.into())
    }
}

/// Types a metadata value can be read as without copying large data; used by
/// the generic getters such as [`GgufMetadata::get_as`](super::GgufMetadata::get_as).
///
/// Scalars match exactly one value type (no numeric conversion — use
/// [`GgufMetadata::get_integer`](super::GgufMetadata::get_integer) for that);
/// slices borrow the elements of an array of exactly that element type.
pub trait FromGgufValue<'a>: Sized {
    /// The expected type, for [`WrongType`](super::GgufErrorKind::WrongType) messages.
    const EXPECTED: &'static str;
    /// The converted value, or `None` when `value` has another type.
    fn from_gguf_value(value: &'a GgufValue) -> Option<Self>;
}

impl<'a> FromGgufValue<'a> for &'a str {
    const EXPECTED: &'static str = "string";
    fn from_gguf_value(value: &'a GgufValue) -> Option<Self> {
        value.as_str()
    }
}

impl<'a> FromGgufValue<'a> for &'a [String] {
    const EXPECTED: &'static str = "array[string]";
    fn from_gguf_value(value: &'a GgufValue) -> Option<Self> {
        match value {
            GgufValue::Array(GgufArray::String(v)) => Some(v),
            _ => None,
        }
    }
}

impl<'a> FromGgufValue<'a> for &'a [GgufArray] {
    const EXPECTED: &'static str = "array[array]";
    fn from_gguf_value(value: &'a GgufValue) -> Option<Self> {
        match value {
            GgufValue::Array(GgufArray::Array(v)) => Some(v),
            _ => None,
        }
    }
}

impl<'a> FromGgufValue<'a> for &'a GgufArray {
    const EXPECTED: &'static str = "array";
    fn from_gguf_value(value: &'a GgufValue) -> Option<Self> {
        value.as_array()
    }
}

impl<'a> FromGgufValue<'a> for &'a GgufValue {
    const EXPECTED: &'static str = "any";
    fn from_gguf_value(value: &'a GgufValue) -> Option<Self> {
        Some(value)
    }
}
