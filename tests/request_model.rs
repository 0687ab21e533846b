//! One request model behind every door: every option of the engine's option table, for every
//! task, sent through the C ABI (`audiocpp_request_set_option`) and through `POST
//! /v1/tasks/run`'s JSON (in `options`, and as the top-level field where audio.cpp's request JSON
//! has one) at its default, at each bound, one past each bound and with a value of the wrong
//! type, resolves to the same engine request (the same job, the same stream grouping) or fails
//! the same way (`AUDIOCPP_ERR_INVALID_ARGUMENT` / HTTP 400). The OpenAI speech and
//! transcription routes take or refuse their sampling fields as the task route does. README's
//! option table is the one the table generates.

mod common;

use std::ffi::CString;
use std::ptr::null;

use audio_engine::lfm2_audio::options::{markdown_table, OptionSpec, OptionType};
use audio_engine::lfm2_audio::{
    encode_wav_24k, AudioInput, Job, ReadOptions, ResolvedRequest, Task, REQUEST_OPTIONS,
};
use serde_json::{json, Value};

use common::capi::*;

/// `AUDIOCPP_ERR_INVALID_ARGUMENT`.
const INVALID_ARGUMENT: i32 = 1;
/// The server's `max_tokens` cap in these requests: the conversation limit, so the option's
/// own range is what is checked on both sides.
const LIMIT: usize = 8192;
const RATE: u32 = 24_000;

fn question() -> Vec<f32> {
    (0..RATE as usize / 2)
        .map(|i| 0.3 * (i as f32 * 0.05).sin())
        .collect()
}

/// The request through the C ABI: the task's input and the option as text.
fn via_c(task: Task, option: Option<(&str, &str)>) -> Result<ResolvedRequest, i32> {
    let samples = question();
    // SAFETY: a fresh handle, valid C strings and a live sample buffer; freed below.
    unsafe {
        let req = audiocpp_request_create();
        assert!(!req.is_null());
        match task {
            Task::Tts => {
                let t = CString::new("Hello there.").unwrap();
                assert_eq!(audiocpp_request_set_text(req, t.as_ptr(), null()), 0);
            }
            _ => assert_eq!(
                audiocpp_request_set_audio(req, samples.as_ptr(), samples.len(), RATE as i32, 1),
                0
            ),
        }
        if let Some((k, v)) = option {
            let (k, v) = (CString::new(k).unwrap(), CString::new(v).unwrap());
            assert_eq!(audiocpp_request_set_option(req, k.as_ptr(), v.as_ptr()), 0);
        }
        let r = lfm2_engine::resolve_request_handle(req.cast(), task.name(), "en");
        audiocpp_request_free(req);
        r.map_err(|(code, _)| code)
    }
}

/// The request through `POST /v1/tasks/run`'s body: the option in `options` or, with `top`,
/// as a top-level request field.
fn via_http(task: Task, option: Option<(&str, Value)>, top: bool) -> Result<ResolvedRequest, u16> {
    let mut request = json!({});
    match task {
        Task::Tts => request["text"] = json!("Hello there."),
        _ => {
            let wav = encode_wav_24k(&question()).unwrap();
            request["audio"] = json!(serve::audio_io::b64(&wav));
        }
    }
    if let Some((k, v)) = option {
        if top {
            request[k] = v;
        } else {
            request["options"] = json!({ k: v });
        }
    }
    let body = json!({"model": "m", "request": request}).to_string();
    serve::tasks::resolve_body(task.name(), body.as_bytes(), LIMIT).map_err(|e| e.status.as_u16())
}

/// The job with its audio taken out (the C side hands PCM, HTTP a WAV of the same samples), and
/// the audio as the model hears it.
fn split(mut r: ResolvedRequest) -> (ResolvedRequest, Option<Vec<f32>>) {
    let take = |a: &mut AudioInput| {
        let s = a.samples_16k(&ReadOptions::default()).unwrap();
        *a = AudioInput::default();
        s
    };
    let audio = match &mut r.job {
        Job::Asr(j) => Some(take(&mut j.audio)),
        Job::S2s(j) => Some(take(&mut j.question)),
        _ => None,
    };
    (r, audio)
}

fn same(what: &str, c: Result<ResolvedRequest, i32>, h: Result<ResolvedRequest, u16>) {
    match (c, h) {
        (Ok(c), Ok(h)) => {
            let (c, ca) = split(c);
            let (h, ha) = split(h);
            assert_eq!(c, h, "{what}: the two doors resolve differently");
            assert_eq!(ca, ha, "{what}: the audio differs");
        }
        (Err(code), Err(status)) => {
            assert_eq!(code, INVALID_ARGUMENT, "{what}: C status");
            assert_eq!(status, 400, "{what}: HTTP status");
        }
        (c, h) => panic!(
            "{what}: C {} but HTTP {}",
            if c.is_ok() { "accepts" } else { "refuses" },
            if h.is_ok() { "accepts" } else { "refuses" }
        ),
    }
}

