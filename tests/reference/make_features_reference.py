#!/usr/bin/env python3
"""Writes the log-mel reference fixtures for audio-engine/tests/features.rs.

Dev-time only (CI has no Python). Needs liquid-audio 1.3.0:

    python3.12 -m venv venv && venv/bin/pip install liquid-audio==1.3.0
    venv/bin/python tests/reference/make_features_reference.py

The features come from liquid-audio's own preprocessor,
`liquid_audio.model.conformer.processor.AudioToMelSpectrogramPreprocessor` (a copy of NeMo's),
built the way `liquid_audio.processor.LFM2AudioProcessor` builds it: from the checkpoint's
`config.json` "preprocessor" section, put in eval mode (which disables dither).

Test signals are computed from closed formulas in f64 with math.sin (libm, as Rust's f64::sin)
and an integer LCG for noise, then rounded to f32; audio-engine/tests/features.rs has the same
formulas.

Two references are written:
- `<name>.bin`: liquid-audio's preprocessor as it runs (f32). It carries the f32 rounding of
  torch's FFT, matmul and reductions, about 1e-5 of the largest value on these signals (more in mel
  bins whose energy is close to the 2^-24 log guard, which is why every signal has a noise floor).
- `<name>.f64ref.bin` (a subset): the same liquid-audio code run in float64 (window, filterbank and
  signal promoted; the float32 cast in `forward` bypassed). It isolates the algorithm from f32
  rounding: the Rust features, computed in f64, agree with it to ~1e-13 before their final f32
  rounding.

Each fixture is:

    bytes 0..4    magic b"LMF1"
    u32 LE        n_samples of the input signal
    u32 LE        n_mels (128)
    u32 LE        n_frames
    f32 LE x n_mels*n_frames   features, mel-major (row m holds frames 0..n_frames)
"""

import math
import pathlib
import struct

import numpy as np
import torch

from liquid_audio.model.conformer.processor import AudioToMelSpectrogramPreprocessor

# The "preprocessor" section of LFM2-Audio / LFM2.5-Audio config.json.
PREPROCESSOR_CONFIG = dict(
    sample_rate=16000,
    normalize="per_feature",
    window_size=0.025,
    window_stride=0.01,
    window="hann",
    features=128,
    n_fft=512,
    log=True,
    frame_splicing=1,
    dither=1e-5,
    pad_to=0,
    pad_value=0.0,
)

SR = 16000
OUT_DIR = pathlib.Path(__file__).resolve().parents[2] / "audio-engine/tests/fixtures/features"


class Lcg:
    """64-bit LCG (Knuth MMIX constants); 24-bit outputs mapped exactly onto [-1, 1)."""

    def __init__(self, seed: int):
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def next(self) -> float:
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        return (self.state >> 40) / 8388608.0 - 1.0


def chirp_noise() -> list[float]:
    # 1.37 s linear chirp 100 Hz -> 7000 Hz plus 60 Hz hum and white noise. The hum keeps the
    # lowest mel bins (which pre-emphasis attenuates) well above the reference's f32 rounding.
    n = 21920
    dur = n / SR
    rng = Lcg(1)
    out = []
    for i in range(n):
        t = i / SR
        phase = 2.0 * math.pi * (100.0 * t + (7000.0 - 100.0) * t * t / (2.0 * dur))
        hum = 0.05 * math.sin(2.0 * math.pi * 60.0 * t)
        out.append(0.5 * math.sin(phase) + hum + 0.05 * rng.next())
    return out


def tone440() -> list[float]:
    # 0.5 s 440 Hz tone with a low noise floor (keeps every mel bin well above the log guard,
    # where f32 rounding in the reference would otherwise dominate).
    n = 8000
    rng = Lcg(2)
    return [0.3 * math.sin(2.0 * math.pi * 440.0 * i / SR) + 0.01 * rng.next() for i in range(n)]


