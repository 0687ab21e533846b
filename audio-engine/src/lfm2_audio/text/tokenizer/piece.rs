//! A token's decoded bytes, computed once at load time: special tokens give their text, normal
//! tokens their byte-decoded text, byte tokens the byte their `<0xXX>` names.

use super::bpe::ByteMap;
use super::token_type::{ATTR_BYTE, ATTR_CONTROL, ATTR_NORMAL, ATTR_UNKNOWN, ATTR_USER_DEFINED};

/// A token's decoded bytes; `None` for a byte token whose text is too short to hold `<0xXX>`
/// (llama.cpp fails to load such a vocabulary).
pub(super) fn piece(map: &ByteMap, text: &str, attr: u32) -> Option<Box<[u8]>> {
    if attr & (ATTR_UNKNOWN | ATTR_CONTROL | ATTR_USER_DEFINED) != 0 {
        return Some(text.as_bytes().into());
    }
    if attr & ATTR_NORMAL != 0 {
        let mut out = Vec::with_capacity(text.len());
        for c in text.chars() {
            match map.byte_of(c) {
                Some(b) => out.push(b),
                None => {
                    // llama.cpp's marker for a character outside the byte map.
                    out.extend_from_slice(b"[UNK_BYTE_0x");
                    let mut buf = [0u8; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        out.extend_from_slice(format!("{b:02x}").as_bytes());
                    }
                    out.extend_from_slice(text.as_bytes());
                    out.push(b']');
                }
            }
        }
        return Some(out.into());
    }
    if attr & ATTR_BYTE != 0 {
        let b = text.as_bytes();
        if b.len() < 3 {
            return None;
        }
        return Some(vec![strtol_hex(&b[3..b.len().min(5)])].into());
    }
    Some(Box::default())
}

/// C's `strtol(s, NULL, 16)` truncated to a byte, as llama.cpp reads `<0xXX>`.
fn strtol_hex(s: &[u8]) -> u8 {
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    let neg = s.get(i) == Some(&b'-');
    if matches!(s.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    if s.get(i) == Some(&b'0')
        && matches!(s.get(i + 1), Some(b'x' | b'X'))
        && s.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
    {
        i += 2;
    }
    let mut v: i64 = 0;
    while let Some(d) = s.get(i).and_then(|&c| (c as char).to_digit(16)) {
        v = v * 16 + d as i64;
        i += 1;
    }
    (if neg { -v } else { v }) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtol_reads_like_c() {
        assert_eq!(strtol_hex(b"0A"), 0x0a);
        assert_eq!(strtol_hex(b"ff"), 0xff);
        assert_eq!(strtol_hex(b"G1"), 0);
        assert_eq!(strtol_hex(b"-1"), 0xff);
        assert_eq!(strtol_hex(b" 5"), 5);
        assert_eq!(strtol_hex(b""), 0);
    }
}
