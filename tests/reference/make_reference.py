#!/usr/bin/env python3
"""Runs liquid-audio 1.3.0 (LiquidAI's PyTorch reference) on the synthetic tiny LFM2-Audio
checkpoint and writes the fixture audio-engine/tests/fixtures/lfm2_tiny/reference.safetensors.

Dev-time only (CI has no Python). To rerun:

    python3.12 -m venv venv && venv/bin/pip install liquid-audio==1.3.0
    cargo run -p lfm2-audio-engine --example make_tiny_checkpoint -- /tmp/lfm2_tiny --seed 11
    venv/bin/python tests/reference/make_reference.py /tmp/lfm2_tiny \
        audio-engine/tests/fixtures/lfm2_tiny/reference.safetensors

(the seed must be `audio_engine::lfm2_audio::synthetic::DEFAULT_SEED`; the script reads the
checkpoint's bytes, not the seed, and records the seed given with --seed in the metadata).

Everything runs on the CPU in float32. The model is `LFM2AudioModel.from_pretrained(dir,
dtype=torch.float32, device="cpu")`, the processor `LFM2AudioProcessor.from_pretrained(dir,
device="cpu")`, prompts are built with liquid-audio's `ChatState(dtype=torch.float32)` exactly
as its demo does, and generation uses the model's own `generate_sequential` /
`generate_interleaved` with greedy sampling (temperature None). The detokenizer is built
directly (`LFM2AudioDetokenizer`, as `LFM2AudioProcessor.audio_detokenizer` does, without its
hard-coded `.cuda()`).

The input signal is 1.5 s at 16 kHz made with integer arithmetic only; `input_signal()` below
and `audio_engine::lfm2_audio::synthetic::tiny_input_signal` are the same formula (checked here
against spot values; the signal is stored too).

Tensors (row-major, outermost first; "frames" are time steps):
- input_signal        f32 [24000]           samples in [-1, 1)
- mel                 f32 [128, 151]        log-mel features (processor.audio), mel-major
- encoder_out         f32 [19, 64]          FastConformer output before the adapter, frame-major
                                            (liquid-audio returns [1, 64, 19]; transposed)
- adapter_out         f32 [19, 128]         audio_adapter(encoder_out): backbone input rows
- asr_prompt_ids      i64 [L]               per prompt position: token id, or -1 at audio rows
- asr_prompt_modality i64 [L]               1 text, 2 audio-in (liquid-audio's LFMModality)
- asr_prefill_embeds  f32 [L, 128]          backbone input (model._prefill)
- asr_prefill_hidden  f32 [L, 128]          backbone output after the final norm
- asr_prefill_logits  f32 [L, 640]          text logits (hidden @ embed_tokens^T) at every position
- asr_tokens          i64 [n]               greedy ASR tokens (generate_sequential), including the
                                            stopping token; metadata asr_stop says why it stopped
- asr_margins         f32 [n]               top-1 minus top-2 text logit at each ASR step
- s2s_prompt_ids, s2s_prompt_modality       the same for the S2S prompt
- s2s_steps           i64 [m, 9]            greedy interleaved S2S (generate_interleaved), one row
                                            per yielded step: text = [token, -1 x 8], audio frame
                                            = [-1, code_0 .. code_7]
- s2s_text_margins    f32 [m_text]          top-1 minus top-2 for each text step, in order
- s2s_depth_margins   f32 [m_audio, 8]      the same for each codebook of each frame
- s2s_depth_hidden    f32 [128]             backbone final-norm hidden state the first frame was
                                            generated from
- s2s_depth_logits    f32 [8, 2049]         depthformer logits of the first frame, per codebook
- detok_codes         i64 [8, T]            codes fed to the detokenizer (the first T audio frames
                                            of s2s_steps without end-of-audio frames, codebook-major)
- detok_spec          f32 [6T, 1282]        detokenizer head output (lin) before the ISTFT:
                                            641 log-magnitudes then 641 phases per row
- detok_waveform      f32 [1920 T]          24 kHz waveform
- tts_prompt_ids, tts_prompt_modality       the TTS prompt (text only: all modality 1); system
                                            TTS_SYSTEM, user turn TTS_TEXT (below)
- tts_steps           i64 [k, 9]            greedy sequential TTS (generate_sequential), one row
                                            per yielded step, laid out like s2s_steps: text
                                            tokens until <|audio_start|> (128), then frames
                                            (a frame with code_0 = 2048 is yielded as all 2048
                                            and switches back to text)
- tts_text_margins    f32 [k_text]          top-1 minus top-2 for each TTS text step, in order
- tts_depth_margins   f32 [k_audio, 8]      the same for each codebook of each TTS frame

__metadata__ (strings): seed, liquid_audio_version, torch_version, transformers_version,
checkpoint_config (config.json), digest_model / digest_detokenizer / digest_tokenizer (see
file_digest), asr_stop / s2s_stop / tts_stop ("im_end", "audio_start" or "max_steps"), the
smallest greedy margins (asr_min_margin, s2s_min_text_margin, s2s_min_depth_margin,
tts_min_text_margin, tts_min_depth_margin), tts_system / tts_prompt (the TTS system prompt and
user text), shape.<name> per tensor.

The TTS user text: a random tiny model greedily emits <|audio_start|> only for some texts, and
sequential generation produces audio only after it. TTS_TEXT was picked from the 80 texts
f"{subject}, {tail}" (subject in "Hello there", "Good morning", "The weather today", "My
favourite song", "This sentence", "A small test", "Please read this", "Welcome home", "The
train", "Our meeting"; tail in "numbers 2024 and voices.", "is quite nice.", "starts at
nine.", "sounds lovely.", "has 7 words.", "ends here!", "was late again.", "is about 42
cats."): three of them reach 128 within 32 steps ("Hello there, was late again." at step 27,
"Welcome home, has 7 words." at step 8, "The train, numbers 2024 and voices." at step 20);
TTS_TEXT is the one whose 64-step greedy run has the largest smallest margins (text 0.092,
depth 0.0094; the others go down to 0.0074 / 0.0011 and 0.020 / 0.0034).
"""

