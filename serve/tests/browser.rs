//! The voice page at `GET /` in headless Chromium (driven over WebDriver by chromedriver) with a
//! fake microphone fed from a WAV file: two turns held on the Speak button, both replies arrive
//! and are scheduled for playback, the second request carries the first turn's two artifacts
//! (question WAV and reply codes), and the resumed/reused figures the page shows are the server's.
//! Skips when `chromium` or `chromedriver` is not installed (a marker line; a failure with
//! `CI=true`: ci-skip).

mod common;

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use common::webdriver::{headless_chromium, Driver};
use common::*;

/// Holds the pointer down on `element` for `ms`, as a person holding the button.
async fn hold(d: &Driver, element: &Value, ms: u64) {
    d.post(
        "/actions",
        json!({"actions": [{"type": "pointer", "id": "mouse",
        "parameters": {"pointerType": "mouse"},
        "actions": [
            {"type": "pointerMove", "duration": 0, "origin": element, "x": 0, "y": 0},
            {"type": "pointerDown", "button": 0},
            {"type": "pause", "duration": ms},
            {"type": "pointerUp", "button": 0},
        ]}]}),
    )
    .await;
}

/// Waits until `voiceTurns` has `n` finished turns; returns them.
async fn turns_done(d: &Driver, n: usize) -> Vec<Value> {
    let t0 = Instant::now();
    loop {
        let v = d.js("return JSON.stringify(window.voiceTurns || [])").await;
        let turns: Vec<Value> = serde_json::from_str(v.as_str().unwrap()).unwrap();
        if turns.len() >= n && turns.iter().all(|t| t["done"] == true) {
            return turns;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "waiting for {n} turns: {turns:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn metric(srv: &serve::Running, name: &str) -> f64 {
    metric_sum(
        &get_text(&reqwest::Client::new(), &url(srv, "/metrics")).await,
        name,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_voice_turns_in_headless_chromium() {
    let mut bins = Vec::new();
    for bin in ["chromium", "chromedriver"] {
        match installed(bin) {
            Some(p) => bins.push(p),
            None => {
                ci_skip::skip(
                    "two_voice_turns_in_headless_chromium",
                    &format!("`{bin}` is not installed (apt-get install chromium chromium-driver)"),
                );
                return;
            }
        }
    }
    let srv = server().await;
    let dir = std::env::temp_dir().join(format!("serve-browser-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mic = dir.join("q.wav");
    std::fs::write(&mic, question(1)).unwrap();

    let fake_capture = mic.display().to_string();
    let (_driver, d) = headless_chromium(&bins[1], &fake_capture, &dir.join("profile")).await;

    let page = format!("{}?max_tokens=48&seed=7", url(&srv, "/"));
    d.post("/url", json!({"url": page})).await;
    // The page lists the models, then enables the button.
    let t0 = Instant::now();
    while d
        .js("return document.getElementById('speak').disabled")
        .await
        != false
    {
        assert!(t0.elapsed() < Duration::from_secs(20), "page never ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let button = d
        .post(
            "/element",
            json!({"using": "css selector", "value": "#speak"}),
        )
        .await;

    let mut shown = Vec::new();
    for n in 1..=2 {
        hold(&d, &button, 1500).await;
        let turns = turns_done(&d, n).await;
        let t = &turns[n - 1];
        assert!(t["error"].is_null(), "turn {n}: {t}");
        // Shown on the page, figure by figure.
        let fig = d
            .js(&format!(
                "const f = document.querySelectorAll('.turn .fig')[{}]; \
                 return [f.dataset.resumed, f.dataset.reused, f.textContent]",
                n - 1
            ))
            .await;
        assert_eq!(fig[0], t["resumedPrefillPositions"].to_string(), "{fig}");
        assert_eq!(fig[1], t["reusedQuestions"].to_string(), "{fig}");
        eprintln!("turn {n}: {}", fig[2]);
        shown.push(t.clone());
    }
    let _ = d.call(reqwest::Method::DELETE, "", None).await;

    let (t1, t2) = (&shown[0], &shown[1]);
    // A question of about 1.5 s at 16 kHz was recorded each time.
    for t in [t1, t2] {
        let q = t["questionBytes"].as_u64().unwrap();
        assert!(q > 44 + 2 * 16_000, "question {q} bytes");
        assert!(t["samplesPlayed"].as_u64().unwrap() > 0, "{t}");
        assert!(t["audioChunks"].as_u64().unwrap() > 0, "{t}");
        assert_eq!(
            t["replyTextLength"].as_u64().unwrap() as usize,
            t["text"].as_str().unwrap().chars().count()
        );
    }
    assert_eq!(t1["artifactsSent"], 0);
    assert_eq!(t2["artifactsSent"], 2);
    // The first turn restored the head its session prefilled when the server made it.
    assert!(t1["resumedPrefillPositions"].as_u64().unwrap() > 0, "{t1}");
    assert_eq!(t1["reusedQuestions"], 0);
    // The second turn went to the first turn's session (conversation affinity) and reused the
    // encoder output of the first question. (Its prefill blocks resume from a prompt of more than
    // one 256-position block; a short first turn has none to resume.)
    assert_eq!(t2["affinity"], true, "{t2}");
    assert_eq!(t2["reusedQuestions"], 1, "{t2}");
    // The page's figures are the server's.
    let resumed = metric(&srv, "serve_prefill_positions_resumed_total").await;
    let reused = metric(&srv, "serve_questions_reused_total").await;
    let page_resumed: u64 = shown
        .iter()
        .map(|t| t["resumedPrefillPositions"].as_u64().unwrap())
        .sum();
    let page_reused: u64 = shown
        .iter()
        .map(|t| t["reusedQuestions"].as_u64().unwrap())
        .sum();
    assert_eq!(resumed as u64, page_resumed);
    assert_eq!(reused as u64, page_reused);
    let _ = std::fs::remove_dir_all(&dir);
}
