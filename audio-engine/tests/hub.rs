//! `lfm2_audio::hub` against a stand-in hub on loopback (`hub_server`) serving a repository made
//! of the tiny package: the package it fetches runs byte-identical to the same files opened as a
//! directory; a second run needs no server; a cut transfer resumes; every failure is a typed
//! error naming the file and leaves nothing the loader would take; a cached file changed in
//! place is caught (downloaded again online, an error offline), and one another client cached is
//! hashed once, then vouched for by its marker; and Python's `huggingface_hub`
//! (`$LFM2E_PYTHON`, else `python3`; skips without it) shares the cache both ways.

mod common;
mod hub_server;

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use audio_engine::lfm2_audio::hub::{
    fetch, DigestKind, HubError, HubOptions, HubSpec, VERIFIED_MARKER_DIR,
};
use audio_engine::lfm2_audio::internals::package::{ModelPackage, PackagePaths, Quant};
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{AsrOptions, Lfm2Audio, ModelOptions, S2sOptions};

use common::child;
use hub_server::{File, HubServer};

const REPO: &str = "test-org/Tiny-GGUF";
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// The tiny Q4_0 package's four files (as the hub names them) and a README (read and hashed
/// once per test process).
fn repo_files() -> (PackagePaths, Vec<File>) {
    static FILES: OnceLock<(PackagePaths, Vec<File>)> = OnceLock::new();
    FILES
        .get_or_init(|| {
            let paths = common::package::package(Quant::Q4_0);
            let mut files = File::package(&paths);
            files.push(File::new("README.md", b"# tiny\n".to_vec()));
            (paths, files)
        })
        .clone()
}

fn server() -> (HubServer, PackagePaths, Vec<File>) {
    let s = HubServer::start();
    let (paths, files) = repo_files();
    s.add_repo(REPO, COMMIT, files.clone());
    (s, paths, files)
}

fn options(endpoint: &str, cache: &Path) -> HubOptions {
    HubOptions {
        endpoint: endpoint.to_owned(),
        cache_dir: cache.to_path_buf(),
        token: None,
        offline: false,
        progress: false,
        retries: 0,
    }
}

/// The repository without `:QUANT`: its default, Q4_0, is what the stand-in serves.
fn spec() -> HubSpec {
    HubSpec::parse(REPO).unwrap()
}

fn fresh_cache(name: &str) -> PathBuf {
    let d = common::scratch::dir(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn repo_dir(cache: &Path) -> PathBuf {
    cache.join("models--test-org--Tiny-GGUF")
}

/// The served file named `name`.
fn file<'a>(files: &'a [File], name: &str) -> &'a File {
    files.iter().find(|f| f.name == name).unwrap()
}

/// The package's four files (not the README).
fn ggufs(files: &[File]) -> Vec<&File> {
    files.iter().filter(|f| f.name.ends_with(".gguf")).collect()
}

/// `f`'s blob in the cache (named by its sha256, its ETag).
fn blob(cache: &Path, f: &File) -> PathBuf {
    repo_dir(cache).join("blobs").join(&f.sha256)
}

/// The marker that says `f`'s blob was verified.
fn marker(cache: &Path, f: &File) -> PathBuf {
    repo_dir(cache).join(VERIFIED_MARKER_DIR).join(&f.sha256)
}

/// What an edit in place does to the file's mtime.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mtime {
    /// Set to another time.
    New,
    /// Put back as it was.
    Kept,
}

