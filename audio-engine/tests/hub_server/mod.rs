//! A stand-in for the Hugging Face Hub on loopback, serving the endpoints `huggingface_hub` and
//! `hf-hub` use, as the hub answers them:
//!
//! - `GET /api/models/<org>/<name>[/revision/main][?blobs=true]`: `{"id", "sha", "siblings":
//!   [{"rfilename", "size", "lfs": {"sha256", "size"}}]}`;
//! - `GET|HEAD /<org>/<name>/resolve/main/<file>`: `302` to an absolute `/cdn/<sha256>` URL, with
//!   `X-Repo-Commit`, `X-Linked-Etag` (the quoted sha256), `X-Linked-Size` and `ETag`;
//! - `GET|HEAD /cdn/<sha256>`: the bytes, with `Range` requests (`206`, `Content-Range`).
//!
//! Unknown repositories and files are `404` (with the hub's `X-Error-Code`). It logs every
//! request (`METHOD path [range]`) and can require a token, cut one transfer halfway, serve a
//! file with one byte changed, and list a file it then answers 404 for.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use sha2::{Digest, Sha256};

/// One served file.
#[derive(Clone)]
pub struct File {
    /// Its name in the repository.
    pub name: String,
    /// Its bytes.
    pub data: Arc<Vec<u8>>,
    /// Their sha256 (hex).
    pub sha256: String,
}

impl File {
    /// A file of `data`.
    pub fn new(name: &str, data: Vec<u8>) -> File {
        let sha256 = hex(&Sha256::digest(&data));
        File {
            name: name.to_owned(),
            data: Arc::new(data),
            sha256,
        }
    }

    /// The four files of a package on disk, named as the hub names them (their file names).
    pub fn package(paths: &audio_engine::lfm2_audio::PackagePaths) -> Vec<File> {
        [
            &paths.backbone,
            &paths.mmproj,
            &paths.vocoder,
            &paths.tokenizer,
        ]
        .iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            File::new(name, std::fs::read(p).unwrap())
        })
        .collect()
    }
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Default)]
struct State {
    /// repo id -> (commit, files)
    repos: HashMap<String, (String, Vec<File>)>,
    log: Vec<String>,
    token: Option<String>,
    /// Files whose next full transfer is cut halfway (once each).
    cut: HashSet<String>,
    /// Files served with one byte changed (the listing keeps the right sha256).
    corrupt: HashSet<String>,
    /// Files listed but answered 404.
    gone: HashSet<String>,
}

/// The server; stops when dropped (or on [`HubServer::stop`]).
///
/// why two ports: the hub redirects file downloads to another origin (its CDN), and
/// `huggingface_hub` follows same-origin redirects when it reads a file's metadata, so the
/// bytes are served from a second loopback port, as from another host.
pub struct HubServer {
    addr: SocketAddr,
    cdn: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

fn accept_loop(
    listener: TcpListener,
    cdn: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let Ok(conn) = conn else { continue };
            let st = state.clone();
            std::thread::spawn(move || {
                let _ = serve(conn, cdn, &st);
            });
        }
    })
}

