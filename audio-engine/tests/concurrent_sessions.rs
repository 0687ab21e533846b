//! Sessions on one loaded model compute at the same time: four sessions, one ggml thread each,
//! on four threads at once (ASR, TTS, a three-turn S2S conversation carrying its history as
//! artifacts with `return_codes`, and a two-turn conversation whose second turn streams), and
//! every result is byte-identical to the same requests run alone in a fresh session. No run
//! looks a weight up by name: every layer holds its weights from load on.
//!
//! The model's compute threads are one budget for all its sessions
//! (`ModelOptions::max_compute_threads`): sessions that each compute on two threads, on a model
//! of two, never have more than two threads computing at once, and keep their bytes; that
//! model batches its replies' steps and frames (`max_batch` 4, from two replies on), and the
//! sessions' steps share ticks.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

use audio_engine::lfm2_audio::conversation::{Artifact, ArtifactKind, QUESTION_ID};
use audio_engine::lfm2_audio::internals::package::Quant;
use audio_engine::lfm2_audio::internals::sampling::SamplerConfig;
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{
    AsrOptions, Lfm2Audio, ModelOptions, ReplyEvent, S2sOptions, S2sRequest, Session,
    SessionOptions, TtsOptions, Voice,
};

use common::lfm2_tiny::input_signal;
use common::package::{engine_with, package};

/// why: the tests of this binary run at once; one of them computes on two threads, and two
/// threads spinning at ggml's barriers beside other computes on two cores slow everything down
/// by orders of magnitude.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A deterministic 16 kHz question (an integer waveform, different per `i`).
fn question(i: usize) -> Vec<u8> {
    let n = 24_000 + 8_000 * i;
    let mut out = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
    for t in 0..n {
        let v = ((t * (7 + 3 * i)) % 400) as i32 - 200;
        w.write_sample((v * 60) as i16).unwrap();
    }
    w.finalize().unwrap();
    out.into_inner()
}

/// Everything a job produced, as bytes to compare.
#[derive(Debug, Default, PartialEq, Eq)]
struct Output {
    items: Vec<(String, Vec<u8>)>,
}

impl Output {
    fn put(&mut self, key: impl Into<String>, bytes: Vec<u8>) {
        self.items.push((key.into(), bytes));
    }

    fn f32s(&mut self, key: impl Into<String>, v: &[f32]) {
        self.put(
            key,
            v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect(),
        );
    }

    fn reply(&mut self, key: &str, r: &audio_engine::lfm2_audio::ReplyResult) {
        self.put(format!("{key}.text"), r.text.clone().into_bytes());
        self.put(
            format!("{key}.steps"),
            format!("{:?}", r.steps).into_bytes(),
        );
        self.f32s(format!("{key}.audio"), &r.audio);
        self.put(format!("{key}.ended"), vec![u8::from(r.ended)]);
    }
}

#[derive(Debug, Clone, Copy)]
enum Job {
    Asr,
    Tts,
    /// A conversation of `turns` turns on questions `first..`; the last turn streams when asked.
    Chat {
        first: usize,
        turns: usize,
        stream_last: bool,
    },
}

/// A session computing on `threads` threads.
fn session(e: &Lfm2Audio, threads: usize) -> Session {
    Session::new(
        e.clone(),
        SessionOptions {
            n_threads: Some(threads),
            ..Default::default()
        },
    )
}

fn run(e: &Lfm2Audio, job: Job) -> Output {
    run_on(e, job, 1)
}

fn run_on(e: &Lfm2Audio, job: Job, threads: usize) -> Output {
    let mut out = Output::default();
    let mut s = session(e, threads);
    match job {
        Job::Asr => {
            let r = s
                .asr(
                    &input_signal(),
                    &AsrOptions {
                        max_new_tokens: 48,
                        ..Default::default()
                    },
                )
                .unwrap();
            out.put("tokens", format!("{:?}", r.tokens).into_bytes());
            out.put("text", r.text.into_bytes());
        }
        Job::Tts => {
            let opts = TtsOptions {
                max_new_tokens: 64,
                voice: Voice::UkFemale,
                audio: SamplerConfig::tts_audio(3),
                ..Default::default()
            };
            let r = s.tts("Two sessions, one model.", &opts).unwrap();
            out.reply("tts", &r);
        }
        Job::Chat {
            first,
            turns,
            stream_last,
        } => {
            let mut history: Vec<Artifact> = Vec::new();
            for t in 0..turns {
                let q = first + t;
                let req = S2sRequest {
                    question: question(q).into(),
                    history: history.clone(),
                    return_codes: true,
                    s2s: S2sOptions {
                        max_new_tokens: 120,
                        text: SamplerConfig::GREEDY,
                        audio: SamplerConfig::s2s_audio(7 + q as u64),
                        ..Default::default()
                    },
                };
                let turn = if stream_last && t + 1 == turns {
                    let mut stream = s.s2s_stream(&req).unwrap();
                    let mut audio = Vec::new();
                    while let Some(ev) = stream.next_event() {
                        if let ReplyEvent::Audio(a) = ev {
                            audio.extend(a);
                        }
                    }
                    let (back, turn) = stream.wait().unwrap();
                    s = back;
                    let turn = turn.unwrap();
                    out.f32s(format!("turn{t}.events.audio"), &audio);
                    turn
                } else {
                    s.s2s(&req).unwrap()
                };
                out.reply(&format!("turn{t}"), &turn.reply);
                let art = turn.artifact.unwrap();
                out.put(format!("turn{t}.artifact.payload"), art.payload.clone());
                out.put(
                    format!("turn{t}.artifact.meta"),
                    serde_json::to_string(&art.meta).unwrap().into_bytes(),
                );
                history.push(Artifact {
                    id: QUESTION_ID.to_owned(),
                    kind: ArtifactKind::Custom,
                    payload: question(q),
                    meta: BTreeMap::new(),
                });
                history.push(art);
            }
        }
    }
    out
}

