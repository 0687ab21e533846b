//! The voice page's hands-free mode in headless Chromium (driven over WebDriver by
//! chromedriver), its fake microphone fed from a WAV of three spoken utterances (espeak-ng):
//! the first two are questions whose replies run to their end, the third starts while the
//! second reply is still playing. Checked from the figures the page records
//! (`window.handsfree`): two replies end with their audio received (as much as the server
//! sent) and played out; one is stopped at once and the page truncates it at the audio it
//! played, no more than it received (the server acknowledges the same cut). When the server was
//! still generating that reply, its `response.done` says cancelled (its VAD heard the
//! barge-in); a reply generated faster than it plays may have ended before.
//! Skips when `chromium`, `chromedriver` or `espeak-ng` is not installed (a marker line; a failure
//! with `CI=true`: ci-skip).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use common::webdriver::{headless_chromium, Driver};
use common::*;

/// The fake microphone's rate (Chromium's capture rate; the page resamples to 24 kHz).
const MIC_RATE: u32 = 48_000;
/// Reply steps (text tokens and audio frames) of the first and third responses: a reply of a
/// few seconds that plays out before the next utterance.
const SHORT_TOKENS: u32 = 40;
/// Reply steps of the second response: the demo package generates faster than real time, so
/// only a long reply is still being generated when the third utterance barges in.
const LONG_TOKENS: u32 = 1500;
/// The WAV's timeline, seconds: silence before the first utterance, after the first (the
/// first reply is generated and played in it), after the second (the second reply starts
/// playing in it), and after the third.
const LEAD_IN_S: f64 = 0.5;
const AFTER_FIRST_S: f64 = 8.0;
const AFTER_SECOND_S: f64 = 2.5;
const TAIL_S: f64 = 1.0;
/// The VAD's silence that ends a turn, ms (what the page asks of the server).
const SILENCE_MS: u32 = 500;

/// The page's figures.
async fn figures(d: &Driver) -> Value {
    let v = d
        .js("return JSON.stringify(window.handsfree || null)")
        .await;
    serde_json::from_str(v.as_str().unwrap()).unwrap()
}

/// Speech of `text` from espeak-ng at `MIC_RATE` (linear interpolation from its 22050 Hz),
/// or `None` without espeak-ng on PATH.
fn speak(dir: &Path, text: &str) -> Option<Vec<i16>> {
    installed("espeak-ng")?;
    let path = dir.join(format!("say-{}.wav", text.len()));
    let status = Command::new("espeak-ng")
        .args(["-v", "en-us", "-s", "170", "-w"])
        .arg(&path)
        .arg(text)
        .status()
        .unwrap();
    assert!(status.success(), "espeak-ng failed: {status}");
    let mut r = hound::WavReader::open(&path).unwrap();
    let spec = r.spec();
    assert_eq!((spec.channels, spec.bits_per_sample), (1, 16), "{spec:?}");
    let x: Vec<f64> = r.samples::<i16>().map(|s| f64::from(s.unwrap())).collect();
    let step = f64::from(spec.sample_rate) / f64::from(MIC_RATE);
    let n = ((x.len() - 1) as f64 / step) as usize;
    Some(
        (0..n)
            .map(|k| {
                let t = k as f64 * step;
                let (i, f) = (t as usize, t.fract());
                (x[i] + (x[(i + 1).min(x.len() - 1)] - x[i]) * f).round() as i16
            })
            .collect(),
    )
}

fn silence(s: f64) -> Vec<i16> {
    vec![0; (s * f64::from(MIC_RATE)) as usize]
}

/// The fake microphone's WAV: three utterances on the timeline above; and where the third
/// starts, seconds.
fn microphone(dir: &Path) -> Option<(Vec<u8>, f64)> {
    let first = speak(dir, "What is the capital of France?")?;
    let second = speak(dir, "Tell me a long story about the sea.")?;
    let third = speak(dir, "Wait, tell me about the mountains instead.")?;
    let mut all = silence(LEAD_IN_S);
    all.extend(&first);
    all.extend(silence(AFTER_FIRST_S));
    all.extend(&second);
    all.extend(silence(AFTER_SECOND_S));
    let third_at = all.len() as f64 / f64::from(MIC_RATE);
    all.extend(&third);
    all.extend(silence(TAIL_S));
    let mut out = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: MIC_RATE,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
    for s in all {
        w.write_sample(s).unwrap();
    }
    w.finalize().unwrap();
    Some((out.into_inner(), third_at))
}

