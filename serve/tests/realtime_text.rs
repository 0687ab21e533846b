//! `/v1/realtime`'s typed conversation items and input transcription, raw protocol on the demo
//! package: a created item is acknowledged at once (`conversation.item.added` and `.done`; the
//! beta `conversation.item.created`) where `previous_item_id` puts it, a delete with
//! `conversation.item.deleted`; unknown ids and unsupported items get `error` events on a
//! socket that still answers; a typed question is answered with speech; with transcription on,
//! a spoken question's transcript arrives as `.delta` then `.completed` and sits on its item,
//! after the response when one starts at the turn's end.

mod common;

use audio_engine::lfm2_audio::{AudioInput, Request, RequestContext, Task};
use serde_json::{json, Value};

use common::realtime::*;
use common::*;

fn user_text(id: &str, text: &str) -> Value {
    json!({"type": "message", "role": "user", "id": id,
           "content": [{"type": "input_text", "text": text}]})
}

fn assistant_text(id: &str, text: &str) -> Value {
    json!({"type": "message", "role": "assistant", "id": id,
           "content": [{"type": "output_text", "text": text}]})
}

/// Creates `item` (after `previous`, when given) and takes its acks: the `previous_item_id`
/// the server placed it after.
async fn create(ws: &mut Ws, item: Value, previous: Option<&str>) -> Value {
    let mut ev = json!({"type": "conversation.item.create", "item": item});
    if let Some(p) = previous {
        ev["previous_item_id"] = json!(p);
    }
    send(ws, ev).await;
    let added = next(ws).await;
    assert_eq!(added["type"], "conversation.item.added", "{added}");
    assert_eq!(added["item"]["id"], item["id"], "{added}");
    let done = next(ws).await;
    assert_eq!(done["type"], "conversation.item.done", "{done}");
    assert_eq!(done["item"]["id"], item["id"], "{done}");
    assert_eq!(done["previous_item_id"], added["previous_item_id"]);
    added["previous_item_id"].clone()
}

/// Sends `v`, expects its `error` with `code`, then checks the socket still answers.
async fn expect_error(ws: &mut Ws, v: Value, code: &str) {
    send(ws, v.clone()).await;
    let e = next(ws).await;
    assert_eq!(e["type"], "error", "{v} -> {e}");
    assert_eq!(e["error"]["code"], code, "{v} -> {e}");
    assert_eq!(e["error"]["event_id"], v["event_id"], "{e}");
    send(ws, json!({"type": "session.update", "session": {}})).await;
    assert_eq!(next(ws).await["type"], "session.updated", "after {v}");
}

