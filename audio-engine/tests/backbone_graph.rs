//! The Rust-built LFM2 backbone graph against llama.cpp's own lfm2 implementation on the same
//! GGUF, chunked against one-shot prefill, caches of different capacity bit for bit, and the
//! lazily zeroed decode cache's residency.

use std::path::{Path, PathBuf};

use audio_engine::ggml::dtype::{quantize_q4_0, quantize_q8_0};
use audio_engine::ggml::gguf::{GgufValue, GgufWriter};
use audio_engine::ggml::{Backend, GgmlType};
use audio_engine::lfm2_audio::internals::backbone::{Backbone, BackboneError, Position, Rows};
use audio_engine::lfm2_audio::internals::backbone_config::Lfm2Backbone;
use lfm2_llm::llama::{ContextOptions, LlamaBatch, LlamaContext, LlamaModel};

const HIDDEN: u64 = 64;
const FF: u64 = 96;
const VOCAB: u64 = 160;
const HEADS: u32 = 4;
/// conv / attn / conv / attn / conv, GQA 4:2.
const KV_PER_LAYER: [u32; 5] = [0, 2, 0, 2, 0];
const L: u64 = 3;

struct Rng(u64);
impl Rng {
    fn uniform(&mut self, scale: f32) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
    }
}

/// Writes a tiny lfm2 backbone; matrices in `matrix_ty`, norms and the conv kernel F32.
fn write_model(path: &Path, matrix_ty: GgmlType, seed: u64) {
    write_model_layers(path, matrix_ty, seed, &KV_PER_LAYER)
}

fn write_model_layers(path: &Path, matrix_ty: GgmlType, seed: u64, layers: &[u32]) {
    write_model_full(path, matrix_ty, seed, layers, None)
}