/// Changes one byte of the file at `path` in place: same size, same inode.
fn flip_byte(path: &Path, mtime: Mtime) {
    let before = std::fs::metadata(path).unwrap();
    // why: ctime comes from a coarse clock; let it move past the one the marker holds.
    std::thread::sleep(Duration::from_millis(20));
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mid = before.len() / 2;
    let mut b = [0u8];
    f.seek(SeekFrom::Start(mid)).unwrap();
    f.read_exact(&mut b).unwrap();
    f.seek(SeekFrom::Start(mid)).unwrap();
    f.write_all(&[b[0] ^ 0x5a]).unwrap();
    let old = before.modified().unwrap();
    f.set_modified(match mtime {
        Mtime::New => old - Duration::from_secs(1000),
        Mtime::Kept => old,
    })
    .unwrap();
    drop(f);
    let after = std::fs::metadata(path).unwrap();
    let id = |m: &std::fs::Metadata| (m.len(), m.ino(), m.dev());
    assert_eq!(id(&after), id(&before));
    assert_eq!(after.modified().unwrap() == old, mtime == Mtime::Kept);
    assert_ne!(
        (after.ctime(), after.ctime_nsec()),
        (before.ctime(), before.ctime_nsec())
    );
}

fn engine(paths: PackagePaths) -> Lfm2Audio {
    let opts = ModelOptions {
        n_threads: 1,
        ..ModelOptions::default()
    };
    Lfm2Audio::from_package(ModelPackage::open_paths(paths).unwrap(), opts).unwrap()
}

/// Everything under `dir` whose name ends with `suffix`.
fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                out.extend(files_ending(&p, suffix));
            } else if p.to_string_lossy().ends_with(suffix) {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn hub_package_runs_like_the_directory_and_a_second_run_needs_no_server() {
    let (mut srv, dir_paths, files) = server();
    let cache = fresh_cache("hub-main");
    let opts = options(&srv.endpoint(), &cache);
    let got = fetch(&spec(), &opts).unwrap();
    assert_eq!(got.commit, COMMIT);
    assert_eq!(got.downloaded.len(), 4, "{:?}", got.downloaded);
    assert_eq!(got.hashed, got.downloaded);
    assert!(!got.offline_fallback);
    // The hub cache layout: refs/main, snapshot links into blobs named by the sha256 ETag.
    let rd = repo_dir(&cache);
    assert_eq!(
        std::fs::read_to_string(rd.join("refs/main")).unwrap(),
        COMMIT
    );
    for f in files.iter().filter(|f| f.name.ends_with(".gguf")) {
        let link = rd.join("snapshots").join(COMMIT).join(&f.name);
        assert!(link.is_symlink(), "{}", link.display());
        assert_eq!(
            std::fs::canonicalize(&link).unwrap(),
            std::fs::canonicalize(rd.join("blobs").join(&f.sha256)).unwrap()
        );
        assert_eq!(std::fs::read(&link).unwrap(), *f.data);
    }
    assert!(files_ending(&rd, ".part").is_empty());

    // ASR and S2S byte-identical to the same files opened as a directory.
    let hub = engine(got.paths.clone());
    let local = engine(dir_paths);
    let wav = common::wav::question(0);
    let asr = AsrOptions {
        max_new_tokens: 12,
        ..Default::default()
    };
    let (a, b) = (
        hub.asr_wav(&wav, &asr).unwrap(),
        local.asr_wav(&wav, &asr).unwrap(),
    );
    assert_eq!((a.tokens, a.text), (b.tokens, b.text));
    let s2s = S2sOptions {
        max_new_tokens: 16,
        ..Default::default()
    };
    let (a, b) = (
        hub.s2s_wav(&wav, &s2s).unwrap(),
        local.s2s_wav(&wav, &s2s).unwrap(),
    );
    assert_eq!(a.text, b.text);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a.audio), bits(&b.audio));
    assert!(!a.audio.is_empty() || !a.text.is_empty());

    // A second run with the server up: the listing only, no file transfer.
    let before = srv.log().len();
    let again = fetch(&spec(), &opts).unwrap();
    assert!(again.downloaded.is_empty());
    assert!(again.hashed.is_empty(), "{:?}", again.hashed);
    let new: Vec<String> = srv.log()[before..].to_vec();
    assert!(new.iter().all(|l| l.contains("/api/models/")), "{new:?}");

    // The server gone: the cache serves, as fallback and with `offline`.
    srv.stop();
    let fallback = fetch(&spec(), &opts).unwrap();
    assert!(fallback.offline_fallback);
    assert_eq!(fallback.paths, got.paths);
    assert!(fallback.hashed.is_empty(), "{:?}", fallback.hashed);
    let offline = fetch(
        &spec(),
        &HubOptions {
            offline: true,
            ..opts.clone()
        },
    )
    .unwrap();
    assert!(!offline.offline_fallback);
    assert_eq!(offline.paths, got.paths);
    assert!(offline.hashed.is_empty(), "{:?}", offline.hashed);
    ModelPackage::from_hub(
        &spec(),
        &HubOptions {
            offline: true,
            ..opts
        },
    )
    .unwrap();
}

