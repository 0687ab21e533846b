//! Test audio: espeak-ng speech when the program is installed, and joins with silence.
// why: each test binary includes this module and uses only part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// Whether espeak-ng is on PATH; without it a test skips, except under `CI=true`, where it
/// fails (CI installs espeak-ng: a missing one must not pass silently).
pub fn have_espeak() -> bool {
    if Command::new("espeak-ng").arg("--version").output().is_ok() {
        return true;
    }
    assert!(
        !std::env::var("CI").is_ok_and(|v| v == "true"),
        "CI=true but espeak-ng is not on PATH (apt-get install espeak-ng)"
    );
    eprintln!("espeak-ng not on PATH: skipping the real-speech test");
    false
}

/// Speech of `text` in `voice`, as espeak-ng makes it (mono, 22050 Hz), or `None` without
/// espeak-ng on PATH (a failure under `CI=true`: [`have_espeak`]).
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
