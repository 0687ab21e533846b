//! Code-point classes the pre-tokenizers look at, as llama.cpp's tables define them.
//!
//! llama.cpp generates its tables from Unicode 15.1. The classes here come from regex-syntax's
//! tables (a newer Unicode) cut down to the code points that Unicode 15.1 had assigned, so a
//! character added later counts as unassigned here too, exactly as in llama.cpp.

use std::sync::OnceLock;

/// Sorted, disjoint inclusive code-point ranges.
struct RangeSet(Vec<(u32, u32)>);

impl RangeSet {
    /// Builds the set from a regex-syntax class expression.
    fn from_class(expr: &str) -> RangeSet {
        use regex_syntax::hir::{Class, HirKind};
        // why: the expressions are constants of this file; a failure is a build-time bug that the
        // unit tests below catch, so an empty set (never a panic at run time) is fine here.
        let ranges = match regex_syntax::parse(expr).map(|h| h.into_kind()) {
            Ok(HirKind::Class(Class::Unicode(cls))) => cls
                .ranges()
                .iter()
                .map(|r| (r.start() as u32, r.end() as u32))
                .collect(),
            _ => Vec::new(),
        };
        RangeSet(ranges)
    }

    fn contains(&self, cp: u32) -> bool {
        self.0
            .binary_search_by(|&(lo, hi)| {
                if hi < cp {
                    std::cmp::Ordering::Less
                } else if lo > cp {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
    }
}

struct Tables {
    letter: RangeSet,
    number: RangeSet,
    punctuation: RangeSet,
}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| Tables {
        letter: RangeSet::from_class(r"[\p{L}&&\p{Age=V15_1}]"),
        number: RangeSet::from_class(r"[\p{N}&&\p{Age=V15_1}]"),
        punctuation: RangeSet::from_class(r"[\p{P}&&\p{Age=V15_1}]"),
    })
}

/// What the pre-tokenizers know about one position of a fragment.
///
/// A position past either end of the fragment has all flags false, including `present`; every
/// code point inside it is `present` (llama.cpp gives even unassigned ones a non-zero flag word).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Flags {
    /// The position holds a code point.
    pub present: bool,
    /// `\p{L}`.
    pub letter: bool,
    /// `\p{N}`.
    pub number: bool,
    /// `\p{P}`.
    pub punctuation: bool,
    /// Unicode `White_Space` (llama.cpp's `\s`).
    pub whitespace: bool,
}

impl Flags {
    /// The flags of one code point.
    pub fn of(c: char) -> Flags {
        let cp = c as u32;
        if cp < 0x80 {
            let b = cp as u8;
            return Flags {
                present: true,
                letter: b.is_ascii_alphabetic(),
                number: b.is_ascii_digit(),
                // ASCII punctuation in the Unicode sense: no `$+<=>^`|~`, which are symbols.
                punctuation: b.is_ascii_punctuation() && !b"$+<=>^`|~".contains(&b),
                whitespace: matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' '),
            };
        }
        let t = tables();
        Flags {
            present: true,
            letter: t.letter.contains(cp),
            number: t.number.contains(cp),
            punctuation: t.punctuation.contains(cp),
            whitespace: c.is_whitespace(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_follow_unicode_15_1() {
        assert!(Flags::of('é').letter);
        assert!(Flags::of('中').letter);
        assert!(Flags::of('٣').number);
        assert!(Flags::of('²').number);
        assert!(Flags::of('Ⅻ').number);
        assert!(Flags::of('¿').punctuation);
        assert!(Flags::of('\u{3000}').whitespace);
        assert!(Flags::of('\u{85}').whitespace);
        assert!(!Flags::of('😀').letter);
        // CJK extension I arrived in 15.1: a letter.
        assert!(Flags::of('\u{2EBF0}').letter);
        // U+A7CB arrived in 16.0: unassigned for llama.cpp, so not a letter.
        assert!(!Flags::of('\u{A7CB}').letter);
        assert!(Flags::of('\u{A7CB}').present);
        for c in ['$', '+', '<', '=', '>', '^', '`', '|', '~'] {
            assert!(!Flags::of(c).punctuation, "{c}");
        }
        for c in [
            '!', '"', '#', '%', '&', '\'', '(', ')', '*', ',', '-', '.', '/', ':', ';',
        ] {
            assert!(Flags::of(c).punctuation, "{c}");
        }
    }
}
