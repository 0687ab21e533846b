//! The server's edges (issue #40): Realtime socket limits (in all and per client, answered
//! before the upgrade, existing sockets unaffected, slots freed on close), the `Origin`
//! allow-list, the request and idle timeouts, readiness and the drain (in process, and SIGTERM
//! to the binary), JSON log lines with their request id, and `/v1/models`' quantization.

mod common;

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::get;
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

use common::realtime::*;
use common::*;

/// A socket upgrade to `srv` with `headers`: the socket (after `session.created`), or the
/// refusal's status and JSON body.
async fn open(srv_addr: &str, headers: &[(&str, &str)]) -> Result<Ws, (u16, Value)> {
    let url = format!("ws://{srv_addr}/v1/realtime?model={MODEL}");
    let mut req = url.into_client_request().unwrap();
    for (k, v) in headers {
        let name = tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(k.as_bytes());
        req.headers_mut().insert(name.unwrap(), v.parse().unwrap());
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok((mut ws, _)) => {
            let hello = next(&mut ws).await;
            assert_eq!(hello["type"], "session.created", "{hello}");
            Ok(ws)
        }
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
            let body = r
                .body()
                .as_ref()
                .map(|b| serde_json::from_slice(b).unwrap())
                .unwrap_or(Value::Null);
            Err((r.status().as_u16(), body))
        }
        Err(e) => panic!("the upgrade failed without an HTTP answer: {e}"),
    }
}

/// An upgrade that must be refused: its status and JSON body.
async fn refused(srv_addr: &str, headers: &[(&str, &str)], what: &str) -> (u16, Value) {
    match open(srv_addr, headers).await {
        Ok(_) => panic!("not refused: {what}"),
        Err(e) => e,
    }
}

/// The socket still answers: a `session.update` gets its `session.updated`.
async fn still_answers(ws: &mut Ws) {
    send(
        ws,
        json!({"type": "session.update", "session": {"instructions": "hi"}}),
    )
    .await;
    assert_eq!(next(ws).await["type"], "session.updated");
}

