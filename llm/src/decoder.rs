//! Multi-sequence batched decoding: every active sequence advances by one token per [`step`],
//! all in one `llama_decode`; sequences join (with a prompt), leave, fork and roll back.
//!
//! [`step`]: Decoder::step

use crate::error::{LlmError, Result};
use crate::llama::LlamaModel as LlmModel;
use crate::llama::{ContextOptions, EvalObserver, LlamaBatch, LlamaContext};
use crate::sampler::Sampler;

/// A sequence handle (its slot in the context).
pub type SeqId = i32;

/// Sizes of a [`Decoder`].
#[derive(Debug, Clone)]
pub struct DecoderConfig {
    /// Sequences that can be active at once.
    pub n_seq_max: u32,
    /// Positions each sequence may use.
    pub n_ctx_per_seq: u32,
    /// Most tokens per `llama_decode` (longer prompts are split).
    pub n_batch: u32,
    /// CPU threads.
    pub n_threads: i32,
    /// Recurrent-state snapshots per sequence, i.e. how many tokens [`Decoder::rollback`] can
    /// undo on recurrent models (0 = none).
    pub n_rs_seq: u32,
}

impl Default for DecoderConfig {
    fn default() -> Self {
        DecoderConfig {
            n_seq_max: 1,
            n_ctx_per_seq: 512,
            n_batch: 512,
            n_threads: std::thread::available_parallelism().map_or(1, |n| n.get() as i32),
            n_rs_seq: 0,
        }
    }
}

/// One sequence's result of a [`Decoder::step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepOutput {
    /// The sequence.
    pub seq: SeqId,
    /// The token it sampled (fed back on its next step).
    pub token: i32,
}

#[derive(Debug)]
struct Seq {
    /// Next position to write.
    pos: i32,
    /// Tokens to feed on the next step (a prompt, forced input, or the last sampled token).
    pending: Vec<i32>,
    sampler: Sampler,
    /// Logits after the last token fed (empty before the first step and after a rollback).
    logits: Vec<f32>,
}

/// A context plus the bookkeeping of its sequences.
pub struct Decoder {
    ctx: LlamaContext,
    seqs: Vec<Option<Seq>>,
    batch: LlamaBatch,
    cfg: DecoderConfig,
}

impl Decoder {
    /// A decoder over `model`.
    pub fn new(model: &LlmModel, cfg: DecoderConfig) -> Result<Decoder> {
        Decoder::with_observer(model, cfg, None)
    }

    /// A decoder whose graph nodes are shown to `observer` as they are computed.
    pub fn with_observer(
        model: &LlmModel,
        cfg: DecoderConfig,
        observer: Option<Box<dyn EvalObserver>>,
    ) -> Result<Decoder> {
        let opts = ContextOptions {
            n_ctx: cfg.n_ctx_per_seq.saturating_mul(cfg.n_seq_max),
            n_batch: cfg.n_batch,
            n_ubatch: cfg.n_batch,
            n_seq_max: cfg.n_seq_max,
            n_rs_seq: cfg.n_rs_seq,
            n_threads: cfg.n_threads,
            exact_attention: false,
        };
        let ctx = LlamaContext::new(model, &opts, observer)?;
        let seqs = (0..cfg.n_seq_max).map(|_| None).collect();
        Ok(Decoder {
            ctx,
            seqs,
            batch: LlamaBatch::new(),
            cfg,
        })
    }

    /// Active sequences, in id order.
    pub fn active(&self) -> Vec<SeqId> {
        (0..self.seqs.len())
            .filter(|&i| self.seqs[i].is_some())
            .map(|i| i as SeqId)
            .collect()
    }

