//! The log subscriber: text or JSON lines on stderr, filtered by `RUST_LOG` (default `info`).
//! HTTP requests log inside a `request` span (`request_id`) and Realtime sockets inside a
//! `realtime` span (`conversation_id`), so every line of one names it.

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the global subscriber (a second call does nothing).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        // why the current span and not the list: one `span` object with the id is what a log
        // pipeline indexes; the list repeats it on nested spans.
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
    };
}

/// The request id of an HTTP request: the client's `X-Request-Id` when it is short printable
/// ASCII (so a proxy's id carries through), else a fresh one.
pub fn request_id(header: Option<&str>) -> String {
    match header {
        Some(h) if !h.is_empty() && h.len() <= 128 && h.bytes().all(|b| b.is_ascii_graphic()) => {
            h.to_owned()
        }
        _ => crate::realtime::ids::fresh("req"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sane_client_id_is_kept_others_replaced() {
        assert_eq!(request_id(Some("abc-123")), "abc-123");
        assert!(request_id(Some("has space")).starts_with("req_"));
        assert!(request_id(Some(&"x".repeat(129))).starts_with("req_"));
        assert!(request_id(None).starts_with("req_"));
    }
}
