//! `serve`: an HTTP server for LFM2-Audio voice assistants.
//!
//! Routes (see the README's "HTTP server" section): audio.cpp's `GET /health`, `GET /v1/models`,
//! `POST /v1/tasks/run`, `POST /v1/tasks/stream`; OpenAI's `POST /v1/audio/transcriptions`,
//! `POST /v1/audio/speech`, `POST /v1/chat/completions`; `GET /metrics` (Prometheus) and the
//! voice page at `GET /`.
//!
//! Each loaded model has a pool of sessions ([`pool`]); a request leases one, runs on it on a
//! blocking thread ([`work`]) and gives it back. Requests of one conversation go to the session
//! that served its previous turn when that one is free.

#![forbid(unsafe_code)]

pub mod artifact_limits;
pub mod audio_io;
pub mod config;
pub mod error;
pub mod metrics;
pub mod openai;
pub mod pool;
pub mod realtime;
pub mod tasks;
pub mod work;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, Query, Request, State};
use axum::http::{header, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clap::Parser;
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use audio_engine::lfm2_audio::{Lfm2Audio, ModelOptions, SessionOptions};

use config::{Cli, ModelEntry, Settings};
use error::ApiError;
use metrics::Metrics;
use pool::Pool;

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

/// Loads one package (`None`: the demo package).
pub fn load_model(path: Option<&Path>, settings: &Settings) -> anyhow::Result<Lfm2Audio> {
    let opts = ModelOptions {
        n_threads: settings.threads,
        max_batch: settings.batch,
        batch_from: settings.batch_from,
        max_audio_seconds: settings.max_audio_seconds,
        ..ModelOptions::default()
    };
    #[cfg(feature = "hub")]
    if let Some(spec) = path.and_then(|p| p.to_str()).and_then(hub_spec) {
        return load_from_hub(&spec?, settings, opts);
    }
    match path {
        Some(p) => Ok(Lfm2Audio::load(p, opts)?),
        #[cfg(feature = "demo")]
        None => Ok(audio_engine::lfm2_audio::load_demo(
            &audio_engine::lfm2_audio::default_demo_dir(),
            opts,
        )?),
        #[cfg(not(feature = "demo"))]
        None => anyhow::bail!("no --model given and the demo package is not built in"),
    }
}

/// The hub spec of an `hf:REPO[:QUANT]` model path (`None` for a directory).
#[cfg(feature = "hub")]
fn hub_spec(path: &str) -> Option<anyhow::Result<audio_engine::lfm2_audio::hub::HubSpec>> {
    audio_engine::lfm2_audio::hub::HubSpec::from_model_path(path).map(|r| Ok(r?))
}

/// Fetches a hub package into the Hugging Face cache (the environment's `HF_*` settings,
/// `--offline`) and loads it.
#[cfg(feature = "hub")]
fn load_from_hub(
    spec: &audio_engine::lfm2_audio::hub::HubSpec,
    settings: &Settings,
    opts: ModelOptions,
) -> anyhow::Result<Lfm2Audio> {
    use anyhow::Context;
    use audio_engine::lfm2_audio::hub::{fetch, HubOptions, DEFAULT_QUANT};
    if spec.quant.is_none() {
        tracing::info!("{spec} names no quantization: using {DEFAULT_QUANT}");
    }
    let mut hub = HubOptions::from_env();
    hub.offline |= settings.hub_offline;
    let got = fetch(spec, &hub).with_context(|| format!("fetching {spec}"))?;
    tracing::info!(
        "{spec}: commit {} ({} files downloaded, {} hashed{})",
        got.commit,
        got.downloaded.len(),
        got.hashed.len(),
        if got.offline_fallback {
            ", hub unreachable: from the cache"
        } else {
            ""
        }
    );
    let package = audio_engine::lfm2_audio::ModelPackage::open_paths(got.paths)?;
    Ok(Lfm2Audio::from_package(package, opts)?)
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
    Ok(AppState {
        streams: Arc::new(Semaphore::new(settings.max_streams.max(1))),
        settings,
        entries,
        metrics: Metrics::default(),
        stop: Arc::new(AtomicBool::new(false)),
        audio_dir,
        backend,
    })
}

const ROUTES: [&str; 10] = [
    "/",
    "/health",
    "/metrics",
    "/v1/models",
    "/v1/tasks/run",
    "/v1/tasks/stream",
    "/v1/audio/transcriptions",
    "/v1/audio/speech",
    "/v1/chat/completions",
    "/app.js",
];

/// Auth, counting and the one log line per request.
async fn observe(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let t0 = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let route = if ROUTES.contains(&path.as_str()) {
        path.as_str()
    } else {
        "other"
    };
    let open = matches!(path.as_str(), "/" | "/health" | "/app.js") || method == Method::OPTIONS;
    let resp = match &state.settings.api_key {
        Some(key) if !open => {
            let ok = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .is_some_and(|v| v.trim() == key);
            if ok {
                next.run(req).await
            } else {
                ApiError::unauthorized().into_response()
            }
        }
        _ => next.run(req).await,
    };
    let status = resp.status().as_u16();
    state.metrics.request(route, status);
    tracing::info!(
        %method,
        path,
        status,
        ms = format_args!("{:.1}", t0.elapsed().as_secs_f64() * 1e3),
        "request"
    );
    resp
}

async fn health(State(s): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({
        "status": "ok",
        "backend": s.backend,
        "models": s.entries.len(),
        "ui": true,
        "ui_management": false,
    }))
}

