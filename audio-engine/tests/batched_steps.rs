//! Single-position steps of several sequences batched into one graph
//! (`Backbone::forward_steps`) give each sequence the bits it gets alone
//! (`Backbone::forward` with one position), for every weight type, at one and two threads,
//! with text, audio-in and audio-out positions mixed in one batch and sequences of different
//! lengths; and a batch whose step is bad fails without moving any cache. Likewise the
//! depthformer's frames of several replies computed together (`Depthformer::frames`) equal
//! each reply's frames alone (`DepthSession::frame`), a reply whose frame fails
//! included.

mod common;

use audio_engine::ggml::Backend;
use audio_engine::lfm2_audio::internals::backbone::{
    AudioCodeTable, Backbone, BackboneError, BatchCompute, DecodeCache, ForwardOutput, Position,
    Rows, Step,
};
use audio_engine::lfm2_audio::internals::backbone_config::Lfm2Backbone;
use audio_engine::lfm2_audio::internals::depthformer::{DepthError, Depthformer, FrameJob};
use audio_engine::lfm2_audio::internals::package::{ModelPackage, Quant};
use audio_engine::lfm2_audio::internals::sampling::{AudioSampler, SamplerConfig};
use audio_engine::lfm2_audio::internals::weights::WeightFile;

use common::package::package;

const QUANTS: [Quant; 4] = [Quant::F32, Quant::F16, Quant::Q8_0, Quant::Q4_0];

fn backbone(q: Quant, threads: usize) -> (Backbone, Backend) {
    let be = Backend::cpu().unwrap();
    be.set_n_threads(threads).unwrap();
    let p = package(q);
    let mut bb = Backbone::load(Lfm2Backbone::open(&p.backbone).unwrap(), &be).unwrap();
    let h = bb.config().hidden_size as usize;
    let codes = WeightFile::open(&p.mmproj, &be).unwrap();
    // The tiny package's audio-out embedding: 8 codebooks in the mmproj file.
    let name = "audio_embedding.embedding.weight";
    if codes.contains(name) {
        bb.set_audio_codes(AudioCodeTable::new(codes, name, 8, h).unwrap());
    }
    (bb, be)
}

/// A deterministic value stream (64-bit LCG).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn unit(&mut self) -> f32 {
        (self.next() % 20001) as f32 / 10000.0 - 1.0
    }
}

/// The positions step `t` of sequence `s` runs: text ids, audio-in rows and (when the model
/// has the table) frames, in a pattern that differs between sequences.
enum Owned {
    Text(u32),
    Audio(Vec<f32>),
    Frame(Vec<u32>),
}

impl Owned {
    fn position(&self) -> Position<'_> {
        match self {
            Owned::Text(t) => Position::Text(*t),
            Owned::Audio(a) => Position::Audio(a),
            Owned::Frame(f) => Position::Frame(f),
        }
    }
}

fn positions(bb: &Backbone, seq: usize, steps: usize) -> Vec<Owned> {
    let h = bb.config().hidden_size as usize;
    let vocab = bb.config().vocab_size as u64;
    let mut rng = Lcg(seq as u64 * 7919 + 1);
    (0..steps)
        .map(|t| match (t + seq) % 3 {
            0 => Owned::Text((rng.next() % vocab) as u32),
            1 => Owned::Audio((0..h).map(|_| rng.unit()).collect()),
            _ if bb.audio_codes().is_some() => {
                Owned::Frame((0..8).map(|_| (rng.next() % 64) as u32).collect())
            }
            _ => Owned::Text((rng.next() % vocab) as u32),
        })
        .collect()
}

fn bits(o: &ForwardOutput) -> (Vec<u32>, Option<Vec<u32>>) {
    let b = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    (b(&o.hidden), o.logits.as_deref().map(b))
}

/// Sequences with prompts of different lengths, prefilled alike in both runs.
fn prefilled(bb: &Backbone, n: usize) -> Vec<DecodeCache> {
    (0..n)
        .map(|s| {
            let mut c = bb.new_cache(64).unwrap();
            let prompt: Vec<Position<'_>> = (0..3 + 2 * s as u32)
                .map(|i| Position::Text(1 + i * 5 + s as u32))
                .collect();
            bb.forward(&mut c, &prompt, Rows::None, false).unwrap();
            c
        })
        .collect()
}

