//! `serve`: an HTTP server for LFM2-Audio voice assistants.
//!
//! Routes (see the README's "HTTP server" section): audio.cpp's `GET /health`, `GET /v1/models`,
//! `POST /v1/tasks/run`, `POST /v1/tasks/stream`; OpenAI's `POST /v1/audio/transcriptions`,
//! `POST /v1/audio/speech`, `POST /v1/chat/completions`; `GET /metrics` (Prometheus),
//! `GET /health/ready` (readiness) and the voice page at `GET /`. The checks before a route
//! (limits, origins, key, drain) are in [`edges`].
//!
//! Each loaded model has a pool of sessions ([`pool`]); a request leases one, runs on it on a
//! blocking thread ([`work`]) and gives it back. Requests of one conversation go to the session
//! that served its previous turn when that one is free.

#![forbid(unsafe_code)]

pub mod artifact_limits;
pub mod audio_io;
pub mod config;
pub mod edges;
pub mod error;
pub mod metrics;
pub mod openai;
pub mod pool;
pub mod realtime;
pub mod tasks;
pub mod work;

mod load;
mod state;

pub use load::load_model;
pub use state::{build_state, AppState, Entry};

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
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

use audio_engine::lfm2_audio::Lfm2Audio;

use config::{Cli, Settings};
use error::ApiError;

const ROUTES: [&str; 13] = [
    "/",
    "/health",
    "/health/ready",
    "/metrics",
    "/v1/models",
    "/v1/tasks/run",
    "/v1/tasks/stream",
    "/v1/audio/transcriptions",
    "/v1/audio/speech",
    "/v1/chat/completions",
    "/v1/realtime",
    "/v1/realtime/client_secrets",
    "/app.js",
];

/// Auth, the drain, the request timeout, counting, and the one log line per request, all
/// inside the request's span (its `request_id`, echoed as `X-Request-Id`).
async fn observe(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let id = edges::logging::request_id(
        req.headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok()),
    );
    let span = tracing::info_span!("request", request_id = %id);
    let mut resp = tracing::Instrument::instrument(observed(state, req, next), span).await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-request-id", v);
    }
    resp
}

