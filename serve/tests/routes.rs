//! Every route over loopback HTTP on the demo package: response shapes field by field, every
//! error status (400, 401, 404, 413, 500, 503) with its envelope, and a failure in the middle
//! of a generation: an error event that ends a started stream, a 500 before one starts.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{ReplyEvent, S2sOptions, S2sRequest, Session, SessionOptions};
use serde_json::{json, Value};
use serve::config::Settings;

use common::*;

fn s2s_req(i: usize, max_tokens: usize) -> Value {
    json!({"audio": b64(&question(i)), "max_tokens": max_tokens, "seed": 3})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_models_metrics_and_the_task_routes() {
    let srv = server().await;
    let c = reqwest::Client::new();
    let h = get_json(&c, &url(&srv, "/health")).await;
    assert_eq!(h["status"], "ok");
    assert_eq!(h["models"], 3);
    assert!(h["backend"].is_string());
    assert_eq!(h["ui_management"], false);

    let m = get_json(&c, &url(&srv, "/v1/models")).await;
    assert_eq!(m["object"], "list");
    let ids: Vec<_> = m["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["lfm2-audio-s2s", "lfm2-audio-asr", "lfm2-audio-tts"]);
    let e = &m["data"][0];
    for (k, v) in [
        ("object", json!("model")),
        ("owned_by", json!("engine")),
        ("family", json!("lfm2_audio")),
        ("task", json!("s2s")),
        ("mode", json!("streaming")),
        ("loaded", json!(true)),
        ("slots", json!(2)),
        ("active_slots", json!(0)),
        ("queued_requests", json!(0)),
        ("max_parallel_slots", json!(2)),
        ("device", json!("CPU")),
    ] {
        assert_eq!(e[k], v, "{k}");
    }
    assert!(e["path"].is_string());
    assert!(e.get("session_options").is_none());
    let m = get_json(&c, &url(&srv, "/v1/models?include_session_options=true")).await;
    assert_eq!(m["data"][0]["session_options"]["prefill_slots"], 4);

    // s2s offline; return_codes defaults to true (the option table's default, as through the
    // C ABI), so the reply artifact comes back.
    let run = url(&srv, "/v1/tasks/run");
    let r = post_json(&c, &run, &task("lfm2-audio-s2s", s2s_req(0, 30))).await;
    assert!(r["text"].is_string());
    assert_eq!(r["language"], "en");
    assert_eq!(r["sample_rate"], 24_000);
    assert_eq!(r["channels"], 1);
    let wav = unb64(r["audio"].as_str().unwrap());
    assert_eq!(&wav[..4], b"RIFF");
    assert_eq!(r["artifacts"][0]["id"], "lfm2_audio.reply");
    for k in ["wall_ms", "audio_duration_ms", "rtf"] {
        assert!(r["timing"][k].is_number(), "{k}");
    }
    // The same request streamed without SSE: events + result, same bytes.
    let s = post_json(
        &c,
        &url(&srv, "/v1/tasks/stream"),
        &task("lfm2-audio-s2s", s2s_req(0, 30)),
    )
    .await;
    assert_eq!(s["result"]["audio"], r["audio"]);
    assert_eq!(s["result"]["text"], r["text"]);
    assert!(s["result"]["timing"]["ttft_ms"].is_number());
    let events = s["events"].as_array().unwrap();
    assert_eq!(events.last().unwrap()["is_final"], true);
    let audio: Vec<i16> = events
        .iter()
        .filter_map(|e| e["audio"].as_str())
        .flat_map(|a| wav_i16(&unb64(a)))
        .collect();
    assert_eq!(audio, wav_i16(&wav));

    // asr and tts.
    let a = post_json(
        &c,
        &run,
        &task(
            "lfm2-audio-asr",
            json!({"audio": b64(&question(1)), "max_tokens": 20}),
        ),
    )
    .await;
    assert!(a["text"].is_string());
    assert!(a.get("audio").is_none());
    assert!((a["timing"]["audio_duration_ms"].as_f64().unwrap() - 2000.0).abs() < 1.0);
    let t = post_json(
        &c,
        &run,
        &task(
            "lfm2-audio-tts",
            json!({"text": "Hello there.", "voice_id": "uk-male", "max_tokens": 40}),
        ),
    )
    .await;
    assert_eq!(&unb64(t["audio"].as_str().unwrap())[..4], b"RIFF", "{t}");

    let metrics = c.get(url(&srv, "/metrics")).send().await.unwrap();
    assert!(metrics.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let metrics = metrics.text().await.unwrap();
    for needle in [
        "serve_requests_total{route=\"/v1/tasks/run\",status=\"200\"} 3",
        "serve_requests_total{route=\"/health\",status=\"200\"} 1",
        "serve_queue_depth{model=",
        "serve_time_to_first_audio_seconds_bucket",
        "serve_real_time_factor_count",
        "serve_prefill_positions_resumed_total",
        "serve_questions_reused_total",
    ] {
        assert!(metrics.contains(needle), "{needle} in\n{metrics}");
    }
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_requests_are_400_naming_the_problem() {
    let mut s = settings();
    s.max_tokens = 9000;
    let srv = server_with(s).await;
    let c = reqwest::Client::new();
    let run = url(&srv, "/v1/tasks/run");
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"model": "lfm2-audio-s2s", "request": {"audio": b64(&question(0)), "bogus_field": 1}}),
            "bogus_field",
        ),
        (
            json!({"model": "lfm2-audio-s2s", "request": {}, "extra": true}),
            "extra",
        ),
        (
            task(
                "lfm2-audio-s2s",
                json!({"audio": b64(&question(0)), "options": {"beam": 2}}),
            ),
            "beam",
        ),
        (
            task(
                "lfm2-audio-s2s",
                json!({"audio": b64(&question(0)), "options": {"return_codes": "yes"}}),
            ),
            "return_codes",
        ),
        (
            task(
                "lfm2-audio-asr",
                json!({"audio": b64(&question(0)), "options": {"return_codes": true}}),
            ),
            "return_codes",
        ),
        // A typed question is a question (text turns); a typed and a spoken one at once is not.
        (
            task(
                "lfm2-audio-s2s",
                json!({"text": "hi", "audio": b64(&question(0))}),
            ),
            "not both",
        ),
        (task("lfm2-audio-s2s", json!({})), "audio"),
        (
            task("lfm2-audio-s2s", json!({"audio": "/etc/passwd"})),
            "--audio-dir",
        ),
        (
            task("lfm2-audio-s2s", json!({"audio": b64(&vec![7u8; 400])})),
            "RIFF",
        ),
        (
            task(
                "lfm2-audio-s2s",
                json!({"audio": b64(&question(0)), "max_tokens": 0}),
            ),
            "max_tokens",
        ),
        (
            task(
                "lfm2-audio-s2s",
                json!({"audio": b64(&question(0)), "max_tokens": 9001}),
            ),
            "max_tokens",
        ),
        (
            task(
                "lfm2-audio-s2s",
                json!({"audio": b64(&question(0)), "language": "fr"}),
            ),
            "language",
        ),
        (
            task("lfm2-audio-tts", json!({"text": "hi", "voice_id": "alloy"})),
            "alloy",
        ),
        (
            task(
                "lfm2-audio-s2s",
                json!({"audio": b64(&question(0)),
            "artifacts": [{"id": "lfm2_audio.question", "kind": "custom", "payload": b64(&question(1))},
                          {"id": "lfm2_audio.reply", "kind": "acoustic_tokens", "payload": b64(&[1, 0, 0, 0]), "meta": {"format": "x"}}]}),
            ),
            "meta",
        ),
        (
            task(
                "lfm2-audio-s2s",
                json!({"audio": b64(&question(0)),
            "artifacts": [{"id": "lfm2_audio.question", "kind": "speaker_embedding", "payload": ""}]}),
            ),
            "speaker_embedding",
        ),
        (
            task(
                "lfm2-audio-s2s",
                json!({"audio": b64(&question(0)),
            "artifacts": [{"id": "other", "kind": "custom", "payload": ""}]}),
            ),
            "other",
        ),
        // Capacity: the prompt plus 8192 steps do not fit the 8192-step conversation.
        (
            task(
                "lfm2-audio-s2s",
                json!({"audio": b64(&question(0)), "max_tokens": 8192}),
            ),
            "8192",
        ),
    ];
    for (body, needle) in cases {
        let resp = c.post(&run).json(&body).send().await.unwrap();
        let msg = expect_error(resp, 400, "invalid_request_error").await;
        assert!(msg.contains(needle), "`{needle}` not in `{msg}`");
        let _ = body;
    }
    let resp = c.post(&run).body("{not json").send().await.unwrap();
    expect_error(resp, 400, "invalid_request_error").await;
    let resp = c.post(url(&srv, "/v1/tasks/stream"))
        .json(&json!({"model": "lfm2-audio-s2s", "stream_format": "ndjson", "request": s2s_req(0, 5)}))
        .send().await.unwrap();
    assert!(expect_error(resp, 400, "invalid_request_error")
        .await
        .contains("ndjson"));
    // A bad request to the SSE route is still answered with its status, before any event.
    let resp = c.post(url(&srv, "/v1/tasks/stream"))
        .json(&json!({"model": "lfm2-audio-s2s", "stream_format": "sse", "request": {"audio": b64(&question(0)), "max_tokens": 8192}}))
        .send().await.unwrap();
    expect_error(resp, 400, "invalid_request_error").await;
    // 404: unknown model, unknown route.
    let resp = c
        .post(&run)
        .json(&task("nope", s2s_req(0, 5)))
        .send()
        .await
        .unwrap();
    assert!(expect_error(resp, 404, "not_found")
        .await
        .contains("unknown model id: nope"));
    let resp = c.get(url(&srv, "/v2/none")).send().await.unwrap();
    expect_error(resp, 404, "not_found").await;
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_auth_paths_panics_and_cors() {
    let dir = std::env::temp_dir().join(format!("serve-audio-dir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("q.wav"), question(0)).unwrap();
    let outside = std::env::temp_dir().join(format!("serve-outside-{}.wav", std::process::id()));
    std::fs::write(&outside, question(0)).unwrap();
    let mut s = settings();
    s.max_body_bytes = 200_000;
    s.api_key = Some("sekret".into());
    s.audio_dir = Some(dir.clone());
    s.cors_origins = vec!["http://example.test".into()];
    let state = Arc::new(
        serve::build_state(
            Settings { ..s },
            Some(tokio::task::spawn_blocking(model).await.unwrap()),
        )
        .unwrap(),
    );
    let extra = axum::Router::new().route(
        "/test/panic",
        axum::routing::get(|| async { panic!("boom") as &'static str }),
    );
    let srv = serve::start_with_state(state, extra).await.unwrap();
    let c = reqwest::Client::new();
    let run = url(&srv, "/v1/tasks/run");
    let auth = |r: reqwest::RequestBuilder| r.header("authorization", "Bearer sekret");
    // 401 without the key; /health stays open.
    let resp = c
        .post(&run)
        .json(&task("lfm2-audio-asr", json!({})))
        .send()
        .await
        .unwrap();
    expect_error(resp, 401, "authentication_error").await;
    let resp = c
        .post(&run)
        .header("authorization", "Bearer wrong")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    expect_error(resp, 401, "authentication_error").await;
    assert_eq!(
        c.get(url(&srv, "/health")).send().await.unwrap().status(),
        200
    );
    // 413 over the body limit.
    let big = task("lfm2-audio-asr", json!({"audio": "A".repeat(300_000)}));
    let resp = auth(c.post(&run)).json(&big).send().await.unwrap();
    assert_eq!(resp.status(), 413);
    let v: Value = resp.json().await.unwrap();
    assert!(v["error"]["message"].is_string());
    // Paths: inside the allowed directory yes, outside (or escaping with ..) no.
    let ok = auth(c.post(&run))
        .json(&task(
            "lfm2-audio-asr",
            json!({"audio": dir.join("q.wav"), "max_tokens": 5}),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let rel = auth(c.post(&run))
        .json(&task(
            "lfm2-audio-asr",
            json!({"audio": "q.wav", "max_tokens": 5}),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(rel.status(), 200);
    for bad in [
        outside.display().to_string(),
        format!("../{}", outside.file_name().unwrap().to_string_lossy()),
    ] {
        let resp = auth(c.post(&run))
            .json(&task("lfm2-audio-asr", json!({"audio": bad})))
            .send()
            .await
            .unwrap();
        assert!(expect_error(resp, 400, "invalid_request_error")
            .await
            .contains("outside"));
    }
    // 500 from a panicking handler, as the envelope (the connection is not dropped).
    let resp = auth(c.get(url(&srv, "/test/panic"))).send().await.unwrap();
    expect_error(resp, 500, "server_error").await;
    // CORS when configured.
    let pre = c
        .request(reqwest::Method::OPTIONS, &run)
        .header("origin", "http://example.test")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(
        pre.headers()["access-control-allow-origin"],
        "http://example.test"
    );
    srv.shutdown().await.unwrap();
    // CORS is off by default.
    let srv = server().await;
    let r = c
        .get(url(&srv, "/health"))
        .header("origin", "http://example.test")
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
    srv.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&outside);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_is_503_and_shutdown_cuts_streams_at_the_deadline() {
    let mut s = settings();
    s.slots = 1;
    s.max_queue = 1;
    // why a whole second: the test must see the waiting request in the queue before it times out.
    s.busy_timeout_ms = 1000;
    s.shutdown_timeout_ms = 200;
    let srv = server_with(s).await;
    let c = reqwest::Client::new();
    let long =
        json!({"model": "lfm2-audio-s2s", "stream_format": "sse", "request": s2s_req(0, 4000)});
    let mut stream = c
        .post(url(&srv, "/v1/tasks/stream"))
        .json(&long)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    stream.chunk().await.unwrap().unwrap();
    // One waits (and times out after 1 s); with the queue full the next is refused at once.
    let c2 = c.clone();
    let u = url(&srv, "/v1/tasks/run");
    let waiting = tokio::spawn(async move {
        let t = Instant::now();
        let r = c2
            .post(&u)
            .json(&task("lfm2-audio-s2s", s2s_req(1, 5)))
            .send()
            .await
            .unwrap();
        (r, t.elapsed())
    });
    // why poll: under load the waiting request may take longer than any fixed sleep to reach
    // the queue, and the next one must find the queue full.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = get_text(&c, &url(&srv, "/metrics")).await;
        if metric_sum(&m, "serve_queue_depth{") == 1.0 {
            break;
        }
        assert!(Instant::now() < deadline, "the request never queued:\n{m}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let resp = c
        .post(url(&srv, "/v1/tasks/run"))
        .json(&task("lfm2-audio-s2s", s2s_req(1, 5)))
        .send()
        .await
        .unwrap();
    assert!(expect_error(resp, 503, "server_busy")
        .await
        .contains("queued"));
    let (resp, waited) = waiting.await.unwrap();
    assert!(waited >= Duration::from_millis(950), "{waited:?}");
    assert!(expect_error(resp, 503, "server_busy")
        .await
        .contains("1000 ms"));
    // A request may ask for a shorter wait.
    let resp = c
        .post(url(&srv, "/v1/tasks/run"))
        .json(&json!({"model": "lfm2-audio-s2s", "request": s2s_req(1, 5), "busy_timeout_ms": 10}))
        .send()
        .await
        .unwrap();
    assert!(expect_error(resp, 503, "server_busy")
        .await
        .contains("10 ms"));
    // Shutdown: the running stream is cut at the 200 ms deadline and ends cleanly.
    let t = Instant::now();
    // why: read_to_end panics on a broken-off body, so this also checks the cut stream ends
    // as a stream (its done event, then the end), not as a dropped connection.
    let reader = tokio::spawn(async move { String::from_utf8(read_to_end(stream).await).unwrap() });
    srv.shutdown().await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let body = reader.await.unwrap();
    let events = sse_events(&body);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "task.stream.done", "{last}");
    assert_eq!(last["result"]["lfm2_audio"]["ended"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_exits_0_on_sigterm() {
    let (mut child, base) = tokio::task::spawn_blocking(|| {
        spawn_serve(&[
            "--port",
            "0",
            "--threads",
            "1",
            "--shutdown-timeout-ms",
            "500",
        ])
    })
    .await
    .unwrap();
    let h = get_json(&reqwest::Client::new(), &format!("{base}/health")).await;
    assert_eq!(h["status"], "ok");
    let st = std::process::Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let status = tokio::task::spawn_blocking(move || child.0.wait().unwrap())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

/// The demo package's events for `s2s_req(0, max_tokens)`, as the server runs it.
fn demo_events(max_tokens: usize) -> Vec<ReplyEvent> {
    let d = S2sOptions::default();
    let req = S2sRequest {
        question: question(0).into(),
        history: Vec::new(),
        return_codes: false,
        s2s: S2sOptions {
            max_new_tokens: max_tokens,
            audio: audio_engine::lfm2_audio::SamplerConfig { seed: 3, ..d.audio },
            ..d
        },
    };
    let mut events = Vec::new();
    Session::new(model(), SessionOptions::default())
        .s2s_with(&req, &mut |ev| {
            events.push(ev);
            true
        })
        .unwrap();
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_mid_stream_is_an_error_event_and_the_stream_ends() {
    // A package whose audio-code table is NaN: a reply runs normally up to its first audio
    // frame; fed back, that frame makes the hidden state NaN and the depthformer refuses it (a
    // real failure in the generation, after the first events went out).
    let mut s = settings();
    s.slots = 1;
    let srv = server_on(s, poisoned_model).await;
    let c = reqwest::Client::new();
    let want = tokio::task::spawn_blocking(|| demo_events(200))
        .await
        .unwrap();

    // The task route over SSE: 200, the reply's first events, one error event, the end.
    let body =
        json!({"model": "lfm2-audio-s2s", "stream_format": "sse", "request": s2s_req(0, 200)});
    let resp = c
        .post(url(&srv, "/v1/tasks/stream"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let text = String::from_utf8(read_to_end(resp).await).unwrap();
    let events = sse_events(&text);
    let (last, before) = events.split_last().unwrap();
    assert_eq!(last["type"], "error", "{last}");
    assert_eq!(last["error"]["type"], "server_error", "{last}");
    let msg = last["error"]["message"].as_str().unwrap();
    assert!(msg.contains("not finite"), "{msg}");
    // Nothing after the error event.
    assert!(text.ends_with("\n\n"), "{text}");
    assert_eq!(
        text.rsplit("data: ").next().unwrap().trim_end(),
        serde_json::to_string(last).unwrap()
    );
    // Before it: the events the demo package gives for the same request, in order, the reply
    // cut short (no final event, no done).
    assert!(!before.is_empty(), "the failure came before any event");
    assert!(
        before.len() < want.len(),
        "{} of {}",
        before.len(),
        want.len()
    );
    for (i, (got, w)) in before.iter().zip(&want).enumerate() {
        assert_eq!(got["type"], "task.stream.event", "{got}");
        let e = &got["event"];
        assert_eq!(e["is_final"], false, "event {i}");
        match w {
            ReplyEvent::Text(t) => assert_eq!(e["partial_text"]["text"], t.as_str(), "event {i}"),
            ReplyEvent::Audio(a) => assert_eq!(
                wav_i16(&unb64(e["audio"].as_str().unwrap())),
                to_i16(a),
                "event {i}"
            ),
        }
    }
    println!(
        "the stream failed after {} of the demo reply's {} events: {msg}",
        before.len(),
        want.len()
    );

    // Before a stream starts the same failure is a status: 500 with the envelope, on the run
    // route and on the stream route without SSE.
    for route in ["/v1/tasks/run", "/v1/tasks/stream"] {
        let resp = c
            .post(url(&srv, route))
            .json(&task("lfm2-audio-s2s", s2s_req(0, 200)))
            .send()
            .await
            .unwrap();
        assert!(expect_error(resp, 500, "server_error")
            .await
            .contains("not finite"));
    }

    // Streamed chat: the role chunk and the reply's first deltas, then the error, no [DONE].
    let chat = json!({"model": "lfm2-audio-s2s", "stream": true, "max_completion_tokens": 200,
        "seed": 3, "messages": [{"role": "user", "content": [{"type": "input_audio",
        "input_audio": {"data": b64(&question(0)), "format": "wav"}}]}]});
    let resp = c
        .post(url(&srv, "/v1/chat/completions"))
        .json(&chat)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let ev = sse_events(&String::from_utf8(read_to_end(resp).await).unwrap());
    let (last, before) = ev.split_last().unwrap();
    assert_eq!(last["error"]["type"], "server_error", "{last}");
    assert!(last["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not finite"));
    assert!(before.len() >= 2, "{ev:?}");
    for e in before {
        assert_eq!(e["object"], "chat.completion.chunk", "{e}");
        assert!(e["choices"][0]["finish_reason"].is_null(), "{e}");
    }

    // Streamed speech over SSE: audio deltas, then the error; no done event, no [DONE].
    // why: this text and voice reach `<|audio_start|>` on the demo package (tests/c_abi.rs
    // speaks it too); before that, TTS generates text only.
    let speech = json!({"model": "lfm2-audio-tts", "input": "Hello there, numbers 2024 and voices.",
        "voice": "uk-female", "stream": true, "stream_format": "sse", "max_tokens": 200, "seed": 11});
    let resp = c
        .post(url(&srv, "/v1/audio/speech"))
        .json(&speech)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let ev = sse_events(&String::from_utf8(read_to_end(resp).await).unwrap());
    let (last, before) = ev.split_last().unwrap();
    assert_eq!(last["type"], "error", "{last}");
    assert_eq!(last["error"]["type"], "server_error", "{last}");
    assert!(!before.is_empty(), "{ev:?}");
    for e in before {
        assert_eq!(e["type"], "speech.audio.delta", "{e}");
    }
    // Raw chunked PCM has no room for an error: the body ends early, cleanly (the failure is
    // logged), and holds whole samples.
    let mut raw = speech.clone();
    raw.as_object_mut().unwrap().remove("stream_format");
    let resp = c
        .post(url(&srv, "/v1/audio/speech"))
        .json(&raw)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "audio/pcm");
    let pcm = read_to_end(resp).await;
    assert_eq!(pcm.len() % 2, 0);

    // Every session went back to the pool, and the server serves on: ASR does not touch the
    // damaged table.
    let pool = srv.state.entries[0].pool.clone();
    let t = Instant::now();
    while pool.active() > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "a session never came back"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let resp = c
        .post(url(&srv, "/v1/tasks/run"))
        .json(&task(
            "lfm2-audio-asr",
            json!({"audio": b64(&question(1)), "max_tokens": 8}),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let m = get_text(&c, &url(&srv, "/metrics")).await;
    for needle in [
        "serve_requests_total{route=\"/v1/tasks/stream\",status=\"200\"} 1",
        "serve_requests_total{route=\"/v1/tasks/stream\",status=\"500\"} 1",
        "serve_requests_total{route=\"/v1/tasks/run\",status=\"500\"} 1",
        "serve_client_disconnects_total 0",
    ] {
        assert!(m.contains(needle), "{needle} in\n{m}");
    }
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_concurrent_stream_limit_is_503_and_frees_with_the_stream() {
    let mut s = settings();
    s.slots = 2;
    s.max_streams = 1;
    let srv = server_with(s).await;
    let c = reqwest::Client::new();
    let stream = url(&srv, "/v1/tasks/stream");
    let long =
        json!({"model": "lfm2-audio-s2s", "stream_format": "sse", "request": s2s_req(0, 4000)});
    let mut first = c.post(&stream).json(&long).send().await.unwrap();
    assert_eq!(first.status(), 200);
    first.chunk().await.unwrap().unwrap();
    // A second stream is refused at once although a session is free ...
    let short =
        json!({"model": "lfm2-audio-s2s", "stream_format": "sse", "request": s2s_req(1, 5)});
    let resp = c.post(&stream).json(&short).send().await.unwrap();
    assert!(expect_error(resp, 503, "server_busy")
        .await
        .contains("1 streams are running"));
    // ... and a request that does not stream takes that session.
    let resp = c
        .post(url(&srv, "/v1/tasks/run"))
        .json(&task("lfm2-audio-s2s", s2s_req(1, 5)))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // The stream's slot is freed with it: once its client went away, a new stream runs.
    drop(first);
    let pool = srv.state.entries[0].pool.clone();
    let t = Instant::now();
    while pool.active() > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the session never came back"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (events, _) = sse_task(&c, &stream, &[], &short).await;
    assert_eq!(events.last().unwrap()["is_final"], true);
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_refuses_audio_over_max_audio_seconds() {
    // why: the limit belongs to the loaded model (ModelOptions), so it is checked on a server
    // that loads its own, as the binary does.
    let (_child, base) = tokio::task::spawn_blocking(|| {
        spawn_serve(&["--port", "0", "--threads", "1", "--max-audio-seconds", "1"])
    })
    .await
    .unwrap();
    let c = reqwest::Client::new();
    let run = format!("{base}/v1/tasks/run");
    let over = task(
        "lfm2-audio-asr",
        json!({"audio": b64(&question(0)), "max_tokens": 4}),
    );
    let resp = c.post(&run).json(&over).send().await.unwrap();
    let msg = expect_error(resp, 400, "invalid_request_error").await;
    assert!(msg.contains("1.500 s, over the 1.000 s limit"), "{msg}");
    let short = saw_wav(12_000, 7, 400, 60); // 0.75 s
    let under = task(
        "lfm2-audio-asr",
        json!({"audio": b64(&short), "max_tokens": 4}),
    );
    let resp = c.post(&run).json(&under).send().await.unwrap();
    assert_eq!(resp.status(), 200);
}
