//! The step every route shares between its request and its reply: lease a session of the
//! model and start the job on it.

use std::sync::Arc;

use crate::error::ApiError;
use crate::work::{self, Msg};
use crate::{AppState, Entry};

use super::prepare::Prepared;

/// Leases a session of `entry` and starts `job` on it.
pub async fn start(
    state: &Arc<AppState>,
    entry: &Entry,
    p: Prepared,
    busy_timeout_ms: Option<u64>,
) -> Result<tokio::sync::mpsc::Receiver<Msg>, ApiError> {
    let lease = entry
        .pool
        .acquire(p.key, state.busy_timeout(busy_timeout_ms))
        .await?;
    Ok(work::spawn(lease, p.job, state.stop.clone(), 64))
}
