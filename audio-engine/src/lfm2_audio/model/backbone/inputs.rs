//! What one graph reads besides the weights: the positions' embeddings (text ids, audio-in rows,
//! audio-out frames gathered by kind and put back in position order) and each sequence's RoPE
//! positions and attention mask; and the checks that a cache fits a run.

use crate::ggml::{Context, GgmlType, Tensor};

use super::super::nn::input;
use super::cache::{DecodeCache, LayerSlot};
use super::config::LayerKind;
use super::error::BackboneError;
use super::model::Backbone;
use super::types::Position;

type R<T> = Result<T, BackboneError>;

/// The chunk's inputs, grouped by kind, and where each position's row comes from.
pub(super) struct Inputs {
    text: Vec<i32>,
    audio: Vec<f32>,
    codes: Vec<i32>,
    n_audio: usize,
    n_frames: usize,
    /// Row of the concatenated [text | audio | frames] embeddings for each position.
    order: Vec<i32>,
}

pub(super) fn gather(bb: &Backbone, positions: &[Position<'_>]) -> R<Inputs> {
    let cfg = &bb.config;
    let h = cfg.hidden_size as usize;
    let (mut text, mut audio, mut codes) = (Vec::new(), Vec::new(), Vec::new());
    let mut kinds = Vec::with_capacity(positions.len());
    for (i, p) in positions.iter().enumerate() {
        match *p {
            Position::Text(id) => {
                if id >= cfg.vocab_size {
                    return Err(BackboneError::Input(format!(
                        "position {i}: token id {id} is outside the vocabulary ({})",
                        cfg.vocab_size
                    )));
                }
                kinds.push((0u8, text.len()));
                text.push(id as i32);
            }
            Position::Audio(row) => {
                if row.len() != h {
                    return Err(BackboneError::Input(format!(
                        "position {i}: audio embedding has {} values, the backbone is {h} wide",
                        row.len()
                    )));
                }
                if row.iter().any(|v| !v.is_finite()) {
                    return Err(BackboneError::Input(format!(
                        "position {i}: audio embedding is not finite"
                    )));
                }
                kinds.push((1, audio.len() / h));
                audio.extend_from_slice(row);
            }
            Position::Frame(frame) => {
                let table = bb.audio_codes.as_ref().ok_or(BackboneError::NoAudioCodes)?;
                if frame.len() != table.codebooks {
                    return Err(BackboneError::Input(format!(
                        "position {i}: frame has {} codes, the model has {} codebooks",
                        frame.len(),
                        table.codebooks
                    )));
                }
                kinds.push((2, codes.len() / table.codebooks));
                for (cb, &c) in frame.iter().enumerate() {
                    if c as usize >= table.codebook_size {
                        return Err(BackboneError::Input(format!(
                            "position {i}: code {c} of codebook {cb} is outside 0..{}",
                            table.codebook_size
                        )));
                    }
                    // why: the table stacks the codebooks, `codebook_size` rows each.
                    codes.push((c as usize + cb * table.codebook_size) as i32);
                }
            }
        }
    }
    let n_audio = audio.len() / h;
    let n_frames = bb
        .audio_codes
        .as_ref()
        .map_or(0, |t| codes.len() / t.codebooks);
    let order = kinds
        .iter()
        .map(|&(k, j)| {
            (match k {
                0 => j,
                1 => text.len() + j,
                _ => text.len() + n_audio + j,
            }) as i32
        })
        .collect();
    Ok(Inputs {
        text,
        audio,
        codes,
        n_audio,
        n_frames,
        order,
    })
}

/// The embedding's input tensors, created in the graph context and filled after allocation.
#[derive(Default)]
pub(super) struct EmbedInputs<'a> {
    text: Option<Tensor<'a>>,
    audio: Option<Tensor<'a>>,
    codes: Option<Tensor<'a>>,
    order: Option<Tensor<'a>>,
}

/// One sequence's attention inputs: RoPE positions and the mask (when it has attention layers).
pub(super) struct SequenceInputs<'a> {
    pub pos: Tensor<'a>,
    pub mask: Option<Tensor<'a>>,
}

impl<'a> SequenceInputs<'a> {
    /// The inputs of `n` positions after `p0` cached ones.
    pub fn new(ctx: &'a Context, p0: usize, n: usize, has_attention: bool) -> R<Self> {
        Ok(SequenceInputs {
            pos: input(ctx.new_tensor_1d(GgmlType::I32, n as i64)?, "inp_pos")?,
            mask: if has_attention {
                let kv_len = (p0 + n) as i64;
                Some(input(
                    ctx.new_tensor_2d(GgmlType::F32, kv_len, n as i64)?,
                    "inp_mask",
                )?)
            } else {
                None
            },
        })
    }
}

