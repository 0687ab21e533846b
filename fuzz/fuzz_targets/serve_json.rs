//! The HTTP server's JSON request bodies (audio.cpp's task routes for asr, tts and s2s entries;
//! OpenAI's transcriptions, speech and chat completions): serde parsing with unknown fields
//! refused, then every check the handlers make before a model is involved (audio and artifact
//! base64, WAV headers, the chat's message order, voices, formats, limits, sampling values).
//! Any body must give an `ApiError` (a 4xx envelope), never a panic.
//!
//! Input: a route byte, then the body.
#![no_main]

use lfm2_engine_fuzz::{tone, wav_bytes, write_seeds_if_asked};
use libfuzzer_sys::fuzz_target;

const ROUTES: [&str; 6] = [
    "tasks:asr",
    "tasks:tts",
    "tasks:s2s",
    "transcriptions",
    "speech",
    "chat",
];
/// The server's default `max_tokens` limit.
const LIMIT: usize = 2048;

fn b64(bytes: &[u8]) -> String {
    // why: no base64 dependency for one seed helper; standard alphabet with padding.
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(char::from(A[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let wav = b64(&wav_bytes(&tone(160), 16_000, 1, 16, false));
    let reply = b64(&[1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 4, 0, 0, 0, 4, 0, 0, 0]);
    let meta = r#"{"format":"lfm2_audio.reply/1","language":"en","codebooks":"2","audio_vocab_size":"5","text_vocab_size":"300","steps":"2","ended":"true"}"#;
    let bodies: Vec<(&str, usize, String)> = vec![
        ("tasks_asr", 0, format!(r#"{{"model":"m","request":{{"audio":"{wav}","max_tokens":8}}}}"#)),
        ("tasks_tts", 1, r#"{"model":"m","request":{"text":"Hello.","voice_id":"uk_female","seed":3,"temperature":0.8,"top_k":4}}"#.to_owned()),
        ("tasks_s2s", 2, format!(
            r#"{{"model":"m","request":{{"audio":"{wav}","options":{{"return_codes":true}},"artifacts":[{{"id":"lfm2_audio.question","kind":"custom","payload":"{wav}"}},{{"id":"lfm2_audio.reply","kind":"acoustic_tokens","payload":"{reply}","meta":{meta}}}]}},"stream_format":"sse"}}"#
        )),
        ("transcriptions", 3, format!(r#"{{"model":"m","audio":"data:audio/wav;base64,{wav}","response_format":"verbose_json"}}"#)),
        ("speech", 4, r#"{"model":"m","input":"Hi there","voice":"us-male","response_format":"pcm","stream":true,"stream_format":"sse"}"#.to_owned()),
        ("chat", 5, format!(
            r#"{{"model":"m","modalities":["text","audio"],"audio":{{"voice":"default","format":"wav"}},"messages":[{{"role":"system","content":"Be brief."}},{{"role":"user","content":[{{"type":"input_audio","input_audio":{{"data":"{wav}","format":"wav"}}}}]}},{{"role":"assistant","content":"hi","lfm2_audio_reply":{{"id":"","kind":"acoustic_tokens","payload":"{reply}","meta":{meta}}}}},{{"role":"user","content":[{{"type":"input_audio","input_audio":{{"data":"{wav}"}}}}]}}],"max_completion_tokens":4,"n":1}}"#
        )),
    ];
    bodies
        .into_iter()
        .map(|(name, route, body)| {
            let mut b = vec![route as u8];
            b.extend_from_slice(body.as_bytes());
            (name.to_owned(), b)
        })
        .collect()
}

fuzz_target!(
    init: { write_seeds_if_asked(seeds) },
    |data: &[u8]| {
        let Some((&r, body)) = data.split_first() else {
            return;
        };
        let route = ROUTES[usize::from(r) % ROUTES.len()];
        let _ = match route.strip_prefix("tasks:") {
            Some(task) => serve::tasks::check_body(task, body, LIMIT),
            None => serve::openai::check_body(route, body, LIMIT),
        };
    }
);
