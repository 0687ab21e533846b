//! The Realtime socket's `Origin` check.
//!
//! why: CORS does not apply to WebSockets, so without this any web page a user visits could
//! open a socket to a server on their network (and spend its sessions). Requests without
//! `Origin` come from non-browser clients, which can send any header anyway: they pass.

/// Whether a socket upgrade with `origin` (the `Origin` header) and `host` (the `Host`
/// header) may proceed under the allow-list `allowed` (`*` for any origin).
///
/// Allowed: no `Origin`; an origin whose `host[:port]` is the request's `Host` (the server's
/// own pages, also through a proxy that keeps `Host`); an origin in the list (compared without
/// case and a trailing `/`).
pub fn origin_allowed(origin: Option<&str>, host: Option<&str>, allowed: &[String]) -> bool {
    let Some(origin) = origin.map(|o| o.trim().trim_end_matches('/')) else {
        return true;
    };
    if allowed.iter().any(|a| a.trim() == "*") {
        return true;
    }
    let same_origin =
        host.is_some_and(|h| authority(origin).is_some_and(|a| a.eq_ignore_ascii_case(h.trim())));
    same_origin
        || allowed
            .iter()
            .any(|a| a.trim().trim_end_matches('/').eq_ignore_ascii_case(origin))
}

/// The `host[:port]` of an `http(s)://` origin.
fn authority(origin: &str) -> Option<&str> {
    let (scheme, rest) = origin.split_once("://")?;
    (scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")).then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn no_origin_and_same_origin_pass_by_default() {
        assert!(origin_allowed(None, Some("127.0.0.1:8080"), &[]));
        assert!(origin_allowed(
            Some("http://127.0.0.1:8080"),
            Some("127.0.0.1:8080"),
            &[]
        ));
        assert!(!origin_allowed(
            Some("http://127.0.0.1:9999"),
            Some("127.0.0.1:8080"),
            &[]
        ));
        assert!(!origin_allowed(Some("https://evil.example"), None, &[]));
        assert!(!origin_allowed(Some("null"), Some("127.0.0.1:8080"), &[]));
    }

    #[test]
    fn the_list_and_the_wildcard_allow_others() {
        let l = list(&["https://app.example.com/", "http://localhost:3000"]);
        assert!(origin_allowed(
            Some("https://APP.example.com"),
            Some("x"),
            &l
        ));
        assert!(origin_allowed(Some("http://localhost:3000"), Some("x"), &l));
        assert!(!origin_allowed(
            Some("http://localhost:3001"),
            Some("x"),
            &l
        ));
        assert!(origin_allowed(
            Some("https://any.example"),
            Some("x"),
            &list(&["*"])
        ));
    }
}
