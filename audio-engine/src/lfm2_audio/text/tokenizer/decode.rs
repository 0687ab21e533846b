//! Token ids to bytes and text (llama.cpp's `token_to_piece` with `special = true`).

use super::{Result, Tokenizer};

impl Tokenizer {
    /// The bytes a token stands for: special tokens give their text, normal tokens their
    /// byte-decoded text, unused ones nothing (llama.cpp's `token_to_piece`, `special = true`).
    /// A piece may end inside a UTF-8 character; streaming callers accumulate bytes.
    pub fn token_bytes(&self, id: u32) -> Result<&[u8]> {
        Ok(&self.pieces[self.check(id)?])
    }

    /// The concatenated bytes of `ids`.
    pub fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        for &id in ids {
            out.extend_from_slice(self.token_bytes(id)?);
        }
        Ok(out)
    }

    /// The text of `ids`: their bytes as UTF-8, invalid sequences replaced by U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        Ok(String::from_utf8_lossy(&self.decode_bytes(ids)?).into_owned())
    }
}