def odd_length() -> list[float]:
    # 12345 samples (not a multiple of 160): two tones under a slow envelope, clicks, noise.
    n = 12345
    rng = Lcg(3)
    out = []
    for i in range(n):
        t = i / SR
        env = 0.5 + 0.5 * math.sin(2.0 * math.pi * 1.5 * t)
        v = env * (0.2 * math.sin(2.0 * math.pi * 300.0 * t) + 0.1 * math.sin(2.0 * math.pi * 2500.0 * t))
        if i % 1000 == 0:
            v += 0.8
        out.append(v + 0.02 * rng.next())
    return out


def short() -> list[float]:
    # 479 samples: two valid frames, the fewest for which the normalisation is defined.
    rng = Lcg(4)
    return [0.1 * math.sin(2.0 * math.pi * 1000.0 * i / SR) + 0.05 * rng.next() for i in range(479)]


SIGNALS = {
    "chirp_noise": chirp_noise,
    "tone440": tone440,
    "odd_length": odd_length,
    "short": short,
}


# Signals that also get a float64 reference (kept to a subset to keep the fixtures small).
F64_SIGNALS = ("tone440", "odd_length", "short")


def float64_featurizer():
    """liquid-audio's FilterbankFeatures with every buffer and the STFT window in float64."""
    proc = AudioToMelSpectrogramPreprocessor(**PREPROCESSOR_CONFIG).eval()
    fz = proc.featurizer
    fz.to(torch.float64)
    fz.window = torch.hann_window(fz.win_length, periodic=False, dtype=torch.float64)

    def stft64(x):
        # FilterbankFeatures.stft with the window left in float64.
        return torch.stft(
            x,
            n_fft=fz.n_fft,
            hop_length=fz.hop_length,
            win_length=fz.win_length,
            center=True,
            window=fz.window,
            return_complex=True,
            pad_mode="constant",
        )

    fz.stft = stft64
    return fz


def write_fixture(path: pathlib.Path, n_samples: int, mel: np.ndarray) -> None:
    mel = np.ascontiguousarray(mel.astype("<f4"))
    n_mels, n_frames = mel.shape
    assert n_mels == 128 and n_frames == n_samples // 160 + 1, mel.shape
    with path.open("wb") as f:
        f.write(b"LMF1")
        f.write(struct.pack("<III", n_samples, n_mels, n_frames))
        f.write(mel.tobytes())


def main() -> None:
    proc = AudioToMelSpectrogramPreprocessor(**PREPROCESSOR_CONFIG).eval()
    assert not proc.training and not proc.featurizer.training  # eval mode: no dither
    fz64 = float64_featurizer()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for name, make in SIGNALS.items():
        wave = np.asarray(make(), dtype=np.float64).astype(np.float32)
        n = wave.shape[0]
        length = torch.tensor([n], dtype=torch.long)
        mel, mel_len = proc(torch.from_numpy(wave).unsqueeze(0), length)
        assert int(mel_len[0]) == n // 160
        mel = mel[0].numpy()
        write_fixture(OUT_DIR / f"{name}.bin", n, mel)
        line = f"{name}: {n} samples, {mel.shape[1]} frames, max|feat| {float(np.abs(mel).max()):.4f}"
        if name in F64_SIGNALS:
            x64 = torch.from_numpy(wave.astype(np.float64)).unsqueeze(0)
            mel64, _ = fz64(x64, length)
            mel64 = mel64[0].numpy()
            write_fixture(OUT_DIR / f"{name}.f64ref.bin", n, mel64)
            rel = float(np.abs(mel.astype(np.float64) - mel64).max() / np.abs(mel64).max())
            line += f", f32 vs f64 reference {rel:.2e}"
        # The input checksum catches formula drift between the two languages.
        line += f", input sum {float(np.sum(wave.astype(np.float64))):.9f}"
        print(line)


if __name__ == "__main__":
    main()
