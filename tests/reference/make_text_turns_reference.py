#!/usr/bin/env python3
"""Runs liquid-audio 1.3.0 on the synthetic tiny LFM2-Audio checkpoint for conversations that
mix typed and spoken questions, and writes the fixture
audio-engine/tests/fixtures/lfm2_tiny/text_turns_reference.safetensors (read by
audio-engine/tests/text_turns.rs).

Dev-time only (CI has no Python). The checkpoint is the one make_reference.py ran on (same
digests, recorded here too); to rerun:

    cargo run -p lfm2-audio-engine --example make_tiny_checkpoint -- /tmp/lfm2_tiny --seed 11
    venv/bin/python tests/reference/make_text_turns_reference.py /tmp/lfm2_tiny \
        audio-engine/tests/fixtures/lfm2_tiny/text_turns_reference.safetensors

Everything runs on the CPU in float32, as make_reference.py does (model, processor, greedy
`generate_interleaved`). Each conversation is held in one liquid-audio `ChatState`, built the
way liquid-audio's own multi-turn demo (`liquid_audio/demo/chat.py`) does: the system turn, then
per turn `new_turn("user")`, `add_text(question)` or `add_audio(wave, 16000)`, `end_turn()`,
`new_turn("assistant")`; the generated reply goes back with `ChatState.append(text, audio_out,
modality_flag)` (every yielded step, in order: text tokens as TEXT, frames, end-of-audio ones
included, as AUDIO_OUT) then `end_turn()`. A typed assistant reply (a text-only item of the
history) is `add_text(reply)` inside the assistant turn.

Conversations (system prompt SYSTEM, the engine's default S2S system prompt; the texts and the
first question's length were picked among a few tried for clear greedy margins, MIN_MARGIN):
- `two`: turn 1 the typed question TWO_Q1, its greedy reply (REPLY_STEPS steps, cut there);
  turn 2 the spoken question `input_signal` (make_reference.py's 1.5 s signal), answered.
- `three`: turn 1 the spoken question `input_signal[:THREE_Q1_SAMPLES]`, its greedy reply
  (REPLY_STEPS steps); turn 2 the typed question THREE_Q2 with the typed assistant reply
  THREE_R2; turn 3 the typed question THREE_Q3, answered.

Tensors per conversation c (row-major, outermost first):
- {c}_reply{t}_steps   i64 [n, 9]  turn t's greedy reply (t < last turn): text `[tok, -1 x8]`,
                                   frame `[-1, c0..c7]`; the reply the next turn's history holds
- {c}_prompt_ids       i64 [L]     the last turn's prompt: token id per position, -1 elsewhere
- {c}_prompt_modality  i64 [L]     1 text, 2 audio-in, 3 audio-out (liquid-audio's LFMModality)
- {c}_prompt_codes     i64 [F, 8]  the audio-out positions' codes, in order
- {c}_steps            i64 [m, 9]  the last turn's greedy interleaved steps (LAST_STEPS), rows
                                   as above

__metadata__: system, two_q1, three_q1_samples, three_q2, three_r2, three_q3, the checkpoint's
digests (digest_model, digest_tokenizer; make_reference.py's file_digest), the smallest greedy
margins over every generated step (min_text_margin, min_depth_margin), liquid_audio_version,
torch_version, shape.<name>.
"""

import argparse
import importlib.metadata
import pathlib
import sys

import torch
from safetensors.torch import save_file

from liquid_audio.model.lfm2_audio import LFM2AudioModel
from liquid_audio.processor import ChatState, LFM2AudioProcessor
from liquid_audio.utils import LFMModality

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_reference import file_digest, input_signal, top2_margin  # noqa: E402

SYSTEM = "Respond with interleaved text and audio."
REPLY_STEPS = 12
LAST_STEPS = 16
TWO_Q1 = "What is the weather like?"
THREE_Q1_SAMPLES = 20_000
THREE_Q2 = "Say that again, slowly."
THREE_R2 = "Sure, here it is."
THREE_Q3 = "What about tomorrow?"
# why: a random tiny model's greedy choices can be near ties, which float reassociation between
# liquid-audio and the engine may flip; the questions above were picked (among a few tried) so
# that every greedy choice wins by at least this (the smallest are recorded in the metadata).
MIN_MARGIN = 0.01


class Margins:
    """Records the greedy top-1 minus top-2 margin of every text token and codebook sampled."""

    def __init__(self, model):
        self.text: list[float] = []
        self.depth: list[float] = []
        real_text = model._sample_text_token

        def sample_text(logits, **kw):
            self.text.append(top2_margin(logits))
            return real_text(logits, **kw)

        model._sample_text_token = sample_text
        for de in model.depth_embeddings:
            real = de.get_logits

            def get_logits(x, real=real):
                y = real(x)
                self.depth.append(top2_margin(y))
                return y

            de.get_logits = get_logits


def generate(model, chat: ChatState, n: int) -> list[list[int]]:
    """Greedy interleaved steps, as rows `[tok, -1 x8]` / `[-1, c0..c7]`."""
    rows = []
    for t in model.generate_interleaved(**chat, max_new_tokens=n):
        rows.append([int(t)] + [-1] * 8 if t.numel() == 1 else [-1] + [int(c) for c in t])
    return rows


