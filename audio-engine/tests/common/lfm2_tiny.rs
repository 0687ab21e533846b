//! The tiny synthetic LFM2-Audio checkpoint and liquid-audio's outputs on it.
//!
//! [`checkpoint_dir`] writes the checkpoint of `synthetic::DEFAULT_SEED` (Hugging Face layout:
//! `config.json`, `model.safetensors`, `audio_detokenizer/{config.json,model.safetensors}`,
//! `tokenizer.json`, ...) once under `CARGO_TARGET_TMPDIR` and checks its digests against the
//! fixture's, so a generator change that was not followed by a new fixture fails loudly instead
//! of as a numeric mismatch.
//!
//! [`reference`] is `tests/fixtures/lfm2_tiny/reference.safetensors`, written by
//! `tests/reference/make_reference.py` (liquid-audio 1.3.0, CPU, fp32; its header documents how
//! each tensor was produced). Tensors, row-major, outermost dimension first:
//!
//! | name | dtype | shape | content |
//! |---|---|---|---|
//! | `input_signal` | f32 | [24000] | [`input_signal`], 16 kHz |
//! | `mel` | f32 | [128, 151] | log-mel features, mel-major |
//! | `encoder_out` | f32 | [19, 64] | FastConformer output before the adapter, frame-major |
//! | `adapter_out` | f32 | [19, 128] | adapter output: the audio rows of the backbone input |
//! | `asr_prompt_ids` | i64 | [36] | token id per prompt position, -1 at audio rows |
//! | `asr_prompt_modality` | i64 | [36] | 1 text, 2 audio-in |
//! | `asr_prefill_embeds` | f32 | [36, 128] | backbone input rows |
//! | `asr_prefill_hidden` | f32 | [36, 128] | backbone output after the final norm |
//! | `asr_prefill_logits` | f32 | [36, 640] | text logits at every prompt position |
//! | `asr_tokens` | i64 | [32] | greedy ASR tokens (metadata `asr_stop`: `max_steps`) |
//! | `asr_margins` | f32 | [32] | top-1 minus top-2 logit per ASR step |
//! | `s2s_prompt_ids`, `s2s_prompt_modality` | i64 | [41] | the S2S prompt, as above |
//! | `s2s_steps` | i64 | [48, 9] | greedy interleaved steps: text `[tok, -1 x8]`, frame `[-1, c0..c7]` |
//! | `s2s_text_margins` | f32 | [18] | margin per S2S text step |
//! | `s2s_depth_margins` | f32 | [30, 8] | margin per frame and codebook |
//! | `s2s_depth_hidden` | f32 | [128] | final-norm hidden state of the first frame's step |
//! | `s2s_depth_logits` | f32 | [8, 2049] | depthformer logits of the first frame |
//! | `detok_codes` | i64 | [8, 8] | codes (codebook-major) of the first 8 S2S frames |
//! | `detok_spec` | f32 | [48, 1282] | detokenizer head output: 641 log-magnitudes, 641 phases |
//! | `detok_waveform` | f32 | [15360] | 24 kHz waveform of those 8 frames |
//! | `tts_prompt_ids`, `tts_prompt_modality` | i64 | [38] | the TTS prompt (text only), as above |
//! | `tts_steps` | i64 | [64, 9] | greedy sequential TTS: 20 text steps ending in `<\|audio_start\|>` (128), then 44 frames; rows as in `s2s_steps` |
//! | `tts_text_margins` | f32 | [20] | margin per TTS text step |
//! | `tts_depth_margins` | f32 | [44, 8] | margin per TTS frame and codebook |
//!
//! The TTS prompt is `<|startoftext|>`, a system turn `tts_system` ("Perform TTS. Use the US
//! female voice."), a user turn with the text `tts_prompt` ("The train, numbers 2024 and
//! voices.") and an open assistant turn; it stops at `max_steps` (`tts_stop`).
//!
//! Metadata: `seed`, `liquid_audio_version`, `torch_version`, `asr_stop`, `s2s_stop`,
//! `tts_stop`, `asr_min_margin`, `s2s_min_text_margin`, `s2s_min_depth_margin`,
//! `tts_min_text_margin`, `tts_min_depth_margin`, `tts_system`, `tts_prompt`, `digest_*`,
//! `checkpoint_config`, `shape.<name>`.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use audio_tooling::safetensors::{Dtype, SafeTensors};
use audio_tooling::synthetic::{
    tiny_input_signal, write_tiny_checkpoint, TinyConfig, DEFAULT_SEED,
};

/// Path of the reference fixture.
pub const REFERENCE_PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/lfm2_tiny/reference.safetensors"
);

/// The tiny model's dims (the checkpoint is written with these).
pub fn config() -> TinyConfig {
    TinyConfig::default()
}

/// The fixture's input: 1.5 s of 16 kHz mono, regenerated (bit-identical to `input_signal`).
pub fn input_signal() -> Vec<f32> {
    tiny_input_signal()
}