fn write_model_full(
    path: &Path,
    matrix_ty: GgmlType,
    seed: u64,
    layers: &[u32],
    window: Option<u32>,
) {
    let mut w = GgufWriter::new();
    let kvs: Vec<(&str, GgufValue)> = vec![
        ("general.architecture", "lfm2".into()),
        ("tokenizer.ggml.model", "none".into()),
        ("lfm2.vocab_size", (VOCAB as u32).into()),
        ("lfm2.context_length", 4096u32.into()),
        ("lfm2.embedding_length", (HIDDEN as u32).into()),
        ("lfm2.block_count", (layers.len() as u32).into()),
        ("lfm2.feed_forward_length", (FF as u32).into()),
        ("lfm2.attention.head_count", HEADS.into()),
        ("lfm2.attention.head_count_kv", layers.to_vec().into()),
        ("lfm2.attention.layer_norm_rms_epsilon", 1e-5f32.into()),
        ("lfm2.rope.freq_base", 1e6f32.into()),
        ("lfm2.shortconv.l_cache", (L as u32).into()),
    ];
    for (k, v) in kvs {
        w.add_kv(k, v).unwrap();
    }
    if let Some(win) = window {
        w.add_kv("lfm2.attention.sliding_window", win).unwrap();
    }
    let mut rng = Rng(seed);
    let hd = HIDDEN / u64::from(HEADS);
    let mut add = |name: String, shape: Vec<u64>, norm: bool, rng: &mut Rng| {
        let n: u64 = shape.iter().product();
        let fan_in = shape[0] as f32;
        let vals: Vec<f32> = (0..n)
            .map(|_| {
                if norm {
                    1.0 + rng.uniform(0.3)
                } else if name == "token_embd.weight" {
                    rng.uniform(1.0)
                } else {
                    rng.uniform(1.7 / fan_in.sqrt())
                }
            })
            .collect();
        let ty = if norm || shape.len() == 1 || name.contains("shortconv.conv") {
            GgmlType::F32
        } else {
            matrix_ty
        };
        let bytes = match ty {
            GgmlType::F32 => vals.iter().flat_map(|v| v.to_le_bytes()).collect(),
            GgmlType::F16 => vals
                .iter()
                .flat_map(|&v| audio_engine::ggml::dtype::f32_to_f16(v).to_le_bytes())
                .collect(),
            GgmlType::Q8_0 => {
                let mut b = vec![0u8; ty.row_size(n).unwrap()];
                quantize_q8_0(&vals, &mut b).unwrap();
                b
            }
            GgmlType::Q4_0 => {
                let mut b = vec![0u8; ty.row_size(n).unwrap()];
                quantize_q4_0(&vals, &mut b).unwrap();
                b
            }
            other => panic!("unsupported test type {other}"),
        };
        w.add_tensor(name, ty, &shape, bytes).unwrap();
    };
    add(
        "token_embd.weight".into(),
        vec![HIDDEN, VOCAB],
        false,
        &mut rng,
    );
    add(
        "token_embd_norm.weight".into(),
        vec![HIDDEN],
        true,
        &mut rng,
    );
    for (i, &kv) in layers.iter().enumerate() {
        let n = |s: &str| format!("blk.{i}.{s}.weight");
        add(n("attn_norm"), vec![HIDDEN], true, &mut rng);
        add(n("ffn_norm"), vec![HIDDEN], true, &mut rng);
        add(n("ffn_gate"), vec![HIDDEN, FF], false, &mut rng);
        add(n("ffn_up"), vec![HIDDEN, FF], false, &mut rng);
        add(n("ffn_down"), vec![FF, HIDDEN], false, &mut rng);
        if kv == 0 {
            add(
                n("shortconv.in_proj"),
                vec![HIDDEN, 3 * HIDDEN],
                false,
                &mut rng,
            );
            add(n("shortconv.conv"), vec![L, HIDDEN], false, &mut rng);
            add(
                n("shortconv.out_proj"),
                vec![HIDDEN, HIDDEN],
                false,
                &mut rng,
            );
        } else {
            let kvw = u64::from(kv) * hd;
            add(n("attn_q"), vec![HIDDEN, HIDDEN], false, &mut rng);
            add(n("attn_k"), vec![HIDDEN, kvw], false, &mut rng);
            add(n("attn_v"), vec![HIDDEN, kvw], false, &mut rng);
            add(n("attn_output"), vec![HIDDEN, HIDDEN], false, &mut rng);
            add(n("attn_q_norm"), vec![hd], true, &mut rng);
            add(n("attn_k_norm"), vec![hd], true, &mut rng);
        }
    }
    w.write_to_path(path).unwrap();
}

fn model_path(tag: &str, ty: GgmlType) -> PathBuf {
    let p = std::env::temp_dir().join(format!("backbone-graph-{tag}-{}.gguf", std::process::id()));
    write_model(&p, ty, 0x5eed_0001);
    p
}

fn cpu() -> Backend {
    let be = Backend::cpu().unwrap();
    be.set_n_threads(2).unwrap();
    be
}

fn tokens(n: usize) -> Vec<u32> {
    (0..n)
        .map(|i| ((i * 37 + 11) % VOCAB as usize) as u32)
        .collect()
}

fn rel(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let m = b.iter().fold(0f32, |m, v| m.max(v.abs()));
    a.iter().zip(b).fold(0f32, |e, (x, y)| e.max((x - y).abs())) / m
}

/// llama.cpp's logits for every position of `toks`, prefilled in one batch (on the CPU, as ours).
fn llama_logits(path: &Path, toks: &[u32]) -> Vec<f32> {
    let model = LlamaModel::load_cpu(path).unwrap();
    let opts = ContextOptions {
        n_ctx: 512,
        exact_attention: true,
        ..Default::default()
    };
    let mut ctx = LlamaContext::new(&model, &opts, None).unwrap();
    let mut batch = LlamaBatch::new();
    for (i, &t) in toks.iter().enumerate() {
        batch.push(t as i32, i as i32, 0, true);
    }
    ctx.decode(&batch).unwrap();
    (0..toks.len())
        .flat_map(|i| ctx.logits(i).unwrap().to_vec())
        .collect()
}

