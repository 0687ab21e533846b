//! `--prefill-ab CONTEXTS`: our prefill of one question block against llama.cpp's prefill of
//! the same number of positions at the same context length, on the same backbone file, back to
//! back in this one process and interleaved over `--rounds` (issue #26, part 1). Both sides
//! then see the same host state (frequency, memory bandwidth, the neighbours' load), so the
//! ratio of each pair is what the code does, not what the machine did meanwhile.
//!
//! Each timed block starts from a fresh decode cache (ours) or a cleared context (llama.cpp)
//! holding `context` positions, prefilled untimed. Besides the seconds, each side's minor page
//! faults during the block are counted (first touches of fresh memory: our lazily mapped cache
//! rows and a graph allocator that grew, llama.cpp's buffers reserved up front), and for ours
//! the graph allocator's size before and after the block.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use audio_engine::ggml::llama::{ContextOptions, LlamaBatch, LlamaContext, LlamaModel};
use audio_engine::lfm2_audio::step_anchor::{minor_faults, PrefillProbe};

use super::{median, Args};

/// One timed block of one side.
struct Sample {
    seconds: f64,
    faults: u64,
}

/// llama.cpp's side: one context sized for the longest block, cleared before each.
struct Llama {
    ctx: LlamaContext,
    n_vocab: u32,
}

impl Llama {
    fn new(model: &LlamaModel, n_ctx: usize, threads: u32) -> Result<Llama> {
        let opts = ContextOptions {
            n_ctx: n_ctx.div_ceil(256) as u32 * 256,
            n_batch: 512,
            n_ubatch: 512,
            n_seq_max: 1,
            n_rs_seq: 0,
            n_threads: threads as i32,
            exact_attention: false,
        };
        Ok(Llama {
            ctx: LlamaContext::new(model, &opts, None).context("libllama context")?,
            n_vocab: model.n_vocab() as u32,
        })
    }

    fn block(&mut self, context: usize, len: usize) -> Result<Sample> {
        self.ctx.clear(true);
        let token = |i: usize| (5 + (i as u32 * 7) % 1000).min(self.n_vocab - 1) as i32;
        let mut batch = LlamaBatch::new();
        for start in (0..context).step_by(512) {
            batch.clear();
            for i in start..(start + 512).min(context) {
                batch.push(token(i), i as i32, 0, false);
            }
            self.ctx.decode(&batch)?;
        }
        batch.clear();
        for i in context..context + len {
            batch.push(token(i), i as i32, 0, i + 1 == context + len);
        }
        let faults = minor_faults();
        let t = Instant::now();
        self.ctx.decode(&batch)?;
        Ok(Sample {
            seconds: t.elapsed().as_secs_f64(),
            faults: minor_faults().saturating_sub(faults),
        })
    }
}

fn spread(v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(0.0, f64::max);
    format!("{:.0}-{:.0}", lo * 1e3, hi * 1e3)
}

/// Runs the A/B at each context of `--prefill-ab` and prints one table.
pub fn run(a: &Args, backbone: &Path) -> Result<()> {
    let len = a.prefill_len as usize;
    let contexts: Vec<usize> = a.prefill_ab.iter().map(|&c| c as usize).collect();
    let longest = contexts.iter().max().copied().unwrap_or(0) + len;
    let ours = PrefillProbe::load(backbone, a.threads as usize)?;
    // on the CPU, where the probe runs ours
    let model = LlamaModel::load_cpu(backbone)
        .with_context(|| format!("libllama loading {}", backbone.display()))?;
    let mut llama = Llama::new(&model, longest + 1, a.threads)?;
    println!(
        "prefill A/B on {}: a block of {len} positions after each context, ours and llama.cpp \
         back to back ({} threads), {} round(s) alternating which goes first",
        backbone.display(),
        a.threads,
        a.rounds
    );
    // one untimed block each, so that neither side's first use counts
    ours.block(0, len, longest)?;
    llama.block(0, len)?;
    println!(
        "| context | ours ms (median, range) | llama.cpp ms (median, range) | ours pos/s | llama \
         tok/s | ratio (llama / ours, median of pairs) | pairs >= 1.0 | faults ours / llama | \
         our allocator grew |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut all_pairs = Vec::new();
    for &context in &contexts {
        let (mut o, mut l, mut pairs) = (Vec::new(), Vec::new(), Vec::new());
        let (mut of, mut lf, mut grew) = (Vec::new(), Vec::new(), 0);
        for r in 0..a.rounds {
            let mut run_ours = || -> Result<f64> {
                let t = ours.block(context, len, longest)?;
                of.push(t.minor_faults as f64);
                if t.allocator_after > t.allocator_before {
                    grew += 1;
                }
                Ok(t.seconds)
            };
            if let Some(side) = a.prefill_side.as_deref() {
                // each timed block's window on the realtime clock (`perf record -k realtime`)
                let now = || {
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0.0, |d| d.as_secs_f64())
                };
                let s = if side == "ours" {
                    run_ours()?
                } else {
                    llama.block(context, len)?.seconds
                };
                let end = now();
                println!("PREFILL_BLOCK {side} {context} {:.6} {end:.6}", end - s);
                continue;
            }
            let (so, sl) = if r % 2 == 0 {
                let so = run_ours()?;
                (so, llama.block(context, len)?)
            } else {
                let sl = llama.block(context, len)?;
                (run_ours()?, sl)
            };
            lf.push(sl.faults as f64);
            o.push(so);
            l.push(sl.seconds);
            pairs.push(sl.seconds / so);
        }
        let (mo, ml) = (
            median(&o).unwrap_or(f64::NAN),
            median(&l).unwrap_or(f64::NAN),
        );
        let mp = median(&pairs).unwrap_or(f64::NAN);
        all_pairs.extend(pairs.iter().copied());
        println!(
            "| {context} | {:.0} ({}) | {:.0} ({}) | {:.0} | {:.0} | {mp:.2}x | {}/{} | {:.0} / {:.0} | {grew}/{} |",
            mo * 1e3,
            spread(&o),
            ml * 1e3,
            spread(&l),
            len as f64 / mo,
            len as f64 / ml,
            pairs.iter().filter(|&&p| p >= 1.0).count(),
            pairs.len(),
            median(&of).unwrap_or(0.0),
            median(&lf).unwrap_or(0.0),
            a.rounds
        );
    }
    let lo = all_pairs.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "all pairs: median {:.2}x, lowest {lo:.2}x, {}/{} at or above 1.0",
        median(&all_pairs).unwrap_or(f64::NAN),
        all_pairs.iter().filter(|&&p| p >= 1.0).count(),
        all_pairs.len()
    );
    Ok(())
}
