//! Waiting for a whole reply: the non-streamed routes drop the events and take the outcome.

use tokio::sync::mpsc::Receiver;

use crate::error::ApiError;
use crate::work::{Finished, Msg};

/// The finished job on `rx`, its events dropped.
pub(super) async fn collect(mut rx: Receiver<Msg>) -> Result<Finished, ApiError> {
    while let Some(msg) = rx.recv().await {
        if let Msg::Done(r) = msg {
            return Ok(*r?);
        }
    }
    Err(ApiError::internal(
        "the engine worker ended without a result",
    ))
}