fn ours(path: &Path) -> Backbone {
    Backbone::load(Lfm2Backbone::open(path).unwrap(), &cpu()).unwrap()
}

fn text(toks: &[u32]) -> Vec<Position<'static>> {
    toks.iter().map(|&t| Position::Text(t)).collect()
}

#[test]
fn logits_agree_with_llama_cpp_for_every_type() {
    let toks = tokens(40);
    for ty in [GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0] {
        let path = model_path(&format!("agree-{ty}"), ty);
        let want = llama_logits(&path, &toks);
        let bb = ours(&path);
        let mut cache = bb.new_cache(256).unwrap();
        let out = bb
            .forward(&mut cache, &text(&toks), Rows::All, true)
            .unwrap();
        let got = out.logits.unwrap();
        let e = rel(&got, &want);
        println!("{ty}: max rel logits difference vs llama.cpp {e:.2e}");
        assert!(e < 1e-3, "{ty}: {e}");
        assert_eq!(out.rows, toks.len());
        assert_eq!(out.hidden.len(), toks.len() * HIDDEN as usize);
        let _ = std::fs::remove_file(&path);
    }
}

#[test]
fn decode_steps_agree_with_prefill_and_caches_of_any_capacity_agree_bitwise() {
    let path = model_path("steps", GgmlType::F32);
    let bb = ours(&path);
    let toks = tokens(300);
    // One-shot prefill of everything.
    let mut one = bb.new_cache(512).unwrap();
    let all = bb.forward(&mut one, &text(&toks), Rows::All, true).unwrap();
    let all = all.logits.unwrap();
    let v = VOCAB as usize;

    // Chunked: 256-position block, then single decode steps.
    let run_chunked = |capacity: usize| {
        let mut c = bb.new_cache(capacity).unwrap();
        let mut logits = Vec::new();
        let first = bb
            .forward(&mut c, &text(&toks[..256]), Rows::All, true)
            .unwrap();
        logits.extend(first.logits.unwrap());
        for &t in &toks[256..] {
            let o = bb
                .forward(&mut c, &[Position::Text(t)], Rows::Last, true)
                .unwrap();
            logits.extend(o.logits.unwrap());
        }
        assert_eq!(c.len(), toks.len());
        logits
    };
    let small = run_chunked(512);
    let large = run_chunked(8192);
    let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(&small),
        bits(&large),
        "cache capacity changed the bits"
    );
    let e = rel(&small, &all);
    println!("chunked vs one-shot: {e:.2e}");
    assert!(e < 1e-5, "chunked vs one-shot {e}");
    // The first block is the same computation in both.
    assert_eq!(bits(&small[..256 * v]), bits(&all[..256 * v]));

    // After clear, the same run gives the same bits.
    let mut c = bb.new_cache(512).unwrap();
    bb.forward(&mut c, &text(&toks[..10]), Rows::None, false)
        .unwrap();
    c.clear().unwrap();
    let again = bb
        .forward(&mut c, &text(&toks[..256]), Rows::All, true)
        .unwrap();
    assert_eq!(bits(&again.logits.unwrap()), bits(&all[..256 * v]));
    let _ = std::fs::remove_file(&path);
}

#[test]
fn bad_input_is_a_typed_error_and_leaves_the_cache_alone() {
    let path = model_path("errors", GgmlType::F32);
    let bb = ours(&path);
    let mut c = bb.new_cache(256).unwrap();
    assert!(matches!(
        bb.forward(&mut c, &[], Rows::Last, true),
        Err(BackboneError::Input(_))
    ));
    assert!(matches!(
        bb.forward(&mut c, &[Position::Text(VOCAB as u32)], Rows::Last, true),
        Err(BackboneError::Input(_))
    ));
    let short = [0.5f32; 3];
    assert!(matches!(
        bb.forward(&mut c, &[Position::Audio(&short)], Rows::Last, true),
        Err(BackboneError::Input(_))
    ));
    assert!(matches!(
        bb.forward(&mut c, &[Position::Frame(&[0; 8])], Rows::Last, true),
        Err(BackboneError::NoAudioCodes)
    ));
    assert_eq!(c.len(), 0);
    let toks = tokens(257);
    assert!(matches!(
        bb.forward(&mut c, &text(&toks), Rows::Last, true),
        Err(BackboneError::Capacity {
            needed: 257,
            capacity: 256
        })
    ));
    assert_eq!(c.len(), 0);
    // Audio embeddings enter exactly like the token rows they equal.
    let _ = std::fs::remove_file(&path);
}

