//! The thread count is not part of the output: ASR, TTS and a two-turn S2S conversation on the
//! tiny package give the same bytes with 1 and 2 backbone threads and with the per-frame graphs
//! (depthformer, detokenizer) on 1 thread, on 2, or switching between them as the default
//! measuring policy does (`ModelOptions::frame_threads` 0; it probes both within the first
//! frames and every 16 after), and with the backbone's single-position steps on 1 thread while
//! prefills run on 2 (`ModelOptions::step_threads`). (Not 4 here: on the 2-core CI machine ggml's spinning workers would
//! oversubscribe the cores by orders of magnitude; `repack.rs` checks the matrix kernels at 1,
//! 2 and 4 threads.)

mod common;

use std::collections::BTreeMap;

use audio_engine::lfm2_audio::conversation::{Artifact, ArtifactKind, QUESTION_ID};
use audio_engine::lfm2_audio::internals::package::{ModelPackage, Quant};
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{
    AsrOptions, Lfm2Audio, ModelOptions, S2sOptions, S2sRequest, SamplerConfig, Session,
    SessionOptions, TtsOptions, Voice,
};

use common::package::package;
use common::wav::mono_i16;

fn question(i: usize) -> Vec<u8> {
    let n = 16_000 + 4_000 * i;
    mono_i16(
        16_000,
        (0..n).map(|t| ((((t * (5 + 2 * i)) % 300) as i32 - 150) * 80) as i16),
    )
}

/// Every output of the jobs, as bytes.
fn outputs(ty: Quant, n_threads: usize, frame_threads: usize, step_threads: usize) -> Vec<Vec<u8>> {
    let opts = ModelOptions {
        n_threads,
        frame_threads,
        step_threads,
        ..ModelOptions::default()
    };
    let model =
        Lfm2Audio::from_package(ModelPackage::open_paths(package(ty)).unwrap(), opts).unwrap();
    let mut s = Session::new(model, SessionOptions::default());
    let bits = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut out = Vec::new();
    let samples: Vec<f32> = (0..24_000)
        .map(|t| ((t % 200) as f32 - 100.0) / 400.0)
        .collect();
    let asr = s.asr(&samples, &AsrOptions::default()).unwrap();
    out.push(asr.text.into_bytes());
    let tts = s
        .tts(
            "Two sessions, one model.",
            &TtsOptions {
                max_new_tokens: 48,
                voice: Voice::UkFemale,
                audio: SamplerConfig::tts_audio(3),
                ..Default::default()
            },
        )
        .unwrap();
    out.push(format!("{:?}", tts.steps).into_bytes());
    out.push(bits(&tts.audio));
    let mut history = Vec::new();
    for i in 0..2 {
        let req = S2sRequest {
            question: question(i).into(),
            history: history.clone(),
            return_codes: true,
            s2s: S2sOptions {
                max_new_tokens: 48,
                text: SamplerConfig::GREEDY,
                audio: SamplerConfig::s2s_audio(3),
                ..Default::default()
            },
        };
        let t = s.s2s(&req).unwrap();
        out.push(t.reply.text.into_bytes());
        out.push(bits(&t.reply.audio));
        let art = t.artifact.unwrap();
        out.push(art.payload.clone());
        history.push(Artifact {
            id: QUESTION_ID.to_owned(),
            kind: ArtifactKind::Custom,
            payload: question(i),
            meta: BTreeMap::new(),
        });
        history.push(art);
    }
    out
}

#[test]
fn outputs_do_not_depend_on_the_thread_counts() {
    for ty in [Quant::F32, Quant::Q4_0] {
        let base = outputs(ty, 1, 1, 1);
        // TTS steps and both S2S replies' audio and codes were produced (the tiny model's TTS
        // replies here are frames too short for the detokenizer to give audio).
        for i in [1, 4, 5, 7, 8] {
            assert!(
                !base[i].is_empty(),
                "{ty:?}: output {i} is empty: {:?}",
                base.iter().map(Vec::len).collect::<Vec<_>>()
            );
        }
        // Fixed counts; the measuring policies; prefills on two threads, steps on one.
        for (n, f, st) in [(2, 2, 2), (2, 0, 0), (2, 2, 1)] {
            let got = outputs(ty, n, f, st);
            for (i, (a, b)) in base.iter().zip(&got).enumerate() {
                assert!(
                    a == b,
                    "{ty:?}: output {i} differs at {n} threads (frame threads {f}, step threads \
                     {st})"
                );
            }
        }
    }
}