#[test]
fn a_cut_transfer_is_an_error_that_keeps_nothing_loadable_and_a_rerun_resumes_it() {
    let (srv, _, files) = server();
    let backbone = files.iter().find(|f| f.name == "Tiny-Q4_0.gguf").unwrap();
    srv.cut_once(&backbone.name);
    let cache = fresh_cache("hub-cut");
    let opts = options(&srv.endpoint(), &cache);
    let e = fetch(&spec(), &opts).unwrap_err();
    assert!(
        matches!(&e, HubError::Interrupted { file, .. } if *file == backbone.name),
        "{e:?}"
    );
    assert!(e.to_string().contains("Tiny-Q4_0.gguf"), "{e}");
    let rd = repo_dir(&cache);
    // Nothing at the snapshot path; the partial blob kept under a name the loader never opens.
    assert!(!rd
        .join("snapshots")
        .join(COMMIT)
        .join(&backbone.name)
        .exists());
    let parts = files_ending(&rd.join("blobs"), ".part");
    assert_eq!(parts.len(), 1, "{parts:?}");
    let half = std::fs::metadata(&parts[0]).unwrap().len();
    assert!(half > 0 && half < backbone.data.len() as u64, "{half}");
    let offline = HubOptions {
        offline: true,
        ..opts.clone()
    };
    assert!(matches!(
        fetch(&spec(), &offline),
        Err(HubError::NotCached { .. })
    ));

    let got = fetch(&spec(), &opts).unwrap();
    assert_eq!(std::fs::read(&got.paths.backbone).unwrap(), *backbone.data);
    // The rerun asked for the rest only.
    let resumed = format!("range=bytes={half}-");
    assert!(
        srv.requests_for(REPO, backbone)
            .iter()
            .any(|l| l.contains(&resumed)),
        "{:?}",
        srv.requests_for(REPO, backbone)
    );
    assert!(files_ending(&rd.join("blobs"), ".part").is_empty());
    ModelPackage::open_paths(got.paths).unwrap();
}