async fn models(
    State(s): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> Json<Value> {
    let with_opts = q
        .get("include_session_options")
        .is_some_and(|v| v == "true" || v == "1");
    let data: Vec<Value> = s
        .entries
        .iter()
        .map(|e| {
            let mut v = json!({
                "id": e.cfg.id,
                "object": "model",
                "owned_by": "engine",
                "family": e.cfg.family,
                "task": e.cfg.task,
                "mode": e.cfg.mode,
                "loaded": true,
                "path": e.path,
                "slots": e.pool.size(),
                "active_slots": e.pool.active(),
                "queued_requests": e.pool.queued(),
                "max_parallel_slots": e.pool.size(),
                "max_batch": e.pool.model().options().max_batch,
                "batch_from": e.pool.model().options().batch_from,
                "language": e.language,
            });
            if with_opts {
                let o = e.pool.session_options();
                v["session_options"] = json!({
                    "prefill_slots": o.prefill_slots,
                    "kept_questions": o.kept_questions,
                });
            }
            v
        })
        .collect();
    Json(json!({"object": "list", "data": data}))
}

async fn metrics_route(State(s): State<Arc<AppState>>) -> Response {
    let mut seen = Vec::new();
    let pools: Vec<_> = s
        .entries
        .iter()
        .filter(|e| {
            let p = Arc::as_ptr(&e.pool);
            if seen.contains(&p) {
                false
            } else {
                seen.push(p);
                true
            }
        })
        .map(|e| metrics::PoolGauges {
            model: e.pool.model().label().to_owned(),
            size: e.pool.size(),
            active: e.pool.active(),
            queued: e.pool.queued(),
            affinity_hits: e.pool.affinity_hits.load(Ordering::Relaxed),
            steps: e.pool.model().step_stats(),
        })
        .collect();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.metrics.render(&pools),
    )
        .into_response()
}

async fn page() -> Html<&'static str> {
    Html(include_str!("../web/index.html"))
}

async fn page_js() -> Response {
    (
        [(header::CONTENT_TYPE, "application/javascript")],
        include_str!("../web/app.js"),
    )
        .into_response()
}

async fn not_found(req: Request) -> ApiError {
    ApiError::not_found(format!("no route {} {}", req.method(), req.uri().path()))
}

/// The router over `state`.
pub fn router(state: Arc<AppState>) -> Router {
    router_with(state, Router::new())
}

/// [`router`] with `extra` routes behind the same layers (auth, limits, metrics, panics).
pub fn router_with(state: Arc<AppState>, extra: Router<Arc<AppState>>) -> Router {
    let mut app = extra
        .route("/", get(page))
        .route("/app.js", get(page_js))
        .route("/health", get(health))
        .route("/metrics", get(metrics_route))
        .route("/v1/models", get(models))
        .route("/v1/tasks/run", post(tasks::run))
        .route("/v1/tasks/stream", post(tasks::stream))
        .route("/v1/audio/transcriptions", post(openai::transcriptions))
        .route("/v1/audio/speech", post(openai::speech))
        .route("/v1/chat/completions", post(openai::chat))
        .route("/v1/realtime", get(realtime::realtime))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(state.settings.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(state.clone(), observe))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            |_: Box<dyn std::any::Any + Send>| {
                ApiError::internal("the request handler panicked").into_response()
            },
        ));
    if !state.settings.cors_origins.is_empty() {
        use tower_http::cors::{AllowOrigin, Any, CorsLayer};
        let origins = &state.settings.cors_origins;
        let allow = if origins.iter().any(|o| o == "*") {
            AllowOrigin::any()
        } else {
            AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
        };
        app = app.layer(
            CorsLayer::new()
                .allow_origin(allow)
                .allow_methods(Any)
                .allow_headers(Any),
        );
    }
    app.with_state(state)
}

