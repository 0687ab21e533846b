//! The install path: `cargo run -p xtask -- install --prefix DIR` into a temporary prefix, then
//! C programs built against the installed copy the ways callers build them: `pkg-config
//! --cflags --libs audiocpp` (via PKG_CONFIG_PATH), plain `-laudiocpp`, and statically; and
//! `examples/c/chat.c`, whose conversation is compared with the Rust session's. And the build
//! tree without an install: `audiocpp-uninstalled.pc`, which build.rs writes for pkg-config.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use audio_engine::lfm2_audio::conversation::{Artifact, ArtifactKind, QUESTION_ID};
use audio_engine::lfm2_audio::internals::sampling::SamplerConfig;
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{S2sOptions, S2sRequest, Session, SessionOptions};
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
            .arg(built_lib_dir())
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
        ci_skip::skip(
            "a_c_program_builds_with_pkg_config_and_with_plain_laudiocpp",
            "pkg-config is not installed (apt-get install pkg-config)",
        );
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
        ci_skip::skip(
            "a_c_program_links_the_static_library",
            "pkg-config is not installed (apt-get install pkg-config)",
        );
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

#[test]
fn a_c_program_builds_against_the_build_tree_with_the_uninstalled_pc_file() {
    // build.rs wrote it for the profile directory this test binary is in.
    let pc_dir = profile_dir().join("pkgconfig");
    let lib_dir = profile_dir().join("audiocpp-uninstalled");
    let pkg_config = |args: &[&str]| {
        Command::new("pkg-config")
            .args(args)
            .env("PKG_CONFIG_PATH", &pc_dir)
            .env_remove("PKG_CONFIG_DISABLE_UNINSTALLED")
            .output()
            .ok()
    };
    let Some(o) = pkg_config(&["--cflags", "--libs", "audiocpp"]) else {
        ci_skip::skip(
            "a_c_program_builds_against_the_build_tree_with_the_uninstalled_pc_file",
            "pkg-config is not installed (apt-get install pkg-config)",
        );
        return;
    };
    assert!(
        o.status.success(),
        "pkg-config: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let flags: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    // The checkout's headers and the links under audio.cpp's names in the build tree.
    for want in [
        format!("-I{}", root().join("include").display()),
        format!("-L{}", lib_dir.display()),
        "-laudiocpp".to_owned(),
    ] {
        assert!(flags.contains(&want), "{want} not in {flags:?}");
    }
    // pkg-config took `audiocpp-uninstalled.pc` for `audiocpp` (its exit status says so).
    let o = pkg_config(&["--uninstalled", "audiocpp"]).unwrap();
    assert!(
        o.status.success(),
        "pkg-config did not pick the uninstalled file"
    );
    // The links lead to the library this test run was built with.
    for name in ["libaudiocpp.so", "libaudiocpp.so.0"] {
        assert_eq!(
            std::fs::canonicalize(lib_dir.join(name)).unwrap(),
            std::fs::canonicalize(cdylib()).unwrap(),
            "{name}"
        );
    }
    assert_eq!(
        std::fs::canonicalize(lib_dir.join("libaudiocpp.a")).unwrap(),
        std::fs::canonicalize(built_lib_dir().join("liblfm2_engine.a")).unwrap()
    );

    let exe = scratch("hello-build-tree").join("hello");
    build(&root().join("tests/c/hello.c"), &exe, &flags);
    // No LD_LIBRARY_PATH: the rpath the .pc file adds finds the build tree's library.
    let o = Command::new(&exe)
        .arg(demo_package())
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.starts_with("lfm2_audio abi 000200 lfm2-engine "),
        "{out}"
    );
}

fn pcm16_wav(p: &Pcm) -> Vec<u8> {
    let spec = hound::WavSpec {
        channels: p.channels as u16,
        sample_rate: p.rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut out = std::io::Cursor::new(Vec::new());
    let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
    for &s in &p.samples {
        w.write_sample((s * 32767.0) as i16).unwrap();
    }
    w.finalize().unwrap();
    out.into_inner()
}

#[test]
fn the_chat_example_holds_a_conversation_like_the_rust_session() {
    let dir = scratch("chat");
    let exe = dir.join("chat");
    let src = root().join("examples/c/chat.c");
    match pkg_config(&["--cflags", "--libs"]) {
        Some(flags) => build(&src, &exe, &flags),
        None => build(
            &src,
            &exe,
            &[
                format!("-I{}", prefix().join("include").display()),
                format!("-L{}", prefix().join("lib").display()),
                "-laudiocpp".into(),
            ],
        ),
    }
    let qs = [signal(1.5, 16_000, 1, 3), signal(1.1, 44_100, 2, 4)];
    let files: Vec<PathBuf> = qs
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let f = dir.join(format!("q{i}.wav"));
            std::fs::write(&f, pcm16_wav(q)).unwrap();
            f
        })
        .collect();

    // The Rust session with the same questions and settings.
    let mut session = Session::new(rust_model().clone(), SessionOptions::default());
    let mut history = Vec::new();
    let mut want = Vec::new();
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let t = session
            .s2s(&S2sRequest {
                question: bytes.clone().into(),
                history: history.clone(),
                return_codes: true,
                s2s: S2sOptions {
                    max_new_tokens: 24,
                    text: SamplerConfig::text(),
                    audio: SamplerConfig::s2s_audio(5),
                    ..S2sOptions::default()
                },
            })
            .unwrap();
        history.push(Artifact {
            id: QUESTION_ID.to_owned(),
            kind: ArtifactKind::Custom,
            payload: bytes,
            meta: BTreeMap::new(),
        });
        history.push(t.artifact.clone().unwrap());
        want.push(t.reply.audio);
    }

    for mode in [None, Some("--stream")] {
        let out = scratch(&format!("chat-out-{}", mode.is_some()));
        let mut cmd = Command::new(&exe);
        cmd.args(mode)
            .args(["--max-tokens", "24", "--seed", "5"])
            .arg(demo_package())
            .arg(&out)
            .args(&files);
        cmd.env("LD_LIBRARY_PATH", prefix().join("lib"));
        let o = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        println!("{stdout}");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(stdout.contains("reused 1 questions"), "{stdout}");
        for (i, w) in want.iter().enumerate() {
            let mut r = hound::WavReader::open(out.join(format!("turn{}.wav", i + 1))).unwrap();
            assert_eq!(r.spec().sample_rate, 24_000);
            let got: Vec<f32> = r.samples::<f32>().map(Result::unwrap).collect();
            assert!(
                bits(&got) == bits(w),
                "turn {} ({mode:?}) differs from the Rust session",
                i + 1
            );
        }
    }
}
