//! Pre-tokenizers: split a text fragment into the words that BPE then merges inside of.
//!
//! These follow llama.cpp's hand-written splitters rather than a regex engine, because llama.cpp
//! does not run the published regexes either: where its loops and the regex disagree (they do on
//! a few corner cases), llama.cpp's output is what the model was run with.

use super::unicode::Flags;

/// Which pre-tokenizer a vocabulary uses (llama.cpp's `pre_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PreKind {
    /// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
    /// (`lfm2`, `llama3`, ...).
    Llama3,
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)` (`gpt-2`, ...).
    Gpt2,
    /// llama.cpp's `default`: punctuation runs, then the GPT-2 split, then number runs, then
    /// groups of three ASCII digits.
    Default,
}

/// A fragment's code points with out-of-range reads answering "nothing".
struct Cps<'a>(&'a [char]);

impl Cps<'_> {
    fn at(&self, i: usize) -> Option<char> {
        self.0.get(i).copied()
    }
    fn flags(&self, i: usize) -> Flags {
        self.at(i).map(Flags::of).unwrap_or_default()
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

/// Splits `text` into words (as UTF-8 strings, not yet byte-encoded).
pub(super) fn split(kind: PreKind, text: &str) -> Vec<String> {
    let cps: Vec<char> = text.chars().collect();
    let lens = match kind {
        PreKind::Llama3 => llama3(&cps),
        PreKind::Gpt2 => gpt2(&cps),
        PreKind::Default => default_split(&cps),
    };
    let mut words = Vec::with_capacity(lens.len());
    let mut start = 0;
    for n in lens {
        words.push(cps[start..start + n].iter().collect());
        start += n;
    }
    words
}

/// Collects word lengths; `cut(end)` closes the word that runs from the previous cut to `end`.
struct Cutter {
    prev: usize,
    lens: Vec<usize>,
}

impl Cutter {
    fn new() -> Self {
        Cutter {
            prev: 0,
            lens: Vec::new(),
        }
    }
    fn cut(&mut self, end: usize) {
        if end > self.prev {
            self.lens.push(end - self.prev);
        }
        self.prev = end;
    }
}

fn is_cr_or_lf(c: Option<char>) -> bool {
    matches!(c, Some('\r' | '\n'))
}

/// Length of a contraction (`'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d`) at `pos`, or 0.
fn contraction(cps: &Cps<'_>, pos: usize, ignore_case: bool) -> usize {
    if cps.at(pos) != Some('\'') || pos + 1 >= cps.len() {
        return 0;
    }
    // why: only ASCII capitals lower-case to these letters, so ASCII folding is the whole of
    // llama.cpp's `unicode_tolower` here.
    let fold = |c: Option<char>| {
        let c = c.unwrap_or('\0');
        if ignore_case {
            c.to_ascii_lowercase()
        } else {
            c
        }
    };
    let c1 = fold(cps.at(pos + 1));
    if matches!(c1, 's' | 't' | 'm' | 'd') {
        return 2;
    }
    if pos + 2 < cps.len() {
        let c2 = fold(cps.at(pos + 2));
        if matches!((c1, c2), ('r', 'e') | ('v', 'e') | ('l', 'l')) {
            return 3;
        }
    }
    0
}

/// Length of the whitespace run at `pos` and the end of its last `\r`/`\n` (0 if none).
fn whitespace_run(cps: &Cps<'_>, pos: usize) -> (usize, usize) {
    let mut n = 0;
    let mut last_crlf_end = 0;
    while cps.flags(pos + n).whitespace {
        if is_cr_or_lf(cps.at(pos + n)) {
            last_crlf_end = pos + n + 1;
        }
        n += 1;
    }
    (n, last_crlf_end)
}

fn llama3(chars: &[char]) -> Vec<usize> {
    let cps = Cps(chars);
    let mut out = Cutter::new();
    let mut pos = 0;
    while pos < cps.len() {
        let c = cps.at(pos);
        let f = cps.flags(pos);

        let n = contraction(&cps, pos, true);
        if n > 0 {
            pos += n;
            out.cut(pos);
            continue;
        }

        // [^\r\n\p{L}\p{N}]?\p{L}+
        if !(is_cr_or_lf(c) || f.number) && (f.letter || cps.flags(pos + 1).letter) {
            pos += 1;
            while cps.flags(pos).letter {
                pos += 1;
            }
            out.cut(pos);
            continue;
        }

        // \p{N}{1,3}
        if f.number {
            let mut group_start = pos;
            while cps.flags(pos).number {
                pos += 1;
                if pos - group_start >= 3 {
                    out.cut(pos);
                    group_start = pos;
                }
            }
            out.cut(pos);
            continue;
        }

        // ' ?[^\s\p{L}\p{N}]+[\r\n]*'. why `f.present` and not the next flags: llama.cpp tests
        // the current code point here, so a trailing lone space takes this branch.
        let mut f2 = if c == Some(' ') {
            cps.flags(pos + 1)
        } else {
            f
        };
        if !(f2.whitespace || f2.letter || f2.number) && f.present {
            if c == Some(' ') {
                pos += 1;
            }
            while !(f2.whitespace || f2.letter || f2.number) && f2.present {
                pos += 1;
                f2 = cps.flags(pos);
            }
            while is_cr_or_lf(cps.at(pos)) {
                pos += 1;
            }
            out.cut(pos);
            continue;
        }

        let (n_ws, last_crlf_end) = whitespace_run(&cps, pos);
        // \s*[\r\n]+
        if last_crlf_end > 0 {
            pos = last_crlf_end;
            out.cut(pos);
            continue;
        }
        // \s+(?!\S): leave the last space to the word that follows, unless the fragment ends.
        if n_ws > 1 && cps.at(pos + n_ws).is_some() {
            pos += n_ws - 1;
            out.cut(pos);
            continue;
        }
        // \s+
        if n_ws > 0 {
            pos += n_ws;
            out.cut(pos);
            continue;
        }
        pos += 1;
        out.cut(pos);
    }
    out.lens
}

