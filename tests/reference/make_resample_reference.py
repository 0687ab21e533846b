#!/usr/bin/env python3
"""Runs liquid-audio 1.3.0 on 44.1 kHz and 48 kHz stereo WAVs (resampling, features, greedy ASR
on the synthetic tiny checkpoint) and writes the fixture
audio-engine/tests/fixtures/lfm2_tiny/resample_reference.safetensors, which
audio-engine/tests/resample_reference.rs checks the engine against.

Dev-time only (CI has no Python). To rerun:

    python3.12 -m venv venv && venv/bin/pip install liquid-audio==1.3.0
    cargo run -p lfm2-audio-engine --example make_tiny_checkpoint -- /tmp/lfm2_tiny --seed 11
    venv/bin/python tests/reference/make_resample_reference.py /tmp/lfm2_tiny \
        audio-engine/tests/fixtures/lfm2_tiny/resample_reference.safetensors

(the same checkpoint as make_reference.py's; its digests are recorded and the Rust test checks
them against reference.safetensors'). Everything runs on the CPU in float32.

The path through liquid-audio is the one a WAV upload takes there:
1. `stereo_signal(rate)` below: 2.0 s of two-channel 16-bit samples from integer arithmetic
   only (audio-engine/tests/resample_reference.rs has the same formula). Left: a triangle
   sweeping 200 -> 1400 Hz, a 400 / 640 Hz square and a 60 Hz triangle hum under an envelope
   with a dip, plus noise (the hum keeps the lowest mel bins, which pre-emphasis attenuates,
   well above the float32 rounding of liquid-audio's preprocessor).
   Right: a triangle sweeping 2 -> 7.6 kHz (through the 16 kHz band edge), a square at a quarter
   of the rate (11.025 / 12 kHz: above 8 kHz, so only the anti-aliasing filter's stop band
   decides what is left of it), and louder noise (full band).
2. Written as a 32-bit float stereo WAV (sample / 32768, exact) with soundfile and read back with
   liquid-audio's own loader, `LFM2AudioChatMapper._load_audio_bytes` (soundfile float32,
   channels averaged with `wav.mean(dim=0)`).
3. `ChatState.add_audio(wave, rate)`, which resamples with
   `torchaudio.functional.resample(wave, rate, 16000)` (defaults: sinc_interp_hann, width 6,
   rolloff 0.99; float32 in, so torchaudio builds a float32 kernel) and computes the log-mel
   features with the processor. The same resample call is made here to record its output, and
   the features are checked to be ChatState's bit for bit. The same preprocessor is also run in
   float64 (make_features_reference.py's float64_featurizer) on that resampled signal, to
   separate the resampler's share of any feature difference from the float32 rounding of
   liquid-audio's preprocessor (about 1e-5 of the largest feature).
4. Greedy ASR as make_reference.py runs it: system "Perform ASR.", the audio as the user turn,
   `model.generate_sequential` with greedy sampling, up to ASR_MAX_STEPS tokens, stopping at
   <|im_end|> (7) or <|audio_start|> (128); the top-1 minus top-2 text logit at each step.

Tensors, for each rate R in (44100, 48000) (row-major, outermost first):
- r{R}_resampled   f32 [32000]       torchaudio.functional.resample(mono, R, 16000)
- r{R}_mel         f32 [128, 201]    log-mel features of that (processor.audio), mel-major
- r{R}_mel_f64     f32 [128, 201]    the same preprocessor in float64 on the same (float32)
                                     resampled signal, rounded to f32 at the end
- r{R}_asr_tokens  i64 [n]           greedy ASR tokens, including a stopping token
- r{R}_asr_margins f32 [n]           top-1 minus top-2 text logit per ASR step

__metadata__ (strings): seed, liquid_audio_version, torch_version, torchaudio_version,
transformers_version, soundfile_version, digest_model / digest_detokenizer / digest_tokenizer
(make_reference.py's file_digest of the checkpoint files), r{R}_digest_mono (file_digest of the
mono float32 samples at rate R as little-endian bytes: the loader's output, before resampling),
r{R}_asr_stop, r{R}_asr_min_margin, length_cases (JSON list of [rate, n_in, torchaudio's n_out,
exact ceil(16000 n_in / rate)] for zero inputs, some chosen where torchaudio's float32 length
rounding gives one sample fewer than the exact ceiling), shape.<name> per tensor. (safetensors
writes the metadata in no fixed order, so a rerun gives the same tensors and values but not the
same bytes.)

The signal was chosen (hum frequency, level, under the envelope) among a few variants for greedy
margins well clear of float rounding (smallest 0.076 at 44.1 kHz, 0.039 at 48 kHz) and a float32
preprocessor rounding near 1e-5.
"""

import argparse
import importlib.metadata
import io
import json
import pathlib
import sys

import numpy as np
import soundfile
import torch
import torchaudio
from safetensors.torch import save_file

from liquid_audio.data.mapper import LFM2AudioChatMapper
from liquid_audio.model.lfm2_audio import LFM2AudioModel
from liquid_audio.processor import ChatState, LFM2AudioProcessor

