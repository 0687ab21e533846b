//! Times one smart-turn call (features and network over an 8 s window) on this thread.
//!
//! `cargo run -p voice-activity --release --example smart_turn_bench [-- runs]`

use std::time::Instant;

use anyhow::Result;
use voice_activity::SmartTurn;

fn main() -> Result<()> {
    let runs: usize = std::env::args().nth(1).map_or(Ok(10), |s| s.parse())?;
    let model = SmartTurn::load_default()?;
    // A deterministic chirp-like signal: the cost does not depend on the content.
    let audio: Vec<f32> = (0..128_000)
        .map(|i| 0.3 * ((i as f32) * 0.05 + (i as f32 * 1e-5).powi(2)).sin())
        .collect();
    model.probability(&audio); // warm-up
    let mut features_ms = Vec::new();
    let mut total_ms = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let f = model.features(&audio);
        features_ms.push(t.elapsed().as_secs_f64() * 1e3);
        model.probability_of_features(&f)?;
        total_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "{runs} runs: features min {:.1} ms, median {:.1} ms; whole call min {:.1} ms, median {:.1} ms",
        min(&features_ms),
        median(&mut features_ms),
        min(&total_ms),
        median(&mut total_ms)
    );
    Ok(())
}
