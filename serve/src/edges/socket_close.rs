//! When the server closes a Realtime socket on its own: the drain after SIGTERM, and
//! `--idle-timeout-ms`. The socket loop asks [`server_close`] on its tick.
//!
//! Close codes a client can act on: 1001 (going away) while draining, to reconnect to another
//! replica; 4408 (the 4xxx range is the application's; 408 as HTTP's Request Timeout) when
//! idle, for a client that wants the conversation to reopen it when it speaks again.

use std::time::Duration;

use axum::extract::ws::CloseFrame;

use crate::AppState;

/// The close code of an idle socket.
pub const IDLE_CLOSE_CODE: u16 = 4408;
/// The close code of a socket closed by the drain (RFC 6455's "going away").
pub const DRAIN_CLOSE_CODE: u16 = 1001;

/// Why the server closes a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerClose {
    /// The server drains; the socket had no running turn.
    Draining,
    /// No client event and no running turn for `ms`.
    Idle { ms: u64 },
}

impl ServerClose {
    /// The close frame sent to the client.
    pub fn frame(self) -> CloseFrame {
        let (code, reason) = match self {
            ServerClose::Draining => (
                DRAIN_CLOSE_CODE,
                "server shutting down: reconnect to continue".to_owned(),
            ),
            ServerClose::Idle { ms } => (
                IDLE_CLOSE_CODE,
                format!("idle timeout: no client event for {ms} ms"),
            ),
        };
        CloseFrame {
            code,
            reason: reason.into(),
        }
    }
}

/// Whether a socket idle for `idle` (since its last client event or running turn) and `busy`
/// (a turn runs or waits) is to be closed now.
///
/// why never while busy: a running turn finishes, whether the server drains or the client only
/// listens to a long reply.
pub fn server_close(state: &AppState, idle: Duration, busy: bool) -> Option<ServerClose> {
    if busy {
        return None;
    }
    if state.drain.is_draining() {
        return Some(ServerClose::Draining);
    }
    let ms = state.settings.idle_timeout_ms;
    (ms > 0 && idle >= Duration::from_millis(ms)).then_some(ServerClose::Idle { ms })
}

/// How long a socket waits for the client's close frame after sending its own.
pub const CLOSE_REPLY_WAIT: Duration = Duration::from_secs(1);

/// Reads (and drops) what the client still sends until its close reply, for at most
/// [`CLOSE_REPLY_WAIT`].
///
/// why: the closing handshake. A socket dropped right after its close frame, with the process
/// exiting (the drain), resets the connection, and a reset can discard the close frame before
/// the client reads it: the client would see a reset instead of 1001 and its reason.
pub async fn await_close_reply(ws: &mut axum::extract::ws::WebSocket) {
    use axum::extract::ws::Message;
    let _ = tokio::time::timeout(CLOSE_REPLY_WAIT, async {
        while let Some(Ok(m)) = ws.recv().await {
            if matches!(m, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
}