impl HubServer {
    /// Starts a server on two ephemeral loopback ports (the hub and its CDN).
    pub fn start() -> HubServer {
        let hub = TcpListener::bind("127.0.0.1:0").expect("binding loopback");
        let cdn_l = TcpListener::bind("127.0.0.1:0").expect("binding loopback");
        let addr = hub.local_addr().unwrap();
        let cdn = cdn_l.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let threads = vec![
            accept_loop(hub, cdn, state.clone(), stop.clone()),
            accept_loop(cdn_l, cdn, state.clone(), stop.clone()),
        ];
        HubServer {
            addr,
            cdn,
            state,
            stop,
            threads,
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Adds (or replaces) repository `repo` at `commit` with `files`.
    pub fn add_repo(&self, repo: &str, commit: &str, files: Vec<File>) {
        self.state
            .lock()
            .unwrap()
            .repos
            .insert(repo.to_owned(), (commit.to_owned(), files));
    }

    /// Answers 401 to hub requests without `Authorization: Bearer <token>`.
    pub fn require_token(&self, token: &str) {
        self.state.lock().unwrap().token = Some(token.to_owned());
    }

    /// Cuts the next full transfer of `file` after half its bytes.
    pub fn cut_once(&self, file: &str) {
        self.state.lock().unwrap().cut.insert(file.to_owned());
    }

    /// Serves `file` with one byte changed.
    pub fn corrupt(&self, file: &str) {
        self.state.lock().unwrap().corrupt.insert(file.to_owned());
    }

    /// Lists `file` but answers 404 for it.
    pub fn gone(&self, file: &str) {
        self.state.lock().unwrap().gone.insert(file.to_owned());
    }

    /// Every request so far, `METHOD path` (+ ` range=<Range>` when it had one).
    pub fn log(&self) -> Vec<String> {
        self.state.lock().unwrap().log.clone()
    }

    /// The requests that concern `file` of `repo` (its resolve URL, or its bytes).
    pub fn requests_for(&self, repo: &str, file: &File) -> Vec<String> {
        let resolve = format!(" /{repo}/resolve/main/{}", file.name);
        let cdn = format!(" /cdn/{}", file.sha256);
        self.log()
            .into_iter()
            .filter(|l| l.contains(&resolve) || l.contains(&cdn))
            .collect()
    }

    /// Stops accepting connections; the port is closed when this returns.
    pub fn stop(&mut self) {
        if self.stop.swap(true, Ordering::SeqCst) {
            return;
        }
        // why: `incoming` blocks in accept; one connection wakes it to see the flag.
        let _ = TcpStream::connect(self.addr);
        let _ = TcpStream::connect(self.cdn);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for HubServer {
    fn drop(&mut self) {
        self.stop();
    }
}

struct Request {
    method: String,
    path: String,
    headers: HashMap<String, String>,
}

fn read_request(r: &mut impl BufRead) -> std::io::Result<Option<Request>> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let target = parts.next().unwrap_or("/");
    let path = target.split('?').next().unwrap_or("/").to_owned();
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    Ok(Some(Request {
        method,
        path,
        headers,
    }))
}

fn respond(
    w: &mut TcpStream,
    status: &str,
    headers: &[(&str, String)],
    body: &[u8],
    head: bool,
) -> std::io::Result<()> {
    let mut out = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    if !headers.iter().any(|(k, _)| *k == "Content-Length") {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    w.write_all(out.as_bytes())?;
    if !head {
        w.write_all(body)?;
    }
    w.flush()
}

fn not_found(w: &mut TcpStream, code: &str, head: bool) -> std::io::Result<()> {
    let body = format!("{{\"error\":\"{code}\"}}");
    respond(
        w,
        "404 Not Found",
        &[
            ("X-Error-Code", code.to_owned()),
            ("Content-Type", "application/json".into()),
        ],
        body.as_bytes(),
        head,
    )
}

fn serve(conn: TcpStream, cdn: SocketAddr, state: &Mutex<State>) -> std::io::Result<()> {
    let mut w = conn.try_clone()?;
    let mut r = BufReader::new(conn);
    let Some(req) = read_request(&mut r)? else {
        return Ok(());
    };
    let head = req.method == "HEAD";
    let range = req.headers.get("range").cloned();
    let mut st = state.lock().unwrap();
    st.log.push(match &range {
        Some(rg) => format!("{} {} range={rg}", req.method, req.path),
        None => format!("{} {}", req.method, req.path),
    });
    let authorized = match &st.token {
        None => true,
        Some(t) => req.headers.get("authorization") == Some(&format!("Bearer {t}")),
    };
    let path = req.path.trim_start_matches('/');

    if let Some(rest) = path.strip_prefix("api/models/") {
        let repo = rest.strip_suffix("/revision/main").unwrap_or(rest);
        if !authorized {
            return respond(&mut w, "401 Unauthorized", &[], b"{}", head);
        }
        let Some((commit, files)) = st.repos.get(repo) else {
            return not_found(&mut w, "RepoNotFound", head);
        };
        let siblings: Vec<serde_json::Value> = files
            .iter()
            .map(|f| {
                serde_json::json!({
                    "rfilename": f.name,
                    "size": f.data.len(),
                    "blobId": &f.sha256[..40],
                    "lfs": {"sha256": f.sha256, "size": f.data.len(), "pointerSize": 134},
                })
            })
            .collect();
        let body =
            serde_json::json!({"id": repo, "modelId": repo, "sha": commit, "siblings": siblings});
        return respond(
            &mut w,
            "200 OK",
            &[("Content-Type", "application/json".into())],
            body.to_string().as_bytes(),
            head,
        );
    }

    if let Some(sha) = path.strip_prefix("cdn/") {
        let found = st
            .repos
            .values()
            .flat_map(|(_, fs)| fs.iter())
            .find(|f| f.sha256 == sha)
            .cloned();
        let Some(file) = found else {
            return not_found(&mut w, "EntryNotFound", head);
        };
        let corrupt;
        let data: &[u8] = if st.corrupt.contains(&file.name) && !file.data.is_empty() {
            let mut d = (*file.data).clone();
            let mid = d.len() / 2;
            d[mid] ^= 0x5a;
            corrupt = d;
            &corrupt
        } else {
            &file.data
        };
        let total = data.len();
        let (start, end) = match range.as_deref().and_then(|r| r.strip_prefix("bytes=")) {
            Some(spec) => {
                let (a, b) = spec.split_once('-').unwrap_or((spec, ""));
                let a: usize = a.parse().unwrap_or(0);
                let b: usize = b.parse().map(|b: usize| b + 1).unwrap_or(total);
                (a.min(total), b.min(total))
            }
            None => (0, total),
        };
        let body = &data[start..end.max(start)];
        let mut headers = vec![
            ("ETag", format!("\"{}\"", file.sha256)),
            ("Accept-Ranges", "bytes".into()),
            ("Content-Type", "application/octet-stream".into()),
            ("Content-Length", body.len().to_string()),
        ];
        let status = if range.is_some() {
            headers.push((
                "Content-Range",
                format!("bytes {start}-{}/{total}", end.max(start + 1) - 1),
            ));
            "206 Partial Content"
        } else {
            "200 OK"
        };
        // A "full" transfer: more than the one-byte probes clients send for metadata.
        let cut = !head && body.len() > 1 && st.cut.remove(&file.name);
        drop(st);
        if cut {
            // Headers announce every byte; half come, then the connection closes.
            let mut out = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
            for (k, v) in &headers {
                out.push_str(&format!("{k}: {v}\r\n"));
            }
            out.push_str("\r\n");
            w.write_all(out.as_bytes())?;
            w.write_all(&body[..body.len() / 2])?;
            w.flush()?;
            return w.shutdown(std::net::Shutdown::Both);
        }
        return respond(&mut w, status, &headers, body, head);
    }

    if let Some((repo, file)) = path.split_once("/resolve/main/") {
        if !authorized {
            return respond(&mut w, "401 Unauthorized", &[], b"", head);
        }
        let Some((commit, files)) = st.repos.get(repo) else {
            return not_found(&mut w, "RepoNotFound", head);
        };
        let commit = commit.clone();
        let found = files.iter().find(|f| f.name == file).cloned();
        match found {
            Some(f) if !st.gone.contains(file) => {
                let headers = [
                    ("Location", format!("http://{cdn}/cdn/{}", f.sha256)),
                    ("X-Repo-Commit", commit),
                    ("X-Linked-Etag", format!("\"{}\"", f.sha256)),
                    ("X-Linked-Size", f.data.len().to_string()),
                    ("ETag", format!("\"{}\"", &f.sha256[..40])),
                ];
                respond(&mut w, "302 Found", &headers, b"", head)
            }
            _ => not_found(&mut w, "EntryNotFound", head),
        }
    } else {
        not_found(&mut w, "RepoNotFound", head)
    }
}
