//! GPT-2 byte-level encoding and merge-rank BPE over one pre-tokenized word.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::OnceLock;

/// GPT-2's reversible byte <-> printable-character map.
pub(super) struct ByteMap {
    to_char: [char; 256],
    to_byte: HashMap<char, u8>,
}

impl ByteMap {
    /// The process-wide map.
    pub fn get() -> &'static ByteMap {
        static MAP: OnceLock<ByteMap> = OnceLock::new();
        MAP.get_or_init(|| {
            // Printable Latin-1 bytes stand for themselves; the others (controls, space, DEL,
            // NBSP, soft hyphen, ...) take the code points from U+0100 on, in byte order.
            let keeps =
                |b: u32| (0x21..=0x7e).contains(&b) || (0xa1..=0xac).contains(&b) || b >= 0xae;
            let mut to_char = ['\0'; 256];
            let mut next = 0x100u32;
            for b in 0..256u32 {
                let cp = if keeps(b) {
                    b
                } else {
                    next += 1;
                    next - 1
                };
                to_char[b as usize] = char::from_u32(cp).unwrap_or('\u{fffd}');
            }
            let to_byte = (0..=255u8).map(|b| (to_char[b as usize], b)).collect();
            ByteMap { to_char, to_byte }
        })
    }

    /// The printable character standing for `b`.
    pub fn char_of(&self, b: u8) -> char {
        self.to_char[b as usize]
    }

    /// The byte a printable character stands for, if it is one of the 256.
    pub fn byte_of(&self, c: char) -> Option<u8> {
        self.to_byte.get(&c).copied()
    }

    /// `text`'s UTF-8 bytes, each replaced by its character.
    pub fn encode(&self, text: &str) -> String {
        text.bytes().map(|b| self.char_of(b)).collect()
    }
}

/// Merge ranks, keyed by interned symbol strings so that look-ups do not allocate.
#[derive(Default)]
pub(super) struct Merges {
    pieces: HashMap<Box<str>, u32>,
    ranks: HashMap<(u32, u32), u32>,
}

impl Merges {
    /// Builds the table from `tokenizer.ggml.merges` (`"left right"`, rank = index).
    ///
    /// Like llama.cpp: the split is at the first space from the second byte on, an entry without
    /// one is ignored, and a repeated pair keeps its first (lowest) rank.
    pub fn new(merges: &[String]) -> Merges {
        let mut m = Merges::default();
        for (rank, entry) in merges.iter().enumerate() {
            let bytes = entry.as_bytes();
            let Some(sp) = bytes.iter().skip(1).position(|&b| b == b' ').map(|p| p + 1) else {
                continue;
            };
            // Splitting at an ASCII space keeps both halves valid UTF-8.
            let (left, right) = (&entry[..sp], &entry[sp + 1..]);
            let a = m.intern(left);
            let b = m.intern(right);
            m.ranks.entry((a, b)).or_insert(rank as u32);
        }
        m
    }

    fn intern(&mut self, s: &str) -> u32 {
        let n = self.pieces.len() as u32;
        *self.pieces.entry(s.into()).or_insert(n)
    }

    /// The number of merge entries with a usable pair.
    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    fn rank(&self, left: &str, right: &str) -> Option<u32> {
        let a = self.pieces.get(left)?;
        let b = self.pieces.get(right)?;
        self.ranks.get(&(*a, *b)).copied()
    }

    /// Merges the characters of one byte-encoded `word` by rank and returns the final symbols
    /// as byte ranges of `word`, in order.
    ///
    /// The lowest rank merges first; among equal ranks the leftmost pair goes first. Candidate
    /// pairs go in a heap and are dropped when popped if either side has changed since, which
    /// gives the same order as rescanning the word after every merge.
    pub fn apply(&self, word: &str) -> Vec<(usize, usize)> {
        struct Sym {
            start: usize,
            len: usize,
            prev: Option<usize>,
            next: Option<usize>,
        }
        let mut syms: Vec<Sym> = Vec::with_capacity(word.len());
        for (i, (start, c)) in word.char_indices().enumerate() {
            syms.push(Sym {
                start,
                len: c.len_utf8(),
                prev: i.checked_sub(1),
                next: None,
            });
            if i > 0 {
                syms[i - 1].next = Some(i);
            }
        }
        // (rank, left, right, left_len, right_len)
        type Cand = Reverse<(u32, usize, usize, usize, usize)>;
        let mut heap: BinaryHeap<Cand> = BinaryHeap::new();
        let text = |s: &Sym| &word[s.start..s.start + s.len];
        let push =
            |heap: &mut BinaryHeap<Cand>, syms: &[Sym], l: Option<usize>, r: Option<usize>| {
                let (Some(l), Some(r)) = (l, r) else { return };
                if let Some(rank) = self.rank(text(&syms[l]), text(&syms[r])) {
                    heap.push(Reverse((rank, l, r, syms[l].len, syms[r].len)));
                }
            };
        for i in 1..syms.len() {
            push(&mut heap, &syms, Some(i - 1), Some(i));
        }
        while let Some(Reverse((_, l, r, llen, rlen))) = heap.pop() {
            if syms[l].len == 0 || syms[r].len == 0 || syms[l].len != llen || syms[r].len != rlen {
                continue;
            }
            syms[l].len += syms[r].len;
            syms[r].len = 0;
            let after = syms[r].next;
            syms[l].next = after;
            if let Some(a) = after {
                syms[a].prev = Some(l);
            }
            let before = syms[l].prev;
            push(&mut heap, &syms, before, Some(l));
            push(&mut heap, &syms, Some(l), after);
        }
        syms.iter()
            .filter(|s| s.len > 0)
            .map(|s| (s.start, s.start + s.len))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_is_gpt2s() {
        let m = ByteMap::get();
        assert_eq!(m.char_of(b' '), 'Ġ');
        assert_eq!(m.char_of(b'\n'), 'Ċ');
        assert_eq!(m.char_of(b'a'), 'a');
        assert_eq!(m.char_of(0), 'Ā');
        assert_eq!(m.char_of(0xa0), 'ł');
        assert_eq!(m.char_of(0xad), 'Ń');
        for b in 0..=255u8 {
            assert_eq!(m.byte_of(m.char_of(b)), Some(b));
        }
    }

    #[test]
    fn merges_apply_by_rank_then_leftmost() {
        let merges: Vec<String> = ["a a", "b c", "aa a", "x"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let m = Merges::new(&merges);
        assert_eq!(m.len(), 3);
        let parts = |w: &str| -> Vec<String> {
            m.apply(w)
                .into_iter()
                .map(|(s, e)| w[s..e].to_string())
                .collect()
        };
        assert_eq!(parts("aaaa"), ["aa", "aa"]);
        assert_eq!(parts("abca"), ["a", "bc", "a"]);
        assert_eq!(parts(""), Vec::<String>::new());
    }
}