/// Runs `jobs` at once, one session of `threads` threads each on its own thread, released
/// together; returns each output with when it started and ended.
fn side_by_side(e: &Lfm2Audio, jobs: &[Job], threads: usize) -> Vec<(Output, Instant, Instant)> {
    let barrier = Arc::new(Barrier::new(jobs.len()));
    std::thread::scope(|sc| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|&job| {
                let (e, barrier) = (e.clone(), barrier.clone());
                sc.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    let out = run_on(&e, job, threads);
                    (out, start, Instant::now())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn four_sessions_on_one_model_compute_at_once_with_the_bytes_of_each_alone() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // why a budget of four: one-thread graphs have no barriers to spin at, so four of them may
    // compute at once even on two cores; that is what this test is about.
    let e = engine_with(
        Quant::F32,
        ModelOptions {
            max_compute_threads: 4,
            ..Default::default()
        },
    );
    let lookups = audio_engine::ggml::weights::name_lookups();
    let jobs = [
        Job::Asr,
        Job::Tts,
        Job::Chat {
            first: 0,
            turns: 3,
            stream_last: false,
        },
        Job::Chat {
            first: 4,
            turns: 2,
            stream_last: true,
        },
    ];
    // Alone, one after the other, each in a fresh session.
    let t0 = Instant::now();
    let alone: Vec<Output> = jobs.iter().map(|&j| run(&e, j)).collect();
    let sequential = t0.elapsed();

    // At once: four threads released together, one session each, on the same model.
    let t0 = Instant::now();
    let together = side_by_side(&e, &jobs, 1);
    let concurrent = t0.elapsed();
    for ((job, a), (b, _, _)) in jobs.iter().zip(&alone).zip(&together) {
        assert_eq!(a.items.len(), b.items.len(), "{job:?}");
        for ((ka, va), (kb, vb)) in a.items.iter().zip(&b.items) {
            assert_eq!(ka, kb);
            assert!(va == vb, "{job:?}: {ka} differs when run beside the others");
        }
    }
    assert_eq!(
        audio_engine::ggml::weights::name_lookups(),
        lookups,
        "a forward pass looked a weight up by name"
    );
    // The jobs really ran at the same time: every one started before any finished.
    let last_start = together.iter().map(|t| t.1).max().unwrap();
    let first_end = together.iter().map(|t| t.2).min().unwrap();
    assert!(last_start < first_end, "the jobs did not overlap");
    println!(
        "4 jobs alone one after the other: {:.2} s; four sessions at once: {:.2} s ({:.2}x)",
        sequential.as_secs_f64(),
        concurrent.as_secs_f64(),
        concurrent.as_secs_f64() / sequential.as_secs_f64()
    );
}

#[test]
fn batched_sessions_never_compute_on_more_threads_than_the_model_has_with_the_bytes_of_each_alone()
{
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let e = Lfm2Audio::from_package(
        audio_engine::lfm2_audio::internals::package::ModelPackage::open_paths(package(
            Quant::Q4_0,
        ))
        .unwrap(),
        ModelOptions {
            n_threads: 2,
            max_compute_threads: 2,
            // why batched from two: this test checks the step and frame ticks too, whatever
            // number of its sessions generate at once (the other test runs the defaults, its
            // replies batching while three or more generate and computing alone otherwise).
            max_batch: 4,
            batch_from: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let jobs = [
        Job::Asr,
        Job::Tts,
        Job::Chat {
            first: 1,
            turns: 2,
            stream_last: true,
        },
    ];
    let alone: Vec<Output> = jobs.iter().map(|&j| run_on(&e, j, 2)).collect();
    let before = e.compute_thread_stats().unwrap();
    assert_eq!(before.peak_in_use, 2, "{before:?}");
    assert_eq!(
        before.waits, 0,
        "one session at a time never waits: {before:?}"
    );

    let together: Vec<Output> = side_by_side(&e, &jobs, 2)
        .into_iter()
        .map(|(out, _, _)| out)
        .collect();
    let after = e.compute_thread_stats().unwrap();
    assert_eq!(
        after.peak_in_use, 2,
        "more threads computed at once than the model has"
    );
    // why not "some compute waited": the scheduler batches the sessions' steps into one
    // graph, so they may never compete for threads; that they shared ticks shows they overlapped.
    let ticks = e.step_stats();
    assert!(
        ticks.max_width >= 2,
        "three sessions side by side never shared a step tick: {ticks:?}"
    );
    // The same work again, side by side, all of it through the budget.
    assert!(
        after.computes - before.computes >= before.computes * 9 / 10,
        "{before:?} {after:?}"
    );
    for ((job, a), b) in jobs.iter().zip(&alone).zip(&together) {
        assert!(a == b, "{job:?}: bytes differ when run beside the others");
    }
}