/// A server running on a tokio runtime.
pub struct Running {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its state (metrics, pools).
    pub state: Arc<AppState>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    handle: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// Stops accepting, lets in-flight requests finish within the shutdown deadline (then cuts
    /// them), and waits for the server to end.
    pub async fn shutdown(mut self) -> std::io::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.handle
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?
    }
}

/// Binds `settings.host:settings.port` and serves in the background until
/// [`Running::shutdown`] (or `signal` when given) fires.
pub async fn start(settings: Settings, preloaded: Option<Lfm2Audio>) -> anyhow::Result<Running> {
    let state = Arc::new(tokio::task::block_in_place(|| {
        build_state(settings, preloaded)
    })?);
    start_with_state(state, Router::new()).await
}

/// [`start`] over a built state, with `extra` routes (tests add failing ones).
pub async fn start_with_state(
    state: Arc<AppState>,
    extra: Router<Arc<AppState>>,
) -> anyhow::Result<Running> {
    let listener =
        tokio::net::TcpListener::bind((state.settings.host.as_str(), state.settings.port)).await?;
    let addr = listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let app = router_with(state.clone(), extra);
    let st = state.clone();
    let handle = tokio::spawn(async move {
        let deadline = Duration::from_millis(st.settings.shutdown_timeout_ms);
        let (fired_tx, mut fired_rx) = tokio::sync::watch::channel(false);
        let signal = async move {
            let _ = rx.await;
            let _ = fired_tx.send(true);
        };
        let server = axum::serve(listener, app).with_graceful_shutdown(signal);
        let server = std::future::IntoFuture::into_future(server);
        tokio::pin!(server);
        tokio::select! {
            r = &mut server => return r,
            _ = fired_rx.wait_for(|f| *f) => {}
        }
        tracing::info!(
            deadline_ms = deadline.as_millis() as u64,
            "shutting down: no new connections"
        );
        if tokio::time::timeout(deadline, &mut server).await.is_ok() {
            return Ok(());
        }
        // The deadline passed: cut every generation at its next event, give the streams a
        // moment to end, then stop regardless.
        tracing::warn!("shutdown deadline passed: cancelling in-flight requests");
        st.stop.store(true, Ordering::SeqCst);
        let _ = tokio::time::timeout(Duration::from_secs(2), &mut server).await;
        Ok(())
    });
    Ok(Running {
        addr,
        state,
        shutdown: Some(tx),
        handle,
    })
}

/// Waits for SIGTERM or SIGINT. The handlers are installed when this is called, not when the
/// future is first polled, so a signal sent right after the "listening" line is not lost.
fn termination() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    let ctrl_c = tokio::signal::ctrl_c();
    async move {
        #[cfg(unix)]
        if let Ok(mut term) = term {
            tokio::select! {
                _ = term.recv() => {}
                _ = ctrl_c => {}
            }
            return;
        }
        let _ = ctrl_c.await;
    }
}

/// The `serve` binary: parses `args` (the first is the program name), loads the models and
/// serves until SIGTERM/SIGINT; exits 0 after a graceful shutdown, 1 on a startup error.
pub fn main_with_args<I, T>(args: I)
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::parse_from(args);
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("building the tokio runtime");
    let code = rt.block_on(async move {
        let run = async {
            let settings = Settings::resolve(&cli)?;
            let running = start(settings, None).await?;
            let stop = termination();
            tracing::info!("listening on http://{}", running.addr);
            println!("serve: listening on http://{}", running.addr);
            stop.await;
            running.shutdown().await?;
            anyhow::Ok(())
        };
        match run.await {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("serve: {e:#}");
                1
            }
        }
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    std::process::exit(code);
}