    fn seq(&self, id: SeqId) -> Result<&Seq> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.seqs.get(i))
            .and_then(Option::as_ref)
            .ok_or(LlmError::UnknownSequence(id))
    }

    fn seq_mut(&mut self, id: SeqId) -> Result<&mut Seq> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.seqs.get_mut(i))
            .and_then(Option::as_mut)
            .ok_or(LlmError::UnknownSequence(id))
    }

    fn check_tokens(&self, tokens: &[i32]) -> Result<()> {
        let n_vocab = self.ctx.n_vocab();
        match tokens.iter().find(|&&t| t < 0 || t as usize >= n_vocab) {
            Some(t) => Err(LlmError::InvalidInput(format!(
                "token {t} outside the vocabulary of {n_vocab}"
            ))),
            None => Ok(()),
        }
    }

    fn free_slot(&self) -> Result<usize> {
        self.seqs
            .iter()
            .position(Option::is_none)
            .ok_or(LlmError::NoFreeSlot(self.cfg.n_seq_max))
    }

    /// Starts a sequence; its prompt is fed on the next [`step`](Decoder::step).
    pub fn join(&mut self, prompt: &[i32], sampler: Sampler) -> Result<SeqId> {
        if prompt.is_empty() {
            return Err(LlmError::InvalidInput("empty prompt".into()));
        }
        self.check_tokens(prompt)?;
        let slot = self.free_slot()?;
        // A slot that was left is already empty; clearing again is cheap and makes it certain.
        self.ctx.seq_rm(slot as SeqId, 0, None)?;
        self.seqs[slot] = Some(Seq {
            pos: 0,
            pending: prompt.to_vec(),
            sampler,
            logits: Vec::new(),
        });
        Ok(slot as SeqId)
    }

    /// Replaces what a sequence feeds next (e.g. user input instead of its own sampled token).
    pub fn feed(&mut self, seq: SeqId, tokens: &[i32]) -> Result<()> {
        self.check_tokens(tokens)?;
        self.seq_mut(seq)?.pending = tokens.to_vec();
        Ok(())
    }

    /// Ends a sequence and frees its slot and memory.
    pub fn leave(&mut self, seq: SeqId) -> Result<()> {
        self.seq(seq)?;
        self.ctx.seq_rm(seq, 0, None)?;
        self.seqs[seq as usize] = None;
        Ok(())
    }

    /// A new sequence that continues from `src`'s state (KV rows and recurrent state copied),
    /// with its own sampler.
    pub fn fork(&mut self, src: SeqId, sampler: Sampler) -> Result<SeqId> {
        let (pos, pending, logits) = {
            let s = self.seq(src)?;
            (s.pos, s.pending.clone(), s.logits.clone())
        };
        let slot = self.free_slot()?;
        self.ctx.seq_rm(slot as SeqId, 0, None)?;
        if pos > 0 {
            self.ctx.seq_cp(src, slot as SeqId)?;
        }
        self.seqs[slot] = Some(Seq {
            pos,
            pending,
            sampler,
            logits,
        });
        Ok(slot as SeqId)
    }

    /// Undoes the last `n` tokens fed to `seq` (speculative decoding). Recurrent models can undo
    /// at most `n_rs_seq` tokens fed in the sequence's last step. The caller feeds what follows.
    pub fn rollback(&mut self, seq: SeqId, n: usize) -> Result<()> {
        let pos = self.seq(seq)?.pos;
        let err = |why: &str| LlmError::Rollback {
            seq,
            n,
            why: why.into(),
        };
        if n > pos as usize {
            return Err(err("the sequence is shorter"));
        }
        if n == 0 {
            return Ok(());
        }
        let new_pos = pos - n as i32;
        if !self.ctx.seq_rm(seq, new_pos, None)? {
            return Err(err("the memory keeps no state that far back"));
        }
        let s = self.seq_mut(seq)?;
        s.pos = new_pos;
        s.pending.clear();
        s.logits.clear();
        Ok(())
    }

    /// Ends every sequence and wipes the memory. A lazily zeroed recurrent-state buffer returns
    /// its pages to the system.
    pub fn clear(&mut self) {
        self.ctx.clear(true);
        self.seqs.iter_mut().for_each(|s| *s = None);
    }

    /// Logits after the last token fed to `seq`.
    pub fn logits(&self, seq: SeqId) -> Result<&[f32]> {
        Ok(&self.seq(seq)?.logits)
    }

    /// Next position of `seq`.
    pub fn position(&self, seq: SeqId) -> Result<i32> {
        Ok(self.seq(seq)?.pos)
    }

    /// Feeds every active sequence its pending tokens (in as many decodes as `n_batch` needs),
    /// then samples one token per sequence, which becomes its pending input.
    pub fn step(&mut self) -> Result<Vec<StepOutput>> {
        let ids = self.active();
        for &id in &ids {
            let s = self.seq(id)?;
            let needed = s.pos as usize + s.pending.len();
            if needed > self.cfg.n_ctx_per_seq as usize {
                return Err(LlmError::ContextFull {
                    seq: id,
                    needed,
                    limit: self.cfg.n_ctx_per_seq as usize,
                });
            }
        }
        // (sequence, index of its next unfed pending token)
        let mut cursor: Vec<(SeqId, usize)> = ids
            .iter()
            .filter(|&&id| {
                self.seqs[id as usize]
                    .as_ref()
                    .is_some_and(|s| !s.pending.is_empty())
            })
            .map(|&id| (id, 0))
            .collect();
        while cursor.iter().any(|&(id, at)| {
            at < self.seqs[id as usize]
                .as_ref()
                .map_or(0, |s| s.pending.len())
        }) {
            self.batch.clear();
            let mut outputs: Vec<(SeqId, usize)> = Vec::new();
            for (id, at) in cursor.iter_mut() {
                let s = self.seqs[*id as usize].as_ref().expect("active");
                while *at < s.pending.len() && self.batch.len() < self.cfg.n_batch as usize {
                    let last = *at + 1 == s.pending.len();
                    let row = self
                        .batch
                        .push(s.pending[*at], s.pos + *at as i32, *id, last);
                    if last {
                        outputs.push((*id, row));
                    }
                    *at += 1;
                }
            }
            self.ctx.decode(&self.batch)?;
            for (id, row) in outputs {
                let logits = self
                    .ctx
                    .logits(row)
                    .map(<[f32]>::to_vec)
                    .unwrap_or_default();
                self.seqs[id as usize].as_mut().expect("active").logits = logits;
            }
        }
        let mut out = Vec::with_capacity(cursor.len());
        for (id, fed) in cursor {
            let s = self.seqs[id as usize].as_mut().expect("active");
            s.pos += fed as i32;
            let token = s.sampler.sample(&s.logits);
            s.pending = vec![token];
            out.push(StepOutput { seq: id, token });
        }
        Ok(out)
    }
}