/// The embeddings of the chunk in position order: `[hidden, n]`.
pub(super) fn embed<'a>(
    ctx: &'a Context,
    bb: &Backbone,
    inp: &Inputs,
    it: &mut EmbedInputs<'a>,
) -> R<Tensor<'a>> {
    let h = i64::from(bb.config.hidden_size);
    let mut pieces = Vec::new();
    if !inp.text.is_empty() {
        let ids = input(
            ctx.new_tensor_1d(GgmlType::I32, inp.text.len() as i64)?,
            "inp_text",
        )?;
        it.text = Some(ids);
        pieces.push(ctx.get_rows(ctx.param(&bb.model.token_embd), ids)?);
    }
    if inp.n_audio > 0 {
        let a = input(
            ctx.new_tensor_2d(GgmlType::F32, h, inp.n_audio as i64)?,
            "inp_audio",
        )?;
        it.audio = Some(a);
        pieces.push(a);
    }
    if let Some(ncb) = inp.codes.len().checked_div(inp.n_frames) {
        let table = bb.audio_codes.as_ref().ok_or(BackboneError::NoAudioCodes)?;
        let idx = input(
            ctx.new_tensor_1d(GgmlType::I32, inp.codes.len() as i64)?,
            "inp_codes",
        )?;
        it.codes = Some(idx);
        // [hidden, codebooks * frames]: codebook rows of frame f at columns f*ncb .. f*ncb+ncb.
        let rows = ctx.get_rows(ctx.param(&table.table), idx)?;
        let stride = rows.nb()[1] * ncb;
        let col = |cb: usize| ctx.view_2d(rows, h, inp.n_frames as i64, stride, cb * rows.nb()[1]);
        // why: codebook 0 first, then each next one added in order (a fixed summation order).
        let mut sum = ctx.cont(col(0)?)?;
        for cb in 1..ncb {
            sum = ctx.add(sum, col(cb)?)?;
        }
        pieces.push(sum);
    }
    let mut x = pieces[0];
    for &p in &pieces[1..] {
        x = ctx.concat(x, p, 1)?;
    }
    let identity = inp.order.iter().enumerate().all(|(i, &j)| i as i32 == j);
    if !identity {
        let order = input(
            ctx.new_tensor_1d(GgmlType::I32, inp.order.len() as i64)?,
            "inp_order",
        )?;
        it.order = Some(order);
        x = ctx.get_rows(x, order)?;
    }
    Ok(x)
}

/// Checks that `cache` was made for `bb`'s layers and has room for `n` more positions.
pub(super) fn check_cache(bb: &Backbone, cache: &DecodeCache, n: usize) -> R<()> {
    let cfg = &bb.config;
    if cache.len() + n > cache.capacity() {
        return Err(BackboneError::Capacity {
            needed: cache.len() + n,
            capacity: cache.capacity(),
        });
    }
    let n_layers = cfg.num_hidden_layers as usize;
    let kinds_match = cache.slots().len() == n_layers
        && cache
            .slots()
            .iter()
            .enumerate()
            .all(|(il, s)| match (s, cfg.layer_kind(il)) {
                (LayerSlot::Attention { .. }, LayerKind::Attention) => {
                    cache.kv_row_bytes(il)
                        == (cfg.head_dim * cfg.num_key_value_heads[il]) as usize * 4
                }
                (LayerSlot::Conv { .. }, LayerKind::Conv) => true,
                _ => false,
            });
    if !kinds_match {
        return Err(BackboneError::CacheMismatch);
    }
    Ok(())
}

/// ggml prunes inputs nothing reads (e.g. the mask when no output needs the last attention
/// layer), and a pruned input has no memory to write.
fn live<'t>(t: &Option<Tensor<'t>>) -> Option<Tensor<'t>> {
    t.filter(|t| t.is_allocated())
}

pub(super) fn set_embed_inputs(it: &EmbedInputs<'_>, inp: &Inputs) -> R<()> {
    if let Some(t) = live(&it.text) {
        t.set_i32(&inp.text)?;
    }
    if let Some(t) = live(&it.audio) {
        t.set_f32(&inp.audio)?;
    }
    if let Some(t) = live(&it.codes) {
        t.set_i32(&inp.codes)?;
    }
    if let Some(t) = live(&it.order) {
        t.set_i32(&inp.order)?;
    }
    Ok(())
}

pub(super) fn set_sequence_inputs(
    it: &SequenceInputs<'_>,
    p0: usize,
    n: usize,
    window: Option<usize>,
) -> R<()> {
    let pos: Vec<i32> = (p0..p0 + n).map(|p| p as i32).collect();
    if it.pos.is_allocated() {
        it.pos.set_i32(&pos)?;
    }
    if let Some(m) = live(&it.mask) {
        let kv = p0 + n;
        let mut mask = vec![0f32; kv * n];
        for i in 0..n {
            // why: position p0+i sees cache rows 0..=p0+i (causal), nothing later.
            for v in &mut mask[i * kv + p0 + i + 1..(i + 1) * kv] {
                *v = f32::NEG_INFINITY;
            }
            // With a sliding window of w, it sees only rows p0+i-w+1 ..= p0+i.
            if let Some(w) = window {
                let first = (p0 + i + 1).saturating_sub(w);
                for v in &mut mask[i * kv..i * kv + first] {
                    *v = f32::NEG_INFINITY;
                }
            }
        }
        m.set_f32(&mask)?;
    }
    Ok(())
}
