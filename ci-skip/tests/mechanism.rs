//! The mechanism itself: a test that needs a tool which is not installed passes with a marker
//! line outside CI and fails (with the marker line) when `CI=true`; `.ci/run` counts the lines.

use std::process::{Command, Output};

const TOOL: &str = "lfm2e-no-such-tool-for-the-skip-test";

/// The test the children run: it needs [`TOOL`]. Outside a child run it only checks that the
/// tool is indeed missing (so the children's premise holds).
#[test]
fn child_needs_a_missing_tool() {
    if std::env::var_os("CI_SKIP_CHILD").is_none() {
        assert!(
            ci_skip::find_tool(TOOL).is_none(),
            "{TOOL} exists on this machine"
        );
        return;
    }
    if ci_skip::require_tool("child_needs_a_missing_tool", TOOL, "nothing installs it").is_none() {
        return;
    }
    unreachable!("{TOOL} was found");
}

/// Runs [`child_needs_a_missing_tool`] in a child test process with `CI` set to `ci` (or unset).
fn run_child(ci: Option<&str>) -> Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_needs_a_missing_tool", "--test-threads=1"])
        .env("CI_SKIP_CHILD", "1")
        .env_remove("CI");
    if let Some(v) = ci {
        cmd.env("CI", v);
    }
    cmd.output().unwrap()
}

fn marker_lines(out: &Output) -> usize {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with(ci_skip::MARKER))
        .count()
}

#[test]
fn a_missing_tool_fails_the_test_in_ci() {
    let out = run_child(Some("true"));
    assert!(
        !out.status.success(),
        "the child passed with CI=true:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        marker_lines(&out),
        1,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("could not run its check in CI"));
}

#[test]
fn a_missing_tool_is_a_marked_pass_outside_ci() {
    for ci in [None, Some("false"), Some("")] {
        let out = run_child(ci);
        assert!(
            out.status.success(),
            "CI={ci:?}: the child failed:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        // The marker reaches stderr although the harness captured the passing test's output.
        assert_eq!(marker_lines(&out), 1, "CI={ci:?}");
    }
}

#[test]
fn ci_recognises_true_and_1() {
    // A child, so that this process's environment stays as it is.
    for (v, failed) in [("TRUE", true), ("1", true), ("0", false)] {
        let out = run_child(Some(v));
        assert_eq!(!out.status.success(), failed, "CI={v}");
    }
}

#[test]
fn an_installed_tool_is_found() {
    // `sh` is on every Unix this project builds on.
    assert!(ci_skip::find_tool("sh").is_some());
}
