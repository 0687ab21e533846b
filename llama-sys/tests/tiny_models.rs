//! Tiny random `qwen35` and `lfm2` models built entirely in memory with
//! `llama_model_init_from_user` (gguf metadata + a weight-filling callback), decoded on several
//! sequences at once.
//!
//! Each model has 4 layers mixing recurrent layers (qwen35: gated delta net, lfm2: short conv)
//! with attention layers, `n_embd` 64, 4 heads of 16. The vocabulary is `tokenizer.ggml.model =
//! "none"` with `<arch>.vocab_size` dummy tokens: the cheapest vocab libllama accepts.
//!
//! Checked: logits finite and not constant, different histories give different logits (even for
//! the same last token), every sequence decoded in the shared batch matches it decoded alone,
//! and the whole run is bit-for-bit reproducible in a fresh context and in a fresh model.
//!
//! `TINY_MODELS_LIST_TENSORS=1 cargo test -p lfm2-llama-sys --test tiny_models -- --nocapture` lists
//! every weight libllama created for each model.

mod common;

use common::{Batch, Context, Gguf, Model};
use std::sync::Mutex;

const VOCAB: u32 = 128;
const N_EMBD: u32 = 64;
const N_LAYER: u32 = 4;
const N_HEAD: u32 = 4;
const N_FF: u32 = 128;
const N_SEQ: usize = 4;
/// libllama pads each sequence's KV share to a multiple of 256 cells: 4 x 256 is the smallest
/// context that is not rounded (with a warning).
const N_CTX: u32 = 256 * N_SEQ as u32;
const N_BATCH: u32 = 32;
const N_THREADS: i32 = 2;
const SEED: u64 = 0x5eed_1234;

/// One prompt per sequence, of different lengths; sequences 0 and 1 end on the same token, so
/// their logits can only differ through the history (attention / recurrent state).
const PROMPTS: [&[i32]; N_SEQ] = [
    &[1, 2, 3],
    &[4, 5, 6, 7, 3],
    &[8, 9, 10, 11],
    &[12, 13, 14, 15, 16],
];
/// Tokens fed to every sequence in the single-token steps after the prompts.
const STEPS: [i32; 3] = [20, 21, 22];

/// Keys every architecture needs: general.architecture, the generic hparams and a "none" vocab.
fn base_metadata(arch: &str) -> Gguf {
    let mut g = Gguf::new();
    g.str("general.architecture", arch)
        .str("general.name", &format!("tiny-random-{arch}"))
        .u32(&format!("{arch}.context_length"), 256)
        .u32(&format!("{arch}.embedding_length"), N_EMBD)
        .u32(&format!("{arch}.block_count"), N_LAYER)
        .u32(&format!("{arch}.feed_forward_length"), N_FF)
        .u32(&format!("{arch}.attention.head_count"), N_HEAD)
        .str("tokenizer.ggml.model", "none")
        .u32(&format!("{arch}.vocab_size"), VOCAB);
    g
}

/// qwen35: layers 0 and 2 are gated-delta-net (recurrent), 1 and 3 full attention
/// (`full_attention_interval` = 2: layer `il` is recurrent iff `(il + 1) % 2 != 0`).
fn qwen35_metadata() -> Gguf {
    let a = "qwen35";
    let mut g = base_metadata(a);
    g.u32(&format!("{a}.attention.head_count_kv"), 2)
        .u32(&format!("{a}.attention.key_length"), 16)
        .u32(&format!("{a}.attention.value_length"), 16)
        .f32(&format!("{a}.attention.layer_norm_rms_epsilon"), 1e-6)
        .f32(&format!("{a}.rope.freq_base"), 10_000_000.0)
        // partial rotary (like the real models): 8 of 16 dims, imrope sections sum to n_rot/2
        .u32(&format!("{a}.rope.dimension_count"), 8)
        .arr_i32(&format!("{a}.rope.dimension_sections"), &[2, 1, 1, 0])
        .u32(&format!("{a}.full_attention_interval"), 2)
        // gated delta net: 2 k-heads (group_count), 4 v-heads (time_step_rank), head dim 16
        // (state_size); inner_size must be state_size * time_step_rank
        .u32(&format!("{a}.ssm.conv_kernel"), 4)
        .u32(&format!("{a}.ssm.state_size"), 16)
        .u32(&format!("{a}.ssm.group_count"), 2)
        .u32(&format!("{a}.ssm.time_step_rank"), 4)
        .u32(&format!("{a}.ssm.inner_size"), 64);
    g
}

