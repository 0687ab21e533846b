//! Typed turns of an s2s conversation through the C ABI: a typed question as the request's text
//! (`audiocpp_request_set_text`), typed questions and text-only replies in the history as
//! CUSTOM artifacts with meta `format` = `text`, mixed with spoken turns. Each turn's text,
//! audio and reply artifact equal the library's for the same engine `Request`, byte for byte.

mod common;

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr::{null, null_mut};

use audio_engine::lfm2_audio::{
    Artifact, ArtifactKind, AudioInput, Outcome, Request, RequestContext, Task, QUESTION_ID,
    REPLY_ID,
};

use common::capi::*;
use common::{bits, demo_package, question_signals, rust_model, wav, Pcm};

// The entry points this test reads results and sets meta with, declared as
// `include/audiocpp.h` does.
extern "C" {
    fn audiocpp_request_set_artifact_meta(
        r: *mut Opaque,
        index: usize,
        key: *const c_char,
        value: *const c_char,
    ) -> c_int;
    fn audiocpp_result_audio(
        result: *const Opaque,
        out_samples: *mut *const f32,
        out_frames: *mut usize,
        out_sample_rate: *mut c_int,
        out_channels: *mut c_int,
    ) -> c_int;
    fn audiocpp_result_artifact_count(result: *const Opaque) -> usize;
    fn audiocpp_result_artifact(
        result: *const Opaque,
        index: usize,
        out_kind: *mut c_int,
        out_id: *mut *const c_char,
        out_payload: *mut *const c_void,
        out_payload_bytes: *mut usize,
    ) -> c_int;
    fn audiocpp_result_artifact_meta_count(result: *const Opaque, index: usize) -> usize;
    fn audiocpp_result_artifact_meta(
        result: *const Opaque,
        index: usize,
        meta_index: usize,
        out_key: *mut *const c_char,
        out_value: *mut *const c_char,
    ) -> c_int;
}

/// `AUDIOCPP_ARTIFACT_ACOUSTIC_TOKENS`.
const ARTIFACT_ACOUSTIC_TOKENS: c_int = 3;
const MAX_TOKENS: &str = "24";
const SEED: &str = "7";

/// An artifact as the C caller adds it: kind, id, payload, meta strings.
#[derive(Debug, Clone, PartialEq)]
struct CArtifact {
    kind: c_int,
    id: String,
    payload: Vec<u8>,
    meta: Vec<(String, String)>,
}

impl CArtifact {
    fn typed(id: &str, text: &str) -> CArtifact {
        CArtifact {
            kind: ARTIFACT_CUSTOM,
            id: id.into(),
            payload: text.as_bytes().to_vec(),
            meta: vec![("format".into(), "text".into())],
        }
    }

    fn spoken(wav: Vec<u8>) -> CArtifact {
        CArtifact {
            kind: ARTIFACT_CUSTOM,
            id: QUESTION_ID.into(),
            payload: wav,
            meta: Vec::new(),
        }
    }

    /// The engine artifact the library is given for it (what the C ABI's plan makes of it).
    fn engine(&self) -> Artifact {
        let text = self.meta.iter().any(|(k, v)| k == "format" && v == "text");
        Artifact {
            id: self.id.clone(),
            kind: match (self.kind, text) {
                (ARTIFACT_ACOUSTIC_TOKENS, _) => ArtifactKind::AcousticTokens,
                (_, true) => ArtifactKind::Text,
                _ => ArtifactKind::Custom,
            },
            payload: self.payload.clone(),
            meta: self
                .meta
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        audio_engine::lfm2_audio::conversation::meta_from_text(k, v),
                    )
                })
                .collect::<BTreeMap<_, _>>(),
        }
    }
}

/// What a C run returned: text, samples, the reply artifact.
#[derive(Debug)]
struct CReply {
    text: String,
    audio: Vec<f32>,
    reply: CArtifact,
}

fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// Reads a NUL-terminated string the library returned.
///
/// # Safety
/// `p` is a valid C string while the result lives.
unsafe fn owned(p: *const c_char) -> String {
    // SAFETY: the caller's promise.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_owned()
}