fn gpt2(chars: &[char]) -> Vec<usize> {
    let cps = Cps(chars);
    let mut out = Cutter::new();
    let mut pos = 0;
    while pos < cps.len() {
        let c = cps.at(pos);
        let f = cps.flags(pos);

        let n = contraction(&cps, pos, false);
        if n > 0 {
            pos += n;
            out.cut(pos);
            continue;
        }

        let space = c == Some(' ');
        let f2 = if space { cps.flags(pos + 1) } else { f };
        // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
        let class: Option<fn(Flags) -> bool> = if f2.letter {
            Some(|f| f.letter)
        } else if f2.number {
            Some(|f| f.number)
        } else if !(f2.whitespace || f2.letter || f2.number) && f2.present {
            Some(|f| !(f.whitespace || f.letter || f.number) && f.present)
        } else {
            None
        };
        if let Some(class) = class {
            if space {
                pos += 1;
            }
            while class(cps.flags(pos)) {
                pos += 1;
            }
            out.cut(pos);
            continue;
        }

        let (n_ws, _) = whitespace_run(&cps, pos);
        if n_ws > 1 && cps.at(pos + n_ws).is_some() {
            pos += n_ws - 1;
            out.cut(pos);
            continue;
        }
        if n_ws > 0 {
            pos += n_ws;
            out.cut(pos);
            continue;
        }
        pos += 1;
        out.cut(pos);
    }
    out.lens
}

/// Splits every piece (given as lengths over `chars`) into matches of `find` and the gaps between
/// them; `find(piece, from)` returns the next match `(start, end)` at or after `from`.
fn split_by(
    chars: &[char],
    pieces: Vec<usize>,
    find: impl Fn(&[char], usize) -> Option<(usize, usize)>,
) -> Vec<usize> {
    let mut out = Vec::with_capacity(pieces.len());
    let mut start = 0;
    for n in pieces {
        let piece = &chars[start..start + n];
        let mut at = 0;
        while let Some((s, e)) = find(piece, at) {
            if s > at {
                out.push(s - at);
            }
            out.push(e - s);
            at = e;
        }
        if at < n {
            out.push(n - at);
        }
        start += n;
    }
    out
}

/// The first maximal run of code points satisfying `pred` at or after `from`.
fn run_of(piece: &[char], from: usize, pred: impl Fn(char) -> bool) -> Option<(usize, usize)> {
    let s = from + piece[from..].iter().position(|&c| pred(c))?;
    let e = s + piece[s..].iter().take_while(|&&c| pred(c)).count();
    Some((s, e))
}

fn default_split(chars: &[char]) -> Vec<usize> {
    // `[\p{P}\$\+<=>\^~\|]+`
    let pieces = split_by(chars, vec![chars.len()], |p, from| {
        run_of(p, from, |c| {
            Flags::of(c).punctuation || matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '~' | '|')
        })
    });
    // the GPT-2 expression, inside each piece
    let mut words = Vec::new();
    let mut start = 0;
    for n in pieces {
        words.extend(gpt2(&chars[start..start + n]));
        start += n;
    }
    // `\p{N}+`
    let words = split_by(chars, words, |p, from| {
        run_of(p, from, |c| Flags::of(c).number)
    });
    // `[0-9][0-9][0-9]`
    split_by(chars, words, |p, from| {
        (from..p.len().saturating_sub(2))
            .find(|&i| p[i..i + 3].iter().all(char::is_ascii_digit))
            .map(|i| (i, i + 3))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(kind: PreKind, s: &str) -> Vec<String> {
        split(kind, s)
    }

    #[test]
    fn llama3_splits_like_the_regex() {
        assert_eq!(
            words(PreKind::Llama3, "Hello world, it's 12345 ok!\n\n  x  "),
            [
                "Hello", " world", ",", " it", "'s", " ", "123", "45", " ok", "!\n\n", " ", " x",
                "  "
            ]
        );
        assert_eq!(
            words(PreKind::Llama3, "I'LL  go\r\n\tnow"),
            ["I", "'LL", " ", " go", "\r\n", "\tnow"]
        );
    }

    #[test]
    fn gpt2_and_default() {
        assert_eq!(
            words(PreKind::Gpt2, "it's  12345!!"),
            ["it", "'s", " ", " 12345", "!!"]
        );
        assert_eq!(
            words(PreKind::Default, "a+b 12345 x.y"),
            ["a", "+", "b", " ", "123", "45", " x", ".", "y"]
        );
    }
}
