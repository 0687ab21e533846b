//! The error envelope: `{"error":{"message":"...","type":"..."}}` with the status codes of
//! audio.cpp's server (400 invalid request and capacity, 404 unknown model or route, 413 body
//! too large, 503 busy or out of memory, 500 anything else).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use audio_engine::lfm2_audio::EngineError;

/// An error answered as the JSON envelope.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The envelope's `type`.
    pub kind: &'static str,
    /// The envelope's `message`.
    pub message: String,
}

impl ApiError {
    /// 400 `invalid_request_error`.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            kind: "invalid_request_error",
            message: message.into(),
        }
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            kind: "not_found",
            message: message.into(),
        }
    }

    /// 503 `server_busy`.
    pub fn busy(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            kind: "server_busy",
            message: message.into(),
        }
    }

    /// 500 `server_error`.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            kind: "server_error",
            message: message.into(),
        }
    }

    /// 401 `authentication_error`.
    pub fn unauthorized() -> ApiError {
        ApiError {
            status: StatusCode::UNAUTHORIZED,
            kind: "authentication_error",
            message: "missing or wrong API key (Authorization: Bearer KEY)".into(),
        }
    }

    /// An error with any status (413 from the body limit, 415, ...).
    pub fn with_status(status: StatusCode, message: impl Into<String>) -> ApiError {
        let kind = match status.as_u16() {
            413 => "request_too_large",
            400..=499 => "invalid_request_error",
            503 => "server_busy",
            _ => "server_error",
        };
        ApiError {
            status,
            kind,
            message: message.into(),
        }
    }

    /// The envelope as a JSON value (also the body of an SSE `error` event).
    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"message": self.message, "type": self.kind}})
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.kind,
            self.message
        )
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> ApiError {
        // why: a request too big for the context is the caller's to shrink, as audio.cpp's
        // CapacityError is.
        if e.is_invalid_request() || e.is_capacity() {
            ApiError::invalid(e.chain())
        } else if e.is_out_of_memory() {
            // why: nothing of the request is kept and the model stays usable, so this is the
            // server's momentary state, for the client to retry, not an engine fault.
            ApiError::busy(e.chain())
        } else {
            ApiError::internal(e.chain())
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}