/// Runs one s2s turn through the C ABI on the demo package: `history`, then a typed question
/// (`text`) or a spoken one (`audio`); default sampling with MAX_TOKENS and SEED.
fn c_turn(history: &[CArtifact], text: Option<&str>, audio: Option<&Pcm>) -> CReply {
    let dir = cstr(demo_package().to_str().unwrap());
    // SAFETY: valid C strings and out pointers; every handle is freed once, after the last read
    // of what it lends.
    unsafe {
        let (mut reg, mut model, mut session, mut res) =
            (null_mut(), null_mut(), null_mut(), null_mut());
        assert_eq!(audiocpp_registry_create(null(), &mut reg), 0);
        assert_eq!(
            audiocpp_model_load(reg, dir.as_ptr(), null(), null(), &mut model),
            0,
            "{}",
            last_error()
        );
        let st = audiocpp_session_create(
            model,
            c"s2s".as_ptr(),
            c"offline".as_ptr(),
            null(),
            null(),
            &mut session,
        );
        assert_eq!(st, 0, "{}", last_error());
        let r = audiocpp_request_create();
        for a in history {
            let id = cstr(&a.id);
            let mut index = usize::MAX;
            let st = audiocpp_request_add_artifact(
                r,
                a.kind,
                id.as_ptr(),
                a.payload.as_ptr().cast(),
                a.payload.len(),
                &mut index,
            );
            assert_eq!(st, 0, "{}", last_error());
            for (k, v) in &a.meta {
                let (k, v) = (cstr(k), cstr(v));
                let st = audiocpp_request_set_artifact_meta(r, index, k.as_ptr(), v.as_ptr());
                assert_eq!(st, 0, "{}", last_error());
            }
        }
        if let Some(t) = text {
            let t = cstr(t);
            assert_eq!(audiocpp_request_set_text(r, t.as_ptr(), null()), 0);
        }
        if let Some(p) = audio {
            let st = audiocpp_request_set_audio(
                r,
                p.samples.as_ptr(),
                p.samples.len() / p.channels as usize,
                p.rate as c_int,
                p.channels as c_int,
            );
            assert_eq!(st, 0, "{}", last_error());
        }
        for (k, v) in [("max_tokens", MAX_TOKENS), ("seed", SEED)] {
            let (k, v) = (cstr(k), cstr(v));
            assert_eq!(audiocpp_request_set_option(r, k.as_ptr(), v.as_ptr()), 0);
        }
        let st = audiocpp_session_run(session, r, &mut res);
        assert_eq!(st, 0, "{}", last_error());
        audiocpp_request_free(r);

        let (mut t, mut lang) = (null(), null());
        assert_eq!(audiocpp_result_text(res, &mut t, &mut lang), 0);
        let text = owned(t);
        let (mut samples, mut frames, mut rate, mut channels) = (null(), 0usize, 0, 0);
        assert_eq!(
            audiocpp_result_audio(res, &mut samples, &mut frames, &mut rate, &mut channels),
            0
        );
        assert_eq!((rate, channels), (24_000, 1));
        let audio = if frames == 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(samples, frames).to_vec()
        };
        assert_eq!(audiocpp_result_artifact_count(res), 1);
        let (mut kind, mut id, mut payload, mut n) = (0, null(), null(), 0usize);
        assert_eq!(
            audiocpp_result_artifact(res, 0, &mut kind, &mut id, &mut payload, &mut n),
            0
        );
        let payload = if n == 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(payload.cast::<u8>(), n).to_vec()
        };
        let meta = (0..audiocpp_result_artifact_meta_count(res, 0))
            .map(|m| {
                let (mut k, mut v) = (null(), null());
                assert_eq!(audiocpp_result_artifact_meta(res, 0, m, &mut k, &mut v), 0);
                (owned(k), owned(v))
            })
            .collect();
        let reply = CArtifact {
            kind,
            id: owned(id),
            payload,
            meta,
        };
        audiocpp_result_free(res);
        audiocpp_session_free(session);
        audiocpp_model_free(model);
        audiocpp_registry_free(reg);
        CReply { text, audio, reply }
    }
}