/// The values to try for `spec`: (text as C takes it, JSON as a body carries it, whether the
/// option table accepts it for a task that takes the option).
fn values(spec: &OptionSpec, task: Task) -> Vec<(String, Value, bool)> {
    let mut v = Vec::new();
    if let Some(d) = spec.default_for(task).filter(|d| !d.is_empty()) {
        let j = match spec.ty {
            OptionType::Int { .. } => json!(d.parse::<u64>().unwrap()),
            OptionType::Float { .. } => json!(d.parse::<f64>().unwrap()),
            OptionType::Bool => json!(d == "true"),
            _ => json!(d),
        };
        v.push((d.to_owned(), j, true));
    }
    match spec.ty {
        OptionType::Int { min, max } => {
            v.push((min.to_string(), json!(min), true));
            v.push((max.to_string(), json!(max), true));
            if min > 0 {
                v.push(((min - 1).to_string(), json!(min - 1), false));
            } else {
                v.push(("-1".into(), json!(-1), false));
            }
            if max < u64::MAX {
                v.push(((max + 1).to_string(), json!(max + 1), false));
            }
            v.push(("abc".into(), json!("abc"), false));
            v.push(("1.5".into(), json!(1.5), false));
        }
        OptionType::Float { min, max, open_min } => {
            v.push((min.to_string(), json!(min), !open_min));
            v.push((max.to_string(), json!(max), true));
            v.push(((max * 1.01).to_string(), json!(max * 1.01), false));
            if !open_min {
                v.push(("-0.5".into(), json!(-0.5), false));
            }
            v.push(("abc".into(), json!("abc"), false));
        }
        OptionType::Bool => {
            v.push(("true".into(), json!(true), true));
            v.push(("false".into(), json!(false), true));
            v.push(("yes".into(), json!("yes"), false));
        }
        OptionType::Choice(words) => {
            for w in words {
                // why: `vad` is a word of the table that this build refuses when it runs.
                v.push(((*w).into(), json!(w), *w != "vad"));
            }
            v.push(("nope".into(), json!("nope"), false));
        }
        OptionType::Text => {
            v.push(("en".into(), json!("en"), true));
            v.push(("xx".into(), json!("xx"), false));
        }
    }
    v
}

/// Options that audio.cpp's request JSON also carries as top-level fields.
const TOP_LEVEL: [&str; 8] = [
    "seed",
    "max_tokens",
    "temperature",
    "top_k",
    "text_chunk_size",
    "text_chunk_mode",
    "audio_chunk_seconds",
    "audio_chunk_mode",
];

