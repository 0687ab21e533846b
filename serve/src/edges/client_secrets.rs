//! Ephemeral client secrets (`POST /v1/realtime/client_secrets`): short-lived keys that open
//! one Realtime socket, for browsers, which cannot set `Authorization` on a WebSocket.
//!
//! An app's backend, holding the API key, asks for a secret and hands it to its page; the page
//! offers it as the WebSocket subprotocol `openai-insecure-api-key.<secret>` (as OpenAI's
//! browser clients do) or as `Authorization: Bearer <secret>`. A secret opens one socket
//! (it is spent at the upgrade), only `/v1/realtime` (any other route answers 401), and only
//! until it expires.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::http::HeaderMap;

/// The prefix of every secret (OpenAI's ephemeral keys start with it too).
pub const SECRET_PREFIX: &str = "ek_";
/// The WebSocket subprotocol prefix that carries a key from a browser.
pub const SUBPROTOCOL_PREFIX: &str = "openai-insecure-api-key.";
/// A secret's life when the request names none, seconds (OpenAI's default).
pub const DEFAULT_TTL_SECONDS: u64 = 600;
/// The longest life a secret may ask for, seconds (OpenAI's bound).
pub const MAX_TTL_SECONDS: u64 = 7200;
/// Most secrets outstanding; past it the oldest are dropped first.
///
/// why a bound: each is a few bytes, but a caller with the key could ask without end.
pub const MAX_OUTSTANDING: usize = 10_000;

/// Why a secret did not open a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretError {
    /// Never issued, or already spent.
    Unknown,
    /// Issued, but past its expiry.
    Expired,
}

/// One issued secret.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The secret itself.
    pub value: String,
    /// When it expires, seconds since the Unix epoch.
    pub expires_at: u64,
}

/// The outstanding secrets and when each expires.
#[derive(Default)]
pub struct ClientSecrets {
    outstanding: Mutex<HashMap<String, Instant>>,
}

impl ClientSecrets {
    /// A fresh secret valid for `ttl`; `None` only when the system has no randomness.
    pub fn issue(&self, ttl: Duration) -> Option<Issued> {
        let mut bytes = [0u8; 24];
        getrandom::fill(&mut bytes).ok()?;
        let value = format!(
            "{SECRET_PREFIX}{}",
            bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
        );
        let now = Instant::now();
        let mut map = self.outstanding.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, until| *until > now);
        if map.len() >= MAX_OUTSTANDING {
            if let Some(oldest) = map.iter().min_by_key(|(_, u)| **u).map(|(k, _)| k.clone()) {
                map.remove(&oldest);
            }
        }
        map.insert(value.clone(), now + ttl);
        let expires_at = (SystemTime::now() + ttl)
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Some(Issued { value, expires_at })
    }

    /// Spends `secret`: `Ok` once while it is valid.
    pub fn redeem(&self, secret: &str) -> Result<(), SecretError> {
        let mut map = self.outstanding.lock().unwrap_or_else(|e| e.into_inner());
        match map.remove(secret) {
            Some(until) if until > Instant::now() => Ok(()),
            Some(_) => Err(SecretError::Expired),
            None => Err(SecretError::Unknown),
        }
    }
}

/// The secret a socket upgrade offers: `Authorization: Bearer ek_...`, else the subprotocol
/// `openai-insecure-api-key.ek_...`.
pub fn offered_secret(headers: &HeaderMap) -> Option<String> {
    let bearer = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|v| v.starts_with(SECRET_PREFIX));
    if let Some(b) = bearer {
        return Some(b.to_owned());
    }
    headers
        .get_all(axum::http::header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|p| p.trim().strip_prefix(SUBPROTOCOL_PREFIX))
        .find(|s| s.starts_with(SECRET_PREFIX))
        .map(str::to_owned)
}

/// Whether `headers` offer a valid secret, which is then spent.
pub fn admits(secrets: &ClientSecrets, headers: &HeaderMap) -> bool {
    offered_secret(headers).is_some_and(|s| secrets.redeem(&s).is_ok())
}

