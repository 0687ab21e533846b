//! Test audio: espeak-ng speech when the program is installed, and joins with silence.
// why: each test binary includes this module and uses only part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// Whether espeak-ng is on PATH; without it the calling test skips with the `ci-skip` marker
/// (a failure in CI, which installs espeak-ng: a missing one must not pass silently).
pub fn have_espeak() -> bool {
    ci_skip::require_tool(test_name(), "espeak-ng", "apt-get install espeak-ng").is_some()
}

/// The running test's name (the harness names each test's thread after it).
pub fn test_name() -> &'static str {
    let name = std::thread::current()
        .name()
        .unwrap_or("voice-activity test")
        .to_owned();
    // why leak: a few bytes per skipped test, for a `&'static str` the callers can pass on.
    Box::leak(name.into_boxed_str())
}

/// The smart-turn model, or `None` where its weights are not installed (a `ci-skip` skip: a
/// failure in CI, which runs scripts/smart_turn_weights.sh); other load errors panic.
pub fn smart_turn() -> Option<voice_activity::SmartTurn> {
    match voice_activity::SmartTurn::load_default() {
        Ok(m) => Some(m),
        Err(e @ voice_activity::VadError::TurnWeightsMissing { .. }) => {
            ci_skip::skip(test_name(), &e.to_string());
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// Speech of `text` in `voice`, as espeak-ng makes it (mono, 22050 Hz), or `None` without
/// espeak-ng on PATH (a failure in CI: [`have_espeak`]).
pub fn espeak(text: &str, voice: &str) -> Option<(Vec<f32>, u32)> {
    if !have_espeak() {
        return None;
    }
    let dir = std::env::temp_dir().join(format!("vad-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path: PathBuf = dir.join(format!("{voice}-{}.wav", text.len()));
    let status = Command::new("espeak-ng")
        .args(["-v", voice, "-w"])
        .arg(&path)
        .arg(text)
        .status()
        .unwrap();
    assert!(status.success(), "espeak-ng failed: {status}");
    let mut reader = hound::WavReader::open(&path).unwrap();
    let rate = reader.spec().sample_rate;
    assert_eq!(reader.spec().channels, 1);
    let samples = reader
        .samples::<i16>()
        .map(|s| f32::from(s.unwrap()) / 32768.0)
        .collect();
    std::fs::remove_file(&path).ok();
    Some((samples, rate))
}

/// `n` samples of silence.
pub fn silence(n: usize) -> Vec<f32> {
    vec![0.0; n]
}

/// The first and one past the last sample whose magnitude exceeds a tiny floor (espeak-ng's
/// own silence is digital zero or close to it).
pub fn speech_extent(samples: &[f32]) -> (usize, usize) {
    const FLOOR: f32 = 1e-3;
    let first = samples
        .iter()
        .position(|s| s.abs() > FLOOR)
        .expect("no speech");
    let last = samples.iter().rposition(|s| s.abs() > FLOOR).unwrap();
    (first, last + 1)
}
