//! Backbone work timed alone, for the bench's anchors: the batched step of
//! the session sweep (`Backbone::forward_steps` at each width on a backbone file, without the
//! scheduler, the depthformer or anything else of a reply), and one prefill block for the
//! prefill A/B against llama.cpp ([`PrefillProbe`]).

use std::path::Path;
use std::time::Instant;

use audio_engine::ggml::Backend;
use audio_engine::lfm2_audio::internals::backbone::{Backbone, BatchCompute, Position, Rows, Step};
use audio_engine::lfm2_audio::internals::backbone_config::Lfm2Backbone;
use audio_engine::lfm2_audio::EngineError;

/// The backbone file loaded on a CPU backend with `threads` threads, `Q4_0` products through
/// the VNNI column kernel or not; and that backend.
fn cpu_backbone(
    backbone: &Path,
    threads: usize,
    vnni_q4_0: bool,
) -> Result<(Backbone, Backend), EngineError> {
    let be = Backend::cpu()?.with_vnni_q4_0(vnni_q4_0);
    be.set_n_threads(threads.max(1))?;
    Ok((Backbone::load(Lfm2Backbone::open(backbone)?, &be)?, be))
}

/// The batched step of the sweep's anchor, timed alone: a backbone file loaded on the CPU with
/// its own batch compute.
pub struct StepProbe {
    bb: Backbone,
    compute: BatchCompute,
}

impl StepProbe {
    /// Loads the backbone file on the CPU with `threads` threads, `Q4_0` products through the
    /// VNNI column kernel or not ([`Backend::with_vnni_q4_0`]).
    pub fn load(
        backbone: &Path,
        threads: usize,
        vnni_q4_0: bool,
    ) -> Result<StepProbe, EngineError> {
        let (bb, be) = cpu_backbone(backbone, threads, vnni_q4_0)?;
        let compute = BatchCompute::new(be.new_instance()?, "backbone")?;
        compute.backend().set_n_threads(threads.max(1))?;
        Ok(StepProbe { bb, compute })
    }

    /// Median seconds of one batched step at width `width`: each sequence holds `prompt`
    /// cached positions, then `steps` timed steps run (after one untimed), every column asking
    /// for logits.
    pub fn step_seconds(
        &self,
        width: usize,
        prompt: usize,
        steps: usize,
    ) -> Result<f64, EngineError> {
        let bb = &self.bb;
        let mut caches = (0..width.max(1))
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
            bb.forward_steps(&self.compute, &mut batch)?;
            if k > 0 {
                times.push(t.elapsed().as_secs_f64());
            }
        }
        times.sort_by(f64::total_cmp);
        Ok(times.get(times.len() / 2).copied().unwrap_or(f64::NAN))
    }
}

/// One prefill block of [`PrefillProbe::block`].
#[derive(Debug, Clone, Copy)]
pub struct BlockTiming {
    /// Seconds of the block's forward call.
    pub seconds: f64,
    /// Minor page faults of the process during it (first touches of fresh memory).
    pub minor_faults: u64,
    /// The decode cache's graph allocator before and after the block, in bytes (it grows, with
    /// a fresh buffer, when the block's graph is larger than every graph before it).
    pub allocator_before: usize,
    /// See `allocator_before`.
    pub allocator_after: usize,
}

/// Our backbone's prefill of one block, timed alone, for the bench's prefill A/B against
/// llama.cpp (issue #26): the block the engine runs for a question, `len` positions after
/// `context` positions already in the decode cache.
pub struct PrefillProbe {
    bb: Backbone,
}

impl PrefillProbe {
    /// Loads the backbone file on the CPU with `threads` threads, `Q4_0` products through the
    /// VNNI column kernel or not ([`Backend::with_vnni_q4_0`]).
    pub fn load(
        backbone: &Path,
        threads: usize,
        vnni_q4_0: bool,
    ) -> Result<PrefillProbe, EngineError> {
        Ok(PrefillProbe {
            bb: cpu_backbone(backbone, threads, vnni_q4_0)?.0,
        })
    }

    /// A fresh decode cache of `capacity` positions holding `context` text positions (run as
    /// one untimed block), then one timed block of `len` text positions that returns the last
    /// position's logits, as a question's last block does.
    pub fn block(
        &self,
        context: usize,
        len: usize,
        capacity: usize,
    ) -> Result<BlockTiming, EngineError> {
        let mut cache = self.bb.new_cache(capacity.max(context + len))?;
        let text = |range: std::ops::Range<usize>| -> Vec<Position<'static>> {
            range
                .map(|i| Position::Text(5 + (i as u32 * 7) % 1000))
                .collect()
        };
        if context > 0 {
            self.bb
                .forward(&mut cache, &text(0..context), Rows::None, false)?;
        }
        let block = text(context..context + len);
        let allocator_before = cache.allocator().buffer_size();
        let faults = minor_faults();
        let t = Instant::now();
        self.bb.forward(&mut cache, &block, Rows::Last, true)?;
        let seconds = t.elapsed().as_secs_f64();
        Ok(BlockTiming {
            seconds,
            minor_faults: minor_faults().saturating_sub(faults),
            allocator_before,
            allocator_after: cache.allocator().buffer_size(),
        })
    }
}

/// The process's minor page faults so far (`/proc/self/stat`; 0 where it cannot be read).
pub fn minor_faults() -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0;
    };
    // after the command name (in parentheses, which may hold spaces): state, ppid, pgrp,
    // session, tty_nr, tpgid, flags, minflt
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(7))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
