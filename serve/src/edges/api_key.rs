//! The API key check, in constant time.

use subtle::ConstantTimeEq;

/// Whether the `Authorization` header value `header` is `Bearer KEY` for `key`.
///
/// why constant time: a byte-by-byte `==` returns at the first difference, so its timing tells
/// an attacker how many leading bytes of a guess are right. `subtle` compares every byte; only
/// the length can still show (a key's length is no secret worth the complexity of hiding it).
pub fn bearer_matches(header: Option<&str>, key: &str) -> bool {
    let Some(given) = header.and_then(|v| v.strip_prefix("Bearer ")) else {
        return false;
    };
    given.trim().as_bytes().ct_eq(key.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_key_after_bearer_matches() {
        assert!(bearer_matches(Some("Bearer s3cret"), "s3cret"));
        assert!(bearer_matches(Some("Bearer s3cret "), "s3cret"));
        assert!(!bearer_matches(Some("Bearer s3cre"), "s3cret"));
        assert!(!bearer_matches(Some("Bearer s3cretx"), "s3cret"));
        assert!(!bearer_matches(Some("Bearer S3cret"), "s3cret"));
        assert!(!bearer_matches(Some("s3cret"), "s3cret"));
        assert!(!bearer_matches(Some("Basic s3cret"), "s3cret"));
        assert!(!bearer_matches(None, "s3cret"));
    }
}
