//! A WebDriver client over plain HTTP, and a headless Chromium started through chromedriver with
//! a fake microphone: what the voice page's browser tests drive.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{free_port, Kill};

/// A WebDriver session over plain HTTP.
pub struct Driver {
    http: reqwest::Client,
    base: String,
}

impl Driver {
    pub async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let v: Value = req.send().await.unwrap().json().await.unwrap();
        assert!(
            v["value"].get("error").is_none(),
            "webdriver {path}: {}",
            v["value"]
        );
        v["value"].clone()
    }

    pub async fn post(&self, path: &str, body: Value) -> Value {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    pub async fn js(&self, script: &str) -> Value {
        self.post("/execute/sync", json!({"script": script, "args": []}))
            .await
    }
}

/// Starts `chromedriver` and a headless Chromium session whose microphone is Chromium's fake
/// capture device fed by `fake_capture` (a WAV path, `%noloop` appended to play it once), with
/// its profile in `profile`. The returned [`Kill`] stops chromedriver (and its browser).
pub async fn headless_chromium(
    chromedriver: &str,
    fake_capture: &str,
    profile: &Path,
) -> (Kill, Driver) {
    let port = free_port();
    let proc = Kill(
        Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let t0 = Instant::now();
    loop {
        let ready = match http.get(format!("{base}/status")).send().await {
            Ok(r) => r
                .json::<Value>()
                .await
                .ok()
                .map(|v| v["value"]["ready"] == true),
            Err(_) => None,
        };
        if ready == Some(true) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "chromedriver did not start"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let caps = json!({"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
    "binary": "/usr/bin/chromium",
    "args": [
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
        format!("--use-file-for-fake-audio-capture={fake_capture}"),
        "--autoplay-policy=no-user-gesture-required",
        format!("--user-data-dir={}", profile.display()),
    ]}}}});
    let created: Value = http
        .post(format!("{base}/session"))
        .json(&caps)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["value"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("new session: {created}"))
        .to_owned();
    let d = Driver {
        http,
        base: format!("{base}/session/{id}"),
    };
    (proc, d)
}
