//! The install path: `cargo run -p xtask -- install --prefix DIR` into a temporary prefix, then
//! C programs built against the installed copy the ways callers build them: `pkg-config
//! --cflags --libs audiocpp` (via PKG_CONFIG_PATH), plain `-laudiocpp`, and statically.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::*;

/// The prefix the library was installed into (once per process).
fn prefix() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let p = scratch("prefix");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let o = Command::new(cargo)
            .args(["run", "-q", "-p", "xtask", "--", "install", "--prefix"])
            .arg(&p)
            .arg("--lib-dir")
            .arg(profile_dir())
            .current_dir(root())
            .output()
            .expect("cargo run -p xtask");
        println!("{}", String::from_utf8_lossy(&o.stdout));
        assert!(
            o.status.success(),
            "install failed:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        p
    })
}

/// `pkg-config ARGS audiocpp` against the installed prefix, or `None` without pkg-config.
fn pkg_config(args: &[&str]) -> Option<Vec<String>> {
    let o = Command::new("pkg-config")
        .args(args)
        .arg("audiocpp")
        .env("PKG_CONFIG_PATH", prefix().join("lib/pkgconfig"))
        .output()
        .ok()?;
    assert!(
        o.status.success(),
        "pkg-config: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
    )
}

/// Builds `src` into `out` with `flags` (no rpath: the run below says where the library is).
fn build(src: &Path, out: &Path, flags: &[String]) {
    let mut cmd = Command::new(cc());
    cmd.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1"])
        .arg(src)
        .arg("-o")
        .arg(out)
        .args(flags);
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "{cmd:?}:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn run(exe: &Path, args: &[&Path], with_lib_path: bool) -> String {
    let mut cmd = Command::new(exe);
    cmd.args(args);
    if with_lib_path {
        cmd.env("LD_LIBRARY_PATH", prefix().join("lib"));
    }
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "{}: {}{}",
        exe.display(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn install_lays_out_the_library_header_and_pkg_config_file() {
    let p = prefix();
    for f in [
        "lib/libaudiocpp.so",
        "lib/libaudiocpp.so.0",
        "lib/libaudiocpp.so.0.2.0",
        "lib/libaudiocpp.a",
        "include/audiocpp.h",
        "include/lfm2e.h",
        "lib/pkgconfig/audiocpp.pc",
    ] {
        assert!(p.join(f).exists(), "{f} missing");
    }
    assert_eq!(
        std::fs::read_link(p.join("lib/libaudiocpp.so")).unwrap(),
        Path::new("libaudiocpp.so.0")
    );
    let pc = std::fs::read_to_string(p.join("lib/pkgconfig/audiocpp.pc")).unwrap();
    assert!(pc.contains(&format!("prefix={}", p.display())), "{pc}");
    assert!(pc.contains("Libs: -L${libdir} -laudiocpp"));
    assert!(pc.contains("Version: 0.2.0"));
    assert_eq!(
        std::fs::read(p.join("include/audiocpp.h")).unwrap(),
        std::fs::read(root().join("include/audiocpp.h")).unwrap()
    );
}

#[test]
fn a_c_program_builds_with_pkg_config_and_with_plain_laudiocpp() {
    let dir = scratch("hello");
    let src = root().join("tests/c/hello.c");
    let Some(flags) = pkg_config(&["--cflags", "--libs"]) else {
        println!("SKIPPED the pkg-config build: pkg-config is not installed");
        return;
    };
    assert!(flags.contains(&"-laudiocpp".to_owned()), "{flags:?}");
    let exe = dir.join("hello-pc");
    build(&src, &exe, &flags);
    let out = run(&exe, &[demo_package()], true);
    assert!(
        out.starts_with("lfm2_audio abi 000200 lfm2-engine "),
        "{out}"
    );
    // It records the SONAME, as a program linked with audio.cpp's library does.
    let o = Command::new("readelf")
        .arg("-d")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("[libaudiocpp.so.0]"));

    let plain = dir.join("hello-plain");
    let p = prefix();
    build(
        &src,
        &plain,
        &[
            format!("-I{}", p.join("include").display()),
            format!("-L{}", p.join("lib").display()),
            "-laudiocpp".into(),
        ],
    );
    assert_eq!(run(&plain, &[demo_package()], true), out);
}

#[test]
fn a_c_program_links_the_static_library() {
    let Some(flags) = pkg_config(&["--static", "--cflags", "--libs"]) else {
        println!("SKIPPED the static build: pkg-config is not installed");
        return;
    };
    // The archive itself in place of -laudiocpp (which would pick the shared library).
    let mut args: Vec<String> = flags.into_iter().filter(|f| f != "-laudiocpp").collect();
    args.insert(0, prefix().join("lib/libaudiocpp.a").display().to_string());
    let exe = scratch("hello-static").join("hello");
    build(&root().join("tests/c/hello.c"), &exe, &args);
    let out = run(&exe, &[demo_package()], false);
    assert!(out.starts_with("lfm2_audio abi 000200"), "{out}");
    let o = Command::new("readelf")
        .arg("-d")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&o.stdout).contains("libaudiocpp"));
}
