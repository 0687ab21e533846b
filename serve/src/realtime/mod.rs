//! `GET /v1/realtime`: an OpenAI Realtime-compatible WebSocket. One socket is one
//! conversation, held by the server (its questions and reply artifacts); each response leases
//! a pool session for its turn only.
//!
//! Pieces: [`session_config`] (`session.update`), [`input`] (the input audio buffer),
//! [`turns`] (turn detection: `server_vad`, `semantic_vad`), [`conversation`] (the items, truncation), [`response`] (the turn on
//! a leased session), [`events`] (the server events' shapes and names), [`socket`] (the loop).
//!
//! Names: GA by default; `OpenAI-Beta: realtime=v1` or `?beta=1` selects the beta names of
//! the renamed server events. Client events are read in either shape.

pub mod conversation;
pub mod error;
pub mod events;
pub mod ids;
pub mod input;
pub mod response;
pub mod session_config;
pub mod socket;
pub mod transcription;
pub mod turns;
pub mod typed;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::connect_info::ConnectInfo;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use axum::Extension;

use crate::edges::origin::origin_allowed;
use crate::edges::socket_limits::{client_address, SocketSlot};
use crate::error::ApiError;
use crate::AppState;

/// The largest WebSocket message a client may send, bytes. Above it the socket closes (code
/// 1009); below it an oversized append is refused with an `error` event instead. 32 MiB holds
/// the base64 of the longest question at the default limit with room to spare.
pub const MAX_MESSAGE_BYTES: usize = 32 << 20;

/// Whether the client asked for the beta protocol's event names.
fn wants_beta(headers: &HeaderMap, query: &HashMap<String, String>) -> bool {
    let header = headers
        .get_all("openai-beta")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|p| p.trim() == "realtime=v1"));
    let param = query
        .get("beta")
        .is_some_and(|v| matches!(v.as_str(), "1" | "true" | "v1"));
    header || param
}

/// The edges' checks before an upgrade: the `Origin` allow-list (403), then the socket limits
/// (503 in all, 429 per client). The slot it gives is held for the socket's life.
fn admit(
    state: &Arc<AppState>,
    headers: &HeaderMap,
    peer: Option<SocketAddr>,
) -> Result<Option<SocketSlot>, ApiError> {
    let header = |name| headers.get(name).and_then(|v| v.to_str().ok());
    if !origin_allowed(
        header(header::ORIGIN),
        header(header::HOST),
        &state.settings.allowed_origins,
    ) {
        return Err(ApiError {
            status: StatusCode::FORBIDDEN,
            kind: "permission_error",
            message: format!(
                "origin {} may not open realtime sockets (--allowed-origins)",
                header(header::ORIGIN).unwrap_or_default()
            ),
        });
    }
    let client = client_address(
        peer.map(|p| p.ip()),
        headers,
        state.settings.trust_forwarded,
    );
    // why no slot without an address: a server run without connect info (a router in a test)
    // has none, and then only the total limit could count it; both limits need one.
    match client {
        Some(ip) => Ok(Some(state.sockets.acquire(ip)?)),
        None => Ok(None),
    }
}

/// `GET /v1/realtime?model=ID`: upgrades to the Realtime WebSocket on the speech-to-speech
/// model `ID` (the first served one when absent; 404 for an unknown id).
pub async fn realtime(
    State(state): State<Arc<AppState>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let slot = admit(&state, &headers, peer.map(|Extension(ConnectInfo(a))| a))?;
    let entry = state.entry_for(query.get("model").map(String::as_str), "s2s")?;
    if entry.cfg.task != "s2s" {
        return Err(ApiError::invalid(format!(
            "model `{}` serves {}: the realtime socket needs a speech-to-speech model",
            entry.cfg.id, entry.cfg.task
        )));
    }
    let beta = wants_beta(&headers, &query);
    // why a subprotocol: a browser that offers some (OpenAI's clients offer `realtime` beside
    // `openai-insecure-api-key.<secret>`) fails the socket unless the server picks one.
    Ok(ws
        .protocols(["realtime"])
        .max_message_size(MAX_MESSAGE_BYTES)
        .max_frame_size(MAX_MESSAGE_BYTES)
        .on_upgrade(move |ws| async move {
            let socket = socket::Socket::new(state, entry, beta);
            let span = tracing::info_span!("realtime", conversation_id = %socket.session_id());
            let model = socket.model_id().to_owned();
            let run = async move {
                tracing::info!(model, "socket opened");
                socket.run(ws).await;
                tracing::info!("socket closed");
            };
            tracing::Instrument::instrument(run, span).await;
            // why after the loop: the slot is the socket's place until it has closed.
            drop(slot);
        }))
}