/// The life a `POST /v1/realtime/client_secrets` body asks for: `expires_after.seconds`
/// (1 to [`MAX_TTL_SECONDS`], anchored at `created_at`), else [`DEFAULT_TTL_SECONDS`].
pub fn requested_ttl(body: &serde_json::Value) -> Result<Duration, crate::error::ApiError> {
    use crate::error::ApiError;
    let Some(after) = body.get("expires_after") else {
        return Ok(Duration::from_secs(DEFAULT_TTL_SECONDS));
    };
    if let Some(anchor) = after.get("anchor") {
        if anchor != "created_at" {
            return Err(ApiError::invalid(
                "expires_after.anchor: only \"created_at\" is supported",
            ));
        }
    }
    let seconds = match after.get("seconds") {
        None => DEFAULT_TTL_SECONDS,
        Some(v) => v
            .as_u64()
            .filter(|s| (1..=MAX_TTL_SECONDS).contains(s))
            .ok_or_else(|| {
                ApiError::invalid(format!(
                    "expires_after.seconds: an integer from 1 to {MAX_TTL_SECONDS}"
                ))
            })?,
    };
    Ok(Duration::from_secs(seconds))
}

/// `POST /v1/realtime/client_secrets` (behind the API key): a secret for one Realtime socket,
/// in OpenAI's shape `{"value", "expires_at", "session": {"type", "model"}}`.
pub async fn create(
    axum::extract::State(state): axum::extract::State<std::sync::Arc<crate::AppState>>,
    body: axum::body::Bytes,
) -> Result<axum::Json<serde_json::Value>, crate::error::ApiError> {
    use crate::error::ApiError;
    let body: serde_json::Value = if body.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::invalid(format!("the body is not JSON: {e}")))?
    };
    let ttl = requested_ttl(&body)?;
    let asked = body
        .pointer("/session/model")
        .and_then(serde_json::Value::as_str);
    let entry = state.entry_for(asked, "s2s")?;
    let issued = state
        .client_secrets
        .issue(ttl)
        .ok_or_else(|| ApiError::internal("the system has no randomness for a secret"))?;
    Ok(axum::Json(serde_json::json!({
        "value": issued.value,
        "expires_at": issued.expires_at,
        "session": {"type": "realtime", "model": entry.cfg.id},
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_opens_once_and_not_after_it_expires() {
        let s = ClientSecrets::default();
        let a = s.issue(Duration::from_secs(60)).unwrap();
        let b = s.issue(Duration::from_secs(60)).unwrap();
        assert_ne!(a.value, b.value);
        assert!(a.value.starts_with(SECRET_PREFIX) && a.value.len() == 3 + 48);
        assert_eq!(s.redeem(&a.value), Ok(()));
        assert_eq!(s.redeem(&a.value), Err(SecretError::Unknown));
        let gone = s.issue(Duration::ZERO).unwrap();
        assert_eq!(s.redeem(&gone.value), Err(SecretError::Expired));
        assert_eq!(s.redeem("ek_nope"), Err(SecretError::Unknown));
        assert_eq!(s.redeem(&b.value), Ok(()));
    }

    #[test]
    fn the_secret_comes_from_the_bearer_or_the_subprotocol() {
        let mut h = HeaderMap::new();
        h.insert(
            "sec-websocket-protocol",
            "realtime, openai-insecure-api-key.ek_abc".parse().unwrap(),
        );
        assert_eq!(offered_secret(&h).as_deref(), Some("ek_abc"));
        h.insert("authorization", "Bearer ek_def".parse().unwrap());
        assert_eq!(offered_secret(&h).as_deref(), Some("ek_def"));
        let mut k = HeaderMap::new();
        k.insert("authorization", "Bearer the-api-key".parse().unwrap());
        assert_eq!(offered_secret(&k), None);
    }
}
