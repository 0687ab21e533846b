//! nginx in front of two `serve` replicas, routing by `X-Conversation-Id`
//! (`hash $http_x_conversation_id consistent`): a 5-turn SSE conversation through nginx gives the
//! same bytes as against one server; every turn after the first lands on the first turn's
//! replica (its cached state is reused); killing that replica mid-conversation moves the rest to
//! the other one, which starts cold (nothing resumed) and still answers the same bytes, because
//! the client carries the history. A second conversation drains its replica with SIGTERM in the
//! middle of a turn: that turn streams to its end with the same bytes, the replica exits 0, and
//! the rest goes to the other replica unchanged. nginx runs the README's snippet as written
//! (ports aside).
//! Skips when `nginx` is not installed (a marker line; a failure with `CI=true`: ci-skip).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use common::*;

const MAX_TOKENS: usize = 24;
const SEED: u64 = 5;
const TURNS: usize = 5;
/// The turn (0-based) before which the replica serving the conversation is killed.
const KILL_BEFORE: usize = 3;

/// The README's nginx snippet (the ```nginx block of "Several replicas behind nginx").
fn readme_snippet() -> String {
    let readme = readme();
    let at = readme
        .find("### Several replicas behind nginx")
        .expect("the README's nginx section");
    let rest = &readme[at..];
    let open = rest.find("```nginx\n").expect("a ```nginx block") + "```nginx\n".len();
    let close = rest[open..].find("\n```").expect("the block ends") + open;
    rest[open..close].to_owned()
}

/// nginx.conf: the README's snippet as written, its two upstream servers and its listen port
/// replaced by the test's, inside the process-level settings a private nginx needs (pid, logs
/// and temp files under `dir`).
fn nginx_conf(dir: &Path, listen: u16, upstreams: &[&str]) -> String {
    let d = dir.display();
    let snippet = readme_snippet();
    let mut servers = upstreams.iter();
    let mut lines = Vec::new();
    for line in snippet.lines() {
        let t = line.trim_start();
        if t.starts_with("server 127.0.0.1:") {
            let u = servers
                .next()
                .expect("two upstream servers in the README snippet");
            let (_, rest) = t.split_once(' ').unwrap();
            let (_, opts) = rest.split_once(' ').unwrap();
            lines.push(format!(
                "    server {} {opts}",
                u.trim_start_matches("http://")
            ));
        } else if t.starts_with("listen ") {
            lines.push(format!("    listen 127.0.0.1:{listen};"));
        } else {
            lines.push(line.to_owned());
        }
    }
    assert!(
        servers.next().is_none(),
        "the README snippet has fewer upstream servers than the test's {}",
        upstreams.len()
    );
    assert!(
        snippet.contains("hash $http_x_conversation_id consistent;"),
        "{snippet}"
    );
    let http = lines.join("\n");
    format!(
        "worker_processes 1;\n\
         pid {d}/nginx.pid;\n\
         error_log {d}/error.log warn;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n\
         access_log {d}/access.log;\n\
         client_body_temp_path {d}/body;\n\
         proxy_temp_path {d}/proxy;\n\
         fastcgi_temp_path {d}/fastcgi;\n\
         uwsgi_temp_path {d}/uwsgi;\n\
         scgi_temp_path {d}/scgi;\n\
         client_body_buffer_size 16m;\n\
         {http}\n\
         }}\n"
    )
}

/// A 16 kHz question long enough that its prompt fills a prefill block (so the next turn on the
/// same replica resumes it), different per `i`.
fn long_question(i: usize) -> Vec<u8> {
    saw_wav(16_000 * 21 + 4_000 * i, 5 + 2 * i, 320, 70)
}

/// One SSE turn; returns the result.
async fn turn(client: &reqwest::Client, base: &str, i: usize, history: &[Value]) -> Value {
    let body = json!({
        "model": "lfm2-audio-s2s",
        "stream_format": "sse",
        "request": {"audio": b64(&long_question(i)), "seed": SEED, "max_tokens": MAX_TOKENS,
                    "options": {"return_codes": true}, "artifacts": history},
    });
    let url = format!("{base}/v1/tasks/stream");
    let headers = [("X-Conversation-Id", "nginx-test-conversation")];
    sse_task(client, &url, &headers, &body).await.1
}

fn push_history(history: &mut Vec<Value>, i: usize, result: &Value) {
    history.push(question_artifact(&long_question(i)));
    history.push(result["artifacts"][0].clone());
}