#[test]
fn decode_cache_memory_is_resident_only_where_written() {
    let path = model_path("resident", GgmlType::F32);
    let bb = ours(&path);
    // A large cache: 64k positions.
    let mut c = bb.new_cache(65536).unwrap();
    let before = c.resident_bytes().unwrap();
    let toks = tokens(64);
    bb.forward(&mut c, &text(&toks), Rows::Last, true).unwrap();
    let after = c.resident_bytes().unwrap();
    let total = c.size_bytes();
    println!(
        "cache {:.1} MiB: resident {before} B before, {after} B after a 64-position prompt",
        total as f64 / 1048576.0
    );
    assert!(before <= 4096 * 8, "fresh cache resident {before}");
    // 2 attention layers x K,V x 64 rows x 32 floats = 32 KiB of rows, plus conv tails: a few
    // pages, far below the mapping.
    assert!(after > before);
    assert!(after < total / 20, "{after} of {total} resident");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn sliding_window_attention_matches_llama_cpp() {
    let path = std::env::temp_dir().join(format!("backbone-graph-swa-{}.gguf", std::process::id()));
    write_model_full(&path, GgmlType::F32, 0x5eed_0002, &KV_PER_LAYER, Some(8));
    let toks = tokens(40);
    let want = llama_logits(&path, &toks);
    let bb = ours(&path);
    assert_eq!(bb.sliding_window(), Some(8));
    let mut cache = bb.new_cache(256).unwrap();
    let got = bb
        .forward(&mut cache, &text(&toks), Rows::All, true)
        .unwrap()
        .logits
        .unwrap();
    let e = rel(&got, &want);
    println!("sliding window 8: max rel logits difference vs llama.cpp {e:.2e}");
    assert!(e < 1e-4, "{e}");
    // The window matters: the same weights without it give the same first 8 positions and
    // different later ones.
    write_model_full(&path, GgmlType::F32, 0x5eed_0002, &KV_PER_LAYER, None);
    let full = ours(&path);
    let mut cache = full.new_cache(256).unwrap();
    let unwindowed = full
        .forward(&mut cache, &text(&toks), Rows::All, true)
        .unwrap()
        .logits
        .unwrap();
    let v = VOCAB as usize;
    assert_eq!(&unwindowed[..8 * v], &got[..8 * v]);
    assert!(rel(&unwindowed[30 * v..], &got[30 * v..]) > 1e-3);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn restored_blocks_continue_exactly_like_the_run_that_saved_them() {
    let path = model_path("blocks", GgmlType::F32);
    let bb = ours(&path);
    let toks = tokens(530);
    let mut a = bb.new_cache(1024).unwrap();
    // Blocks of any length (a chunk's blocks need not end at multiples of 256).
    bb.forward(&mut a, &text(&toks[..100]), Rows::None, false)
        .unwrap();
    let b0 = a.save_block(0).unwrap();
    bb.forward(&mut a, &text(&toks[100..356]), Rows::None, false)
        .unwrap();
    let b1 = a.save_block(100).unwrap();
    assert_eq!((b0.start(), b1.start()), (0, 100));
    assert_eq!((b0.positions(), b1.positions()), (100, 256));
    assert!(b1.size_bytes() > 0);
    let tail_a = bb
        .forward(&mut a, &text(&toks[356..]), Rows::All, true)
        .unwrap();

    // A cache of another capacity that ran something else first, cleared, then restored.
    let mut b = bb.new_cache(2048).unwrap();
    bb.forward(&mut b, &text(&tokens(300)[..]), Rows::None, false)
        .unwrap();
    b.clear().unwrap();
    assert!(b.restore_block(&b1).is_err(), "out of order");
    b.restore_block(&b0).unwrap();
    b.restore_block(&b1).unwrap();
    assert_eq!(b.len(), 356);
    let tail_b = bb
        .forward(&mut b, &text(&toks[356..]), Rows::All, true)
        .unwrap();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(tail_a.logits.as_ref().unwrap()),
        bits(tail_b.logits.as_ref().unwrap())
    );
    // An empty block: no save.
    assert!(b.save_block(b.len()).is_err());
    let _ = std::fs::remove_file(&path);
}

#[test]
fn prefill_cache_restores_shared_blocks_without_changing_bits() {
    use audio_engine::lfm2_audio::internals::prefill_cache::{Extension, PrefillCache};
    use audio_engine::lfm2_audio::internals::prompt::{Prompt, PromptPiece};
    let path = model_path("prefill-cache", GgmlType::F32);
    let bb = ours(&path);
    let a = tokens(1000);
    let other: Vec<u32> = tokens(900).iter().map(|t| (t + 5) % VOCAB as u32).collect();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    // The partition of `p` cut into chunks at `starts` (as a conversation's turns cut it).
    let blocks = |p: &[u32], starts: &[usize]| {
        let mut cuts = starts.to_vec();
        cuts.push(p.len());
        let chunks = cuts
            .windows(2)
            .map(|w| vec![PromptPiece::Text(p[w[0]..w[1]].to_vec())])
            .collect();
        Prompt::from_chunks(chunks).blocks()
    };
    let fresh = |p: &[u32], starts: &[usize]| {
        let mut none = PrefillCache::new(0);
        let mut c = bb.new_cache(1024).unwrap();
        let o = none
            .prefill(&bb, &mut c, &text(p), &blocks(p, starts))
            .unwrap();
        assert_eq!(none.resumed_prefill_steps(), 0);
        assert!(none.is_empty());
        bits(&o.logits.unwrap())
    };
    let mut pc = PrefillCache::new(2);
    let mut cache = bb.new_cache(1024).unwrap();
    // The prefill-ahead worker's own decode cache.
    let mut ahead = bb.new_cache(1024).unwrap();
    let mut run = |pc: &mut PrefillCache, p: &[u32], starts: &[usize]| {
        let o = pc
            .prefill(&bb, &mut cache, &text(p), &blocks(p, starts))
            .unwrap();
        (pc.resumed_prefill_steps(), bits(&o.logits.unwrap()))
    };
    // Turn 1 (600 positions in chunks at 0 and 300), turn 2 extends it with a chunk at 600:
    // every block of turn 1 comes back, its last one included.
    let (r1, l1) = run(&mut pc, &a[..600], &[0, 300]);
    assert_eq!((r1, &l1), (0, &fresh(&a[..600], &[0, 300])));
    let t2 = [0, 300, 600];
    let (r2, l2) = run(&mut pc, &a[..700], &t2);
    assert_eq!((r2, &l2), (600, &fresh(&a[..700], &t2)));
    // Another conversation, then the first again: both kept (2 slots); the last block comes
    // back too, with the outputs it was kept with.
    let (r3, _) = run(&mut pc, &other, &[0]);
    assert_eq!(r3, 0);
    let (r4, l4) = run(&mut pc, &a[..700], &t2);
    assert_eq!((r4, &l4), (700, &fresh(&a[..700], &t2)));
    // The same positions cut elsewhere are another partition: nothing is shared past the cut.
    let (r5, l5) = run(&mut pc, &a[..700], &[0, 350]);
    assert_eq!((r5, &l5), (256, &fresh(&a[..700], &[0, 350])));
    // Prefill ahead: extending turn 2 by a chunk runs only that chunk, and the next turn
    // restores all of it.
    run(&mut pc, &a[..700], &t2);
    let t3 = [0, 300, 600, 700];
    let ext = pc
        .extend(
            &bb,
            &mut ahead,
            &text(&a[..800]),
            &blocks(&a[..800], &t3),
            false,
            &|| false,
        )
        .unwrap();
    assert_eq!(
        ext,
        Extension {
            restored: 700,
            ran: 100,
            stopped: false
        }
    );
    let t4 = [0, 300, 600, 700, 800];
    let (r6, l6) = run(&mut pc, &a[..900], &t4);
    assert_eq!((r6, &l6), (800, &fresh(&a[..900], &t4)));
    // Stopped before it starts: nothing runs; stopped after its first block: that one is kept.
    let ext = pc
        .extend(
            &bb,
            &mut ahead,
            &text(&a[..950]),
            &blocks(&a[..950], &[0, 300, 600, 700, 800, 900]),
            false,
            &|| true,
        )
        .unwrap();
    assert_eq!((ext.restored, ext.ran, ext.stopped), (900, 0, true));
    let third: Vec<u32> = tokens(700).iter().map(|t| (t + 9) % VOCAB as u32).collect();
    let asked = std::cell::Cell::new(0);
    let ext = pc
        .extend(
            &bb,
            &mut ahead,
            &text(&third),
            &blocks(&third, &[0]),
            false,
            &|| {
                asked.set(asked.get() + 1);
                asked.get() > 1
            },
        )
        .unwrap();
    assert_eq!((ext.restored, ext.ran, ext.stopped), (0, 256, true));
    let (r7, l7) = run(&mut pc, &third, &[0]);
    assert_eq!((r7, &l7), (256, &fresh(&third, &[0])));
    // Extended with the outputs (a turn started early): the prefill of that prompt then runs
    // nothing and returns the same logits.
    let early: Vec<u32> = tokens(400)
        .iter()
        .map(|t| (t + 13) % VOCAB as u32)
        .collect();
    let ext = pc
        .extend(
            &bb,
            &mut ahead,
            &text(&early),
            &blocks(&early, &[0, 300]),
            true,
            &|| false,
        )
        .unwrap();
    assert_eq!((ext.restored, ext.ran, ext.stopped), (0, 400, false));
    let (r9, l9) = run(&mut pc, &early, &[0, 300]);
    assert_eq!((r9, &l9), (400, &fresh(&early, &[0, 300])));
    // A prompt that diverges inside a block restores the blocks before it only.
    let mut div = a[..700].to_vec();
    div[400] = (div[400] + 1) % VOCAB as u32;
    run(&mut pc, &a[..700], &t2);
    let (r8, l8) = run(&mut pc, &div, &t2);
    assert_eq!((r8, &l8), (300, &fresh(&div, &t2)));
    // One slot: another conversation evicts the first.
    let mut one = PrefillCache::new(1);
    run(&mut one, &a[..700], &t2);
    run(&mut one, &other, &[0]);
    assert_eq!(run(&mut one, &a[..700], &t2).0, 0);
    // Disabled reuse: extending does nothing.
    let ext = PrefillCache::new(0)
        .extend(
            &bb,
            &mut ahead,
            &text(&a[..800]),
            &blocks(&a[..800], &t3),
            false,
            &|| false,
        )
        .unwrap();
    assert_eq!(ext, Extension::default());
    // Over capacity: a typed error, kept blocks untouched.
    let kept = pc.size_bytes();
    let mut small = bb.new_cache(256).unwrap();
    assert!(pc
        .prefill(&bb, &mut small, &text(&a[..700]), &blocks(&a[..700], &t2))
        .is_err());
    assert_eq!(pc.size_bytes(), kept);
    // A partition that does not end at the prompt's end is refused.
    assert!(pc
        .prefill(&bb, &mut cache, &text(&a[..700]), &blocks(&a[..600], &[0]))
        .is_err());
    let _ = std::fs::remove_file(&path);
}