import argparse
import importlib.metadata
import json
import pathlib
import sys

import torch
from safetensors.torch import save_file

from liquid_audio.detokenizer import LFM2AudioDetokenizer
from liquid_audio.model.lfm2_audio import LFM2AudioModel
from liquid_audio.processor import ChatState, LFM2AudioProcessor
from liquid_audio.utils import LFMModality
from transformers import Lfm2Config

N_SAMPLES = 24_000
ASR_MAX_STEPS = 32
S2S_STEPS = 48
DETOK_FRAMES = 8
TTS_STEPS = 64
TTS_SYSTEM = "Perform TTS. Use the US female voice."
TTS_TEXT = "The train, numbers 2024 and voices."

# Spot values of input_signal() * 32768, shared with audio-engine/tests/synthetic_checkpoint.rs.
SIGNAL_SPOTS = {0: 408, 1: -721, 2: -932, 3: 773, 4000: -4749, 12000: 6671, 23999: -15419}


def input_signal() -> list[int]:
    """audio_engine::lfm2_audio::synthetic::tiny_input_signal, as 16-bit integers.

    Rust's integer `/` truncates toward zero and Python's `//` floors: every division here has
    non-negative operands except `(tri + sq) * env / 1024`, which uses trunc_div.
    """

    def trunc_div(a: int, b: int) -> int:
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q

    mask = (1 << 64) - 1
    lcg = 0x2545F4914F6CDD1D
    phase = 0
    out = []
    n = N_SAMPLES
    for i in range(n):
        freq = 200 + 1200 * i // n
        phase = (phase + freq * 65536 // 16000) % 65536
        tri = phase - 16384 if phase < 32768 else 49152 - phase
        period = 40 if (i // 4000) % 2 == 0 else 25
        sq = 3000 if (i % period) < period // 2 else -3000
        env = min(i * 1024 // 4000, 1024) - (600 if 10_000 <= i < 14_000 else 0)
        lcg = (lcg * 6364136223846793005 + 1442695040888963407) & mask
        noise = ((lcg >> 33) % 2001) - 1000
        v = trunc_div((tri + sq) * env, 1024) + noise
        out.append(max(-32768, min(32767, v)))
    return out


def file_digest(path: pathlib.Path) -> str:
    """Sum over the file's little-endian u64 words w_i (zero-padded) of w_i * (2i + 1), mod 2^64,
    as 16 hex digits. Cheap in numpy and in Rust; any change of a word changes it (odd factors
    are invertible mod 2^64). audio-engine/tests/common/lfm2_tiny.rs recomputes it to check that
    the regenerated checkpoint is the one this fixture was made from."""
    import numpy as np

    raw = path.read_bytes()
    raw += b"\0" * (-len(raw) % 8)
    w = np.frombuffer(raw, dtype="<u8")
    k = np.arange(len(w), dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    with np.errstate(over="ignore"):
        return f"{int(np.sum(w * k, dtype=np.uint64)):016x}"


def top2_margin(logits: torch.Tensor) -> float:
    top = torch.topk(logits.float().flatten(), 2).values
    return float(top[0] - top[1])


def prompt(processor, system: str, wave: torch.Tensor) -> ChatState:
    chat = ChatState(processor, dtype=torch.float32)
    chat.new_turn("system")
    chat.add_text(system)
    chat.end_turn()
    chat.new_turn("user")
    chat.add_audio(wave, 16_000)
    chat.end_turn()
    chat.new_turn("assistant")
    return chat


def text_prompt(processor, system: str, text: str) -> ChatState:
    """Like prompt(), with a text user turn (liquid-audio's TTS usage)."""
    chat = ChatState(processor, dtype=torch.float32)
    chat.new_turn("system")
    chat.add_text(system)
    chat.end_turn()
    chat.new_turn("user")
    chat.add_text(text)
    chat.end_turn()
    chat.new_turn("assistant")
    return chat


def prompt_rows(chat: ChatState) -> tuple[torch.Tensor, torch.Tensor]:
    flags = chat.modality_flag[0].clone()
    ids = torch.full_like(flags, -1)
    ids[flags == LFMModality.TEXT] = chat.text[0]
    return ids, flags


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint", type=pathlib.Path)
    ap.add_argument("output", type=pathlib.Path)
    ap.add_argument("--seed", type=int, default=11, help="seed the checkpoint was made with")
    args = ap.parse_args()
    torch.manual_seed(0)  # nothing here samples; set anyway so a change to that is visible
    ckpt: pathlib.Path = args.checkpoint.resolve()

    ints = input_signal()
    for i, v in SIGNAL_SPOTS.items():
        assert ints[i] == v, f"signal[{i}] = {ints[i]}, want {v}"
    wave = torch.tensor(ints, dtype=torch.float32)[None] / 32768.0

    processor = LFM2AudioProcessor.from_pretrained(ckpt, device="cpu").eval()
    model = LFM2AudioModel.from_pretrained(ckpt, dtype=torch.float32, device="cpu").eval()
    out: dict[str, torch.Tensor] = {"input_signal": wave[0].clone()}
    meta: dict[str, str] = {}

    with torch.no_grad():
        # Features, encoder, adapter (as _prefill runs them for a single audio).
        length = torch.tensor([wave.shape[1]])
        mel, mel_len = processor.audio(wave, length)
        out["mel"] = mel[0].contiguous()
        n_mel = mel.shape[2]
        # ChatState feeds all floor(n/160)+1 frames as valid (the preprocessor's own length is
        # floor(n/160)); do the same.
        assert int(mel_len[0]) == N_SAMPLES // 160 and n_mel == N_SAMPLES // 160 + 1
        enc, enc_len = model.conformer(mel, torch.tensor([n_mel]))
        out["encoder_out"] = enc[0].mT.contiguous()
        out["adapter_out"] = model.audio_adapter(enc[0].mT).contiguous()
        assert enc.shape[2] == -(-n_mel // 8) == int(enc_len[0]), (enc.shape, n_mel, enc_len)

        # ASR prompt: prefill logits and greedy decode.
        chat = prompt(processor, "Perform ASR.", wave)
        ids, flags = prompt_rows(chat)
        assert torch.equal(chat.audio_in, out["mel"]), "ChatState features differ"
        out["asr_prompt_ids"], out["asr_prompt_modality"] = ids, flags
        emb = model._prefill(**chat)
        hidden = model.lfm(inputs_embeds=emb, use_cache=False).last_hidden_state
        out["asr_prefill_embeds"] = emb[0].contiguous()
        out["asr_prefill_hidden"] = hidden[0].contiguous()
        out["asr_prefill_logits"] = (hidden[0] @ model.lfm.embed_tokens.weight.T).contiguous()
        audio_rows = (flags == LFMModality.AUDIO_IN).nonzero().flatten()
        # Same computation as above up to float reassociation (layouts differ inside _prefill).
        diff = float((emb[0, audio_rows] - out["adapter_out"]).abs().max())
        assert diff < 1e-4, f"prefill audio rows differ from the adapter output by {diff}"
        meta["adapter_vs_prefill_max_abs_diff"] = f"{diff:.3g}"

        text_margins: list[float] = []
        real_sample_text = model._sample_text_token

        def sample_text(logits, **kw):
            text_margins.append(top2_margin(logits))
            return real_sample_text(logits, **kw)

        model._sample_text_token = sample_text
        asr = []
        asr_stop = "max_steps"
        for t in model.generate_sequential(**chat, max_new_tokens=ASR_MAX_STEPS):
            assert t.numel() == 1, "ASR produced an audio frame before <|audio_start|> ended it"
            asr.append(int(t))
            if asr[-1] == 7:
                asr_stop = "im_end"
                break
            if asr[-1] == 128:
                asr_stop = "audio_start"
                break
        out["asr_tokens"] = torch.tensor(asr, dtype=torch.int64)
        out["asr_margins"] = torch.tensor(text_margins[: len(asr)], dtype=torch.float32)
        # Step 0 of the decode is the prefill's last position.
        assert int(out["asr_prefill_logits"][-1].argmax()) == asr[0]
        meta["asr_stop"] = asr_stop

        # S2S: greedy interleaved generation; record the depthformer's logits.
        text_margins.clear()
        depth_logits: list[torch.Tensor] = []
        depth_hidden: list[torch.Tensor] = []
        for i, de in enumerate(model.depth_embeddings):
            real = de.get_logits

            def get_logits(x, real=real):
                y = real(x)
                depth_logits.append(y.detach().clone())
                return y

            de.get_logits = get_logits
        real_frame = model._sample_audio_frame

        def sample_frame(embedding, **kw):
            depth_hidden.append(embedding.detach().clone())
            return real_frame(embedding, **kw)

        model._sample_audio_frame = sample_frame

        chat = prompt(processor, "Respond with interleaved text and audio.", wave)
        ids, flags = prompt_rows(chat)
        out["s2s_prompt_ids"], out["s2s_prompt_modality"] = ids, flags
        steps = []
        s2s_stop = "max_steps"
        n_yield = 0
        for t in model.generate_interleaved(**chat, max_new_tokens=S2S_STEPS):
            n_yield += 1
            if t.numel() == 1:
                steps.append([int(t)] + [-1] * 8)
            else:
                steps.append([-1] + [int(c) for c in t])
        if n_yield < S2S_STEPS:
            s2s_stop = "im_end"
        meta["s2s_stop"] = s2s_stop
        out["s2s_steps"] = torch.tensor(steps, dtype=torch.int64).reshape(-1, 9)
        n_frames = len(depth_hidden)
        assert len(depth_logits) == 8 * n_frames
        out["s2s_text_margins"] = torch.tensor(text_margins, dtype=torch.float32)
        out["s2s_depth_margins"] = torch.tensor(
            [top2_margin(x) for x in depth_logits], dtype=torch.float32
        ).reshape(n_frames, 8)
        assert n_frames > 0, "S2S produced no audio frame"
        out["s2s_depth_hidden"] = depth_hidden[0].contiguous()
        out["s2s_depth_logits"] = torch.stack(depth_logits[:8]).contiguous()
        first = next(s for s in steps if s[0] == -1)
        assert [int(x.argmax()) for x in depth_logits[:8]] == first[1:]

        # Detokenizer on the first frames (end-of-audio frames cannot be decoded).
        frames = [s[1:] for s in steps if s[0] == -1 and s[1] != 2048][:DETOK_FRAMES]
        assert len(frames) == DETOK_FRAMES, f"only {len(frames)} decodable frames"
        codes = torch.tensor(frames, dtype=torch.int64).T.contiguous()  # [8, T]
        detok_cfg = Lfm2Config.from_pretrained(ckpt / "audio_detokenizer" / "config.json")
        detok_cfg.layer_types = [
            "full_attention" if t == "sliding_attention" else t for t in detok_cfg.layer_types
        ]
        detok = LFM2AudioDetokenizer(detok_cfg).eval()
        from safetensors.torch import load_file

        detok.load_state_dict(load_file(ckpt / "audio_detokenizer" / "model.safetensors"))
        spec: list[torch.Tensor] = []
        detok.lin.register_forward_hook(lambda m, i, o: spec.append(o.detach().clone()))
        wav = detok(codes[None])
        out["detok_codes"] = codes
        out["detok_spec"] = spec[0][0].contiguous()
        out["detok_waveform"] = wav[0].contiguous()
        assert wav.shape[1] == 1920 * DETOK_FRAMES, wav.shape

        # TTS: greedy sequential generation from a text prompt (the hooks above still record).
        text_margins.clear()
        depth_logits.clear()
        depth_hidden.clear()
        chat = text_prompt(processor, TTS_SYSTEM, TTS_TEXT)
        ids, flags = prompt_rows(chat)
        assert bool((flags == LFMModality.TEXT).all()) and chat.audio_in.shape[1] == 0
        out["tts_prompt_ids"], out["tts_prompt_modality"] = ids, flags
        tts = []
        for t in model.generate_sequential(
            **chat,
            max_new_tokens=TTS_STEPS,
            text_temperature=None,
            text_top_k=1,
            audio_temperature=None,
            audio_top_k=1,
        ):
            if t.numel() == 1:
                tts.append([int(t)] + [-1] * 8)
            else:
                tts.append([-1] + [int(c) for c in t])
        tts_stop = "im_end" if tts[-1][0] == 7 else "max_steps"
        assert tts_stop == "im_end" or len(tts) == TTS_STEPS
        meta["tts_stop"] = tts_stop
        out["tts_steps"] = torch.tensor(tts, dtype=torch.int64).reshape(-1, 9)
        n_tts_frames = sum(1 for s in tts if s[0] == -1)
        assert len(depth_logits) == 8 * n_tts_frames == 8 * len(depth_hidden)
        assert len(text_margins) == len(tts) - n_tts_frames
        out["tts_text_margins"] = torch.tensor(text_margins, dtype=torch.float32)
        out["tts_depth_margins"] = torch.tensor(
            [top2_margin(x) for x in depth_logits], dtype=torch.float32
        ).reshape(n_tts_frames, 8)

    # Sanity: the fixture must exercise something.
    assert len(set(asr)) > 1 or asr_stop != "max_steps", f"ASR tokens all equal: {asr}"
    kinds = {s[0] == -1 for s in steps}
    assert kinds == {True, False}, "S2S must have text and audio steps"
    codes_seen = {c for s in steps if s[0] == -1 for c in s[1:]}
    assert len(codes_seen) > 8, f"audio codes barely vary: {codes_seen}"
    assert len(tts) >= 40, f"TTS recorded only {len(tts)} steps"
    first_audio = next(i for i, s in enumerate(tts) if s[0] == 128)  # StopIteration: no audio
    assert tts[first_audio + 1][0] == -1 and n_tts_frames >= 16, "TTS produced too few frames"

    meta.update(
        seed=str(args.seed),
        liquid_audio_version=importlib.metadata.version("liquid-audio"),
        torch_version=torch.__version__,
        transformers_version=importlib.metadata.version("transformers"),
        checkpoint_config=(ckpt / "config.json").read_text(),
        digest_model=file_digest(ckpt / "model.safetensors"),
        digest_detokenizer=file_digest(ckpt / "audio_detokenizer" / "model.safetensors"),
        digest_tokenizer=file_digest(ckpt / "tokenizer.json"),
        asr_min_margin=f"{float(out['asr_margins'].min()):.6g}",
        s2s_min_text_margin=f"{float(out['s2s_text_margins'].min()):.6g}",
        s2s_min_depth_margin=f"{float(out['s2s_depth_margins'].min()):.6g}",
        tts_min_text_margin=f"{float(out['tts_text_margins'].min()):.6g}",
        tts_min_depth_margin=f"{float(out['tts_depth_margins'].min()):.6g}",
        tts_system=TTS_SYSTEM,
        tts_prompt=TTS_TEXT,
        produced_by="tests/reference/make_reference.py; see its header for each tensor's layout",
        asr_prompt="<|startoftext|><|im_start|>system\\nPerform ASR.<|im_end|>\\n"
        "<|im_start|>user\\n[audio]<|im_end|>\\n<|im_start|>assistant\\n",
        s2s_prompt="system 'Respond with interleaved text and audio.', same layout",
    )
    for name, t in out.items():
        meta[f"shape.{name}"] = str(list(t.shape))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in out.items()}, str(args.output), metadata=meta)

    size = args.output.stat().st_size
    print(f"wrote {args.output} ({size} bytes)")
    print(f"mel frames {n_mel}, encoder frames {enc.shape[2]}")
    print(f"asr ({asr_stop}): {asr}")
    print(f"asr margins min {meta['asr_min_margin']}; s2s text {meta['s2s_min_text_margin']}, "
          f"depth {meta['s2s_min_depth_margin']}")
    print("s2s:", [s[0] if s[0] != -1 else tuple(s[1:]) for s in steps])
    print("decoded:", processor.text.decode([t for t in asr]))
    print(f"tts ({tts_stop}, {n_tts_frames} frames, margins min text "
          f"{meta['tts_min_text_margin']}, depth {meta['tts_min_depth_margin']}):",
          [s[0] if s[0] != -1 else tuple(s[1:]) for s in tts])
    assert size < 2_000_000, "fixture too large"
    return 0


if __name__ == "__main__":
    sys.exit(main())
