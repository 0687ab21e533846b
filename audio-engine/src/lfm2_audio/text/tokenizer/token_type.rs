//! A token's type as the file stores it, and the attribute bits llama.cpp derives from it,
//! which decide how a token splits out of text and what it decodes to.

/// A token's type as stored in `tokenizer.ggml.token_type` (llama.cpp's `llama_token_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenType {
    /// 0, or any value outside 1..=6.
    Undefined,
    /// 1: an ordinary byte-level BPE token.
    Normal,
    /// 2: the unknown token.
    Unknown,
    /// 3: a control token (`<|im_end|>`, ...).
    Control,
    /// 4: a user-defined token, split out of text even when special tokens are not parsed.
    UserDefined,
    /// 5: an unused slot.
    Unused,
    /// 6: a byte token written `<0xXX>`.
    Byte,
}

impl TokenType {
    pub(super) fn from_raw(v: i64) -> TokenType {
        match v {
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Undefined,
        }
    }
}

// llama.cpp's token attribute bits (`llama_token_attr`); a token may gain bits at load time.
pub(super) const ATTR_UNKNOWN: u32 = 1 << 0;
pub(super) const ATTR_UNUSED: u32 = 1 << 1;
pub(super) const ATTR_NORMAL: u32 = 1 << 2;
pub(super) const ATTR_CONTROL: u32 = 1 << 3;
pub(super) const ATTR_USER_DEFINED: u32 = 1 << 4;
pub(super) const ATTR_BYTE: u32 = 1 << 5;

pub(super) fn attr_of(t: TokenType) -> u32 {
    match t {
        TokenType::Undefined => 0,
        TokenType::Normal => ATTR_NORMAL,
        TokenType::Unknown => ATTR_UNKNOWN,
        TokenType::Control => ATTR_CONTROL,
        TokenType::UserDefined => ATTR_USER_DEFINED,
        TokenType::Unused => ATTR_UNUSED,
        TokenType::Byte => ATTR_BYTE,
    }
}