/// lfm2: a layer is short-conv (recurrent) iff its `head_count_kv` is 0 -> conv, attn, conv,
/// attn.
fn lfm2_metadata() -> Gguf {
    let a = "lfm2";
    let mut g = base_metadata(a);
    g.arr_u32(&format!("{a}.attention.head_count_kv"), &[0, 2, 0, 2])
        .f32(&format!("{a}.attention.layer_norm_rms_epsilon"), 1e-5)
        .f32(&format!("{a}.rope.freq_base"), 1_000_000.0)
        .u32(&format!("{a}.shortconv.l_cache"), 3);
    g
}

/// logits[step][seq]: step 0 is the last prompt token, then one step per `STEPS` token.
type Logits = Vec<Vec<Vec<f32>>>;

/// Decodes `seqs` (indices into `PROMPTS`) in one fresh context: all their prompts in one batch,
/// then the `STEPS` tokens, one per sequence per decode.
fn run(model: &Model, seqs: &[usize]) -> Logits {
    let mut ctx = Context::new(model, N_CTX, N_BATCH, N_SEQ as u32, N_THREADS);
    let mut batch = Batch::new(N_BATCH as usize);
    let mut out = Vec::new();

    let mut rows = Vec::new();
    for &s in seqs {
        let prompt = PROMPTS[s];
        for (p, &tok) in prompt.iter().enumerate() {
            let last = p + 1 == prompt.len();
            let i = batch.push(tok, p as i32, s as i32, last);
            if last {
                rows.push(i);
            }
        }
    }
    ctx.decode(&batch);
    out.push(rows.iter().map(|&i| ctx.logits(i)).collect());

    for (step, &tok) in STEPS.iter().enumerate() {
        batch.clear();
        let rows: Vec<i32> = seqs
            .iter()
            .map(|&s| batch.push(tok, (PROMPTS[s].len() + step) as i32, s as i32, true))
            .collect();
        ctx.decode(&batch);
        out.push(rows.iter().map(|&i| ctx.logits(i)).collect());
    }
    out
}