/// The digest `make_reference.py` records (`file_digest`): the sum over the file's
/// little-endian u64 words `w_i` (zero-padded) of `w_i * (2i + 1)`, wrapping, as 16 hex digits.
pub fn file_digest(path: &Path) -> String {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut sum = 0u64;
    for (i, c) in bytes.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        let k = (i as u64).wrapping_mul(2).wrapping_add(1);
        sum = sum.wrapping_add(u64::from_le_bytes(w).wrapping_mul(k));
    }
    format!("{sum:016x}")
}

/// Whether the checkpoint in `dir` is the one the fixture was made from.
fn matches_fixture(dir: &Path) -> bool {
    let r = reference();
    [
        ("digest_model", "model.safetensors"),
        ("digest_detokenizer", "audio_detokenizer/model.safetensors"),
        ("digest_tokenizer", "tokenizer.json"),
    ]
    .iter()
    .all(|(key, file)| {
        let p = dir.join(file);
        p.exists() && file_digest(&p) == r.meta(key)
    })
}

/// The checkpoint directory, written on first use (reused across test processes when it is
/// already there and matches the fixture). Panics if the freshly written checkpoint does not
/// match the fixture's digests: then the generator changed and `make_reference.py` must be
/// rerun.
pub fn checkpoint_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("lfm2_tiny_seed{DEFAULT_SEED}"));
        if matches_fixture(&dir) {
            return dir;
        }
        // Write beside it and rename, so concurrent test processes never see a partial one.
        let tmp = dir.with_extension(format!("tmp{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        write_tiny_checkpoint(&tmp, DEFAULT_SEED).expect("write the tiny checkpoint");
        assert!(
            matches_fixture(&tmp),
            "the regenerated checkpoint differs from the one {REFERENCE_PATH} was made from: \
             rerun tests/reference/make_reference.py (see its header)"
        );
        let _ = fs::remove_dir_all(&dir);
        if fs::rename(&tmp, &dir).is_err() {
            // Another process won the race; its copy is equally valid.
            let _ = fs::remove_dir_all(&tmp);
            assert!(
                matches_fixture(&dir),
                "{} is not the expected checkpoint",
                dir.display()
            );
        }
        dir
    })
}

/// The reference fixture.
pub struct Reference {
    file: SafeTensors,
}

/// The fixture, loaded once.
pub fn reference() -> &'static Reference {
    static REF: OnceLock<Reference> = OnceLock::new();
    REF.get_or_init(|| Reference {
        file: SafeTensors::open(REFERENCE_PATH).expect("open the lfm2_tiny reference fixture"),
    })
}

/// One step of a greedy reply (S2S or TTS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A text token.
    Text(u32),
    /// An audio frame: one code per codebook (2048 = end of audio).
    Audio([u32; 8]),
}

impl Reference {
    /// The underlying file.
    pub fn file(&self) -> &SafeTensors {
        &self.file
    }

    /// Shape of tensor `name` (outermost first).
    pub fn shape(&self, name: &str) -> Vec<usize> {
        self.file.tensor(name).unwrap().shape.to_vec()
    }

    /// F32 tensor `name`, flattened row-major.
    pub fn f32(&self, name: &str) -> Vec<f32> {
        self.file.f32(name).unwrap()
    }

    /// I64 tensor `name`, flattened row-major.
    pub fn i64(&self, name: &str) -> Vec<i64> {
        let t = self.file.tensor(name).unwrap();
        assert_eq!(t.dtype, Dtype::I64, "{name}");
        t.data
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
            .collect()
    }

    /// Metadata string `key`.
    pub fn meta(&self, key: &str) -> &str {
        self.file
            .metadata()
            .get(key)
            .unwrap_or_else(|| panic!("fixture metadata has no '{key}'"))
    }

    /// The greedy ASR tokens (the last one included whatever stopped the decode).
    pub fn asr_tokens(&self) -> Vec<u32> {
        self.i64("asr_tokens").iter().map(|&t| t as u32).collect()
    }

    /// A prompt as (token id or `None` for an audio-in row) per position.
    pub fn prompt(&self, which: &str) -> Vec<Option<u32>> {
        let ids = self.i64(&format!("{which}_prompt_ids"));
        let flags = self.i64(&format!("{which}_prompt_modality"));
        ids.iter()
            .zip(&flags)
            .map(|(&id, &f)| match f {
                1 => Some(id as u32),
                2 => None,
                other => panic!("modality {other} in the {which} prompt"),
            })
            .collect()
    }

    /// The greedy S2S reply.
    pub fn s2s_steps(&self) -> Vec<Step> {
        self.steps("s2s_steps")
    }

    /// The greedy sequential TTS reply (prompt: `prompt("tts")`).
    pub fn tts_steps(&self) -> Vec<Step> {
        self.steps("tts_steps")
    }

    /// Steps tensor `name` ([n, 9]: text `[tok, -1 x8]`, frame `[-1, c0..c7]`).
    fn steps(&self, name: &str) -> Vec<Step> {
        self.i64(name)
            .chunks_exact(9)
            .map(|r| {
                if r[0] >= 0 {
                    Step::Text(r[0] as u32)
                } else {
                    Step::Audio(std::array::from_fn(|i| r[i + 1] as u32))
                }
            })
            .collect()
    }
}
