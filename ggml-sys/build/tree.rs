//! Finding the pristine upstream tree on this machine (never over the network) and laying out the
//! copy that the build patches and compiles.
//!
//! The pinned package is a build-dependency of this crate for `cfg(any())`, a target no machine
//! has: cargo records it in `Cargo.lock`, and `cargo fetch`, `cargo vendor` and `--offline` see
//! it, but no build ever compiles it (its own build script would run CMake). So cargo leaves its
//! files where it keeps every package, and this module looks for them there: a `cargo vendor`
//! directory, cargo's unpacked registry copy, or the `.crate` archive in cargo's cache (unpacked
//! into `OUT_DIR`). Each is checked against the sha256 in `upstream/UPSTREAM.toml`.

use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};

/// Environment variable that points the build at a local llama.cpp checkout instead of the
/// registry package (upstream bisection, or a source replacement given only on the command line).
/// The pin's checksum is not checked then.
pub const LOCAL_TREE_ENV: &str = "GGML_SYS_LLAMA_CPP_DIR";

/// What `upstream/UPSTREAM.toml` records.
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

    /// `<package>-<version>`: the name of cargo's unpacked copy and of the `.crate` archive.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.package, self.version)
    }
}

/// Where the build looks for the pinned package.
pub struct Search {
    /// This crate's own directory (`CARGO_MANIFEST_DIR`).
    pub manifest_dir: PathBuf,
    /// Cargo's home (`CARGO_HOME`, else `~/.cargo`), if known.
    pub cargo_home: Option<PathBuf>,
    /// Scratch space for unpacking an archive (`OUT_DIR`).
    pub out_dir: PathBuf,
}

impl Search {
    /// The search of a build script: cargo's variables and the usual default cargo home.
    pub fn from_env(out_dir: &Path) -> Search {
        println!("cargo:rerun-if-env-changed=CARGO_HOME");
        let manifest_dir = PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
        );
        Search::new(&manifest_dir, out_dir)
    }

    /// A search from `manifest_dir`, in `CARGO_HOME` (else `~/.cargo`), unpacking into `out_dir`.
    pub fn new(manifest_dir: &Path, out_dir: &Path) -> Search {
        let cargo_home = std::env::var_os("CARGO_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .or_else(|| std::env::var_os("USERPROFILE"))
                    .map(|h| PathBuf::from(h).join(".cargo"))
            });
        Search {
            manifest_dir: manifest_dir.to_path_buf(),
            cargo_home,
            out_dir: out_dir.to_path_buf(),
        }
    }
}

