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
//!
//! Where ours computes `Q4_0` products with the VNNI column kernel (vendor patch 0007), a third
//! side times ours again with ggml's own kernel (a second copy of the backbone, loaded with the
//! kernel off: on CPUs with AMX its `Q4_0` weights then take ggml's AMX path), so the kernel's
//! gain is read in the same run; the three rotate which goes first.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use audio_tooling::step_anchor::{minor_faults, PrefillProbe};
use lfm2_llm::llama::{ContextOptions, LlamaBatch, LlamaContext, LlamaModel};

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
    let vnni = super::vnni_kernel_on();
    let ours = PrefillProbe::load(backbone, a.threads as usize, vnni)?;
    // ours again with ggml's own Q4_0 kernel, where ours takes the VNNI column kernel (patch 0007)
    let stock = if vnni && a.prefill_side.is_none() {
        Some(PrefillProbe::load(backbone, a.threads as usize, false)?)
    } else {
        None
    };
    // on the CPU, where the probe runs ours
    let model = LlamaModel::load_cpu(backbone)
        .with_context(|| format!("libllama loading {}", backbone.display()))?;
    let mut llama = Llama::new(&model, longest + 1, a.threads)?;
    println!(
        "prefill A/B on {}: a block of {len} positions after each context, ours{} and llama.cpp \
         back to back ({} threads), {} round(s) rotating which goes first",
        backbone.display(),
        if stock.is_some() {
            ", ours with ggml's Q4_0 kernel"
        } else {
            ""
        },
        a.threads,
        a.rounds
    );
    // one untimed block each, so that no side's first use counts
    ours.block(0, len, longest)?;
    if let Some(st) = &stock {
        st.block(0, len, longest)?;
    }
    llama.block(0, len)?;
    println!(
        "| context | ours ms (median, range) | ours with ggml's Q4_0 kernel ms (median, range) | \
         llama.cpp ms (median, range) | ours pos/s | llama tok/s | ratio (llama / ours, median \
         of pairs) | pairs >= 1.0 | ratio (ggml kernel / ours) | faults ours / llama | our \
         allocator grew |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut all_pairs = Vec::new();
    let mut all_kernel = Vec::new();
    for &context in &contexts {
        let (mut o, mut st, mut l, mut pairs, mut kernel) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
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
            // sides 0 (ours), 1 (ours, ggml's kernel), 2 (llama.cpp), rotated by the round
            let (mut so, mut ss, mut sl) = (f64::NAN, f64::NAN, None);
            for k in 0..3 {
                match (r + k) % 3 {
                    0 => so = run_ours()?,
                    1 => {
                        if let Some(p) = &stock {
                            ss = p.block(context, len, longest)?.seconds;
                        }
                    }
                    _ => sl = Some(llama.block(context, len)?),
                }
            }
            let sl = sl.context("llama.cpp's side ran")?;
            lf.push(sl.faults as f64);
            o.push(so);
            l.push(sl.seconds);
            pairs.push(sl.seconds / so);
            if stock.is_some() {
                st.push(ss);
                kernel.push(ss / so);
            }
        }
        let m = |v: &[f64]| median(v).unwrap_or(f64::NAN);
        let (mo, ml) = (m(&o), m(&l));
        all_pairs.extend(pairs.iter().copied());
        all_kernel.extend(kernel.iter().copied());
        println!(
            "| {context} | {:.0} ({}) | {:.0} ({}) | {:.0} ({}) | {:.0} | {:.0} | {:.2}x | {}/{} | {:.2}x | {:.0} / {:.0} | {grew}/{} |",
            mo * 1e3,
            spread(&o),
            m(&st) * 1e3,
            spread(&st),
            ml * 1e3,
            spread(&l),
            len as f64 / mo,
            len as f64 / ml,
            m(&pairs),
            pairs.iter().filter(|&&p| p >= 1.0).count(),
            pairs.len(),
            m(&kernel),
            m(&of),
            m(&lf),
            a.rounds
        );
    }
    let lo = all_pairs.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "all pairs: median {:.2}x, lowest {lo:.2}x, {}/{} at or above 1.0; ggml's kernel / ours: \
         median {:.2}x",
        median(&all_pairs).unwrap_or(f64::NAN),
        all_pairs.iter().filter(|&&p| p >= 1.0).count(),
        all_pairs.len(),
        median(&all_kernel).unwrap_or(f64::NAN)
    );
    Ok(())
}
