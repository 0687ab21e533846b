//! Obtaining the pristine upstream tree (through cargo, checksum-verified) and laying out the copy
//! that the build patches and compiles.

use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Environment variable that points the build at a local llama.cpp checkout instead of the
/// registry package (offline builds, upstream bisection). The pin's checksum is not checked then.
pub const LOCAL_TREE_ENV: &str = "GGML_SYS_LLAMA_CPP_DIR";

/// What `vendor/UPSTREAM.toml` records.
pub struct Pin {
    pub package: String,
    pub version: String,
    pub sha256: String,
    pub tree: String,
    pub ggml_version: String,
    pub llama_version: String,
}

impl Pin {
    /// Reads the flat `key = "value"` file; a full TOML parser would be a dependency for nothing.
    pub fn read(path: &Path) -> Pin {
        let text = fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("cannot read the upstream pin {}: {e}", path.display()));
        let get = |key: &str| -> String {
            text.lines()
                .map(str::trim)
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| l.split_once('='))
                .find(|(k, _)| k.trim() == key)
                .map(|(_, v)| v.trim().trim_matches('"').to_string())
                .unwrap_or_else(|| panic!("{} has no `{key}`", path.display()))
        };
        Pin {
            package: get("package"),
            version: get("version"),
            sha256: get("sha256"),
            tree: get("tree"),
            ggml_version: get("ggml_version"),
            llama_version: get("llama_version"),
        }
    }
}

/// Returns the root of a pristine llama.cpp tree: the local override, or the pinned registry
/// package that cargo fetches and verifies for us.
pub fn locate_pristine(pin: &Pin, out_dir: &Path) -> PathBuf {
    println!("cargo:rerun-if-env-changed={LOCAL_TREE_ENV}");
    if let Some(dir) = std::env::var_os(LOCAL_TREE_ENV) {
        let dir = PathBuf::from(dir);
        assert!(
            dir.join("ggml").join("include").join("ggml.h").is_file(),
            "{LOCAL_TREE_ENV}={} is not a llama.cpp tree (no ggml/include/ggml.h)",
            dir.display()
        );
        println!(
            "cargo:warning=building from the local tree {} (not the pinned {} {}); patches must still apply",
            dir.display(),
            pin.package,
            pin.version
        );
        return dir;
    }
    let package_dir = fetch_with_cargo(pin, out_dir);
    verify_checksum(pin, &package_dir);
    package_dir.join(&pin.tree)
}