async fn observed(state: Arc<AppState>, req: Request, next: Next) -> Response {
    let t0 = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let route = if ROUTES.contains(&path.as_str()) {
        path.as_str()
    } else {
        "other"
    };
    let open = matches!(path.as_str(), "/" | "/health" | "/health/ready" | "/app.js")
        || method == Method::OPTIONS;
    let authorized = match &state.settings.api_key {
        Some(key) if !open => {
            edges::api_key::bearer_matches(
                req.headers()
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok()),
                key,
            )
            // why only the socket: a client secret is scoped to opening one Realtime socket.
            || (path == "/v1/realtime"
                && edges::client_secrets::admits(&state.client_secrets, req.headers()))
        }
        _ => true,
    };
    // why only new work: probes and metrics keep answering while the server drains, so the
    // load balancer sees the 503 of readiness and the operator the gauges.
    let new_work = method == Method::POST || path == "/v1/realtime";
    let resp = if !authorized {
        ApiError::unauthorized().into_response()
    } else if new_work && state.drain.is_draining() {
        ApiError::busy("the server is shutting down: try another replica").into_response()
    } else {
        run_bounded(&state, &path, req, next).await
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

/// The route under `--request-timeout-ms` (504 when it passes). The bound is on the handler,
/// that is the response's head: a streamed body goes on after it (its length is bounded by
/// `max_tokens`), and the Realtime upgrade answers at once.
async fn run_bounded(state: &AppState, path: &str, req: Request, next: Next) -> Response {
    let ms = state.settings.request_timeout_ms;
    if ms == 0 || path == "/v1/realtime" {
        return next.run(req).await;
    }
    match tokio::time::timeout(Duration::from_millis(ms), next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => ApiError::with_status(
            axum::http::StatusCode::GATEWAY_TIMEOUT,
            format!("the request ran past {ms} ms (--request-timeout-ms)"),
        )
        .into_response(),
    }
}

/// `GET /health/ready`: 200 when the server takes new work, else 503 with the reason.
async fn ready(State(s): State<Arc<AppState>>) -> Response {
    match edges::readiness::not_ready(&s) {
        None => Json(json!({"status": "ready"})).into_response(),
        Some(reason) => (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "not_ready", "reason": reason})),
        )
            .into_response(),
    }
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
                "device": e.pool.model().device_name(),
                "quantization": config::quantization_of(e.pool.model().label()),
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
            max_queue: s.settings.max_queue,
            model: e.pool.model().label().to_owned(),
            size: e.pool.size(),
            active: e.pool.active(),
            queued: e.pool.queued(),
            affinity_hits: e.pool.affinity_hits.load(Ordering::Relaxed),
            steps: e.pool.model().step_stats(),
        })
        .collect();
    let mut text = s.metrics.render(&pools);
    metrics::render_server(&mut text, s.sockets.open(), s.drain.is_draining());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
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
        .route("/health/ready", get(ready))
        .route("/metrics", get(metrics_route))
        .route("/v1/models", get(models))
        .route("/v1/tasks/run", post(tasks::run))
        .route("/v1/tasks/stream", post(tasks::stream))
        .route("/v1/audio/transcriptions", post(openai::transcriptions))
        .route("/v1/audio/speech", post(openai::speech))
        .route("/v1/chat/completions", post(openai::chat))
        .route("/v1/realtime", get(realtime::realtime))
        .route(
            "/v1/realtime/client_secrets",
            post(edges::client_secrets::create),
        )
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
        let drain_state = st.clone();
        let signal = async move {
            let _ = rx.await;
            // why before the listener closes: readiness must say 503 from the first moment.
            drain_state.drain.start();
            let _ = fired_tx.send(true);
        };
        // why the peer address: the per-client socket limit counts by it.
        let service = app.into_make_service_with_connect_info::<SocketAddr>();
        let server = axum::serve(listener, service).with_graceful_shutdown(signal);
        let server = std::future::IntoFuture::into_future(server);
        tokio::pin!(server);
        let mut ended = None;
        tokio::select! {
            r = &mut server => ended = Some(r),
            _ = fired_rx.wait_for(|f| *f) => {}
        }
        // why not return when the server ended first: with no HTTP connection open its
        // graceful shutdown ends at once, in the same poll as the signal, and the sockets
        // (which it does not track) still have to drain.
        if !*fired_rx.borrow() {
            return ended.unwrap_or(Ok(()));
        }
        tracing::info!(
            deadline_ms = deadline.as_millis() as u64,
            sockets = st.sockets.open(),
            "draining: no new connections, sockets or requests; idle sockets close (1001)"
        );
        // why the sockets too: an upgraded socket is no longer the server's connection, so
        // the graceful shutdown does not wait for it; its running turn must still finish.
        let until = tokio::time::Instant::now() + deadline;
        let served = match ended {
            Some(r) => Some(r),
            None => tokio::time::timeout_at(until, &mut server).await.ok(),
        };
        let sockets = || async {
            while st.sockets.open() > 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let server_ended = served.is_some();
        if let Some(r) = served {
            if tokio::time::timeout_at(until, sockets()).await.is_ok() {
                return r;
            }
        }
        // The deadline passed: cut every generation at its next event, give the streams and
        // sockets a moment to end, then stop regardless.
        tracing::warn!("shutdown deadline passed: cancelling in-flight requests");
        st.stop.store(true, Ordering::SeqCst);
        let cut = async {
            if !server_ended {
                let _ = (&mut server).await;
            }
            sockets().await;
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), cut).await;
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
    audio_engine::ggml::set_log_level(audio_engine::lfm2_audio::vars::log_level_from_vars(
        &config::env_var,
    ));
    // why resolved before the runtime: the log format may come from the config file.
    let settings = match Settings::resolve(&cli) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("serve: {e:#}");
            std::process::exit(1);
        }
    };
    edges::logging::init(settings.log_format);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("building the tokio runtime");
    let code = rt.block_on(async move {
        let run = async {
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
