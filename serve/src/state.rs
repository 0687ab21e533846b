//! What every handler shares: the served models (each with its pool of sessions), the metrics,
//! the stream slots and the shutdown flag, and how they are built from the settings.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use audio_engine::lfm2_audio::{Lfm2Audio, SessionOptions};

use crate::config::{ModelEntry, Settings};
use crate::edges::client_secrets::ClientSecrets;
use crate::edges::readiness::Drain;
use crate::edges::socket_limits::SocketLimits;
use crate::error::ApiError;
use crate::load::load_model;
use crate::metrics::Metrics;
use crate::pool::Pool;

/// One served model id.
#[derive(Clone)]
pub struct Entry {
    pub cfg: ModelEntry,
    pub pool: Arc<Pool>,
    pub language: String,
    pub path: String,
}

/// What every handler shares.
pub struct AppState {
    pub settings: Settings,
    pub entries: Vec<Entry>,
    pub metrics: Metrics,
    pub streams: Arc<Semaphore>,
    /// Set when the shutdown deadline passed: every generation stops at its next event.
    pub stop: Arc<AtomicBool>,
    /// The canonical `--audio-dir`.
    pub audio_dir: Option<PathBuf>,
    pub backend: String,
    /// Realtime `semantic_vad`'s end-of-turn model, loaded once (`None`: its weights are not
    /// installed, and semantic_vad is a silence timer).
    pub end_of_turn: Option<Arc<voice_activity::SmartTurn>>,
    /// The open Realtime sockets, counted against `--max-sockets[-per-client]`.
    pub sockets: Arc<SocketLimits>,
    /// Set on SIGTERM/SIGINT: readiness fails, new sockets and requests are refused, idle
    /// sockets close.
    pub drain: Drain,
    /// Ephemeral client secrets for Realtime sockets (`POST /v1/realtime/client_secrets`).
    pub client_secrets: ClientSecrets,
}

impl AppState {
    /// The entry of a model id (404 otherwise).
    pub fn entry(&self, id: &str) -> Result<Entry, ApiError> {
        self.entries
            .iter()
            .find(|e| e.cfg.id == id)
            .cloned()
            .ok_or_else(|| ApiError::not_found(format!("unknown model id: {id}")))
    }

    /// The entry for a task: `id` when given (404 if unknown), else the first of that task.
    pub fn entry_for(&self, id: Option<&str>, task: &str) -> Result<Entry, ApiError> {
        match id.filter(|s| !s.is_empty()) {
            Some(id) => self.entry(id),
            None => self
                .entries
                .iter()
                .find(|e| e.cfg.task == task)
                .cloned()
                .ok_or_else(|| ApiError::not_found(format!("no {task} model is served"))),
        }
    }

    /// The effective wait for a session: min(request, server); 0 is unbounded.
    pub fn busy_timeout(&self, request_ms: Option<u64>) -> Option<Duration> {
        let server = self.settings.busy_timeout_ms;
        let ms = match (request_ms.filter(|&m| m > 0), server) {
            (Some(r), 0) => r,
            (Some(r), s) => r.min(s),
            (None, 0) => return None,
            (None, s) => s,
        };
        Some(Duration::from_millis(ms))
    }

    /// A slot among the concurrent streams (503 when all are taken).
    pub fn stream_permit(&self) -> Result<tokio::sync::OwnedSemaphorePermit, ApiError> {
        self.streams.clone().try_acquire_owned().map_err(|_| {
            ApiError::busy(format!(
                "{} streams are running, the server's limit",
                self.settings.max_streams
            ))
        })
    }
}

/// Builds the shared state; `preloaded` (when given) serves every entry instead of loading.
pub fn build_state(settings: Settings, preloaded: Option<Lfm2Audio>) -> anyhow::Result<AppState> {
    let mut loaded: HashMap<Option<PathBuf>, Arc<Pool>> = HashMap::new();
    let session_opts = SessionOptions {
        prefill_slots: settings.prefill_slots,
        kept_questions: settings.kept_questions,
        ..SessionOptions::default()
    };
    let mut entries = Vec::new();
    let mut backend = "cpu".to_owned();
    for m in &settings.models {
        if entries.iter().any(|e: &Entry| e.cfg.id == m.id) {
            anyhow::bail!("model id `{}` is configured twice", m.id);
        }
        let key = m.path.clone();
        let pool = match loaded.get(&key) {
            Some(p) => p.clone(),
            None => {
                let model = match &preloaded {
                    Some(p) => p.clone(),
                    None => {
                        tracing::info!(model = %m.id, path = ?m.path, "loading");
                        load_model(m.path.as_deref(), &settings)?
                    }
                };
                tracing::info!("{}", model.description());
                if let Some(b) = model
                    .description()
                    .split(" on ")
                    .nth(1)
                    .and_then(|r| r.split(',').next())
                {
                    backend = b.to_ascii_lowercase();
                }
                let pool = Arc::new(Pool::new(
                    model,
                    session_opts,
                    settings.slots,
                    settings.max_queue,
                ));
                loaded.insert(key, pool.clone());
                pool
            }
        };
        entries.push(Entry {
            language: pool.model().reply_format().language,
            path: m
                .path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| format!("(demo) {}", pool.model().label())),
            cfg: m.clone(),
            pool,
        });
    }
    let audio_dir = match &settings.audio_dir {
        Some(d) => Some(
            d.canonicalize()
                .map_err(|e| anyhow::anyhow!("--audio-dir {}: {e}", d.display()))?,
        ),
        None => None,
    };
    let end_of_turn =
        crate::realtime::turns::load_end_of_turn(settings.smart_turn_weights.as_deref())?;
    Ok(AppState {
        end_of_turn,
        streams: Arc::new(Semaphore::new(settings.max_streams.max(1))),
        sockets: SocketLimits::new(settings.max_sockets, settings.max_sockets_per_client),
        drain: Drain::default(),
        client_secrets: ClientSecrets::default(),
        settings,
        entries,
        metrics: Metrics::default(),
        stop: Arc::new(AtomicBool::new(false)),
        audio_dir,
        backend,
    })
}