async fn delete(ws: &mut Ws, id: &str) {
    send(
        ws,
        json!({"type": "conversation.item.delete", "item_id": id}),
    )
    .await;
    let d = next(ws).await;
    assert_eq!(d["type"], "conversation.item.deleted", "{d}");
    assert_eq!(d["item_id"], id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_items_are_acknowledged_where_previous_item_id_puts_them() {
    let srv = server().await;
    let mut ws = connect(&srv, "").await;
    // Appended: the first has no predecessor, the next follows it.
    assert_eq!(
        create(&mut ws, user_text("u1", "What is the weather?"), None).await,
        Value::Null
    );
    assert_eq!(
        create(&mut ws, assistant_text("a1", "Sunny."), None).await,
        "u1"
    );
    // "root" puts an item first; an id puts it right after that item; none at the end.
    assert_eq!(
        create(&mut ws, user_text("r0", "first"), Some("root")).await,
        Value::Null
    );
    assert_eq!(
        create(&mut ws, user_text("m1", "middle"), Some("u1")).await,
        "u1"
    );
    assert_eq!(create(&mut ws, user_text("t1", "tail"), None).await, "a1");
    // The items as the API shows them.
    send(
        &mut ws,
        json!({"type": "conversation.item.retrieve", "item_id": "a1"}),
    )
    .await;
    let a = next(&mut ws).await;
    assert_eq!(a["type"], "conversation.item.retrieved", "{a}");
    assert_eq!(
        a["item"]["content"],
        json!([{"type": "output_text", "text": "Sunny."}])
    );
    assert_eq!(a["item"]["role"], "assistant");
    // Order now: r0 u1 m1 a1 t1. An answer needs pairs before the question: refused.
    send(&mut ws, json!({"type": "response.create"})).await;
    let e = next(&mut ws).await;
    assert_eq!(e["error"]["code"], "conversation_unpaired", "{e}");
    // Deletes are acknowledged; after them the order is u1 a1 t1: answerable.
    for id in ["r0", "m1"] {
        delete(&mut ws, id).await;
    }

    // Bad ids and unsupported items: an error each, nothing changes, the socket answers.
    expect_error(
        &mut ws,
        json!({"type": "conversation.item.create", "event_id": "e1",
               "previous_item_id": "nope", "item": user_text("x1", "hi")}),
        "previous_item_not_found",
    )
    .await;
    expect_error(
        &mut ws,
        json!({"type": "conversation.item.delete", "event_id": "e2", "item_id": "nope"}),
        "item_not_found",
    )
    .await;
    expect_error(
        &mut ws,
        json!({"type": "conversation.item.create", "event_id": "e3",
               "item": user_text("u1", "again")}),
        "duplicate_item_id",
    )
    .await;
    expect_error(
        &mut ws,
        json!({"type": "conversation.item.create", "event_id": "e4",
               "item": {"type": "message", "role": "system",
                        "content": [{"type": "input_text", "text": "Be brief."}]}}),
        "unsupported_item",
    )
    .await;
    expect_error(
        &mut ws,
        json!({"type": "conversation.item.create", "event_id": "e5",
               "item": {"type": "message", "role": "user", "content": [
                   {"type": "input_text", "text": "hi"},
                   {"type": "input_audio", "audio": b64(&[0; 4800])}]}}),
        "unsupported_item",
    )
    .await;
    expect_error(
        &mut ws,
        json!({"type": "conversation.item.create", "event_id": "e6",
               "item": user_text("x2", "   ")}),
        "empty_text",
    )
    .await;
    // The failed create left no item x1 behind.
    expect_error(
        &mut ws,
        json!({"type": "conversation.item.retrieve", "event_id": "e7", "item_id": "x1"}),
        "item_not_found",
    )
    .await;

    // The typed question after the typed turn is answered with speech.
    send(
        &mut ws,
        json!({"type": "response.create", "response": {"max_output_tokens": 24}}),
    )
    .await;
    let events = until(&mut ws, "response.done").await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(!kinds.contains(&"error"), "{kinds:?}");
    let audio: usize = events
        .iter()
        .filter(|e| e["type"] == "response.output_audio.delta")
        .map(|e| unb64(e["delta"].as_str().unwrap()).len())
        .sum();
    assert!(audio > 0, "no audio: {kinds:?}");
    let done = &events.last().unwrap()["response"];
    assert_ne!(done["status"], "failed", "{done}");
    // Its prompt holds the typed turns: the same question alone is a shorter prompt.
    let with_history = done["usage"]["input_tokens"].as_u64().unwrap();
    delete(&mut ws, "u1").await;
    delete(&mut ws, "a1").await;
    let reply = done["output"][0]["id"].as_str().unwrap().to_owned();
    delete(&mut ws, &reply).await;
    send(
        &mut ws,
        json!({"type": "response.create", "response": {"max_output_tokens": 4}}),
    )
    .await;
    let done = until(&mut ws, "response.done").await.pop().unwrap();
    let alone = done["response"]["usage"]["input_tokens"].as_u64().unwrap();
    assert!(with_history > alone, "{with_history} <= {alone}");
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beta_sockets_get_item_created_and_a_response_input_may_be_typed() {
    let srv = server().await;
    let mut ws = connect(&srv, "&beta=1").await;
    send(
        &mut ws,
        json!({"type": "conversation.item.create", "item": user_text("b1", "Hello there.")}),
    )
    .await;
    let c = next(&mut ws).await;
    assert_eq!(c["type"], "conversation.item.created", "{c}");
    assert_eq!(c["item"]["content"][0]["text"], "Hello there.");
    // An out-of-band response on a typed `input`: answered with speech, the conversation
    // keeps only b1.
    send(
        &mut ws,
        json!({"type": "response.create", "response": {"conversation": "none",
               "max_output_tokens": 12, "input": [user_text("oob", "Tell me a joke.")]}}),
    )
    .await;
    let events = until(&mut ws, "response.done").await;
    assert!(
        events.iter().any(|e| e["type"] == "response.audio.delta"),
        "{events:?}"
    );
    assert!(events.iter().all(|e| e["type"] != "error"), "{events:?}");
    send(
        &mut ws,
        json!({"type": "conversation.item.retrieve", "item_id": "oob", "event_id": "r"}),
    )
    .await;
    assert_eq!(next(&mut ws).await["error"]["code"], "item_not_found");
    srv.shutdown().await.unwrap();
}

/// The transcription events of `events` for `item`: the deltas joined, the completed
/// transcript.
fn transcription_of(events: &[Value], item: &str) -> (String, Option<String>) {
    let deltas: String = events
        .iter()
        .filter(|e| {
            e["type"] == "conversation.item.input_audio_transcription.delta" && e["item_id"] == item
        })
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    let completed = events
        .iter()
        .find(|e| {
            e["type"] == "conversation.item.input_audio_transcription.completed"
                && e["item_id"] == item
        })
        .map(|e| e["transcript"].as_str().unwrap().to_owned());
    (deltas, completed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spoken_question_is_transcribed_and_after_the_reply_when_one_starts_at_once() {
    let test = "a_spoken_question_is_transcribed_and_after_the_reply_when_one_starts_at_once";
    if ci_skip::require_tool(test, "espeak-ng", "apt-get install espeak-ng").is_none() {
        return;
    }
    let dir = scratch("text-espeak");
    let speech = espeak_24k(
        &dir.join("s.wav"),
        &["-v", "en-us"],
        "How far away is the moon?",
    )
    .expect("espeak-ng failed");
    let srv = server().await;
    let mut ws = connect(&srv, "").await;
    send(
        &mut ws,
        json!({"type": "session.update", "session": {"audio": {"input": {
            "transcription": {"model": "gpt-4o-mini-transcribe"}}}}}),
    )
    .await;
    let u = next(&mut ws).await;
    assert_eq!(
        u["session"]["audio"]["input"]["transcription"],
        json!({"model": "gpt-4o-mini-transcribe"}),
        "{u}"
    );

    // A manual commit, no response: transcribed at once.
    send(
        &mut ws,
        json!({"type": "input_audio_buffer.append", "audio": b64(&pcm_bytes(&speech))}),
    )
    .await;
    send(&mut ws, json!({"type": "input_audio_buffer.commit"})).await;
    let events = until(
        &mut ws,
        "conversation.item.input_audio_transcription.completed",
    )
    .await;
    let item = events[0]["item_id"].as_str().unwrap().to_owned();
    assert_eq!(events[0]["type"], "input_audio_buffer.committed");
    let (deltas, completed) = transcription_of(&events, &item);
    let transcript = completed.unwrap();
    assert!(!transcript.is_empty(), "{events:?}");
    // It is the loaded model's ASR of the committed audio.
    let wav = wav_24k(&speech);
    let library = tokio::task::spawn_blocking(move || {
        let job = Request {
            audio: Some(AudioInput::Wav(wav)),
            ..Request::new(Task::Asr)
        }
        .resolve(&RequestContext::new("en", 60.0))
        .unwrap()
        .job;
        model().run(&job, &mut |_| true).unwrap().text
    })
    .await
    .unwrap();
    assert_eq!(transcript, library.trim());
    assert_eq!(deltas.trim(), transcript, "the deltas make the transcript");
    let last = events.last().unwrap();
    assert_eq!(last["content_index"], 0);
    assert_eq!(last["usage"]["type"], "duration");
    // The transcript is on the item.
    send(
        &mut ws,
        json!({"type": "conversation.item.retrieve", "item_id": item}),
    )
    .await;
    let r = next(&mut ws).await;
    assert_eq!(
        r["item"]["content"][0]["transcript"],
        transcript.as_str(),
        "{r}"
    );

    // Turn detection with create_response: the transcription waits for the reply's end.
    send(
        &mut ws,
        json!({"type": "conversation.item.delete", "item_id": item}),
    )
    .await;
    assert_eq!(next(&mut ws).await["type"], "conversation.item.deleted");
    send(
        &mut ws,
        json!({"type": "session.update", "session": {"max_output_tokens": 16, "audio": {"input": {
            "turn_detection": {"type": "server_vad", "silence_duration_ms": 300}}}}}),
    )
    .await;
    assert_eq!(next(&mut ws).await["type"], "session.updated");
    let mut pcm = silence(300);
    pcm.extend(&speech);
    pcm.extend(silence(1_000));
    for chunk in pcm.chunks(2_400) {
        send(
            &mut ws,
            json!({"type": "input_audio_buffer.append", "audio": b64(&pcm_bytes(chunk))}),
        )
        .await;
    }
    let events = until(
        &mut ws,
        "conversation.item.input_audio_transcription.completed",
    )
    .await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(!kinds.contains(&"error"), "{kinds:?}");
    let committed = events
        .iter()
        .find(|e| e["type"] == "input_audio_buffer.committed")
        .expect("a committed turn");
    let item = committed["item_id"].as_str().unwrap();
    let done_at = kinds
        .iter()
        .position(|k| *k == "response.done")
        .expect("the turn was answered");
    let first_transcription = kinds
        .iter()
        .position(|k| k.starts_with("conversation.item.input_audio_transcription"))
        .unwrap();
    assert!(
        first_transcription > done_at,
        "transcription events before the reply ended: {kinds:?}"
    );
    let (_, completed) = transcription_of(&events, item);
    assert!(completed.is_some_and(|t| !t.is_empty()), "{events:?}");
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_created_at_once_stops_the_transcription_which_runs_again_after_it() {
    let test = "a_response_created_at_once_stops_the_transcription_which_runs_again_after_it";
    if ci_skip::require_tool(test, "espeak-ng", "apt-get install espeak-ng").is_none() {
        return;
    }
    let dir = scratch("text-espeak-preempt");
    let speech = espeak_24k(
        &dir.join("s.wav"),
        &["-v", "en-us"],
        "What is the tallest mountain on Earth?",
    )
    .expect("espeak-ng failed");
    let srv = server().await;
    let mut ws = connect(&srv, "&beta=1").await;
    // The beta shape turns it on too.
    send(
        &mut ws,
        json!({"type": "session.update", "session": {
            "input_audio_transcription": {"model": "whisper-1"}}}),
    )
    .await;
    let u = next(&mut ws).await;
    assert_eq!(
        u["session"]["input_audio_transcription"]["model"],
        "whisper-1"
    );
    // As the Agents SDK's send_audio(commit=True) then an app's response.create.
    send(
        &mut ws,
        json!({"type": "input_audio_buffer.append", "audio": b64(&pcm_bytes(&speech))}),
    )
    .await;
    send(&mut ws, json!({"type": "input_audio_buffer.commit"})).await;
    send(
        &mut ws,
        json!({"type": "response.create", "response": {"max_output_tokens": 24}}),
    )
    .await;
    let mut events = Vec::new();
    let mut item = None;
    let (mut done, mut completed) = (false, false);
    while !(done && completed) {
        let e = next(&mut ws).await;
        assert_ne!(e["type"], "error", "{e}");
        if e["type"] == "input_audio_buffer.committed" {
            item = e["item_id"].as_str().map(str::to_owned);
        }
        done |= e["type"] == "response.done";
        completed |= e["type"] == "conversation.item.input_audio_transcription.completed";
        events.push(e);
    }
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    let created = kinds.iter().position(|k| *k == "response.created").unwrap();
    let done_at = kinds.iter().position(|k| *k == "response.done").unwrap();
    // Nothing of the transcription while the reply generates.
    assert!(
        kinds[created..done_at]
            .iter()
            .all(|k| !k.starts_with("conversation.item.input_audio_transcription")),
        "{kinds:?}"
    );
    assert!(kinds.contains(&"response.audio.delta"), "{kinds:?}");
    // Run again after it: completed once, its deltas not sent twice.
    let item = item.unwrap();
    let (deltas, transcript) = transcription_of(&events, &item);
    let transcript = transcript.unwrap();
    assert!(!transcript.is_empty());
    assert_eq!(deltas.trim(), transcript, "{kinds:?}");
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == "conversation.item.input_audio_transcription.completed")
            .count(),
        1
    );
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcription_turned_off_before_it_starts_sends_nothing() {
    let srv = server().await;
    let mut ws = connect(&srv, "").await;
    send(
        &mut ws,
        json!({"type": "session.update", "session": {
            "input_audio_transcription": {"model": "whisper-1"}}}),
    )
    .await;
    assert_eq!(next(&mut ws).await["type"], "session.updated");
    let tone: Vec<u8> = (0..24_000i32)
        .map(|t| ((((t * 7) % 600) - 300) * 50) as i16)
        .flat_map(|v| v.to_le_bytes())
        .collect();
    send(
        &mut ws,
        json!({"type": "input_audio_buffer.append", "audio": b64(&tone)}),
    )
    .await;
    send(&mut ws, json!({"type": "input_audio_buffer.commit"})).await;
    // Off again at once, within the wait before a transcription starts.
    send(
        &mut ws,
        json!({"type": "session.update", "session": {"input_audio_transcription": null}}),
    )
    .await;
    let events = until(&mut ws, "session.updated").await;
    assert_eq!(
        events.last().unwrap()["session"]["audio"]["input"]["transcription"],
        Value::Null
    );
    // Well past the wait: the socket answers, and no transcription event came.
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    send(&mut ws, json!({"type": "session.update", "session": {}})).await;
    let events = until(&mut ws, "session.updated").await;
    assert!(
        events
            .iter()
            .all(|e| !e["type"].as_str().unwrap().contains("transcription")),
        "{events:?}"
    );
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_past_its_byte_bound_is_refused_and_the_socket_goes_on() {
    let mut s = settings();
    s.max_conversation_bytes = 100;
    let srv = server_with(s).await;
    let mut ws = connect(&srv, "").await;
    create(&mut ws, user_text("u1", &"a".repeat(60)), None).await;
    let second = user_text("u2", &"b".repeat(60));
    expect_error(
        &mut ws,
        json!({"type": "conversation.item.create", "event_id": "e1", "item": second}),
        "conversation_too_large",
    )
    .await;
    // A spoken question past the bound is not committed either.
    send(
        &mut ws,
        json!({"type": "input_audio_buffer.append", "audio": b64(&pcm_bytes(&silence(300)))}),
    )
    .await;
    expect_error(
        &mut ws,
        json!({"type": "input_audio_buffer.commit", "event_id": "e2"}),
        "conversation_too_large",
    )
    .await;
    // Deleting the older item makes room again.
    delete(&mut ws, "u1").await;
    create(&mut ws, second, None).await;
    srv.shutdown().await.unwrap();
}

/// Tools: the session's tools go into the system prompt, a client's `function_call` item and
/// the tool's `function_call_output` are the reply and the tool's turn, and the response that
/// answers them gives the library's bytes for that history (the tool turn asked last).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_call_output_is_answered_with_the_librarys_bytes() {
    use audio_engine::lfm2_audio::conversation::{Artifact, ArtifactKind};
    use audio_engine::lfm2_audio::tools::{tool_system_prompt, write_calls, ToolCall};
    use audio_engine::lfm2_audio::{Job, S2sOptions, S2sRequest, QUESTION_ID, REPLY_ID};
    let srv = server().await;
    let mut ws = connect(&srv, "").await;
    let tool = json!({"type": "function", "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}});
    send(
        &mut ws,
        json!({"type": "session.update", "session": {"type": "realtime", "tools": [tool],
               "tool_choice": "auto"}}),
    )
    .await;
    let updated = next(&mut ws).await;
    assert_eq!(updated["type"], "session.updated", "{updated}");
    assert_eq!(updated["session"]["tools"][0]["name"], "get_weather");
    create(&mut ws, user_text("u1", "Weather in Paris?"), None).await;
    let call = json!({"type": "function_call", "id": "c1", "call_id": "call_1",
                      "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"});
    assert_eq!(create(&mut ws, call, None).await, "u1");
    // Bad tool items: an error each, nothing added.
    expect_error(
        &mut ws,
        json!({"type": "conversation.item.create", "event_id": "t1",
               "item": {"type": "function_call", "call_id": "c", "name": "f",
                        "arguments": "[1, 2]"}}),
        "invalid_value",
    )
    .await;
    expect_error(
        &mut ws,
        json!({"type": "conversation.item.create", "event_id": "t2",
               "item": {"type": "function_call_output", "output": "x"}}),
        "invalid_value",
    )
    .await;
    let output = json!({"type": "function_call_output", "id": "o1", "call_id": "call_1",
                        "output": "{\"temperature\": 21}"});
    assert_eq!(create(&mut ws, output, None).await, "c1");
    send(
        &mut ws,
        json!({"type": "response.create", "response": {"max_output_tokens": 24}}),
    )
    .await;
    let events = until(&mut ws, "response.done").await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(!kinds.contains(&"error"), "{kinds:?}");
    let audio: Vec<u8> = events
        .iter()
        .filter(|e| e["type"] == "response.output_audio.delta")
        .flat_map(|e| unb64(e["delta"].as_str().unwrap()))
        .collect();
    let transcript: String = events
        .iter()
        .filter(|e| e["type"] == "response.output_audio_transcript.delta")
        .map(|e| e["delta"].as_str().unwrap().to_owned())
        .collect();

    let text = |id: &str, s: &str, role: Option<&str>| Artifact {
        id: id.into(),
        kind: ArtifactKind::Text,
        payload: s.as_bytes().to_vec(),
        meta: role
            .map(|r| [("role".to_owned(), json!(r))].into_iter().collect())
            .unwrap_or_default(),
    };
    let calls = write_calls(&[ToolCall {
        name: "get_weather".into(),
        arguments: json!({"city": "Paris"}).as_object().unwrap().clone(),
    }]);
    let history = vec![
        text(QUESTION_ID, "Weather in Paris?", None),
        text(REPLY_ID, &calls, None),
        text(QUESTION_ID, "{\"temperature\": 21}", Some("tool")),
    ];
    let (lib_text, lib_audio) = tokio::task::spawn_blocking(move || {
        let d = S2sOptions::default();
        let job = Job::S2s(S2sRequest {
            question: AudioInput::default(),
            history,
            return_codes: true,
            s2s: S2sOptions {
                max_new_tokens: 24,
                system_prompt: tool_system_prompt(&d.system_prompt, &[tool]),
                ..d
            },
        });
        let o = model().run(&job, &mut |_| true).unwrap();
        (o.text, o.audio)
    })
    .await
    .unwrap();
    assert!(!audio.is_empty(), "no audio: {kinds:?}");
    assert_eq!(audio, serve::audio_io::pcm16(&lib_audio));
    assert_eq!(transcript, lib_text);
    srv.shutdown().await.unwrap();
}