/// The bytes a turn must match: text, audio WAV, reply codes and meta.
fn bytes(r: &Value) -> (Value, Value, Value, Value) {
    let a = &r["artifacts"][0];
    (
        r["text"].clone(),
        r["audio"].clone(),
        a["payload"].clone(),
        a["meta"].clone(),
    )
}

/// Stream requests a replica has answered.
async fn served(client: &reqwest::Client, base: &str) -> Option<u64> {
    let text = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    Some(metric_sum(&text, "serve_requests_total{route=\"/v1/tasks/stream\"") as u64)
}

/// Stream requests each replica has answered.
async fn served_all(
    client: &reqwest::Client,
    replicas: &[(Option<Kill>, String)],
) -> [Option<u64>; 2] {
    [
        served(client, &replicas[0].1).await,
        served(client, &replicas[1].1).await,
    ]
}

/// The one replica whose count grew from `before` to `after` (turn `i`, for the message).
fn served_by(i: usize, before: [Option<u64>; 2], after: [Option<u64>; 2]) -> usize {
    let hit: Vec<usize> = (0..2)
        .filter(|&k| matches!((before[k], after[k]), (Some(x), Some(y)) if y > x))
        .collect();
    assert_eq!(hit.len(), 1, "turn {i}: {before:?} -> {after:?}");
    hit[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_routes_a_conversation_to_its_replica_and_fails_over() {
    let Some(nginx) = installed("nginx") else {
        ci_skip::skip(
            "nginx_routes_a_conversation_to_its_replica_and_fails_over",
            "`nginx` is not installed (apt-get install nginx)",
        );
        return;
    };
    let client = reqwest::Client::new();
    let reference = reference_conversation(&client).await;
    let mut replicas = two_replicas();
    let urls: Vec<&str> = replicas.iter().map(|r| r.1.as_str()).collect();
    let (_nginx, front, dir) = start_nginx(&client, &nginx, "failover", &urls).await;

    let mut history = Vec::new();
    let mut on: Option<usize> = None;
    let mut head = 0;
    for (i, want) in reference.iter().enumerate() {
        if i == KILL_BEFORE {
            let k = on.expect("a replica served the conversation");
            drop(replicas[k].0.take());
        }
        let before = served_all(&client, &replicas).await;
        let r = turn(&client, &front, i, &history).await;
        let k = served_by(i, before, served_all(&client, &replicas).await);
        let resumed = r["lfm2_audio"]["resumed_prefill_positions"]
            .as_u64()
            .unwrap();
        let reused = r["lfm2_audio"]["reused_questions"].as_u64().unwrap();
        eprintln!("turn {i}: replica {k}, resumed {resumed}, reused {reused}");
        assert_eq!(bytes(&r), bytes(want), "turn {i}: bytes differ");
        match i {
            // The first turn restores only the head its session prefilled when it was made.
            0 => {
                assert!(resumed > 0, "turn 0: the session's head was not restored");
                head = resumed;
            }
            // The first turn after the move starts cold on the other replica (but for the head
            // every session prefills).
            KILL_BEFORE => {
                assert_ne!(Some(k), on, "turn {i} went to the killed replica");
                assert_eq!(resumed, head, "turn {i}");
                assert_eq!(reused, 0, "turn {i}");
            }
            // Every other turn lands where the previous one did and resumes its state.
            _ => {
                assert_eq!(Some(k), on, "turn {i} changed replica");
                assert!(resumed > head, "turn {i}: nothing but the head resumed");
                // Every earlier question's encoder output is cached on this replica (after
                // the move, the cold turn encoded them all).
                assert_eq!(reused as usize, i, "turn {i}");
            }
        }
        on = Some(k);
        push_history(&mut history, i, &r);
    }
    drop(_nginx);
    drop(replicas);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The reference: the conversation against one (in-process) server.
async fn reference_conversation(client: &reqwest::Client) -> Vec<Value> {
    let one = server().await;
    let one_url = url(&one, "");
    let mut reference = Vec::new();
    let mut history = Vec::new();
    for i in 0..TURNS {
        let r = turn(client, &one_url, i, &history).await;
        push_history(&mut history, i, &r);
        reference.push(r);
    }
    eprintln!(
        "reference prompt positions per turn: {:?}",
        reference
            .iter()
            .map(|r| r["lfm2_audio"]["prompt_positions"].clone())
            .collect::<Vec<_>>()
    );
    one.shutdown().await.unwrap();
    reference
}

/// Two serve replicas (one slot, one thread each) and their base URLs.
fn two_replicas() -> Vec<(Option<Kill>, String)> {
    let replica = || spawn_serve(&["--port", "0", "--threads", "1", "--slots", "1"]);
    let (a, a_url) = replica();
    let (b, b_url) = replica();
    vec![(Some(a), a_url), (Some(b), b_url)]
}

/// nginx with the README's snippet over `upstreams`, up and answering: it, its base URL and
/// its folder.
async fn start_nginx(
    client: &reqwest::Client,
    nginx: &str,
    name: &str,
    upstreams: &[&str],
) -> (Kill, String, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("serve-nginx-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    std::fs::write(dir.join("nginx.conf"), nginx_conf(&dir, port, upstreams)).unwrap();
    let nginx = Kill(
        Command::new(nginx)
            .arg("-p")
            .arg(&dir)
            .arg("-e")
            .arg(dir.join("error.log"))
            .args(["-c", "nginx.conf", "-g", "daemon off;"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let front = format!("http://127.0.0.1:{port}");
    let t0 = Instant::now();
    while client.get(format!("{front}/health")).send().await.is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "nginx did not start: {}",
            std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (nginx, front, dir)
}

/// One SSE turn's request through `base`, sent: its response, the stream still running.
async fn start_turn(
    client: &reqwest::Client,
    base: &str,
    i: usize,
    history: &[Value],
) -> reqwest::Response {
    let body = json!({
        "model": "lfm2-audio-s2s",
        "stream_format": "sse",
        "request": {"audio": b64(&long_question(i)), "seed": SEED, "max_tokens": MAX_TOKENS,
                    "options": {"return_codes": true}, "artifacts": history},
    });
    let resp = client
        .post(format!("{base}/v1/tasks/stream"))
        .header("X-Conversation-Id", "nginx-test-conversation")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_a_replica_mid_turn_and_the_conversation_goes_on_unchanged() {
    let Some(nginx) = installed("nginx") else {
        ci_skip::skip(
            "sigterm_drains_a_replica_mid_turn_and_the_conversation_goes_on_unchanged",
            "`nginx` is not installed (apt-get install nginx)",
        );
        return;
    };
    let client = reqwest::Client::new();
    let reference = reference_conversation(&client).await;
    let mut replicas = two_replicas();
    let urls: Vec<&str> = replicas.iter().map(|r| r.1.as_str()).collect();
    let (_nginx, front, dir) = start_nginx(&client, &nginx, "drain", &urls).await;

    let mut history = Vec::new();
    let mut on = None;
    let mut drained = None;
    for (i, want) in reference.iter().enumerate() {
        let before = served_all(&client, &replicas).await;
        let resp = start_turn(&client, &front, i, &history).await;
        // The answer's head is counted once the stream starts.
        let k = served_by(i, before, served_all(&client, &replicas).await);
        if i == KILL_BEFORE {
            // SIGTERM the replica while this turn streams from it.
            assert_eq!(Some(k), on, "turn {i} changed replica before the drain");
            // Its one session is leased: the turn runs there as the signal goes out.
            let m = get_text(&client, &format!("{}/metrics", replicas[k].1)).await;
            assert_eq!(metric_sum(&m, "serve_sessions_active"), 1.0, "{m}");
            let child = replicas[k].0.as_ref().unwrap();
            let ok = Command::new("kill")
                .args(["-TERM", &child.0.id().to_string()])
                .status()
                .unwrap()
                .success();
            assert!(ok, "kill -TERM");
        }
        let body = String::from_utf8(read_to_end(resp).await).unwrap();
        let events = sse_events(&body);
        let last = events.last().expect("an SSE event");
        assert_eq!(last["type"], "task.stream.done", "turn {i}: {last}");
        let r = last["result"].clone();
        assert_eq!(bytes(&r), bytes(want), "turn {i}: bytes differ");
        if i == KILL_BEFORE {
            // The drained replica exits 0 once its turn has ended.
            let mut child = replicas[k].0.take().unwrap();
            let t = Instant::now();
            let status = loop {
                if let Some(s) = child.0.try_wait().unwrap() {
                    break s;
                }
                assert!(
                    t.elapsed() < Duration::from_secs(20),
                    "the replica did not exit"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            assert_eq!(status.code(), Some(0), "the drained replica's exit");
            eprintln!("turn {i}: replica {k} drained, exited 0");
            drained = Some(k);
        } else if i > KILL_BEFORE {
            assert_ne!(Some(k), drained, "turn {i} went to the drained replica");
        }
        on = Some(k);
        push_history(&mut history, i, &r);
    }
    drop(_nginx);
    drop(replicas);
    let _ = std::fs::remove_dir_all(&dir);
}