def append_reply(chat: ChatState, rows: list[list[int]]) -> None:
    """liquid-audio's demo: the reply's steps back into the chat, then the turn's end."""
    text = [r[0] for r in rows if r[0] != -1]
    frames = [r[1:] for r in rows if r[0] == -1]
    flags = [LFMModality.TEXT if r[0] != -1 else LFMModality.AUDIO_OUT for r in rows]
    chat.append(
        text=torch.tensor([text], dtype=torch.long),
        audio_out=torch.tensor(frames, dtype=torch.long).T.reshape(8, len(frames)),
        modality_flag=torch.tensor(flags, dtype=torch.long),
    )
    chat.end_turn()


def user_turn(chat: ChatState, question) -> None:
    chat.new_turn("user")
    if isinstance(question, str):
        chat.add_text(question)
    else:
        chat.add_audio(question, 16_000)
    chat.end_turn()
    chat.new_turn("assistant")


def record_prompt(out: dict, name: str, chat: ChatState) -> None:
    flags = chat.modality_flag[0].clone()
    ids = torch.full_like(flags, -1)
    ids[flags == LFMModality.TEXT] = chat.text[0]
    out[f"{name}_prompt_ids"], out[f"{name}_prompt_modality"] = ids, flags
    out[f"{name}_prompt_codes"] = chat.audio_out.T.contiguous().to(torch.int64)


def steps_tensor(rows: list[list[int]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.int64).reshape(-1, 9)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint", type=pathlib.Path)
    ap.add_argument("output", type=pathlib.Path)
    args = ap.parse_args()
    torch.manual_seed(0)
    ckpt: pathlib.Path = args.checkpoint.resolve()

    wave = torch.tensor(input_signal(), dtype=torch.float32)[None] / 32768.0
    processor = LFM2AudioProcessor.from_pretrained(ckpt, device="cpu").eval()
    model = LFM2AudioModel.from_pretrained(ckpt, dtype=torch.float32, device="cpu").eval()
    margins = Margins(model)
    out: dict[str, torch.Tensor] = {}

    def new_chat() -> ChatState:
        chat = ChatState(processor, dtype=torch.float32)
        chat.new_turn("system")
        chat.add_text(SYSTEM)
        chat.end_turn()
        return chat

    with torch.no_grad():
        # two: typed, then spoken.
        chat = new_chat()
        user_turn(chat, TWO_Q1)
        reply = generate(model, chat, REPLY_STEPS)
        out["two_reply1_steps"] = steps_tensor(reply)
        append_reply(chat, reply)
        user_turn(chat, wave)
        record_prompt(out, "two", chat)
        out["two_steps"] = steps_tensor(generate(model, chat, LAST_STEPS))

        # three: spoken, typed with a typed reply, typed.
        chat = new_chat()
        user_turn(chat, wave[:, :THREE_Q1_SAMPLES])
        reply = generate(model, chat, REPLY_STEPS)
        out["three_reply1_steps"] = steps_tensor(reply)
        append_reply(chat, reply)
        user_turn(chat, THREE_Q2)
        chat.add_text(THREE_R2)
        chat.end_turn()
        user_turn(chat, THREE_Q3)
        record_prompt(out, "three", chat)
        out["three_steps"] = steps_tensor(generate(model, chat, LAST_STEPS))

    # Sanity: every conversation has each modality where it should, and replies of both kinds.
    for c, want in (("two", {1, 2, 3}), ("three", {1, 2, 3})):
        assert set(out[f"{c}_prompt_modality"].tolist()) == want, c
        kinds = {r[0] == -1 for r in out[f"{c}_steps"].tolist()}
        assert kinds == {True, False}, f"{c}: the last reply must have text and audio steps"
        assert len(out[f"{c}_steps"]) == LAST_STEPS, f"{c} stopped early"
    for name in ("two_reply1_steps", "three_reply1_steps"):
        assert len(out[name]) == REPLY_STEPS, f"{name} stopped early"

    meta = dict(
        system=SYSTEM,
        two_q1=TWO_Q1,
        three_q1_samples=str(THREE_Q1_SAMPLES),
        three_q2=THREE_Q2,
        three_r2=THREE_R2,
        three_q3=THREE_Q3,
        digest_model=file_digest(ckpt / "model.safetensors"),
        digest_tokenizer=file_digest(ckpt / "tokenizer.json"),
        min_text_margin=f"{min(margins.text):.6g}",
        min_depth_margin=f"{min(margins.depth):.6g}",
        liquid_audio_version=importlib.metadata.version("liquid-audio"),
        torch_version=torch.__version__,
        produced_by="tests/reference/make_text_turns_reference.py; see its header",
    )
    for name, t in out.items():
        meta[f"shape.{name}"] = str(list(t.shape))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in out.items()}, str(args.output), metadata=meta)
    size = args.output.stat().st_size
    print(f"wrote {args.output} ({size} bytes)")
    print(f"margins min: text {meta['min_text_margin']}, depth {meta['min_depth_margin']}")
    for name, t in out.items():
        print(name, list(t.shape))
    assert size < 100_000, "fixture too large"
    assert min(margins.text) > MIN_MARGIN and min(margins.depth) > MIN_MARGIN, "near ties"
    return 0


if __name__ == "__main__":
    sys.exit(main())
