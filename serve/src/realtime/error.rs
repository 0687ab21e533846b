//! A bad client event: answered with the API's `error` event, the socket stays open.

use serde_json::{json, Value};

use super::ids;

/// Why a client event was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventError {
    /// The API's `error.type` (`invalid_request_error`, or `server_error` for the engine's
    /// own failures).
    pub kind: &'static str,
    /// A stable code for programs (`unknown_event`, `invalid_base64`, ...).
    pub code: &'static str,
    /// What was wrong, for people.
    pub message: String,
    /// The field at fault, when one is.
    pub param: Option<String>,
}

impl EventError {
    /// An `invalid_request_error` with `code`.
    pub fn invalid(code: &'static str, message: impl Into<String>) -> EventError {
        EventError {
            kind: "invalid_request_error",
            code,
            message: message.into(),
            param: None,
        }
    }

    /// The same error naming its field.
    pub fn at(mut self, param: impl Into<String>) -> EventError {
        self.param = Some(param.into());
        self
    }

    /// The `error` event answering the client event `client_event_id` (when it had one).
    pub fn event(&self, client_event_id: Option<&str>) -> Value {
        json!({
            "type": "error",
            "event_id": ids::fresh("event"),
            "error": {
                "type": self.kind,
                "code": self.code,
                "message": self.message,
                "param": self.param,
                "event_id": client_event_id,
            }
        })
    }
}

impl std::fmt::Display for EventError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.kind, self.message)
    }
}

impl std::error::Error for EventError {}