from make_features_reference import PREPROCESSOR_CONFIG, float64_featurizer
from make_reference import file_digest, top2_margin

RATES = (44_100, 48_000)
SECONDS = 2
ASR_MAX_STEPS = 40

# Spot values (left, right) of stereo_signal(); audio-engine/tests/resample_reference.rs
# asserts the same ones.
SIGNAL_SPOTS = {
    44_100: {0: (408, 2269), 1: (-721, 1152), 30_000: (2932, -4640), 88_199: (6544, -863)},
    48_000: {0: (408, 2269), 1: (-721, 1152), 30_000: (6742, 5926), 95_999: (-17, -3435)},
}


def trunc_div(a: int, b: int) -> int:
    """Rust's integer `/` (truncates toward zero); Python's `//` floors."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def triangle(phase: int) -> int:
    """Triangle in [-16384, 16384] of a phase in 1/65536 of a period."""
    return phase - 16384 if phase < 32768 else 49152 - phase


def stereo_signal(rate: int) -> tuple[list[int], list[int]]:
    """Two channels of 16-bit samples, SECONDS long at `rate`. Every division has non-negative
    operands except the two envelope products, which use trunc_div."""
    mask = (1 << 64) - 1
    lcg = 0x2545F4914F6CDD1D
    n = SECONDS * rate
    quarter = rate // 4
    phase_l = phase_r = phase_h = 0
    left, right = [], []
    for i in range(n):
        # Left: triangle sweeping 200 -> 1400 Hz, square at 400 / 640 Hz alternating every
        # quarter second.
        phase_l = (phase_l + (200 + 1200 * i // n) * 65536 // rate) % 65536
        period = rate // 400 if (i // quarter) % 2 == 0 else rate // 640
        sq = 3000 if i % period < period // 2 else -3000
        # Right: triangle sweeping 2000 -> 7600 Hz, square at rate / 4.
        phase_r = (phase_r + (2000 + 5600 * i // n) * 65536 // rate) % 65536
        hf = 1500 if i % 4 < 2 else -1500
        # 60 Hz triangle hum (left, under the envelope).
        phase_h = (phase_h + 60 * 65536 // rate) % 65536
        # Envelope: rises over a quarter second, dips in the middle sixth, in 1/1024 steps.
        env = min(i * 1024 // quarter, 1024) - (600 if 5 * n // 12 <= i < 7 * n // 12 else 0)
        lcg = (lcg * 6364136223846793005 + 1442695040888963407) & mask
        noise_l = ((lcg >> 33) % 2001) - 1000
        noise_r = ((lcg >> 11) % 4001) - 2000
        hum = trunc_div(triangle(phase_h), 4)
        lv = trunc_div((triangle(phase_l) + sq + hum) * env, 1024) + noise_l
        rv = trunc_div(triangle(phase_r) * env, 2048) + hf + noise_r
        left.append(max(-32768, min(32767, lv)))
        right.append(max(-32768, min(32767, rv)))
    return left, right


def samples_digest(x: np.ndarray) -> str:
    """file_digest of the samples' little-endian float32 bytes."""
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".f32") as f:
        f.write(np.ascontiguousarray(x, dtype="<f4").tobytes())
        f.flush()
        return file_digest(pathlib.Path(f.name))


def prompt(processor, system: str, wave: torch.Tensor, rate: int) -> ChatState:
    """make_reference.py's prompt(), with the audio at `rate`."""
    chat = ChatState(processor, dtype=torch.float32)
    chat.new_turn("system")
    chat.add_text(system)
    chat.end_turn()
    chat.new_turn("user")
    chat.add_audio(wave, rate)
    chat.end_turn()
    chat.new_turn("assistant")
    return chat