/// The next frame is a close frame: its code and reason (within `within`).
async fn close_of(ws: &mut Ws, within: Duration) -> (u16, String) {
    loop {
        let m = tokio::time::timeout(within, ws.next())
            .await
            .expect("a close frame in time")
            .expect("a frame before the end")
            .expect("a readable frame");
        match m {
            Message::Close(Some(f)) => return (u16::from(f.code), f.reason.to_string()),
            Message::Close(None) => panic!("a close frame without a code"),
            _ => continue,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_past_the_per_client_limit_gets_429_and_a_closed_one_frees_its_slot() {
    let mut s = settings();
    s.max_sockets = 10;
    s.max_sockets_per_client = 2;
    let srv = server_with(s).await;
    let addr = srv.addr.to_string();
    let mut a = open(&addr, &[]).await.unwrap();
    let mut b = open(&addr, &[]).await.unwrap();
    let (status, body) = refused(&addr, &[], "a third socket refused").await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");
    let m = get_text(&reqwest::Client::new(), &url(&srv, "/metrics")).await;
    assert_eq!(metric_sum(&m, "serve_realtime_sockets"), 2.0, "{m}");
    still_answers(&mut a).await;
    still_answers(&mut b).await;
    a.close(None).await.unwrap();
    drop(a);
    let t = Instant::now();
    while srv.state.sockets.open() > 1 {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the slot never came back"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut c = open(&addr, &[])
        .await
        .expect("a freed slot takes a new socket");
    still_answers(&mut c).await;
    still_answers(&mut b).await;
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_past_the_total_limit_gets_503_and_forwarded_addresses_count_when_trusted() {
    let mut s = settings();
    s.max_sockets = 2;
    s.max_sockets_per_client = 0;
    let srv = server_with(s).await;
    let addr = srv.addr.to_string();
    let mut a = open(&addr, &[]).await.unwrap();
    let _b = open(&addr, &[]).await.unwrap();
    let (status, body) = refused(&addr, &[], "a third socket refused").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["type"], "server_busy", "{body}");
    still_answers(&mut a).await;
    srv.shutdown().await.unwrap();

    // Behind a trusted proxy, the last X-Forwarded-For entry is the client.
    let mut s = settings();
    s.max_sockets_per_client = 1;
    s.trust_forwarded = true;
    let srv = server_with(s).await;
    let addr = srv.addr.to_string();
    let one = [("x-forwarded-for", "203.0.113.9, 10.0.0.1")];
    let two = [("x-forwarded-for", "10.0.0.2")];
    let _a = open(&addr, &one).await.unwrap();
    let _b = open(&addr, &two)
        .await
        .expect("another client has its own limit");
    let spoofed = [("x-forwarded-for", "10.0.0.2, 10.0.0.1")];
    assert_eq!(open(&addr, &spoofed).await.err().map(|e| e.0), Some(429));
    srv.shutdown().await.unwrap();

    // Untrusted, the header is ignored: every socket here is 127.0.0.1's.
    let mut s = settings();
    s.max_sockets_per_client = 1;
    let srv = server_with(s).await;
    let addr = srv.addr.to_string();
    let _a = open(&addr, &one).await.unwrap();
    assert_eq!(open(&addr, &two).await.err().map(|e| e.0), Some(429));
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_origin_gets_403_before_the_upgrade_same_origin_and_listed_ones_pass() {
    let mut s = settings();
    s.allowed_origins = vec!["https://app.example".into()];
    let srv = server_with(s).await;
    let addr = srv.addr.to_string();
    let (status, body) = refused(
        &addr,
        &[("origin", "https://evil.example")],
        "a foreign origin refused",
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["type"], "permission_error", "{body}");
    assert_eq!(srv.state.sockets.open(), 0, "a refused origin took no slot");
    let own = format!("http://{addr}");
    open(&addr, &[("origin", own.as_str())])
        .await
        .expect("same origin");
    open(&addr, &[("origin", "https://app.example")])
        .await
        .expect("a listed origin");
    open(&addr, &[]).await.expect("no Origin: not a browser");
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_socket_is_closed_with_4408_and_client_events_keep_it_open() {
    let mut s = settings();
    s.idle_timeout_ms = 400;
    let srv = server_with(s).await;
    let addr = srv.addr.to_string();
    let mut ws = open(&addr, &[]).await.unwrap();
    let t = Instant::now();
    // Events every 150 ms for well past the timeout keep it open.
    while t.elapsed() < Duration::from_millis(1_000) {
        still_answers(&mut ws).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let quiet = Instant::now();
    let (code, reason) = close_of(&mut ws, Duration::from_secs(5)).await;
    let after = quiet.elapsed();
    assert_eq!(code, 4408, "{reason}");
    assert!(reason.contains("idle"), "{reason}");
    assert!(
        after >= Duration::from_millis(250) && after < Duration::from_millis(2_000),
        "closed {after:?} after the last event"
    );
    let t = Instant::now();
    while srv.state.sockets.open() > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the slot never came back"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_the_request_timeout_gets_504_and_others_are_unaffected() {
    let mut s = settings();
    s.request_timeout_ms = 300;
    let m = tokio::task::spawn_blocking(model).await.unwrap();
    let state = Arc::new(
        tokio::task::spawn_blocking(move || serve::build_state(s, Some(m)))
            .await
            .unwrap()
            .unwrap(),
    );
    let slow = axum::Router::new().route(
        "/slow",
        get(|| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            "late"
        }),
    );
    let srv = serve::start_with_state(state, slow).await.unwrap();
    let c = reqwest::Client::new();
    let t = Instant::now();
    let resp = c.get(url(&srv, "/slow")).send().await.unwrap();
    let took = t.elapsed();
    let msg = expect_error(resp, 504, "server_error").await;
    assert!(msg.contains("300 ms"), "{msg}");
    assert!(took < Duration::from_secs(3), "answered after {took:?}");
    let h = c.get(url(&srv, "/health")).send().await.unwrap();
    assert_eq!(h.status(), 200);
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_fails_readiness_refuses_new_work_and_closes_idle_sockets_with_1001() {
    let srv = server().await;
    let c = reqwest::Client::new();
    let addr = srv.addr.to_string();
    let ready = c.get(url(&srv, "/health/ready")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let mut idle = open(&addr, &[]).await.unwrap();
    let m = get_text(&c, &url(&srv, "/metrics")).await;
    assert_eq!(metric_sum(&m, "serve_draining"), 0.0, "{m}");
    assert!(metric_sum(&m, "serve_sessions_free") >= 1.0, "{m}");

    srv.state.drain.start();
    let (code, reason) = close_of(&mut idle, Duration::from_secs(5)).await;
    assert_eq!(code, 1001, "{reason}");
    assert!(reason.contains("shutting down"), "{reason}");
    let ready = c.get(url(&srv, "/health/ready")).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    let v: Value = ready.json().await.unwrap();
    assert!(v["reason"].as_str().unwrap().contains("draining"), "{v}");
    let live = c.get(url(&srv, "/health")).send().await.unwrap();
    assert_eq!(live.status(), 200, "liveness stays up while draining");
    assert_eq!(open(&addr, &[]).await.err().map(|e| e.0), Some(503));
    let run = c
        .post(url(&srv, "/v1/tasks/run"))
        .json(&task("lfm2-audio-tts", json!({"text": "hi"})))
        .send()
        .await
        .unwrap();
    expect_error(run, 503, "server_busy").await;
    let m = get_text(&c, &url(&srv, "/metrics")).await;
    assert_eq!(metric_sum(&m, "serve_draining"), 1.0, "{m}");
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_fails_while_every_session_is_leased_and_the_queue_is_full() {
    let mut s = settings();
    s.slots = 1;
    s.max_queue = 0;
    let srv = server_with(s).await;
    let c = reqwest::Client::new();
    let pool = srv.state.entries[0].pool.clone();
    let lease = pool.try_acquire(None).expect("the one session");
    let ready = c.get(url(&srv, "/health/ready")).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    let v: Value = ready.json().await.unwrap();
    assert!(v["reason"].as_str().unwrap().contains("leased"), "{v}");
    let m = get_text(&c, &url(&srv, "/metrics")).await;
    assert_eq!(metric_sum(&m, "serve_sessions_free"), 0.0, "{m}");
    drop(lease);
    let ready = c.get(url(&srv, "/health/ready")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_say_which_quantization_is_loaded() {
    let srv = server().await;
    let v = get_json(&reqwest::Client::new(), &url(&srv, "/v1/models")).await;
    let label = srv.state.entries[0].pool.model().label().to_owned();
    for m in v["data"].as_array().unwrap() {
        let q = m["quantization"].as_str().unwrap_or_else(|| panic!("{m}"));
        assert!(label.ends_with(&format!("-{q}")), "{label} vs {q}");
    }
    srv.shutdown().await.unwrap();
}

/// The serve binary with `args` and `env`, its stderr piped; its base URL.
fn spawn_logged(args: &[&str], env: &[(&str, &str)]) -> (Kill, String) {
    model(); // makes sure the demo package exists
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_serve"));
    cmd.arg("--model")
        .arg(audio_tooling::default_demo_dir())
        .args(["--port", "0", "--threads", "1"])
        .args(args)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let base = listening(&mut child);
    (Kill(child), base)
}

/// Sends SIGTERM to `child`.
fn sigterm(child: &std::process::Child) {
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -TERM");
}

/// Waits for `child` to exit (within 20 s): its exit code and its stderr.
fn exit_of(child: &mut std::process::Child) -> (Option<i32>, String) {
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "serve did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.code(), err)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_parse_line_by_line_and_name_the_request_and_the_conversation() {
    // The format from the environment, as a container sets it.
    let (mut serve, base) = spawn_logged(&[], &[("SERVE_LOG_FORMAT", "json")]);
    let c = reqwest::Client::new();
    let resp = c
        .get(format!("{base}/v1/models"))
        .header("x-request-id", "probe-42")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-request-id"], "probe-42");
    let addr = base.strip_prefix("http://").unwrap();
    let ws = open(addr, &[]).await.unwrap();
    drop(ws);
    tokio::time::sleep(Duration::from_millis(300)).await;
    sigterm(&serve.0);
    let (code, err) = exit_of(&mut serve.0);
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert!(lines.len() >= 3, "{err}");
    let request = lines
        .iter()
        .find(|l| l["fields"]["message"] == "request" && l["fields"]["path"] == "/v1/models")
        .unwrap_or_else(|| panic!("no request line: {err}"));
    assert_eq!(request["span"]["request_id"], "probe-42", "{request}");
    assert!(
        lines.iter().any(|l| l["span"]["conversation_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("sess_"))),
        "no line of the socket names its conversation: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_running_turn_closes_sockets_with_1001_and_exits_0() {
    let (mut serve, base) = spawn_logged(&["--shutdown-timeout-ms", "20000"], &[]);
    let addr = base.strip_prefix("http://").unwrap().to_owned();
    let mut idle = open(&addr, &[]).await.unwrap();
    let mut busy = open(&addr, &[]).await.unwrap();
    send(
        &mut busy,
        json!({"type": "input_audio_buffer.append", "audio": b64(&pcm_bytes(&silence(1_000)))}),
    )
    .await;
    send(&mut busy, json!({"type": "input_audio_buffer.commit"})).await;
    send(
        &mut busy,
        json!({"type": "response.create", "response": {"max_output_tokens": 300}}),
    )
    .await;
    until(&mut busy, "response.created").await;
    sigterm(&serve.0);
    let idle_close = tokio::spawn(async move {
        let (code, reason) = close_of(&mut idle, Duration::from_secs(5)).await;
        assert_eq!(code, 1001, "idle: {reason}");
    });
    // The running turn ends with its response.done, then the socket closes.
    let mut done = Vec::new();
    loop {
        let m = tokio::time::timeout(Duration::from_secs(20), busy.next()).await;
        let Ok(Some(Ok(m))) = m else {
            sigterm(&serve.0);
            let (code, err) = exit_of(&mut serve.0);
            panic!(
                "the busy socket broke before response.done ({m:?}); serve exited {code:?}:\n{err}"
            );
        };
        if let Message::Text(t) = m {
            let e: Value = serde_json::from_str(t.as_str()).unwrap();
            let end = e["type"] == "response.done";
            done.push(e);
            if end {
                break;
            }
        }
    }
    let status = &done.last().unwrap()["response"]["status"];
    assert!(
        status != "cancelled" && status != "failed",
        "the running turn was cut: {status}"
    );
    let (code, _) = close_of(&mut busy, Duration::from_secs(5)).await;
    assert_eq!(code, 1001, "busy");
    idle_close.await.unwrap();
    let (code, err) = exit_of(&mut serve.0);
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn close_codes_are_what_the_readme_says() {
    assert_eq!(serve::edges::socket_close::IDLE_CLOSE_CODE, 4408);
    assert_eq!(
        CloseCode::from(serve::edges::socket_close::DRAIN_CLOSE_CODE),
        CloseCode::Away
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_secret_opens_one_socket_only_the_socket_and_not_after_it_expires() {
    let mut s = settings();
    s.api_key = Some("sekret".into());
    let srv = server_with(s).await;
    let addr = srv.addr.to_string();
    let c = reqwest::Client::new();
    let mint = |body: Value, key: Option<&'static str>| {
        let mut r = c.post(url(&srv, "/v1/realtime/client_secrets")).json(&body);
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        r.send()
    };
    // Minting needs the API key.
    let resp = mint(json!({}), None).await.unwrap();
    expect_error(resp, 401, "authentication_error").await;
    let resp = mint(json!({"expires_after": {"seconds": 0}}), Some("sekret"))
        .await
        .unwrap();
    expect_error(resp, 400, "invalid_request_error").await;
    let v: Value = mint(json!({}), Some("sekret"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let secret = v["value"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("ek_"), "{v}");
    assert_eq!(v["session"]["model"], MODEL, "{v}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let ttl = v["expires_at"].as_u64().unwrap() - now;
    assert!((590..=601).contains(&ttl), "{v}");

    // Scope: the secret is no key for other routes, and does not spend itself there.
    let models = c
        .get(url(&srv, "/v1/models"))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap();
    expect_error(models, 401, "authentication_error").await;

    // As a browser offers it: subprotocols `realtime` and `openai-insecure-api-key.<secret>`.
    let protocols = format!("realtime, openai-insecure-api-key.{secret}");
    let offer = [("sec-websocket-protocol", protocols.as_str())];
    let mut ws = open(&addr, &offer)
        .await
        .expect("the secret opens a socket");
    still_answers(&mut ws).await;
    // Once only.
    assert_eq!(open(&addr, &offer).await.err().map(|e| e.0), Some(401));
    // The server picks `realtime`, without which a browser fails the socket.
    let v: Value = mint(json!({}), Some("sekret"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let protocols = format!(
        "realtime, openai-insecure-api-key.{}",
        v["value"].as_str().unwrap()
    );
    let mut req = format!("ws://{addr}/v1/realtime?model={MODEL}")
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("sec-websocket-protocol", protocols.parse().unwrap());
    let (_ws, resp) = tokio_tungstenite::connect_async(req).await.unwrap();
    assert_eq!(resp.headers()["sec-websocket-protocol"], "realtime");

    // As a bearer token; and an expired one opens nothing.
    let v: Value = mint(
        json!({"expires_after": {"anchor": "created_at", "seconds": 1}}),
        Some("sekret"),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let short = v["value"].as_str().unwrap().to_owned();
    let v: Value = mint(json!(null), Some("sekret"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bearer = format!("Bearer {}", v["value"].as_str().unwrap());
    open(&addr, &[("authorization", bearer.as_str())])
        .await
        .expect("the secret as a bearer token");
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let late = format!("Bearer {short}");
    assert_eq!(
        open(&addr, &[("authorization", late.as_str())])
            .await
            .err()
            .map(|e| e.0),
        Some(401)
    );
    srv.shutdown().await.unwrap();
}