/// Asserts `a` and `b` are bit-for-bit identical, naming the first differing logit.
fn assert_same_bits(a: &Logits, b: &Logits, what: &str) {
    let flat = |l: &Logits| {
        l.iter()
            .flatten()
            .flatten()
            .map(|x| x.to_bits())
            .collect::<Vec<_>>()
    };
    let (fa, fb) = (flat(a), flat(b));
    assert_eq!(fa.len(), fb.len(), "{what}: different shapes");
    if let Some(i) = fa.iter().zip(&fb).position(|(x, y)| x != y) {
        let v = VOCAB as usize;
        let (step, seq, tok) = (i / (N_SEQ * v), i / v % N_SEQ, i % v);
        panic!(
            "{what}: logit (step {step}, seq {seq}, token {tok}) differs: {} vs {}",
            f32::from_bits(fa[i]),
            f32::from_bits(fb[i])
        );
    }
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// The tests run one at a time: two tests with 2 ggml threads each on a 2-core machine make
/// ggml's spinning barriers crawl (seconds instead of milliseconds per run).
static SERIAL: Mutex<()> = Mutex::new(());

/// `recurrent_weight`: a weight only recurrent layers have (`blk.N.<recurrent_weight>`).
fn check_arch(name: &str, meta: fn() -> Gguf, recurrent_weight: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let all: Vec<usize> = (0..N_SEQ).collect();

    let model = Model::from_metadata(&meta(), SEED);
    assert_eq!(model.n_vocab(), VOCAB as usize, "{name}: vocab size");
    assert_eq!(model.n_layer(), N_LAYER as i32, "{name}: layers");
    assert_eq!(model.n_embd(), N_EMBD as i32, "{name}: n_embd");
    assert!(
        model.is_hybrid(),
        "{name}: expected a hybrid (recurrent + attention) model"
    );
    if std::env::var_os("TINY_MODELS_LIST_TENSORS").is_some() {
        eprintln!("{name} tensors: {:#?}", model.tensors());
    }
    // layer kinds as the metadata asks: even layers recurrent, odd layers attention
    for il in 0..N_LAYER {
        let recurrent = il % 2 == 0;
        let recr_w = format!("blk.{il}.{recurrent_weight}");
        let attn_w = format!("blk.{il}.attn_q.weight");
        assert_eq!(model.has_tensor(&recr_w), recurrent, "{name}: {recr_w}");
        assert_eq!(model.has_tensor(&attn_w), !recurrent, "{name}: {attn_w}");
    }

    let first = run(&model, &all);
    assert_eq!(first.len(), 1 + STEPS.len());

    for (step, per_seq) in first.iter().enumerate() {
        assert_eq!(per_seq.len(), N_SEQ);
        for (s, l) in per_seq.iter().enumerate() {
            assert_eq!(l.len(), VOCAB as usize);
            assert!(
                l.iter().all(|x| x.is_finite()),
                "{name}: non-finite logits (step {step}, seq {s})"
            );
            let (lo, hi) = l
                .iter()
                .fold((f32::MAX, f32::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
            assert!(
                hi - lo > 1e-4,
                "{name}: (near-)constant logits (step {step}, seq {s}): [{lo}, {hi}]"
            );
        }
        for a in 0..N_SEQ {
            for b in a + 1..N_SEQ {
                let d = max_abs_diff(&per_seq[a], &per_seq[b]);
                assert!(
                    d > 1e-6,
                    "{name}: seqs {a} and {b} give the same logits at step {step} (max diff {d})"
                );
            }
        }
    }

    // each sequence decoded alone (in its own fresh context) matches the shared batch: the
    // sequences' KV cells / recurrent states do not leak into each other (tolerance: the batch
    // size changes the matmul kernels' accumulation order)
    for s in 0..N_SEQ {
        let solo = run(&model, &[s]);
        for (step, (alone, batched)) in solo.iter().zip(&first).enumerate() {
            let d = max_abs_diff(&alone[0], &batched[s]);
            assert!(
                d < 1e-4,
                "{name}: seq {s} alone differs from the batch at step {step} by {d}"
            );
        }
    }

    // same model, fresh context: bit-identical
    let again = run(&model, &all);
    assert_same_bits(&first, &again, &format!("{name}: fresh context"));
    drop(model);

    // fresh model from the same metadata and seed, fresh context: bit-identical
    let model2 = Model::from_metadata(&meta(), SEED);
    let third = run(&model2, &all);
    assert_same_bits(&first, &third, &format!("{name}: fresh model"));

    // and the weights really come from the seed: another seed changes the logits
    let model3 = Model::from_metadata(&meta(), SEED + 1);
    let other = run(&model3, &all);
    assert!(
        first
            .iter()
            .flatten()
            .zip(other.iter().flatten())
            .all(|(a, b)| max_abs_diff(a, b) > 1e-6),
        "{name}: the seed does not affect the logits"
    );
}

#[test]
fn qwen35_tiny_random_model_decodes_multi_sequence_deterministically() {
    check_arch("qwen35", qwen35_metadata, "ssm_conv1d.weight");
}

#[test]
fn lfm2_tiny_random_model_decodes_multi_sequence_deterministically() {
    check_arch("lfm2", lfm2_metadata, "shortconv.conv.weight");
}
