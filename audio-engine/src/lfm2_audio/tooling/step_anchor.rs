//! The batched backbone step timed alone (feature `testkit`), for the bench's session sweep:
//! `Backbone::forward_steps` at each width on a backbone file, without the scheduler, the
//! depthformer or anything else of a reply.

use std::path::Path;
use std::time::Instant;

use crate::ggml::Backend;
use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::model::backbone::config::Lfm2Backbone;
use crate::lfm2_audio::model::backbone::{Backbone, BatchCompute, Position, Rows, Step};

/// Median seconds of one batched step at each of `widths`: each sequence holds `prompt` cached
/// positions, then `steps` timed steps run (after one untimed), every column asking for logits;
/// on the CPU with `threads` threads.
pub fn batched_step_seconds(
    backbone: &Path,
    widths: &[usize],
    threads: usize,
    prompt: usize,
    steps: usize,
) -> Result<Vec<(usize, f64)>, EngineError> {
    let be = Backend::cpu()?;
    be.set_n_threads(threads.max(1))?;
    let bb = Backbone::load(Lfm2Backbone::open(backbone)?, &be)?;
    let compute = BatchCompute::new(be.new_instance()?, "backbone")?;
    compute.backend().set_n_threads(threads.max(1))?;
    let mut out = Vec::with_capacity(widths.len());
    for &w in widths {
        let mut caches = (0..w.max(1))
            .map(|_| bb.new_cache(prompt + steps + 2))
            .collect::<Result<Vec<_>, _>>()?;
        for (s, c) in caches.iter_mut().enumerate() {
            let p: Vec<Position<'_>> = (0..prompt as u32)
                .map(|i| Position::Text(5 + i + s as u32))
                .collect();
            bb.forward(c, &p, Rows::None, false)?;
        }
        let mut times = Vec::with_capacity(steps);
        for k in 0..=steps {
            let mut batch: Vec<Step<'_, '_>> = caches
                .iter_mut()
                .map(|c| Step {
                    cache: c,
                    position: Position::Text(7 + k as u32),
                    logits: true,
                })
                .collect();
            let t = Instant::now();
            bb.forward_steps(&compute, &mut batch)?;
            if k > 0 {
                times.push(t.elapsed().as_secs_f64());
            }
        }
        times.sort_by(f64::total_cmp);
        out.push((w, times.get(times.len() / 2).copied().unwrap_or(f64::NAN)));
    }
    Ok(out)
}