/// Polls the page's figures until `done` holds for them (no errors recorded meanwhile).
async fn wait_for(d: &Driver, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let t0 = Instant::now();
    loop {
        let hf = figures(d).await;
        if done(&hf) {
            return hf;
        }
        assert!(
            hf["errors"].as_array().is_none_or(Vec::is_empty),
            "the page recorded errors while waiting for {what}: {}",
            hf["errors"]
        );
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "waiting for {what}: {hf:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn turns(hf: &Value) -> &[Value] {
    hf["turns"].as_array().map_or(&[][..], Vec::as_slice)
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hands_free_turns_and_a_barge_in_in_headless_chromium() {
    let mut bins = Vec::new();
    for bin in ["chromium", "chromedriver", "espeak-ng"] {
        match installed(bin) {
            Some(p) => bins.push(p),
            None => {
                ci_skip::skip(
                    "hands_free_turns_and_a_barge_in_in_headless_chromium",
                    &format!(
                        "`{bin}` is not installed (apt-get install chromium chromium-driver \
                         espeak-ng)"
                    ),
                );
                return;
            }
        }
    }
    let dir = std::env::temp_dir().join(format!("serve-handsfree-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (wav, third_at) = microphone(&dir).expect("espeak-ng is installed");
    let mic = dir.join("mic.wav");
    std::fs::write(&mic, wav).unwrap();

    let srv = server().await;
    // `%noloop`: the file plays once, then the microphone is silent.
    let fake_capture = format!("{}%noloop", mic.display());
    let (_chromedriver, d) = headless_chromium(&bins[1], &fake_capture, &dir.join("profile")).await;
    let page = format!(
        "{}?mode=handsfree&aec=0&max_tokens={SHORT_TOKENS}&silence_ms={SILENCE_MS}",
        url(&srv, "/")
    );
    d.post("/url", json!({"url": page})).await;
    let t0 = Instant::now();
    while d
        .js("return document.getElementById('hf-start').disabled")
        .await
        != false
    {
        assert!(t0.elapsed() < Duration::from_secs(20), "page never ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The test's browser plays audio without a gesture; a person clicks Start.
    d.js("window.handsfreeTest.start(); return null").await;

    // The second reply is a long one, the third a short one again: the page's max tokens
    // control applies to the next response while the socket is open. Each is set while the
    // reply before is done and the next one not yet asked for (the WAV's silences leave
    // seconds for it).
    for (n, tokens) in [(1, LONG_TOKENS), (2, SHORT_TOKENS)] {
        let hf = wait_for(&d, &format!("reply {n} to finish"), |hf| {
            turns(hf)
                .get(n - 1)
                .is_some_and(|t| t["status"] != "in_progress")
        })
        .await;
        assert_eq!(
            turns(&hf).len(),
            n,
            "reply {} began too early: {hf:#}",
            n + 1
        );
        d.js(&format!(
            "const e = document.getElementById('max_tokens'); e.value = '{tokens}'; \
             e.dispatchEvent(new Event('change')); return null"
        ))
        .await;
        let updates = move |hf: &Value| {
            hf["events"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["type"] == "session.updated")
                .count()
        };
        wait_for(&d, "the session update", |hf| updates(hf) == n + 1).await;
    }
    // Three replies, all finished, and the page back to listening (playback over).
    let hf = wait_for(&d, "three replies", |hf| {
        let t = turns(hf);
        t.len() >= 3 && t.iter().all(|t| t["status"] != "in_progress") && hf["state"] == "listening"
    })
    .await;
    let _ = d.call(reqwest::Method::DELETE, "", None).await;
    let turns = turns(&hf);
    for t in turns {
        eprintln!(
            "reply {}: {} · first audio {} ms after the turn ended · {:.0} ms received, {:.0} ms \
             played{}",
            t["n"],
            t["status"],
            t["first_delta_ms"],
            f(&t["audio_ms_received"]),
            f(&t["audio_ms_played"]),
            if t["interrupted"] == true {
                format!(", truncated at {} ms", t["truncated_at_ms"])
            } else {
                String::new()
            }
        );
    }
    eprintln!(
        "capture: {}, appended {:.0} ms, third utterance at {third_at:.2} s",
        hf["capture"],
        f(&hf["appended_ms"])
    );
    assert!(
        hf["errors"].as_array().unwrap().is_empty(),
        "{}",
        hf["errors"]
    );
    assert_eq!(turns.len(), 3, "one reply per utterance: {hf:#}");
    let (first, second, third) = (&turns[0], &turns[1], &turns[2]);

    // The first and the third reply run to their end (the demo package's random weights never
    // end a reply by themselves, so that end is the step limit: `incomplete`) and play out.
    for t in [first, third] {
        assert!(
            t["status"] == "completed" || t["status"] == "incomplete",
            "{t}"
        );
        assert_eq!(t["interrupted"], false, "{t}");
        let received = f(&t["audio_ms_received"]);
        assert!(received > 0.0, "{t}");
        // The page received exactly the audio the server says it sent.
        assert!((received - f(&t["server_audio_ms"])).abs() < 0.01, "{t}");
        assert!((f(&t["audio_ms_played"]) - received).abs() < 1.0, "{t}");
        assert!(f(&t["first_delta_ms"]) > 0.0, "{t}");
    }

    // The second: the third utterance started while it played, so the page stopped it and cut
    // it at what it had played. If the server was still generating it then, its VAD cancelled
    // it; a reply that generates faster than it plays (a fast machine, a turn started early at
    // the pause) may have ended before, and then the page's cut alone applies.
    let server_cancelled = second["status"] == "cancelled";
    assert!(
        server_cancelled || second["status"] == "completed" || second["status"] == "incomplete",
        "{second}"
    );
    assert_eq!(second["interrupted"], true, "{second}");
    let received = f(&second["audio_ms_received"]);
    let cut = f(&second["truncated_at_ms"]);
    assert!(received > 0.0 && cut > 0.0, "it was playing: {second}");
    assert!(cut <= received, "{second}");
    assert!(
        (f(&second["audio_ms_played"]) - cut).abs() < 1.0,
        "{second}"
    );
    assert!(
        (received - f(&second["server_audio_ms"])).abs() < 0.01,
        "{second}"
    );
    // The page told the server at once, and the server took that cut once the reply ended.
    assert_eq!(second["truncate_sent"], true, "{second}");
    assert_eq!(f(&second["truncate_acked_ms"]), cut, "{second}");
    let events = hf["events"].as_array().unwrap();
    let at = |pred: &dyn Fn(&Value) -> bool| events.iter().position(pred);
    // The page sends no response.cancel: a cancel is the server's VAD's.
    assert!(
        !events.iter().any(|e| e["type"] == "response.cancel"),
        "{events:?}"
    );
    let truncate = at(&|e| e["dir"] == "out" && e["type"] == "conversation.item.truncate")
        .expect("a truncate sent");
    let acked = at(&|e| e["dir"] == "in" && e["type"] == "conversation.item.truncated")
        .expect("the truncate acknowledged");
    let started = events[..truncate]
        .iter()
        .rposition(|e| e["type"] == "input_audio_buffer.speech_started")
        .expect("speech started before the truncate");
    assert!(started < truncate && truncate < acked, "{events:?}");
    let cancelled = at(&|e| e["type"] == "response.done" && e["status"] == "cancelled");
    assert_eq!(cancelled.is_some(), server_cancelled, "{events:?}");
    if let Some(cancelled) = cancelled {
        assert_eq!(events[cancelled]["reason"], "turn_detected", "{events:?}");
        assert!(started < cancelled && cancelled < acked, "{events:?}");
    }
    // The cut is the audio clock's: no more than the wall time from the reply's first delta
    // to the speech_started that stopped it (playback cannot start before its audio arrived).
    let second_item = second["item_id"].as_str().unwrap();
    let first_delta = events
        .iter()
        .find(|e| e["type"] == "response.output_audio.delta" && e["item_id"] == second_item)
        .expect("the second reply's first delta");
    let window_ms = f(&events[started]["t_ms"]) - f(&first_delta["t_ms"]);
    eprintln!("reply 2: {window_ms} ms from its first delta to the barge-in, {cut} ms played");
    assert!(cut <= window_ms, "{cut} ms played in {window_ms} ms");
    assert_eq!(
        hf["truncates"].as_array().unwrap().len(),
        1,
        "{}",
        hf["truncates"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
