//! Ordered metadata map with typed getters.

use std::collections::HashMap;

use super::error::{GgufErrorKind, Result};
use super::format::{DEFAULT_ALIGNMENT, KEY_ALIGNMENT, MAX_ARRAY_NESTING};
use super::value::{FromGgufValue, GgufArray, GgufValue, GgufValueType};

/// GGUF metadata: key/value pairs in file order with lookup by key.
///
/// Keys are unique and non-empty. Getters fail with
/// [`MissingKey`](GgufErrorKind::MissingKey) or
/// [`WrongType`](GgufErrorKind::WrongType); the `*_opt` forms turn a missing key
/// into `None` but still reject a wrong type.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GgufMetadata {
    entries: Vec<(String, GgufValue)>,
    index: HashMap<String, usize>,
}

fn wrong_type(key: &str, expected: &'static str, found: &GgufValue) -> GgufErrorKind {
    GgufErrorKind::WrongType {
        key: key.to_owned(),
        expected,
        found: found.type_description(),
    }
}

fn integer_into<T: TryFrom<i128>>(key: &str, value: i128) -> Result<T> {
    T::try_from(value).map_err(|_| {
        GgufErrorKind::IntegerOutOfRange {
            key: key.to_owned(),
            value,
            target: std::any::type_name::<T>(),
        }
        .into()
    })
}

impl GgufMetadata {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries in file (insertion) order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &GgufValue)> + '_ {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Keys in file (insertion) order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }

    /// Appends `key`; fails if it is empty or already present.
    ///
    /// `general.alignment` must be a `u32` power of two, since readers rely on it.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<GgufValue>) -> Result<()> {
        let key = key.into();
        let value = value.into();
        Self::check_entry(&key, &value)?;
        if self.index.contains_key(&key) {
            return Err(GgufErrorKind::DuplicateKey { key, offset: None }.into());
        }
        self.index.insert(key.clone(), self.entries.len());
        self.entries.push((key, value));
        Ok(())
    }

    /// Replaces the value of `key` in place, or appends it when absent. Returns
    /// the previous value.
    pub fn set(
        &mut self,
        key: impl Into<String>,
        value: impl Into<GgufValue>,
    ) -> Result<Option<GgufValue>> {
        let key = key.into();
        let value = value.into();
        Self::check_entry(&key, &value)?;
        match self.index.get(&key) {
            Some(&i) => Ok(Some(std::mem::replace(&mut self.entries[i].1, value))),
            None => {
                self.index.insert(key.clone(), self.entries.len());
                self.entries.push((key, value));
                Ok(None)
            }
        }
    }

    /// Removes `key`, keeping the order of the others. Returns its value.
    pub fn remove(&mut self, key: &str) -> Option<GgufValue> {
        let i = self.index.remove(key)?;
        let (_, value) = self.entries.remove(i);
        for slot in self.index.values_mut() {
            if *slot > i {
                *slot -= 1;
            }
        }
        Some(value)
    }

    /// Appends a parsed entry without validation; `false` if the key exists.
    pub(crate) fn push_unchecked(&mut self, key: String, value: GgufValue) -> bool {
        if self.index.contains_key(&key) {
            return false;
        }
        self.index.insert(key.clone(), self.entries.len());
        self.entries.push((key, value));
        true
    }

    fn check_entry(key: &str, value: &GgufValue) -> Result<()> {
        if key.is_empty() {
            return Err(GgufErrorKind::EmptyKey { offset: None }.into());
        }
        if let GgufValue::Array(a) = value {
            // Readers (this one included) bound nesting; refuse to write what they reject.
            if a.depth() > MAX_ARRAY_NESTING {
                return Err(GgufErrorKind::NestingTooDeep {
                    key: key.to_owned(),
                    offset: None,
                    max: MAX_ARRAY_NESTING,
                }
                .into());
            }
        }
        if key == KEY_ALIGNMENT {
            match value {
                GgufValue::U32(a) if a.is_power_of_two() => {}
                GgufValue::U32(a) => {
                    return Err(GgufErrorKind::InvalidAlignment {
                        alignment: u64::from(*a),
                    }
                    .into())
                }
                other => return Err(wrong_type(key, "u32", other).into()),
            }
        }
        Ok(())
    }

    /// The data alignment these metadata imply: `general.alignment` or 32.
    ///
    /// Fails if `general.alignment` is not a `u32` power of two.
    pub fn alignment(&self) -> Result<u64> {
        match self.get(KEY_ALIGNMENT) {
            None => Ok(DEFAULT_ALIGNMENT),
            Some(GgufValue::U32(a)) if a.is_power_of_two() => Ok(u64::from(*a)),
            Some(GgufValue::U32(a)) => Err(GgufErrorKind::InvalidAlignment {
                alignment: u64::from(*a),
            }
            .into()),
            Some(other) => Err(wrong_type(KEY_ALIGNMENT, "u32", other).into()),
        }
    }

    /// The value of `key` as `T` (see [`FromGgufValue`]).
    pub fn get_as<'a, T: FromGgufValue<'a>>(&'a self, key: &str) -> Result<T> {
        self.get_opt(key)?.ok_or_else(|| {
            GgufErrorKind::MissingKey {
                key: key.to_owned(),
            }
            .into()
        })
    }

    /// Like [`get_as`](Self::get_as), but a missing key gives `Ok(None)`.
    pub fn get_opt<'a, T: FromGgufValue<'a>>(&'a self, key: &str) -> Result<Option<T>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => T::from_gguf_value(v)
                .map(Some)
                .ok_or_else(|| wrong_type(key, T::EXPECTED, v).into()),
        }
    }

    typed_getters!();

    /// A value of any integer type (u8 … i64), converted losslessly to `T`.
    ///
    /// Converters disagree on integer widths (one writes `u32`, another `i64`),
    /// so model hyperparameters are best read this way. Fails with
    /// [`IntegerOutOfRange`](GgufErrorKind::IntegerOutOfRange) when the value
    /// does not fit `T`.
    pub fn get_integer<T: TryFrom<i128>>(&self, key: &str) -> Result<T> {
        self.get_integer_opt(key)?.ok_or_else(|| {
            GgufErrorKind::MissingKey {
                key: key.to_owned(),
            }
            .into()
        })
    }

    /// Like [`get_integer`](Self::get_integer), but a missing key gives `Ok(None)`.
    pub fn get_integer_opt<T: TryFrom<i128>>(&self, key: &str) -> Result<Option<T>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let n = v
            .as_integer()
            .ok_or_else(|| wrong_type(key, "integer", v))?;
        integer_into(key, n).map(Some)
    }

    /// An array of any integer element type, converted losslessly to `T`.
    pub fn get_integer_array<T: TryFrom<i128>>(&self, key: &str) -> Result<Vec<T>> {
        let v = self.get(key).ok_or_else(|| GgufErrorKind::MissingKey {
            key: key.to_owned(),
        })?;
        let ints = v
            .as_array()
            .and_then(GgufArray::to_integers)
            .ok_or_else(|| wrong_type(key, "array[integer]", v))?;
        ints.into_iter().map(|n| integer_into(key, n)).collect()
    }

    /// The value type of `key`, if present.
    pub fn value_type(&self, key: &str) -> Option<GgufValueType> {
        self.get(key).map(GgufValue::value_type)
    }
}