/// The library's turn for the same engine request the C ABI builds.
fn library_turn(history: &[CArtifact], text: Option<&str>, audio: Option<&Pcm>) -> Outcome {
    let req = Request {
        history: history.iter().map(CArtifact::engine).collect(),
        text: text.map(str::to_owned),
        audio: audio.map(|p| AudioInput::Pcm {
            samples: p.samples.clone(),
            sample_rate: p.rate,
            channels: p.channels as u16,
        }),
        ..Request::new(Task::S2s)
    }
    .option("max_tokens", MAX_TOKENS)
    .option("seed", SEED);
    let job = req
        .resolve(&RequestContext::new("en", 60.0))
        .expect("a valid request")
        .job;
    rust_model().run(&job, &mut |_| true).unwrap()
}

fn assert_same(c: &CReply, lib: &Outcome, what: &str) {
    assert_eq!(c.text, lfm2_engine::c_text(&lib.text), "{what}: text");
    assert!(bits(&c.audio) == bits(&lib.audio), "{what}: audio differs");
    let want = lib
        .artifact
        .as_ref()
        .expect("return_codes defaults to true");
    assert_eq!(c.reply.id, REPLY_ID);
    assert_eq!(c.reply.kind, ARTIFACT_ACOUSTIC_TOKENS);
    assert!(
        c.reply.payload == want.payload,
        "{what}: reply codes differ"
    );
    assert_eq!(c.reply.engine().meta, want.meta, "{what}: reply meta");
}

#[test]
fn a_conversation_mixing_typed_and_spoken_turns_equals_the_library() {
    const Q1: &str = "What is the weather like today?";
    const R2: &str = "Sure, here it is.";
    const Q3: &str = "Thanks! And tomorrow?";
    let spoken = &question_signals()[0];

    // Turn 1, typed: the request's text.
    let c1 = c_turn(&[], Some(Q1), None);
    let lib1 = library_turn(&[], Some(Q1), None);
    assert_same(&c1, &lib1, "turn 1 (typed)");

    // Turn 2, spoken, after the typed turn.
    let mut history = vec![CArtifact::typed(QUESTION_ID, Q1), c1.reply.clone()];
    let c2 = c_turn(&history, None, Some(spoken));
    let lib2 = library_turn(&history, None, Some(spoken));
    assert_same(&c2, &lib2, "turn 2 (spoken)");
    assert!(
        lib2.prompt_positions > library_turn(&[], None, Some(spoken)).prompt_positions,
        "the typed turn is in the prompt"
    );

    // Turn 3, typed, after the spoken turn answered by a text-only reply the client holds.
    history.push(CArtifact::spoken(wav(spoken)));
    history.push(CArtifact::typed(REPLY_ID, R2));
    let c3 = c_turn(&history, Some(Q3), None);
    let lib3 = library_turn(&history, Some(Q3), None);
    assert_same(&c3, &lib3, "turn 3 (typed)");
    assert!(
        !c1.audio.is_empty() || !c2.audio.is_empty() || !c3.audio.is_empty(),
        "some turn speaks, so audio is compared"
    );

    // A typed and a spoken question at once is refused, naming both.
    let dir = cstr(demo_package().to_str().unwrap());
    let (st, msg) = {
        // SAFETY: as c_turn.
        unsafe {
            let (mut reg, mut model, mut session, mut res) =
                (null_mut(), null_mut(), null_mut(), null_mut());
            assert_eq!(audiocpp_registry_create(null(), &mut reg), 0);
            assert_eq!(
                audiocpp_model_load(reg, dir.as_ptr(), null(), null(), &mut model),
                0
            );
            let mode = c"offline".as_ptr();
            assert_eq!(
                audiocpp_session_create(model, c"s2s".as_ptr(), mode, null(), null(), &mut session),
                0
            );
            let r = audiocpp_request_create();
            let t = cstr(Q1);
            assert_eq!(audiocpp_request_set_text(r, t.as_ptr(), null()), 0);
            let p = &spoken.samples;
            assert_eq!(
                audiocpp_request_set_audio(
                    r,
                    p.as_ptr(),
                    p.len() / spoken.channels as usize,
                    spoken.rate as c_int,
                    spoken.channels as c_int
                ),
                0
            );
            let st = audiocpp_session_run(session, r, &mut res);
            let msg = last_error();
            audiocpp_request_free(r);
            if !res.is_null() {
                audiocpp_result_free(res);
            }
            audiocpp_session_free(session);
            audiocpp_model_free(model);
            audiocpp_registry_free(reg);
            (st, msg)
        }
    };
    assert_eq!(st, INVALID_ARGUMENT);
    assert!(msg.contains("not both"), "{msg}");
}
