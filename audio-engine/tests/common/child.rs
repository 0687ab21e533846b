//! Running one test of this binary again in a child process, for tests whose failure could be
//! a crash (an abort, `SIGBUS`) or a hang: the parent watches the child's output lines and
//! kills it when it goes quiet for too long, so a crash or a hang becomes a test failure that
//! says what the child was doing, instead of taking the whole test binary down.
//!
//! The child test is an ordinary `#[test]` that does nothing unless [`CHILD_ENV`] is set.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Set (to the parent's chosen value) in the child's environment.
pub const CHILD_ENV: &str = "LFM2_TEST_CHILD";

/// The marker that starts every line the child reports (libtest prints its own lines too).
pub const MARK: &str = "@@ ";

/// Prints one report line for the parent (flushed at once: stdout is line-buffered).
pub fn report(line: &str) {
    println!("{MARK}{line}");
}

/// The value of [`CHILD_ENV`] when this process is a child.
pub fn child_role() -> Option<String> {
    std::env::var(CHILD_ENV).ok()
}

/// What a child did.
#[derive(Debug)]
pub struct Outcome {
    /// Its exit status (`None` when it was killed for going quiet).
    pub status: Option<ExitStatus>,
    /// Its report lines, marker removed, in order.
    pub lines: Vec<String>,
    /// Whether it was killed for printing no report line within the limit.
    pub timed_out: bool,
    /// Its standard error.
    pub stderr: String,
}

impl Outcome {
    /// Whether it exited with status 0.
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// A description of how it ended, for failure messages (the signal when it died of one).
    pub fn how(&self) -> String {
        use std::os::unix::process::ExitStatusExt;
        match self.status {
            None => "killed after going quiet".to_owned(),
            Some(s) => match s.signal() {
                Some(sig) => format!("died of signal {sig}"),
                None => format!("exited with {s}"),
            },
        }
    }
}

/// Runs test `test` of this binary in a child with [`CHILD_ENV`] = `role` and `env`; kills it
/// if `quiet` passes without a report line.
pub fn run(test: &str, role: &str, env: &[(&str, String)], quiet: Duration) -> Outcome {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, role)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("starting the child test process");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // why: libtest prints `test NAME ... ` without a newline before the test runs,
            // so the first report line follows it.
            if let Some(i) = line.find(MARK) {
                if tx.send(line[i + MARK.len()..].to_owned()).is_err() {
                    break;
                }
            }
        }
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut lines = Vec::new();
    let mut timed_out = false;
    loop {
        match rx.recv_timeout(quiet) {
            Ok(l) => lines.push(l),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                timed_out = true;
                let _ = child.kill();
                break;
            }
        }
    }
    let status = child.wait().expect("waiting for the child");
    let _ = reader.join();
    let stderr = err_reader.join().unwrap_or_default();
    Outcome {
        status: (!timed_out).then_some(status),
        lines,
        timed_out,
        stderr,
    }
}