def length_cases() -> list[list[int]]:
    """torchaudio's output length for zero inputs of chosen lengths."""
    cases = [(44_100, 88_200), (48_000, 96_000), (44_100, 1), (48_000, 2), (22_050, 7)]
    # 44.1 kHz: n with 160 n = 1 (mod 441) gives 16000 n / 44100 = k + 1/441; past 2^16 float32
    # cannot hold the 1/441 and torchaudio's ceil gives k. 22.05 kHz likewise (320 n = 1).
    for rate, new, orig in ((44_100, 160, 441), (22_050, 320, 441)):
        n0 = pow(new, -1, orig)
        q = (70_000 * orig // new) // orig + 1
        cases.append((rate, n0 + q * orig))
        cases.append((rate, n0 + q * orig + 1))
    out = []
    for rate, n in cases:
        y = torchaudio.functional.resample(torch.zeros(1, n), rate, 16_000)
        out.append([rate, n, int(y.shape[-1]), -(-16_000 * n // rate)])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint", type=pathlib.Path)
    ap.add_argument("output", type=pathlib.Path)
    ap.add_argument("--seed", type=int, default=11, help="seed the checkpoint was made with")
    args = ap.parse_args()
    torch.manual_seed(0)  # nothing here samples; set anyway so a change to that is visible
    ckpt: pathlib.Path = args.checkpoint.resolve()

    processor = LFM2AudioProcessor.from_pretrained(ckpt, device="cpu").eval()
    config = json.loads((ckpt / "config.json").read_text())["preprocessor"]
    assert config == PREPROCESSOR_CONFIG, f"preprocessor config {config}"
    fz64 = float64_featurizer()
    model = LFM2AudioModel.from_pretrained(ckpt, dtype=torch.float32, device="cpu").eval()

    text_margins: list[float] = []
    real_sample_text = model._sample_text_token

    def sample_text(logits, **kw):
        text_margins.append(top2_margin(logits))
        return real_sample_text(logits, **kw)

    model._sample_text_token = sample_text

    out: dict[str, torch.Tensor] = {}
    meta: dict[str, str] = {}
    report = []
    for rate in RATES:
        left, right = stereo_signal(rate)
        for i, (lv, rv) in SIGNAL_SPOTS[rate].items():
            assert (left[i], right[i]) == (lv, rv), f"{rate}: signal[{i}] = {(left[i], right[i])}"
        # A float32 stereo WAV, read back by liquid-audio's loader.
        frames = np.stack([np.array(left), np.array(right)], axis=1).astype(np.float32) / 32768.0
        buf = io.BytesIO()
        soundfile.write(buf, frames, rate, subtype="FLOAT", format="WAV")
        wave, sr = LFM2AudioChatMapper._load_audio_bytes(buf.getvalue())
        assert sr == rate and wave.dtype == torch.float32 and wave.shape == (1, SECONDS * rate)
        meta[f"r{rate}_digest_mono"] = samples_digest(wave[0].numpy())

        with torch.no_grad():
            resampled = torchaudio.functional.resample(wave, rate, 16_000)
            assert resampled.shape == (1, SECONDS * 16_000), resampled.shape
            mel, _ = processor.audio(resampled, torch.tensor([resampled.shape[1]]))
            out[f"r{rate}_resampled"] = resampled[0].contiguous()
            out[f"r{rate}_mel"] = mel[0].contiguous()
            mel64, _ = fz64(resampled.double(), torch.tensor([resampled.shape[1]]))
            out[f"r{rate}_mel_f64"] = mel64[0].float().contiguous()
            rel32 = float((mel[0].double() - mel64[0]).abs().max() / mel64.abs().max())

            chat = prompt(processor, "Perform ASR.", wave, rate)
            assert torch.equal(chat.audio_in, mel[0]), "ChatState features differ"
            text_margins.clear()
            asr = []
            stop = "max_steps"
            for t in model.generate_sequential(**chat, max_new_tokens=ASR_MAX_STEPS):
                assert t.numel() == 1, "ASR produced an audio frame"
                asr.append(int(t))
                if asr[-1] in (7, 128):
                    stop = "im_end" if asr[-1] == 7 else "audio_start"
                    break
        out[f"r{rate}_asr_tokens"] = torch.tensor(asr, dtype=torch.int64)
        margins = torch.tensor(text_margins[: len(asr)], dtype=torch.float32)
        out[f"r{rate}_asr_margins"] = margins
        meta[f"r{rate}_asr_stop"] = stop
        meta[f"r{rate}_asr_min_margin"] = f"{float(margins.min()):.6g}"
        assert len(set(asr)) > 1, f"{rate}: ASR tokens all equal: {asr}"
        report.append(
            f"{rate} Hz: resampled max|x| {float(resampled.abs().max()):.4f}, "
            f"mel max|f| {float(mel.abs().max()):.4f} (float32 vs float64 preprocessor "
            f"{rel32:.2e}), asr ({stop}, min margin "
            f"{meta[f'r{rate}_asr_min_margin']}): {asr}"
        )

    meta.update(
        seed=str(args.seed),
        liquid_audio_version=importlib.metadata.version("liquid-audio"),
        torch_version=torch.__version__,
        torchaudio_version=torchaudio.__version__,
        transformers_version=importlib.metadata.version("transformers"),
        soundfile_version=soundfile.__version__,
        digest_model=file_digest(ckpt / "model.safetensors"),
        digest_detokenizer=file_digest(ckpt / "audio_detokenizer" / "model.safetensors"),
        digest_tokenizer=file_digest(ckpt / "tokenizer.json"),
        length_cases=json.dumps(length_cases()),
        produced_by="tests/reference/make_resample_reference.py; see its header",
    )
    for name, t in out.items():
        meta[f"shape.{name}"] = str(list(t.shape))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in out.items()}, str(args.output), metadata=meta)

    size = args.output.stat().st_size
    print(f"wrote {args.output} ({size} bytes)")
    for line in report:
        print(line)
    print("length cases [rate, n_in, torchaudio, exact ceil]:", meta["length_cases"])
    assert size < 1_000_000, "fixture too large"
    return 0


if __name__ == "__main__":
    sys.exit(main())
