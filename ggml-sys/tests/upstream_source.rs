//! Where the build script finds the pinned upstream package without the network (build/tree.rs),
//! on fake cargo homes and vendor directories, and that the pin, the manifest and Cargo.lock agree.

#[allow(dead_code)]
#[path = "../build/tree.rs"]
mod tree;

use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};

const PKG: &str = "upstream-fake";
const VER: &str = "1.2.3";
const HEADER: &[u8] = b"/* ggml.h of the fake package */\n";

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ggml-sys-src-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn pin(sha256: &str) -> tree::Pin {
    tree::Pin {
        package: PKG.into(),
        version: VER.into(),
        sha256: sha256.into(),
        tree: "llama.cpp".into(),
        ggml_version: "0".into(),
        llama_version: "0".into(),
    }
}

/// A `.crate`-like archive: gzipped tar of `PKG-VER/Cargo.toml` and the tree's `ggml.h`.
fn crate_archive() -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    let manifest = format!("[package]\nname = \"{PKG}\"\nversion = \"{VER}\"\n");
    for (path, data) in [
        ("Cargo.toml", manifest.as_bytes()),
        ("llama.cpp/ggml/include/ggml.h", HEADER),
    ] {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, format!("{PKG}-{VER}/{path}"), data)
            .unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap()
}

/// A workspace with ggml-sys inside, an empty cargo home and an OUT_DIR, all under `root`.
fn search(root: &Path) -> tree::Search {
    let ws = root.join("ws");
    fs::create_dir_all(ws.join("ggml-sys")).unwrap();
    fs::create_dir_all(root.join("home")).unwrap();
    tree::Search {
        manifest_dir: ws.join("ggml-sys"),
        cargo_home: Some(root.join("home")),
        out_dir: root.join("out"),
    }
}

