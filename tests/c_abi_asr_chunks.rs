//! ASR in fixed chunks through the C ABI: the text is the engine's ASR job's (each chunk
//! transcribed alone, the texts trimmed and joined by a space), and `lfm2e_session_cancel`
//! from another thread stops a chunked run, which leaves the session usable.

mod common;

use std::ffi::{CStr, CString};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{AsrJob, AsrOptions, AudioInput, Job, ReadOptions};

use common::capi::*;
use common::{demo_package, rust_model, signal, Pcm};

const MAX_TOKENS: usize = 24;
const CHUNK_SECONDS: f64 = 0.5;

/// A registry, a model on the demo package and an offline ASR session; freed on drop.
struct AsrSession {
    reg: *mut Opaque,
    model: *mut Opaque,
    session: *mut Opaque,
}

impl AsrSession {
    fn new() -> AsrSession {
        let dir = CString::new(demo_package().to_str().unwrap()).unwrap();
        // SAFETY: valid C strings and out pointers; the handles are freed once, on drop.
        unsafe {
            let (mut reg, mut model, mut session) = (null_mut(), null_mut(), null_mut());
            assert_eq!(audiocpp_registry_create(null(), &mut reg), 0);
            assert_eq!(
                audiocpp_model_load(reg, dir.as_ptr(), null(), null(), &mut model),
                0,
                "{}",
                last_error()
            );
            let (task, mode) = (c"asr".as_ptr(), c"offline".as_ptr());
            assert_eq!(
                audiocpp_session_create(model, task, mode, null(), null(), &mut session),
                0,
                "{}",
                last_error()
            );
            AsrSession {
                reg,
                model,
                session,
            }
        }
    }

    /// Runs ASR on `pcm` in fixed chunks of `chunk` seconds: the text, or the status and
    /// message.
    fn run(&self, pcm: &Pcm, chunk: f64) -> Result<String, (i32, String)> {
        let options = [
            ("max_tokens", MAX_TOKENS.to_string()),
            ("audio_chunk_mode", "fixed".to_owned()),
            ("audio_chunk_seconds", chunk.to_string()),
        ];
        // SAFETY: a live session; the request and result are freed here; the samples hold
        // `frames * channels` floats.
        unsafe {
            let r = audiocpp_request_create();
            let frames = pcm.samples.len() / pcm.channels as usize;
            let (rate, channels) = (pcm.rate as i32, pcm.channels as i32);
            let st = audiocpp_request_set_audio(r, pcm.samples.as_ptr(), frames, rate, channels);
            assert_eq!(st, 0, "{}", last_error());
            for (k, v) in options {
                let (k, v) = (CString::new(k).unwrap(), CString::new(v).unwrap());
                assert_eq!(audiocpp_request_set_option(r, k.as_ptr(), v.as_ptr()), 0);
            }
            let mut res = null_mut();
            let st = audiocpp_session_run(self.session, r, &mut res);
            audiocpp_request_free(r);
            if st != 0 {
                return Err((st, last_error()));
            }
            let mut text = null();
            assert_eq!(audiocpp_result_text(res, &mut text, null_mut()), 0);
            let out = CStr::from_ptr(text).to_str().unwrap().to_owned();
            audiocpp_result_free(res);
            Ok(out)
        }
    }
}

impl Drop for AsrSession {
    fn drop(&mut self) {
        // SAFETY: handles made in `new`, freed once, the session before its model.
        unsafe {
            audiocpp_session_free(self.session);
            audiocpp_model_free(self.model);
            audiocpp_registry_free(self.reg);
        }
    }
}

fn pcm_input(p: &Pcm) -> AudioInput {
    AudioInput::Pcm {
        samples: p.samples.clone(),
        sample_rate: p.rate,
        channels: p.channels as u16,
    }
}

#[test]
fn fixed_chunks_give_the_engine_jobs_text_and_each_chunk_is_transcribed_alone() {
    let pcm = signal(1.5, 22_050, 2, 9);
    let opts = AsrOptions {
        max_new_tokens: MAX_TOKENS,
        ..AsrOptions::default()
    };
    let job = Job::Asr(AsrJob {
        audio: pcm_input(&pcm),
        options: opts.clone(),
        chunk_seconds: Some(CHUNK_SECONDS),
    });
    let want = rust_model().run(&job, &mut |_| true).unwrap();
    // The same, chunk by chunk: each 0.5 s of the 16 kHz signal alone, trimmed, joined.
    let unlimited = ReadOptions {
        max_seconds: f64::INFINITY,
    };
    let samples = pcm_input(&pcm).samples_16k(&unlimited).unwrap();
    let pieces: Vec<String> = samples
        .chunks(8_000)
        .map(|c| rust_model().asr(c, &opts).unwrap().text.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(samples.chunks(8_000).count(), 3);
    assert_eq!(want.text, pieces.join(" "));

    let s = AsrSession::new();
    let got = s.run(&pcm, CHUNK_SECONDS).unwrap();
    assert_eq!(got, lfm2_engine::c_text(&want.text));
}

/// A session pointer handed to the cancelling thread.
struct SendPtr(*mut Opaque);
// SAFETY: lfm2e_session_cancel is documented as callable from any thread while a run holds
// the session; the pointer is only used for it, and the session outlives the thread.
unsafe impl Send for SendPtr {}

#[test]
fn a_chunked_run_is_cancelled_from_another_thread_and_the_session_stays_usable() {
    // Many short chunks, so the run lasts well past the first cancel.
    let long = signal(30.0, 16_000, 1, 3);
    let s = AsrSession::new();
    let done = Arc::new(AtomicBool::new(false));
    let canceller = {
        let (done, ptr) = (done.clone(), SendPtr(s.session));
        std::thread::spawn(move || {
            let ptr = ptr;
            // why again and again: a run forgets a cancel raised before it started.
            while !done.load(Ordering::SeqCst) {
                // SAFETY: the session is live until this thread is joined.
                assert_eq!(unsafe { lfm2e_session_cancel(ptr.0) }, 0);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let r = s.run(&long, 0.25);
    done.store(true, Ordering::SeqCst);
    canceller.join().unwrap();
    let (st, msg) = r.expect_err("the run was cancelled");
    assert_eq!(st, RUNTIME, "{msg}");
    assert!(msg.starts_with("cancelled"), "{msg}");
    // SAFETY: a live session.
    assert_eq!(unsafe { lfm2e_session_was_cancelled(s.session) }, 1);

    // The next run is not cancelled and gives the engine's text.
    let pcm = signal(1.5, 22_050, 2, 9);
    let got = s.run(&pcm, CHUNK_SECONDS).unwrap();
    let want = rust_model()
        .run(
            &Job::Asr(AsrJob {
                audio: pcm_input(&pcm),
                options: AsrOptions {
                    max_new_tokens: MAX_TOKENS,
                    ..AsrOptions::default()
                },
                chunk_seconds: Some(CHUNK_SECONDS),
            }),
            &mut |_| true,
        )
        .unwrap();
    assert_eq!(got, lfm2_engine::c_text(&want.text));
    // SAFETY: a live session.
    assert_eq!(unsafe { lfm2e_session_was_cancelled(s.session) }, 0);
}