#[test]
fn every_option_resolves_alike_through_the_c_abi_and_the_task_route() {
    let mut checked = 0;
    for task in Task::ALL {
        same(
            &format!("{} with no option", task.name()),
            via_c(task, None),
            via_http(task, None, false),
        );
        for spec in REQUEST_OPTIONS {
            let tried = if spec.takes(task) {
                values(spec, task)
            } else {
                // A task that does not take the option refuses any value of it, even a good one.
                let other = spec.tasks()[0];
                values(spec, other)
                    .into_iter()
                    .take(1)
                    .map(|(t, j, _)| (t, j, false))
                    .collect()
            };
            for (text, j, ok) in tried {
                let what = format!("{} {} = {text}", task.name(), spec.name);
                let c = via_c(task, Some((spec.name, &text)));
                assert_eq!(c.is_ok(), ok, "{what}: the C ABI {:?}", c.as_ref().err());
                same(
                    &what,
                    c.clone(),
                    via_http(task, Some((spec.name, j.clone())), false),
                );
                if TOP_LEVEL.contains(&spec.name) {
                    same(
                        &format!("{what} (top-level)"),
                        c,
                        via_http(task, Some((spec.name, j)), true),
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "only {checked} cases");
}

#[test]
fn defaults_are_the_tables_through_both_doors() {
    // The TTS request whose defaults once differed (C 512 tokens and 200-character chunks, HTTP
    // 2048 and 400): both now give the table's.
    let c = via_c(Task::Tts, None).unwrap();
    let h = via_http(Task::Tts, None, false).unwrap();
    for r in [c, h] {
        match r.job {
            Job::Tts(j) => {
                assert_eq!(j.options.max_new_tokens, 512);
                assert_eq!(j.options.chunk_chars, 200);
                assert_eq!(
                    (j.options.audio.temperature, j.options.audio.top_k),
                    (0.8, 64)
                );
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn an_option_given_twice_in_a_body_is_refused() {
    let body = json!({"model": "m", "request": {"text": "Hi.", "seed": 1, "options": {"seed": 2}}});
    let e = serve::tasks::resolve_body("tts", body.to_string().as_bytes(), LIMIT).unwrap_err();
    assert_eq!(e.status.as_u16(), 400);
    assert!(e.message.contains("seed"), "{}", e.message);
}

#[test]
fn the_servers_cap_lowers_the_default_and_refuses_more() {
    let body = |extra: Value| {
        let mut r = json!({"text": "Hi."});
        if let Value::Object(m) = extra {
            r.as_object_mut().unwrap().extend(m);
        }
        json!({"model": "m", "request": r}).to_string()
    };
    let r = serve::tasks::resolve_body("tts", body(json!({})).as_bytes(), 100).unwrap();
    match r.job {
        Job::Tts(j) => assert_eq!(j.options.max_new_tokens, 100),
        other => panic!("{other:?}"),
    }
    let e = serve::tasks::resolve_body("tts", body(json!({"max_tokens": 101})).as_bytes(), 100)
        .unwrap_err();
    assert!(e.message.contains("limit"), "{}", e.message);
}

#[test]
fn the_openai_routes_take_and_refuse_what_the_task_route_does() {
    let wav = serve::audio_io::b64(&encode_wav_24k(&question()).unwrap());
    for (field, good, bad) in [
        ("max_tokens", json!(8192), json!(8193)),
        ("top_k", json!(2049), json!(2050)),
        ("temperature", json!(100.0), json!(101.0)),
        ("seed", json!(u64::MAX), json!(-1)),
    ] {
        for (value, ok) in [(good, true), (bad, false)] {
            let speech = json!({"input": "Hi.", field: value.clone()}).to_string();
            let task = via_http(Task::Tts, Some((field, value.clone())), true);
            let route = serve::openai::check_body("speech", speech.as_bytes(), LIMIT);
            assert_eq!(task.is_ok(), ok, "task route {field} = {value}");
            assert_eq!(route.is_ok(), ok, "speech {field} = {value}: {route:?}");
        }
    }
    for (value, ok) in [(json!(8192), true), (json!(8193), false), (json!(0), false)] {
        let body = json!({"audio": wav, "max_tokens": value.clone()}).to_string();
        let route = serve::openai::check_body("transcriptions", body.as_bytes(), LIMIT);
        let task = via_http(Task::Asr, Some(("max_tokens", value.clone())), true);
        assert_eq!(task.is_ok(), ok, "asr max_tokens = {value}");
        assert_eq!(
            route.is_ok(),
            ok,
            "transcriptions max_tokens = {value}: {route:?}"
        );
    }
}

#[test]
fn readme_holds_the_generated_option_table() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let table = markdown_table();
    assert!(
        readme.contains(&table),
        "README's request-option table is not the generated one; replace it with:\n{table}"
    );
}

/// The option added last (`text_temperature`, issue #37's "one option end to end": the table,
/// the request's mapping and README) reaches the S2S text sampler from the C door, and the
/// engine runs it: 0 is the greedy default byte for byte, a positive value samples text with
/// the request's seed (the same seed twice, the same bytes).
#[test]
fn text_temperature_reaches_the_reply() {
    use audio_engine::lfm2_audio::SamplerConfig;
    let job = |t: Option<&str>| {
        let mut r = match t {
            Some(t) => via_c(Task::S2s, Some(("text_temperature", t))),
            None => via_c(Task::S2s, None),
        }
        .expect("a valid request")
        .job;
        if let Job::S2s(s) = &mut r {
            s.s2s.max_new_tokens = 24;
            s.s2s.audio.seed = 7;
        }
        r
    };
    let text_sampler = |j: &Job| match j {
        Job::S2s(s) => s.s2s.text,
        _ => panic!("an s2s job"),
    };
    assert_eq!(text_sampler(&job(None)), SamplerConfig::text());
    assert_eq!(text_sampler(&job(Some("0"))), SamplerConfig::text());
    let warm = text_sampler(&job(Some("1.5")));
    assert_eq!((warm.temperature, warm.top_k), (1.5, 0));
    assert!(via_c(Task::S2s, Some(("text_temperature", "-1"))).is_err());

    let m = common::rust_model();
    let run = |j: &Job| {
        let o = m.run(j, &mut |_| true).expect("the reply");
        (o.text, common::bits(&o.audio))
    };
    assert_eq!(run(&job(None)), run(&job(Some("0"))));
    assert_eq!(run(&job(Some("1.5"))), run(&job(Some("1.5"))));
}