/// Returns the root of a pristine llama.cpp tree: the local override, or the pinned package found
/// on this machine. Panics (failing the build) with what to do when there is none.
pub fn locate_pristine(pin: &Pin, search: &Search) -> PathBuf {
    println!("cargo:rerun-if-env-changed={LOCAL_TREE_ENV}");
    if let Some(dir) = std::env::var_os(LOCAL_TREE_ENV).filter(|v| !v.is_empty()) {
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
    match find_package(pin, search) {
        Ok(package_dir) => package_dir.join(&pin.tree),
        // why not a panic: the message is for the user; a panic adds a source line and a trace.
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

/// Finds the pinned package's directory, in this order: a `cargo vendor` directory (next to this
/// crate when it is vendored itself, or one named by a `directory` source in a cargo config file
/// above this crate or in cargo's home), cargo's unpacked registry copy, and the `.crate` archive
/// in cargo's cache (unpacked into `OUT_DIR/upstream-pin`). Every candidate is checked against
/// the pin; one that fails the check is an error, not skipped.
pub fn find_package(pin: &Pin, search: &Search) -> Result<PathBuf, String> {
    let mut looked = Vec::new();

    let mut vendor_dirs: Vec<PathBuf> = search
        .manifest_dir
        .parent()
        .into_iter()
        .map(Path::to_path_buf)
        .collect();
    vendor_dirs.extend(config_directory_sources(
        &search.manifest_dir,
        search.cargo_home.as_deref(),
    ));
    for base in &vendor_dirs {
        for name in [pin.package.clone(), pin.dir_name()] {
            let dir = base.join(name);
            looked.push(dir.display().to_string());
            let checksums = dir.join(".cargo-checksum.json");
            if checksums.is_file() && package_version(&dir).as_deref() == Some(pin.version.as_str())
            {
                verify_vendored(pin, &dir)?;
                return Ok(dir);
            }
        }
    }

    let registries = search
        .cargo_home
        .as_ref()
        .map(|h| h.join("registry"))
        .into_iter()
        .chain(registry_of(&search.manifest_dir))
        .collect::<Vec<_>>();
    for registry in &registries {
        for index in subdirs(&registry.join("src")) {
            let dir = index.join(pin.dir_name());
            looked.push(dir.display().to_string());
            // why `.cargo-ok`: cargo writes it once the archive is fully unpacked.
            if dir.join(".cargo-ok").is_file() && dir.join(&pin.tree).is_dir() {
                let archive = registry
                    .join("cache")
                    .join(index.file_name().unwrap_or_default())
                    .join(format!("{}.crate", pin.dir_name()));
                // why only when present: cargo verified the archive before unpacking it, and its
                // cache cleaning may have removed the archive since.
                if archive.is_file() {
                    check_sum(pin, &sha256_file(&archive)?, &archive)?;
                }
                return Ok(dir);
            }
        }
    }
    for registry in &registries {
        for index in subdirs(&registry.join("cache")) {
            let archive = index.join(format!("{}.crate", pin.dir_name()));
            looked.push(archive.display().to_string());
            if archive.is_file() {
                check_sum(pin, &sha256_file(&archive)?, &archive)?;
                return unpack(pin, &archive, &search.out_dir.join("upstream-pin"));
            }
        }
    }

    Err(format!(
        "the pinned upstream source {} {} (sha256 {}) is not on this machine.\n\
         It is a dependency of ggml-sys that cargo records in Cargo.lock but never compiles, so \
         `cargo build` does not download it and this build script never uses the network. Either\n\
         - run `cargo fetch` (with network) once, then build again (offline builds work from then on), or\n\
         - use a `cargo vendor` directory: its `.cargo/config.toml` source replacement must be in a \
         config file above this crate or in cargo's home (a `--config` on the command line is not \
         visible to build scripts), or\n\
         - set {LOCAL_TREE_ENV} to a llama.cpp source tree (unchecked against the pin).\n\
         Looked in:\n  {}",
        pin.package,
        pin.version,
        pin.sha256,
        looked.join("\n  ")
    ))
}

/// `.../registry` when `dir` lies in `.../registry/src/<index>/` (this crate from a registry).
fn registry_of(dir: &Path) -> Option<PathBuf> {
    let index = dir.parent()?;
    let src = index.parent()?;
    (src.file_name()? == "src").then(|| src.parent().map(Path::to_path_buf))?
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// The `version` of the package whose (normalized, as published) manifest is in `dir`.
fn package_version(dir: &Path) -> Option<String> {
    let text = fs::read_to_string(dir.join("Cargo.toml")).ok()?;
    let mut in_package = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package {
            if let Some((k, v)) = line.split_once('=') {
                if k.trim() == "version" {
                    return Some(v.trim().trim_matches('"').to_string());
                }
            }
        }
    }
    None
}

/// The `directory` of every directory source (`cargo vendor` output) in the cargo config files
/// cargo would read for a build in `start` or below: `.cargo/config.toml` (or `.cargo/config`) in
/// `start` and each ancestor, then cargo's home. Relative paths are resolved as cargo does, against
/// the parent of the directory holding the config file.
pub fn config_directory_sources(start: &Path, cargo_home: Option<&Path>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in start.ancestors() {
        files.push((dir.join(".cargo").join("config.toml"), dir.to_path_buf()));
        files.push((dir.join(".cargo").join("config"), dir.to_path_buf()));
    }
    if let Some(home) = cargo_home {
        let base = home.parent().unwrap_or(home).to_path_buf();
        files.push((home.join("config.toml"), base.clone()));
        files.push((home.join("config"), base));
    }
    let mut out = Vec::new();
    for (file, base) in files {
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        for value in directory_values(&text) {
            let path = base.join(value);
            if !out.contains(&path) {
                out.push(path);
            }
        }
    }
    out
}

/// The string values of `directory` keys in a TOML text, in tables or inline tables alike.
fn directory_values(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("directory") {
            let before_ok = at == 0 || {
                let c = rest.as_bytes()[at - 1];
                c == b' ' || c == b'{' || c == b',' || c == b'\t'
            };
            rest = &rest[at + "directory".len()..];
            let after = rest.trim_start();
            if !before_ok || !after.starts_with('=') {
                continue;
            }
            let value = after[1..].trim_start();
            let Some(quote) = value.chars().next().filter(|c| *c == '"' || *c == '\'') else {
                continue;
            };
            if let Some(end) = value[1..].find(quote) {
                out.push(value[1..1 + end].to_string());
                rest = &value[1 + end + 1..];
            }
        }
    }
    out
}

/// Checks a `cargo vendor` copy: its `.cargo-checksum.json` must name the pinned archive, and every
/// file of the tree we build from must hash to what it lists (cargo itself never reads this
/// package, so it never checks these files). An empty list is accepted, as cargo accepts it (Nix's
/// importCargoLock writes one): the package's sha256 still identifies the archive.
fn verify_vendored(pin: &Pin, dir: &Path) -> Result<(), String> {
    let path = dir.join(".cargo-checksum.json");
    let text = fs::read_to_string(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let package = json["package"].as_str().unwrap_or("(none)");
    check_sum(pin, package, &path)?;
    let files = json["files"]
        .as_object()
        .ok_or_else(|| format!("{} lists no files", path.display()))?;
    let prefix = format!("{}/", pin.tree);
    for (name, sum) in files {
        if !name.starts_with(&prefix) {
            continue;
        }
        let actual = sha256_file(&dir.join(name))?;
        if Some(actual.as_str()) != sum.as_str() {
            return Err(format!(
                "{}: {name} does not match its checksum in .cargo-checksum.json (the vendored \
                 copy was changed); re-run `cargo vendor`",
                dir.display()
            ));
        }
    }
    Ok(())
}

fn check_sum(pin: &Pin, actual: &str, what: &Path) -> Result<(), String> {
    if actual == pin.sha256 {
        Ok(())
    } else {
        Err(format!(
            "{} ({} {}): sha256 {actual} does not match the pin {} in upstream/UPSTREAM.toml",
            what.display(),
            pin.package,
            pin.version,
            pin.sha256
        ))
    }
}

fn sha256_file(path: &Path) -> Result<String, String> {
    let bytes = fs::read(path).map_err(|e| format!("read {}: {e}", path.display()))?;
    Ok(hex(&Sha256::digest(&bytes)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Unpacks a verified `.crate` archive (a gzipped tar of `<package>-<version>/...`) under `dest`
/// once; a marker holding the checksum lets later builds of this `OUT_DIR` reuse it.
fn unpack(pin: &Pin, archive: &Path, dest: &Path) -> Result<PathBuf, String> {
    let dir = dest.join(pin.dir_name());
    let marker = dest.join(".unpacked");
    if fs::read_to_string(&marker).ok().as_deref() == Some(pin.sha256.as_str())
        && dir.join(&pin.tree).is_dir()
    {
        return Ok(dir);
    }
    if dest.exists() {
        fs::remove_dir_all(dest).map_err(|e| format!("remove {}: {e}", dest.display()))?;
    }
    fs::create_dir_all(dest).map_err(|e| format!("create {}: {e}", dest.display()))?;
    let file = fs::File::open(archive).map_err(|e| format!("open {}: {e}", archive.display()))?;
    // why `unpack`: it refuses entries that would land outside `dest` (`..`, absolute paths).
    tar::Archive::new(flate2::read::GzDecoder::new(file))
        .unpack(dest)
        .map_err(|e| format!("unpack {}: {e}", archive.display()))?;
    if !dir.join(&pin.tree).is_dir() {
        return Err(format!(
            "{} holds no {}/{}",
            archive.display(),
            pin.dir_name(),
            pin.tree
        ));
    }
    fs::write(&marker, &pin.sha256).map_err(|e| format!("write {}: {e}", marker.display()))?;
    Ok(dir)
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