#[test]
fn a_batched_step_gives_each_sequence_its_bits_alone() {
    for q in QUANTS {
        for threads in [1, 2] {
            let (bb, be) = backbone(q, threads);
            let n = 4;
            let steps = 6;
            let plan: Vec<Vec<Owned>> = (0..n).map(|s| positions(&bb, s, steps)).collect();
            // why logits on some steps only: the batch picks the columns the head runs on.
            let wants = |s: usize, t: usize| (s + t) % 2 == 0;

            let mut alone = Vec::new();
            for (s, mut cache) in prefilled(&bb, n).into_iter().enumerate() {
                let outs: Vec<_> = (0..steps)
                    .map(|t| {
                        let p = [plan[s][t].position()];
                        bits(&bb.forward(&mut cache, &p, Rows::Last, wants(s, t)).unwrap())
                    })
                    .collect();
                alone.push(outs);
            }

            let compute = BatchCompute::new(be.new_instance().unwrap(), "backbone").unwrap();
            compute.backend().set_n_threads(threads).unwrap();
            let mut caches = prefilled(&bb, n);
            let mut widths = Vec::new();
            // why staggered: sequence s joins at tick s and leaves after its steps, so batches
            // of every width 1..=n run, and each sequence meets different company.
            for tick in 0..n + steps - 1 {
                let members: Vec<usize> =
                    (0..n).filter(|&s| s <= tick && tick < s + steps).collect();
                let mut batch: Vec<Step<'_, '_>> = caches
                    .iter_mut()
                    .enumerate()
                    .filter(|(s, _)| members.contains(s))
                    .map(|(s, cache)| Step {
                        cache,
                        position: plan[s][tick - s].position(),
                        logits: wants(s, tick - s),
                    })
                    .collect();
                let outs = bb.forward_steps(&compute, &mut batch).unwrap();
                widths.push(outs.len());
                for (o, &s) in outs.iter().zip(&members) {
                    // why not assert_eq: the hidden states would fill the screen.
                    assert!(
                        bits(o) == alone[s][tick - s],
                        "{q:?}, {threads} threads: sequence {s} step {} differs in a batch of {}",
                        tick - s,
                        members.len()
                    );
                }
            }
            assert!(widths.contains(&1) && widths.contains(&n), "{widths:?}");
        }
    }
}

#[test]
fn a_bad_step_fails_the_batch_before_any_cache_moves() {
    let (bb, be) = backbone(Quant::F32, 1);
    let compute = BatchCompute::new(be.new_instance().unwrap(), "backbone").unwrap();
    let mut caches = prefilled(&bb, 2);
    let lens: Vec<usize> = caches.iter().map(|c| c.len()).collect();
    let vocab = bb.config().vocab_size;
    let (a, b) = caches.split_at_mut(1);
    let mut batch = [
        Step {
            cache: &mut a[0],
            position: Position::Text(1),
            logits: true,
        },
        Step {
            cache: &mut b[0],
            position: Position::Text(vocab),
            logits: true,
        },
    ];
    let err = bb.forward_steps(&compute, &mut batch).unwrap_err();
    assert!(matches!(err, BackboneError::Input(_)), "{err}");
    assert!(bb.check_step(&caches[1], &Position::Text(vocab)).is_err());
    assert!(bb.check_step(&caches[0], &Position::Text(1)).is_ok());
    assert_eq!(caches.iter().map(|c| c.len()).collect::<Vec<_>>(), lens);
}

fn sampler(seed: u64) -> AudioSampler {
    AudioSampler::new(SamplerConfig {
        temperature: 1.0,
        top_k: 0,
        seed,
    })
}

#[test]
fn batched_frames_give_each_reply_its_frames_alone() {
    for q in QUANTS {
        for threads in [1, 2] {
            let be = Backend::cpu().unwrap();
            be.set_n_threads(threads).unwrap();
            let pkg = ModelPackage::open_paths(package(q)).unwrap();
            let d = Depthformer::load(&pkg.vocoder, &be).unwrap();
            let h = d.config().backbone_embd as usize;
            let replies = 3;
            let frames = 5;
            let mut rng = Lcg(17);
            // Frame f of reply r; reply 1's frame 2 is not finite (it fails, alone and in the
            // batch, and the others' frames are unchanged).
            let hidden: Vec<Vec<Vec<f32>>> = (0..replies)
                .map(|r| {
                    (0..frames)
                        .map(|f| {
                            let mut v: Vec<f32> = (0..h).map(|_| rng.unit() * 4.0).collect();
                            if (r, f) == (1, 2) {
                                v[0] = f32::NAN;
                            }
                            v
                        })
                        .collect()
                })
                .collect();
            let show = |r: &Result<Vec<u32>, DepthError>| match r {
                Ok(c) => format!("{c:?}"),
                Err(e) => format!("error: {e}"),
            };

            let mut alone = Vec::new();
            for (r, frames_of) in hidden.iter().enumerate() {
                let mut scratch = d.new_scratch().unwrap();
                let mut session = d.session(&mut scratch).unwrap();
                let mut s = sampler(r as u64 + 3);
                let out: Vec<String> = frames_of
                    .iter()
                    .map(|hd| show(&session.frame(hd, &mut s)))
                    .collect();
                alone.push(out);
            }

            let compute = BatchCompute::new(be.new_instance().unwrap(), "backbone").unwrap();
            compute.backend().set_n_threads(threads).unwrap();
            let rows: Vec<_> = (0..replies)
                .map(|_| d.new_frame_rows(compute.backend()).unwrap())
                .collect();
            let mut samplers: Vec<AudioSampler> =
                (0..replies).map(|r| sampler(r as u64 + 3)).collect();
            let mut eoa = 0;
            for f in 0..frames {
                let mut jobs: Vec<FrameJob<'_>> = samplers
                    .iter_mut()
                    .enumerate()
                    .map(|(r, s)| FrameJob {
                        rows: &rows[r],
                        hidden: &hidden[r][f],
                        sampler: s,
                    })
                    .collect();
                let out = d.frames(&compute, &mut jobs);
                for (r, o) in out.iter().enumerate() {
                    eoa += usize::from(matches!(o, Ok(c) if c[0] == d.end_of_audio()));
                    assert_eq!(
                        show(o),
                        alone[r][f],
                        "{q:?}, {threads} threads: reply {r} frame {f}"
                    );
                }
            }
            println!("{q:?}, {threads} threads: {replies} replies x {frames} frames identical ({eoa} end-of-audio)");
        }
    }
}