#[test]
fn a_wrong_sha256_is_an_error_and_the_file_is_removed() {
    let (srv, _, files) = server();
    srv.corrupt("vocoder-Tiny-Q4_0.gguf");
    let cache = fresh_cache("hub-sha");
    let e = fetch(&spec(), &options(&srv.endpoint(), &cache)).unwrap_err();
    assert!(
        matches!(&e, HubError::Checksum { file, .. } if file == "vocoder-Tiny-Q4_0.gguf"),
        "{e:?}"
    );
    assert!(e.to_string().contains("vocoder-Tiny-Q4_0.gguf"), "{e}");
    let rd = repo_dir(&cache);
    assert!(!rd
        .join("snapshots")
        .join(COMMIT)
        .join("vocoder-Tiny-Q4_0.gguf")
        .exists());
    // Neither the blob nor a part of it remains.
    let sha = &files
        .iter()
        .find(|f| f.name == "vocoder-Tiny-Q4_0.gguf")
        .unwrap()
        .sha256;
    let left: Vec<_> = std::fs::read_dir(rd.join("blobs"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(sha.as_str()))
        .filter(|e| !e.file_name().to_string_lossy().ends_with(".lock"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_cached_file_changed_in_place_is_downloaded_again_online() {
    let (srv, dir_paths, files) = server();
    let cache = fresh_cache("hub-changed-online");
    let opts = options(&srv.endpoint(), &cache);
    fetch(&spec(), &opts).unwrap();
    for f in ggufs(&files) {
        assert!(marker(&cache, f).is_file(), "{}", f.name);
    }
    let vocoder = file(&files, "vocoder-Tiny-Q4_0.gguf");
    flip_byte(&blob(&cache, vocoder), Mtime::New);

    let got = fetch(&spec(), &opts).unwrap();
    assert_eq!(got.downloaded, [vocoder.name.as_str()]);
    assert_eq!(got.hashed, [vocoder.name.as_str()]);
    assert_eq!(std::fs::read(&got.paths.vocoder).unwrap(), *vocoder.data);
    assert!(marker(&cache, vocoder).is_file());
    // The run is the directory's, byte for byte.
    let (hub, local) = (engine(got.paths), engine(dir_paths));
    let wav = common::wav::question(0);
    let s2s = S2sOptions {
        max_new_tokens: 16,
        ..Default::default()
    };
    let (a, b) = (
        hub.s2s_wav(&wav, &s2s).unwrap(),
        local.s2s_wav(&wav, &s2s).unwrap(),
    );
    assert_eq!(a.text, b.text);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a.audio), bits(&b.audio));
}

#[test]
fn a_cached_file_changed_in_place_is_an_error_offline_and_without_network() {
    let (mut srv, _, files) = server();
    let cache = fresh_cache("hub-changed-offline");
    let opts = options(&srv.endpoint(), &cache);
    let offline = HubOptions {
        offline: true,
        ..opts.clone()
    };
    fetch(&spec(), &opts).unwrap();
    let rd = repo_dir(&cache);

    // Offline, an edit with a new mtime: an error naming the file, which is gone.
    let vocoder = file(&files, "vocoder-Tiny-Q4_0.gguf");
    flip_byte(&blob(&cache, vocoder), Mtime::New);
    let e = fetch(&spec(), &offline).unwrap_err();
    assert!(
        matches!(&e, HubError::Checksum { file, kind: DigestKind::Sha256, cached: true, .. }
            if *file == vocoder.name),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains(&vocoder.name) && msg.contains("run again online"),
        "{msg}"
    );
    let link = rd.join("snapshots").join(COMMIT).join(&vocoder.name);
    assert!(std::fs::symlink_metadata(&link).is_err());
    assert!(!blob(&cache, vocoder).exists());
    assert!(!marker(&cache, vocoder).exists());
    let e = fetch(&spec(), &offline).unwrap_err();
    assert!(matches!(e, HubError::NotCached { .. }), "{e:?}");
    // Online it comes back.
    let got = fetch(&spec(), &opts).unwrap();
    assert_eq!(got.downloaded, [vocoder.name.as_str()]);

    // Without network, an edit that puts the old mtime back (the ctime still moves).
    let mmproj = file(&files, "mmproj-Tiny-Q4_0.gguf");
    flip_byte(&blob(&cache, mmproj), Mtime::Kept);
    srv.stop();
    let e = fetch(&spec(), &opts).unwrap_err();
    assert!(
        matches!(&e, HubError::Checksum { file, cached: true, .. } if *file == mmproj.name),
        "{e:?}"
    );
    assert!(!blob(&cache, mmproj).exists());
    assert!(!marker(&cache, mmproj).exists());
}

#[test]
fn a_file_another_client_cached_is_hashed_once_then_its_marker_vouches_for_it() {
    let (srv, _, files) = server();
    let cache = fresh_cache("hub-foreign");
    let rd = repo_dir(&cache);
    // Laid out as huggingface_hub lays its downloads out, without markers.
    let snapshot = rd.join("snapshots").join(COMMIT);
    std::fs::create_dir_all(rd.join("blobs")).unwrap();
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(rd.join("refs")).unwrap();
    std::fs::write(rd.join("refs/main"), COMMIT).unwrap();
    let package = ggufs(&files);
    for f in &package {
        std::fs::write(blob(&cache, f), &*f.data).unwrap();
        let to = Path::new("../../blobs").join(&f.sha256);
        std::os::unix::fs::symlink(to, snapshot.join(&f.name)).unwrap();
    }
    let offline = HubOptions {
        offline: true,
        ..options(&srv.endpoint(), &cache)
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let names = sorted(package.iter().map(|f| f.name.clone()).collect());

    let first = fetch(&spec(), &offline).unwrap();
    assert_eq!(sorted(first.hashed), names);
    let markers: Vec<String> = package
        .iter()
        .map(|f| std::fs::read_to_string(marker(&cache, f)).unwrap())
        .collect();
    let second = fetch(&spec(), &offline).unwrap();
    assert!(second.hashed.is_empty(), "{:?}", second.hashed);
    for (f, m) in package.iter().zip(&markers) {
        assert_eq!(&std::fs::read_to_string(marker(&cache, f)).unwrap(), m);
    }

    // A marker of another state than the file's does not vouch: hashed again, marker renewed.
    let backbone = file(&files, "Tiny-Q4_0.gguf");
    let i = package
        .iter()
        .position(|f| f.name == backbone.name)
        .unwrap();
    assert!(markers[i].contains(" ino "), "{}", markers[i]);
    std::fs::write(
        marker(&cache, backbone),
        markers[i].replace(" ino ", " ino 1"),
    )
    .unwrap();
    let third = fetch(&spec(), &offline).unwrap();
    assert_eq!(third.hashed, [backbone.name.as_str()]);
    assert_eq!(
        std::fs::read_to_string(marker(&cache, backbone)).unwrap(),
        markers[i]
    );

    // Online the listing agrees with the markers: the listing is the only request.
    let online = fetch(&spec(), &options(&srv.endpoint(), &cache)).unwrap();
    assert!(online.downloaded.is_empty() && online.hashed.is_empty());
    assert!(
        srv.log().iter().all(|l| l.contains("/api/models/")),
        "{:?}",
        srv.log()
    );
    ModelPackage::open_paths(online.paths).unwrap();
}

#[test]
fn each_failure_is_a_typed_error_naming_what_failed() {
    let (srv, _, _) = server();
    let cache = fresh_cache("hub-errors");
    let opts = options(&srv.endpoint(), &cache);

    // No package of the quantization: the error lists the repository's files.
    let e = fetch(&HubSpec::parse(&format!("{REPO}:F16")).unwrap(), &opts).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(
            e,
            HubError::NoPackage {
                quant: Quant::F16,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        msg.contains("Tiny-Q4_0") && msg.contains("README.md"),
        "{msg}"
    );

    // 404: the repository, then a listed file the hub no longer has.
    let e = fetch(&HubSpec::parse("test-org/Nope").unwrap(), &opts).unwrap_err();
    assert!(matches!(e, HubError::RepoNotFound { .. }), "{e:?}");
    assert!(e.to_string().contains("test-org/Nope"));
    srv.gone("mmproj-Tiny-Q4_0.gguf");
    let e = fetch(&spec(), &opts).unwrap_err();
    assert!(
        matches!(&e, HubError::FileNotFound { file, .. } if file == "mmproj-Tiny-Q4_0.gguf"),
        "{e:?}"
    );

    // No network and nothing cached.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let e = fetch(&spec(), &options(&closed, &fresh_cache("hub-nonet"))).unwrap_err();
    assert!(matches!(e, HubError::Network { .. }), "{e:?}");
    assert!(e.to_string().contains(&closed), "{e}");
    // Offline, nothing cached.
    let e = fetch(
        &spec(),
        &HubOptions {
            offline: true,
            ..options(&closed, &fresh_cache("hub-offline-empty"))
        },
    )
    .unwrap_err();
    assert!(
        matches!(e, HubError::NotCached { offline: true, .. }),
        "{e:?}"
    );
}

#[test]
fn a_private_repository_needs_the_token() {
    let (srv, _, _) = server();
    srv.require_token("hf_secret");
    let cache = fresh_cache("hub-token");
    let opts = options(&srv.endpoint(), &cache);
    let e = fetch(&spec(), &opts).unwrap_err();
    assert!(
        matches!(
            e,
            HubError::Unauthorized {
                status: 401,
                token_sent: false,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("HF_TOKEN"), "{e}");
    let wrong = HubOptions {
        token: Some("hf_wrong".into()),
        ..opts.clone()
    };
    let e = fetch(&spec(), &wrong).unwrap_err();
    assert!(
        matches!(
            e,
            HubError::Unauthorized {
                token_sent: true,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(!format!("{wrong:?}").contains("hf_wrong"));
    let ok = HubOptions {
        token: Some("hf_secret".into()),
        ..opts
    };
    assert_eq!(fetch(&spec(), &ok).unwrap().downloaded.len(), 4);
}

/// The child's side of the full-disk test: files over 64 KiB cannot be written.
#[test]
fn full_disk_child() {
    let Some(role) = child::child_role() else {
        return;
    };
    assert_eq!(role, "full-disk");
    let endpoint = std::env::var("HUB_TEST_ENDPOINT").unwrap();
    let cache = PathBuf::from(std::env::var("HUB_TEST_CACHE").unwrap());
    // SAFETY: plain libc calls on this child process's own limits and signal disposition.
    unsafe {
        // why: writes past the limit then fail with EFBIG instead of killing the process.
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let lim = libc::rlimit {
            rlim_cur: 64 << 10,
            rlim_max: 64 << 10,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
    }
    match fetch(&spec(), &options(&endpoint, &cache)) {
        Ok(_) => child::report("ok"),
        Err(e) => child::report(&format!("{}|{e}", matches!(e, HubError::Io { .. }))),
    }
}

#[test]
fn a_full_disk_is_an_error_naming_the_file() {
    let (srv, _, files) = server();
    let big = files
        .iter()
        .filter(|f| f.data.len() > 64 << 10)
        .map(|f| f.name.clone())
        .collect::<Vec<_>>();
    assert!(!big.is_empty(), "the tiny package has no file over 64 KiB");
    let cache = fresh_cache("hub-full");
    let out = child::run(
        "full_disk_child",
        "full-disk",
        &[
            ("HUB_TEST_ENDPOINT", srv.endpoint()),
            ("HUB_TEST_CACHE", cache.display().to_string()),
        ],
        Duration::from_secs(60),
    );
    assert!(out.success(), "{} {}", out.how(), out.stderr);
    let line = out.lines.first().cloned().unwrap_or_default();
    assert!(line.starts_with("true|"), "{line}");
    assert!(big.iter().any(|n| line.contains(n.as_str())), "{line}");
    // Nothing loadable was left: the package is not in the cache.
    let e = fetch(
        &spec(),
        &HubOptions {
            offline: true,
            ..options(&srv.endpoint(), &cache)
        },
    )
    .unwrap_err();
    assert!(matches!(e, HubError::NotCached { .. }), "{e:?}");
}

/// A Python that imports `huggingface_hub`: `$LFM2E_PYTHON`, else `python3`; Err says why there
/// is none. why a panic for `$LFM2E_PYTHON`: CI sets it to its venv (`.ci/run`), where the test
/// must run, not skip.
fn python_with_hub() -> Result<String, String> {
    let (py, required) = match std::env::var("LFM2E_PYTHON") {
        Ok(p) => (p, true),
        Err(_) => ("python3".to_owned(), false),
    };
    let why = match Command::new(&py)
        .args(["-c", "import huggingface_hub"])
        .output()
    {
        Ok(o) if o.status.success() => return Ok(py),
        Ok(_) => format!(
            "`{py}` cannot import huggingface_hub: pip install huggingface_hub, or set \
             LFM2E_PYTHON to a Python that has it"
        ),
        Err(e) => format!("`{py}` cannot run ({e})"),
    };
    assert!(!required, "LFM2E_PYTHON is set but unusable: {why}");
    Err(why)
}

/// Runs `hf_hub_download` for each of `files` and returns the paths it prints.
fn python_download(
    py: &str,
    endpoint: &str,
    cache: &Path,
    files: &[&str],
    local_only: bool,
) -> Vec<PathBuf> {
    let script = format!(
        "import sys\nfrom huggingface_hub import hf_hub_download\n\
         for f in sys.argv[1:]:\n    print(hf_hub_download({REPO:?}, f, cache_dir={:?}, \
         local_files_only={}))\n",
        cache.display().to_string(),
        if local_only { "True" } else { "False" }
    );
    let out = Command::new(py)
        .arg("-c")
        .arg(script)
        .args(files)
        .env("HF_ENDPOINT", endpoint)
        .env("HF_HUB_DISABLE_TELEMETRY", "1")
        .env("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        .env_remove("HF_TOKEN")
        .env_remove("HF_HUB_OFFLINE")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "huggingface_hub failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(PathBuf::from)
        .collect()
}

#[test]
fn python_huggingface_hub_shares_the_cache_both_ways() {
    let py = match python_with_hub() {
        Ok(py) => py,
        Err(why) => {
            ci_skip::skip("python_huggingface_hub_shares_the_cache_both_ways", &why);
            return;
        }
    };
    let (srv, _, files) = server();
    let names: Vec<&str> = files
        .iter()
        .filter(|f| f.name.ends_with(".gguf"))
        .map(|f| f.name.as_str())
        .collect();

    // Ours first: Python finds every file with local_files_only, at our paths.
    let cache = fresh_cache("hub-py-ours");
    let got = fetch(&spec(), &options(&srv.endpoint(), &cache)).unwrap();
    let before = srv.log().len();
    let theirs = python_download(&py, &srv.endpoint(), &cache, &names, true);
    assert_eq!(theirs.len(), 4);
    for (p, name) in theirs.iter().zip(&names) {
        assert_eq!(p, &got.paths.backbone.parent().unwrap().join(name));
    }
    assert_eq!(srv.log().len(), before, "local_files_only made requests");
    // Our markers beside the cache's folders are nothing huggingface_hub's scan minds.
    let scan = Command::new(&py)
        .arg("-c")
        .arg(
            "import sys\nfrom huggingface_hub import scan_cache_dir\n\
             r = scan_cache_dir(sys.argv[1])\n\
             print(len(r.warnings), sum(len(v.files) for x in r.repos for v in x.revisions))",
        )
        .arg(&cache)
        .output()
        .unwrap();
    assert!(
        scan.status.success(),
        "{}",
        String::from_utf8_lossy(&scan.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&scan.stdout).trim(), "0 4");

    // Python's first: our fetch takes its file without a request for it.
    let cache = fresh_cache("hub-py-theirs");
    let backbone = files.iter().find(|f| f.name == "Tiny-Q4_0.gguf").unwrap();
    python_download(&py, &srv.endpoint(), &cache, &[&backbone.name], false);
    let python_requests = srv.requests_for(REPO, backbone).len();
    assert!(python_requests > 0);
    let got = fetch(&spec(), &options(&srv.endpoint(), &cache)).unwrap();
    assert_eq!(got.downloaded.len(), 3, "{:?}", got.downloaded);
    assert!(!got.downloaded.contains(&backbone.name));
    // Python's file had no marker: it was hashed, and has one now.
    assert!(got.hashed.contains(&backbone.name), "{:?}", got.hashed);
    assert!(marker(&cache, backbone).is_file());
    assert_eq!(srv.requests_for(REPO, backbone).len(), python_requests);
    ModelPackage::open_paths(got.paths).unwrap();
}
