//! A lone reply's frames: [`Depthformer::frame`] (graphs built for that one frame) and
//! [`Depthformer::session`] (graphs built once per [`DepthScratch`] and re-run for every
//! frame), each step a [`graph`](super::graph) of one frame.

use crate::ggml::{Backend, Context, GraphAllocator};

use super::graph::{build_step, graph_size, FrameState, StepGraph};
use super::{DepthError, Depthformer, R};
use crate::lfm2_audio::model::sampling::AudioSampler;

impl Depthformer {
    /// One frame: a code per codebook from the backbone's final-norm `hidden` state, each
    /// picked by `sampler` from that codebook's logits. If codebook 0 picks end-of-audio, the
    /// frame is all end-of-audio.
    ///
    /// Builds this frame's step graphs in a fresh scratch; for a stream of frames use
    /// [`Depthformer::session`].
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn frame(&self, hidden: &[f32], sampler: &mut AudioSampler) -> R<Vec<u32>> {
        let scratch = self.new_scratch()?;
        let mut runner = Runner::new(self, &scratch);
        runner.run(hidden, Feed::Sample(sampler))
    }

    /// The logits of every codebook when the codes fed back are `codes` (teacher forcing):
    /// row `i` is codebook `i`'s logits given `codes[..i]`. `codes` holds one code per codebook
    /// (the last one is not used).
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn frame_logits_teacher_forced(&self, hidden: &[f32], codes: &[u32]) -> R<Vec<Vec<f32>>> {
        let scratch = self.new_scratch()?;
        let mut runner = Runner::new(self, &scratch);
        let mut rows = Vec::with_capacity(self.codebooks());
        runner.run(hidden, Feed::Teacher(codes, &mut rows))?;
        Ok(rows)
    }

    /// Per-run state for a [`DepthSession`] computing on the weights' backend: keep it beside
    /// the session.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn new_scratch(&self) -> R<DepthScratch> {
        self.new_scratch_on(&self.backend)
    }

    /// Per-run state for a [`DepthSession`] computing on `backend` (an instance of the weights'
    /// device, e.g. [`Backend::new_instance`], so several sessions compute at once).
    pub fn new_scratch_on(&self, backend: &Backend) -> R<DepthScratch> {
        let size = graph_size(self.layers.len(), 1);
        let ctxs = (0..self.codebooks())
            .map(|_| Context::metadata_with_graph(size, size))
            .collect::<Result<Vec<_>, _>>()?;
        let allocs = (0..self.codebooks())
            .map(|_| GraphAllocator::labelled(backend, "depthformer"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(DepthScratch {
            state: FrameState::new(&self.config, backend)?,
            backend: backend.clone(),
            ctxs,
            allocs,
            used: false,
        })
    }

    /// A session whose step graphs are built once (on first use) and re-run for every frame.
    /// `scratch` (from [`Depthformer::new_scratch`]) serves one session only.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn session<'a>(&'a self, scratch: &'a mut DepthScratch) -> R<DepthSession<'a>> {
        if scratch.used {
            return Err(DepthError::ScratchUsed);
        }
        if scratch.ctxs.len() != self.codebooks() {
            return Err(DepthError::ScratchMismatch {
                expected: self.codebooks(),
                found: scratch.ctxs.len(),
            });
        }
        scratch.used = true;
        let scratch: &'a DepthScratch = scratch;
        Ok(DepthSession {
            runner: Runner::new(self, scratch),
        })
    }
}

/// Per-run state (see the module docs): the backend it computes on, the frame state and the
/// step graphs' memory, for one [`DepthSession`].
pub struct DepthScratch {
    backend: Backend,
    state: FrameState,
    ctxs: Vec<Context>,
    allocs: Vec<GraphAllocator>,
    used: bool,
}

impl std::fmt::Debug for DepthScratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DepthScratch")
            .field("steps", &self.ctxs.len())
            .field("used", &self.used)
            .finish()
    }
}