#[test]
fn crate_archive_in_the_cache_is_checked_and_unpacked() {
    let root = scratch("archive");
    let s = search(&root);
    let bytes = crate_archive();
    let sum = hex(&Sha256::digest(&bytes));
    let cache = s
        .cargo_home
        .as_ref()
        .unwrap()
        .join("registry/cache/index.example-0123");
    fs::create_dir_all(&cache).unwrap();
    fs::write(cache.join(format!("{PKG}-{VER}.crate")), &bytes).unwrap();

    let dir = tree::find_package(&pin(&sum), &s).unwrap();
    assert_eq!(
        dir,
        s.out_dir.join("upstream-pin").join(format!("{PKG}-{VER}"))
    );
    assert_eq!(
        fs::read(dir.join("llama.cpp/ggml/include/ggml.h")).unwrap(),
        HEADER
    );
    // A second build of the same OUT_DIR reuses the unpacked copy.
    assert_eq!(tree::find_package(&pin(&sum), &s).unwrap(), dir);

    // An archive that is not the pinned one is refused, not used.
    let err = tree::find_package(&pin(&"0".repeat(64)), &s).unwrap_err();
    assert!(err.contains("does not match the pin"), "{err}");
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn registry_copy_is_used_and_its_archive_checked() {
    let root = scratch("registry");
    let s = search(&root);
    let bytes = crate_archive();
    let sum = hex(&Sha256::digest(&bytes));
    let registry = s.cargo_home.as_ref().unwrap().join("registry");
    let src = registry
        .join("src/index.example-0123")
        .join(format!("{PKG}-{VER}"));
    fs::create_dir_all(src.join("llama.cpp/ggml/include")).unwrap();
    fs::write(src.join("llama.cpp/ggml/include/ggml.h"), HEADER).unwrap();

    // Not fully unpacked (no `.cargo-ok`): not used; nothing else there, so the error lists it.
    let err = tree::find_package(&pin(&sum), &s).unwrap_err();
    assert!(err.contains(&src.display().to_string()), "{err}");

    fs::write(src.join(".cargo-ok"), "{\"v\":1}").unwrap();
    // The archive was cleaned from the cache: cargo's own check at download is trusted.
    assert_eq!(tree::find_package(&pin(&sum), &s).unwrap(), src);

    let cache = registry.join("cache/index.example-0123");
    fs::create_dir_all(&cache).unwrap();
    fs::write(cache.join(format!("{PKG}-{VER}.crate")), &bytes).unwrap();
    assert_eq!(tree::find_package(&pin(&sum), &s).unwrap(), src);
    let err = tree::find_package(&pin(&"0".repeat(64)), &s).unwrap_err();
    assert!(err.contains("does not match the pin"), "{err}");
    let _ = fs::remove_dir_all(&root);
}

/// A `cargo vendor` directory named by the workspace's `.cargo/config.toml`.
#[test]
fn vendor_directory_from_cargo_config_is_verified_file_by_file() {
    let root = scratch("vendor");
    let s = search(&root);
    let ws = root.join("ws");
    fs::create_dir_all(ws.join(".cargo")).unwrap();
    fs::write(
        ws.join(".cargo/config.toml"),
        "[source.crates-io]\nreplace-with = \"vendored-sources\"\n\n\
         # directory = \"not-this-one\"\n[source.vendored-sources]\ndirectory = \"third-party\"\n",
    )
    .unwrap();
    let dir = ws.join("third-party").join(PKG);
    fs::create_dir_all(dir.join("llama.cpp/ggml/include")).unwrap();
    fs::write(
        dir.join("Cargo.toml"),
        format!("[package]\nname = \"{PKG}\"\nversion = \"{VER}\"\n"),
    )
    .unwrap();
    fs::write(dir.join("llama.cpp/ggml/include/ggml.h"), HEADER).unwrap();
    let package_sum = "ab".repeat(32);
    let checksums = serde_json::json!({
        "files": { "llama.cpp/ggml/include/ggml.h": hex(&Sha256::digest(HEADER)) },
        "package": package_sum,
    });
    fs::write(dir.join(".cargo-checksum.json"), checksums.to_string()).unwrap();

    assert_eq!(tree::find_package(&pin(&package_sum), &s).unwrap(), dir);
    let err = tree::find_package(&pin(&"cd".repeat(32)), &s).unwrap_err();
    assert!(err.contains("does not match the pin"), "{err}");

    fs::write(dir.join("llama.cpp/ggml/include/ggml.h"), b"changed\n").unwrap();
    let err = tree::find_package(&pin(&package_sum), &s).unwrap_err();
    assert!(err.contains("does not match its checksum"), "{err}");

    // An empty file list (as Nix's vendoring writes) is accepted on the package's checksum.
    let empty = serde_json::json!({ "files": {}, "package": package_sum });
    fs::write(dir.join(".cargo-checksum.json"), empty.to_string()).unwrap();
    assert_eq!(tree::find_package(&pin(&package_sum), &s).unwrap(), dir);

    // Another version in the vendor directory is not the pinned one: not used, not an error.
    fs::write(
        dir.join("Cargo.toml"),
        format!("[package]\nname = \"{PKG}\"\nversion = \"9.9.9\"\n"),
    )
    .unwrap();
    let err = tree::find_package(&pin(&package_sum), &s).unwrap_err();
    assert!(err.contains("is not on this machine"), "{err}");
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn config_directory_sources_resolve_like_cargo() {
    let root = scratch("config");
    let ws = root.join("ws");
    let home = root.join("home");
    fs::create_dir_all(ws.join("ggml-sys")).unwrap();
    fs::create_dir_all(ws.join(".cargo")).unwrap();
    fs::create_dir_all(&home).unwrap();
    fs::write(
        ws.join(".cargo/config.toml"),
        "[source]\nvendored = { replace-with = \"x\" , directory = 'vend' }\n",
    )
    .unwrap();
    fs::write(
        home.join("config.toml"),
        "[source.v]\ndirectory = \"/abs/vendor\"\nnot-directory = \"no\"\n",
    )
    .unwrap();
    let found = tree::config_directory_sources(&ws.join("ggml-sys"), Some(&home));
    assert_eq!(found, vec![ws.join("vend"), PathBuf::from("/abs/vendor")]);
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn nothing_found_is_an_error_that_says_what_to_do() {
    let root = scratch("none");
    let err = tree::find_package(&pin(&"0".repeat(64)), &search(&root)).unwrap_err();
    for needle in [
        "cargo fetch",
        "cargo vendor",
        tree::LOCAL_TREE_ENV,
        "Looked in",
    ] {
        assert!(err.contains(needle), "no `{needle}` in: {err}");
    }
    let _ = fs::remove_dir_all(&root);
}

/// The pin, the never-built dependency in Cargo.toml and Cargo.lock name the same package, so
/// `cargo fetch` and `cargo vendor` bring exactly the archive the build checks against.
#[test]
fn pin_manifest_and_lock_agree() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pin = tree::Pin::read(&here.join("upstream/UPSTREAM.toml"));
    // why `.orig` first: in a packaged copy, Cargo.toml is cargo's normalized rewrite.
    let manifest = fs::read_to_string(here.join("Cargo.toml.orig"))
        .or_else(|_| fs::read_to_string(here.join("Cargo.toml")))
        .unwrap();
    let section = manifest
        .split("[target.'cfg(any())'.build-dependencies]")
        .nth(1)
        .expect("Cargo.toml has a [target.'cfg(any())'.build-dependencies] table");
    let dep = section
        .lines()
        .find(|l| l.starts_with(&format!("{} ", pin.package)))
        .unwrap_or_else(|| panic!("no {} under cfg(any())", pin.package));
    assert!(
        dep.contains(&format!("\"={}\"", pin.version)),
        "`{dep}` does not pin ={}",
        pin.version
    );

    // The package's own lock when packaged, else the workspace's.
    let lock = fs::read_to_string(here.join("Cargo.lock"))
        .or_else(|_| fs::read_to_string(here.join("../Cargo.lock")))
        .expect("a Cargo.lock");
    let entry = lock
        .split("[[package]]")
        .find(|p| {
            p.contains(&format!("name = \"{}\"\n", pin.package))
                && p.contains(&format!("version = \"{}\"\n", pin.version))
        })
        .unwrap_or_else(|| panic!("Cargo.lock has no {} {}", pin.package, pin.version));
    assert!(
        entry.contains(&format!("checksum = \"{}\"", pin.sha256)),
        "Cargo.lock's checksum for {} {} is not the pin's {}:\n{entry}",
        pin.package,
        pin.version,
        pin.sha256
    );
}
