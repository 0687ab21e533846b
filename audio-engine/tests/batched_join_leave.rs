//! Replies join and leave the model's step and frame ticks at random, and none of them changes
//! a byte. Six sessions on one model (batching from two generating replies on, ticks of up to
//! four) start at seeded random times and run seeded random plans: conversations of one to
//! three turns that carry their history as artifacts (so prefill ahead runs between turns,
//! beside the other sessions' replies), some cut mid-reply by their client, each cut followed
//! by a fresh turn on the same session. While they run, each reply switches between batched
//! ticks and computing alone as the others come and go. Every finished turn must equal,
//! byte for byte, the same plan run alone; a cut reply's steps must be a prefix of the whole
//! reply's.

mod common;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use audio_engine::lfm2_audio::conversation::Artifact;
use audio_engine::lfm2_audio::internals::package::Quant;
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{
    Lfm2Audio, ModelOptions, ReplyEvent, S2sOptions, S2sRequest, SamplerConfig, Session,
    SessionOptions,
};

use common::package::engine_with;
use common::wav::{question, question_artifact};

/// splitmix64: the plans depend on the seed only.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

/// What one session does.
#[derive(Debug, Clone)]
struct Plan {
    /// Wait after the common start.
    delay: Duration,
    /// Questions of the conversation, in order.
    questions: Vec<usize>,
    /// Cut the last turn after this many audio events, then run `questions[0]` again as a
    /// fresh conversation on the same session.
    cut_after: Option<usize>,
}

fn plans(seed: u64, n: usize) -> Vec<Plan> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| {
            let turns = 1 + rng.below(3) as usize;
            Plan {
                delay: Duration::from_millis(rng.below(400)),
                questions: (0..turns).map(|_| rng.below(5) as usize).collect(),
                cut_after: (rng.below(3) == 0).then(|| 1 + rng.below(4) as usize),
            }
        })
        .collect()
}

fn request(q: usize, history: &[Artifact]) -> S2sRequest {
    S2sRequest {
        question: question(q).into(),
        history: history.to_vec(),
        return_codes: true,
        s2s: S2sOptions {
            max_new_tokens: 60,
            text: SamplerConfig::GREEDY,
            audio: SamplerConfig::s2s_audio(11 + q as u64),
            ..Default::default()
        },
    }
}

/// A finished turn as comparable bytes: text, steps, audio bits, artifact payload.
type TurnBytes = (String, String, Vec<u32>, Vec<u8>);

/// What a plan produced: its finished turns, and the steps of its cut reply.
#[derive(Debug, Default, PartialEq)]
struct Outcome {
    turns: Vec<TurnBytes>,
    cut_steps: Option<String>,
}

fn bytes(t: &audio_engine::lfm2_audio::TurnResult) -> TurnBytes {
    (
        t.reply.text.clone(),
        format!("{:?}", t.reply.steps),
        t.reply.audio.iter().map(|x| x.to_bits()).collect(),
        t.artifact.as_ref().unwrap().payload.clone(),
    )
}

/// Runs `plan` on a fresh session; `cut` says whether the cut really happens (alone, the last
/// turn runs whole, to have the reply a cut one must be a prefix of).
fn run(e: &Lfm2Audio, plan: &Plan, cut: bool) -> Outcome {
    let mut s = Session::new(e.clone(), SessionOptions::default());
    let mut out = Outcome::default();
    let mut history = Vec::new();
    for (t, &q) in plan.questions.iter().enumerate() {
        let req = request(q, &history);
        let last = t + 1 == plan.questions.len();
        let turn = match (last, plan.cut_after) {
            (true, Some(after)) if cut => {
                let mut stream = s.s2s_stream(&req).map_err(|b| b.1).unwrap();
                let mut seen = 0;
                while seen < after {
                    match stream.next_event() {
                        Some(ReplyEvent::Audio(_)) => seen += 1,
                        Some(_) => {}
                        None => break,
                    }
                }
                let (back, turn) = stream.finish().unwrap();
                s = back;
                let turn = turn.unwrap();
                out.cut_steps = Some(format!("{:?}", turn.reply.steps));
                break;
            }
            _ => s.s2s(&req).unwrap(),
        };
        history.push(question_artifact(q));
        history.push(turn.artifact.clone().unwrap());
        out.turns.push(bytes(&turn));
    }
    if plan.cut_after.is_some() {
        // The session after a cut (its prefill ahead of the cut reply settled or dropped)
        // starts a fresh conversation.
        let turn = s.s2s(&request(plan.questions[0], &[])).unwrap();
        out.turns.push(bytes(&turn));
    }
    out
}

/// `a`'s steps (a `Vec<ReplyStep>` debug string) are a prefix of `whole`'s.
fn steps_prefix(a: &str, whole: &str) -> bool {
    let a = a.trim_end_matches(']');
    whole.starts_with(a)
}

#[test]
fn replies_joining_and_leaving_ticks_at_random_keep_their_bytes() {
    let e = engine_with(
        Quant::Q4_0,
        ModelOptions {
            max_batch: 4,
            batch_from: 2,
            ..Default::default()
        },
    );
    let plans = plans(0x5eed_2026_1202, 6);
    // Alone: one plan at a time (one reply generating, so nothing batches).
    let alone: Vec<Outcome> = plans.iter().map(|p| run(&e, p, false)).collect();
    assert_eq!(e.step_stats().ticks, 0, "a reply alone went through a tick");

    let barrier = Arc::new(Barrier::new(plans.len()));
    let together: Vec<Outcome> = std::thread::scope(|sc| {
        let handles: Vec<_> = plans
            .iter()
            .map(|plan| {
                let (e, barrier) = (e.clone(), barrier.clone());
                sc.spawn(move || {
                    barrier.wait();
                    std::thread::sleep(plan.delay);
                    run(&e, plan, true)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ticks = e.step_stats();
    println!(
        "plans {plans:?}\nstep ticks {ticks:?}, frame ticks {:?}",
        e.frame_stats()
    );

    for (i, ((plan, a), t)) in plans.iter().zip(&alone).zip(&together).enumerate() {
        match &t.cut_steps {
            None => assert!(a == t, "plan {i} {plan:?}: bytes differ beside the others"),
            Some(cut) => {
                // The turns before the cut, then the fresh turn after it.
                let whole = plan.questions.len() - 1;
                assert!(
                    a.turns[..whole] == t.turns[..whole],
                    "plan {i} {plan:?}: a turn before the cut differs"
                );
                assert!(
                    steps_prefix(cut, &a.turns[whole].1),
                    "plan {i} {plan:?}: the cut reply is not a prefix of the whole one"
                );
                assert!(
                    a.turns.last() == t.turns.last(),
                    "plan {i} {plan:?}: the fresh turn after the cut differs"
                );
            }
        }
    }
}