/// Asks cargo to resolve a throwaway manifest that depends on the pinned package: `cargo metadata`
/// downloads and checksum-verifies it against the index without building anything.
fn fetch_with_cargo(pin: &Pin, out_dir: &Path) -> PathBuf {
    let dir = out_dir.join("upstream-pin");
    fs::create_dir_all(&dir).expect("create OUT_DIR/upstream-pin");
    // The empty [workspace] keeps cargo from attaching this manifest to our own workspace.
    let manifest = format!(
        "[package]\nname = \"ggml-sys-upstream-pin\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
         [lib]\npath = \"lib.rs\"\n[dependencies]\n{} = \"={}\"\n[workspace]\n",
        pin.package, pin.version
    );
    fs::write(dir.join("Cargo.toml"), manifest).expect("write pin manifest");
    fs::write(dir.join("lib.rs"), "").expect("write pin lib.rs");

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(dir.join("Cargo.toml"));
    if std::env::var("CARGO_NET_OFFLINE").is_ok_and(|v| v == "true" || v == "1") {
        cmd.arg("--offline");
    }
    let output = cmd.output().expect("run cargo metadata");
    if !output.status.success() {
        panic!(
            "cargo could not fetch {} {}: {}\nFor an offline build set {LOCAL_TREE_ENV} to a llama.cpp tree.",
            pin.package,
            pin.version,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let packages = meta["packages"].as_array().expect("metadata has packages");
    let pkg = packages
        .iter()
        .find(|p| p["name"] == pin.package.as_str() && p["version"] == pin.version.as_str())
        .unwrap_or_else(|| {
            panic!(
                "cargo metadata did not resolve {} {}",
                pin.package, pin.version
            )
        });
    let manifest_path = PathBuf::from(pkg["manifest_path"].as_str().expect("manifest_path"));
    manifest_path
        .parent()
        .expect("manifest has a parent")
        .to_path_buf()
}

/// Checks the package against the pin: the `.crate` archive in cargo's cache, or the checksum file
/// of a `cargo vendor` directory. Cargo verified the download against the index; this guards the
/// pin file itself (a bumped version with a stale checksum fails here).
fn verify_checksum(pin: &Pin, package_dir: &Path) {
    let vendored = package_dir.join(".cargo-checksum.json");
    let actual = if vendored.is_file() {
        let text = fs::read_to_string(&vendored).expect("read .cargo-checksum.json");
        let json: serde_json::Value = serde_json::from_str(&text).expect(".cargo-checksum.json");
        json["package"].as_str().map(str::to_string)
    } else {
        crate_archive(package_dir).map(|archive| {
            let bytes = fs::read(&archive).expect("read .crate archive");
            hex(&Sha256::digest(&bytes))
        })
    };
    match actual {
        Some(sum) if sum == pin.sha256 => {}
        Some(sum) => panic!(
            "{} {}: checksum {} does not match the pin {} in vendor/UPSTREAM.toml",
            pin.package, pin.version, sum, pin.sha256
        ),
        None => println!(
            "cargo:warning=no archive found to verify {} {} against the pin; trusting cargo's own check",
            pin.package, pin.version
        ),
    }
}

/// `<CARGO_HOME>/registry/src/<index>/<pkg>-<ver>` -> `<CARGO_HOME>/registry/cache/<index>/<pkg>-<ver>.crate`.
fn crate_archive(package_dir: &Path) -> Option<PathBuf> {
    let name = package_dir.file_name()?.to_str()?;
    let index = package_dir.parent()?;
    let registry = index.parent()?.parent()?;
    let archive = registry
        .join("cache")
        .join(index.file_name()?)
        .join(format!("{name}.crate"));
    archive.is_file().then_some(archive)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The parts of the upstream tree that the Rust build and an exported CMake build need.
const TREE_ENTRIES: &[&str] = &[
    "CMakeLists.txt",
    "LICENSE",
    "cmake",
    "ggml",
    "include",
    "src",
    "common",
    "vendor",
    "licenses",
    // why: not compiled; its key tables (`clip-impl.h`) are what audio-engine's key-spelling
    // test checks the mmproj loader and converter against.
    "tools/mtmd",
];

/// Copies the pristine tree into `dest` afresh, so the patch series always starts from upstream.
pub fn copy_tree(pristine: &Path, dest: &Path) {
    if dest.exists() {
        fs::remove_dir_all(dest).expect("remove the previous patched tree");
    }
    fs::create_dir_all(dest).expect("create the patched tree");
    for entry in TREE_ENTRIES {
        let from = pristine.join(entry);
        if from.exists() {
            copy_recursive(&from, &dest.join(entry));
        }
    }
}

fn copy_recursive(from: &Path, to: &Path) {
    if from.is_dir() {
        fs::create_dir_all(to).expect("create directory in the patched tree");
        for entry in fs::read_dir(from).expect("read upstream directory") {
            let entry = entry.expect("read upstream directory entry");
            copy_recursive(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent).expect("create directory in the patched tree");
        }
        fs::copy(from, to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
    }
}

/// The headers CMake would configure from `*-version.h.in`.
pub fn write_version_headers(pin: &Pin, gen: &Path) {
    fs::create_dir_all(gen).expect("create OUT_DIR/gen");
    let commit = format!("{}-{}+patches", pin.package, pin.version);
    let ggml = format!(
        "#pragma once\n#define GGML_VERSION \"{}\"\n#define GGML_COMMIT \"{commit}\"\n",
        pin.ggml_version
    );
    let llama = format!(
        "#pragma once\n#define LLAMA_VERSION \"{}\"\n#define LLAMA_COMMIT \"{commit}\"\n",
        pin.llama_version
    );
    fs::write(gen.join("ggml-version.h"), ggml).expect("write ggml-version.h");
    fs::write(gen.join("llama-version.h"), llama).expect("write llama-version.h");
}