/// Frames with graphs built once: see [`Depthformer::session`].
pub struct DepthSession<'a> {
    runner: Runner<'a>,
}

impl std::fmt::Debug for DepthSession<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DepthSession")
            .field(
                "built_steps",
                &self.runner.steps.iter().filter(|s| s.is_some()).count(),
            )
            .finish()
    }
}

impl DepthSession<'_> {
    /// As [`Depthformer::frame`], re-running the session's graphs.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn frame(&mut self, hidden: &[f32], sampler: &mut AudioSampler) -> R<Vec<u32>> {
        self.runner.run(hidden, Feed::Sample(sampler))
    }

    /// As [`Depthformer::frame_logits_teacher_forced`], re-running the session's graphs.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub fn frame_logits_teacher_forced(
        &mut self,
        hidden: &[f32],
        codes: &[u32],
    ) -> R<Vec<Vec<f32>>> {
        let mut rows = Vec::with_capacity(self.runner.depth.codebooks());
        self.runner.run(hidden, Feed::Teacher(codes, &mut rows))?;
        Ok(rows)
    }
}

/// Where each step's code comes from.
enum Feed<'s> {
    /// Picked by the sampler; end-of-audio at codebook 0 ends the frame.
    Sample(&'s mut AudioSampler),
    /// Given (teacher forcing); every step's logits are collected.
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    Teacher(&'s [u32], &'s mut Vec<Vec<f32>>),
}

/// Builds step graphs on demand and runs frames.
struct Runner<'a> {
    depth: &'a Depthformer,
    scratch: &'a DepthScratch,
    steps: Vec<Option<StepGraph<'a>>>,
}

impl<'a> Runner<'a> {
    fn new(depth: &'a Depthformer, scratch: &'a DepthScratch) -> Self {
        Runner {
            depth,
            scratch,
            steps: (0..depth.codebooks()).map(|_| None).collect(),
        }
    }

    fn run(&mut self, hidden: &[f32], mut feed: Feed<'_>) -> R<Vec<u32>> {
        let d = self.depth;
        d.check_hidden(hidden)?;
        let c = d.codebooks();
        let vocab = d.audio_vocab() as u32;
        if let Feed::Teacher(codes, _) = &feed {
            if codes.len() != c {
                return Err(DepthError::Input(format!(
                    "{} codes given, the depthformer has {c} codebooks",
                    codes.len()
                )));
            }
            if let Some((cb, code)) = codes.iter().enumerate().find(|(_, &x)| x >= vocab) {
                return Err(DepthError::Input(format!(
                    "code {code} of codebook {cb} is outside 0..{vocab}"
                )));
            }
        }
        let mut out = Vec::with_capacity(c);
        for i in 0..c {
            if self.steps[i].is_none() {
                let ctx = &self.scratch.ctxs[i];
                let step = build_step(d, ctx, &[&self.scratch.state], i)?;
                self.scratch.allocs[i].alloc_graph(&step.graph)?;
                self.steps[i] = Some(step);
            }
            let Some(step) = self.steps[i].as_ref() else {
                unreachable!("built above");
            };
            let prev = match i {
                0 => [0],
                _ => [out[i - 1] as i32],
            };
            step.set_inputs(hidden, &prev)?;
            self.scratch.allocs[i].compute(&self.scratch.backend, &step.graph)?;
            let logits = step.logits.get_f32()?;
            let code = match &mut feed {
                Feed::Sample(s) => s.sample(&logits).map_err(|source| DepthError::Sample {
                    codebook: i,
                    source,
                })?,
                Feed::Teacher(codes, rows) => {
                    rows.push(logits);
                    codes[i]
                }
            };
            out.push(code);
            if i == 0 && code == d.end_of_audio() && matches!(feed, Feed::Sample(_)) {
                // why: liquid-audio overwrites the whole frame with end-of-audio here.
                return Ok(vec![code; c]);
            }
        }
        Ok(out)
    }
}
