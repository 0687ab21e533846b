//! Every GGUF metadata key the loaders read and the converter writes, in one place.
//!
//! The published LFM2.5-Audio files are written by llama.cpp's own converter, so each key is
//! spelled as the pinned tree's key tables spell it: `src/llama-arch.cpp` (`general.*`,
//! `tokenizer.*` and the per-architecture `%s.*` keys, here with `%s` = `lfm2`) and
//! `tools/mtmd/clip-impl.h` (`clip.*`, with `%s` = `audio`). The vocoder file is the exception:
//! its keys come from the vocoder converter of llama.cpp's LFM2.5-Audio runner (PR #18641),
//! which the pinned tree does not hold. `tests/gguf_keys.rs` reads those tables and fails when
//! an entry of [`ALL`] (or a key our converter writes) is spelled otherwise; the only keys it
//! accepts outside them are listed there by name with the reason.
//!
//! A key that older files spelled differently has a `LEGACY_*` companion: loaders read the
//! upstream spelling and fall back to the old one, saying so in a debug log line.
//!
//! Some keys only the converter writes (lfm2-audio-tooling, through `internals`, feature
//! `testkit`) and the spelling test reads; the loaders do not, so this table alone may hold names
//! a build without `testkit` leaves unused.
#![cfg_attr(not(feature = "testkit"), allow(dead_code))]

/// `general.architecture`.
pub const GENERAL_ARCHITECTURE: &str = "general.architecture";
/// `general.type` (`model`, `mmproj`).
pub const GENERAL_TYPE: &str = "general.type";
/// `general.name`.
pub const GENERAL_NAME: &str = "general.name";
/// `general.size_label` (gguf-py's metadata key; llama.cpp does not read it).
pub const GENERAL_SIZE_LABEL: &str = "general.size_label";
/// `general.file_type` (llama.cpp's `llama_ftype`).
pub const GENERAL_FILE_TYPE: &str = "general.file_type";
/// `general.quantization_version`.
pub const GENERAL_QUANTIZATION_VERSION: &str = "general.quantization_version";
/// `general.languages` (gguf-py's metadata key, from the model card): the checkpoint's language.
pub const GENERAL_LANGUAGES: &str = "general.languages";

/// `tokenizer.ggml.model` (`gpt2` for the backbone's BPE, `none` for the detokenizer).
pub const TOKENIZER_MODEL: &str = "tokenizer.ggml.model";
/// `tokenizer.ggml.pre` (the pre-tokenizer, `lfm2`).
pub const TOKENIZER_PRE: &str = "tokenizer.ggml.pre";
/// `tokenizer.ggml.tokens`.
pub const TOKENIZER_TOKENS: &str = "tokenizer.ggml.tokens";
/// `tokenizer.ggml.token_type`.
pub const TOKENIZER_TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
/// `tokenizer.ggml.merges`.
pub const TOKENIZER_MERGES: &str = "tokenizer.ggml.merges";
/// `tokenizer.ggml.bos_token_id`.
pub const TOKENIZER_BOS_ID: &str = "tokenizer.ggml.bos_token_id";
/// `tokenizer.ggml.eos_token_id`.
pub const TOKENIZER_EOS_ID: &str = "tokenizer.ggml.eos_token_id";
/// `tokenizer.ggml.unknown_token_id`.
pub const TOKENIZER_UNK_ID: &str = "tokenizer.ggml.unknown_token_id";
/// `tokenizer.ggml.seperator_token_id` (sic: llama.cpp's spelling).
pub const TOKENIZER_SEP_ID: &str = "tokenizer.ggml.seperator_token_id";
/// `tokenizer.ggml.padding_token_id`.
pub const TOKENIZER_PAD_ID: &str = "tokenizer.ggml.padding_token_id";
/// `tokenizer.ggml.cls_token_id`.
pub const TOKENIZER_CLS_ID: &str = "tokenizer.ggml.cls_token_id";
/// `tokenizer.ggml.mask_token_id`.
pub const TOKENIZER_MASK_ID: &str = "tokenizer.ggml.mask_token_id";
/// `tokenizer.ggml.eot_token_id`.
pub const TOKENIZER_EOT_ID: &str = "tokenizer.ggml.eot_token_id";
/// `tokenizer.ggml.eom_token_id`.
pub const TOKENIZER_EOM_ID: &str = "tokenizer.ggml.eom_token_id";
/// `tokenizer.ggml.fim_pre_token_id`.
pub const TOKENIZER_FIM_PRE_ID: &str = "tokenizer.ggml.fim_pre_token_id";
/// `tokenizer.ggml.fim_suf_token_id`.
pub const TOKENIZER_FIM_SUF_ID: &str = "tokenizer.ggml.fim_suf_token_id";
/// `tokenizer.ggml.fim_mid_token_id`.
pub const TOKENIZER_FIM_MID_ID: &str = "tokenizer.ggml.fim_mid_token_id";
/// `tokenizer.ggml.fim_pad_token_id`.
pub const TOKENIZER_FIM_PAD_ID: &str = "tokenizer.ggml.fim_pad_token_id";
/// `tokenizer.ggml.fim_rep_token_id`.
pub const TOKENIZER_FIM_REP_ID: &str = "tokenizer.ggml.fim_rep_token_id";
/// `tokenizer.ggml.fim_sep_token_id`.
pub const TOKENIZER_FIM_SEP_ID: &str = "tokenizer.ggml.fim_sep_token_id";
/// `tokenizer.ggml.prefix_token_id` (deprecated spelling of a FIM id, still read by llama.cpp).
pub const TOKENIZER_PREFIX_ID: &str = "tokenizer.ggml.prefix_token_id";
/// `tokenizer.ggml.suffix_token_id` (deprecated spelling of a FIM id, still read by llama.cpp).
pub const TOKENIZER_SUFFIX_ID: &str = "tokenizer.ggml.suffix_token_id";
/// `tokenizer.ggml.middle_token_id` (deprecated spelling of a FIM id, still read by llama.cpp).
pub const TOKENIZER_MIDDLE_ID: &str = "tokenizer.ggml.middle_token_id";
/// `tokenizer.ggml.add_bos_token`.
pub const TOKENIZER_ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
/// `tokenizer.ggml.add_eos_token`.
pub const TOKENIZER_ADD_EOS: &str = "tokenizer.ggml.add_eos_token";
/// `tokenizer.ggml.add_sep_token`.
pub const TOKENIZER_ADD_SEP: &str = "tokenizer.ggml.add_sep_token";
/// `tokenizer.chat_template`.
pub const TOKENIZER_CHAT_TEMPLATE: &str = "tokenizer.chat_template";

/// `lfm2.context_length`.
pub const LFM2_CONTEXT_LENGTH: &str = "lfm2.context_length";
/// `lfm2.embedding_length`.
pub const LFM2_EMBEDDING_LENGTH: &str = "lfm2.embedding_length";
/// `lfm2.embedding_length_out` (the detokenizer's head width).
pub const LFM2_EMBEDDING_LENGTH_OUT: &str = "lfm2.embedding_length_out";
/// `lfm2.block_count`.
pub const LFM2_BLOCK_COUNT: &str = "lfm2.block_count";
/// `lfm2.feed_forward_length`.
pub const LFM2_FEED_FORWARD_LENGTH: &str = "lfm2.feed_forward_length";
/// `lfm2.vocab_size`.
pub const LFM2_VOCAB_SIZE: &str = "lfm2.vocab_size";
/// `lfm2.attention.head_count`.
pub const LFM2_HEAD_COUNT: &str = "lfm2.attention.head_count";
/// `lfm2.attention.head_count_kv` (scalar or per layer; 0 marks a conv layer).
pub const LFM2_HEAD_COUNT_KV: &str = "lfm2.attention.head_count_kv";
/// `lfm2.attention.key_length`.
pub const LFM2_KEY_LENGTH: &str = "lfm2.attention.key_length";
/// `lfm2.attention.value_length`.
pub const LFM2_VALUE_LENGTH: &str = "lfm2.attention.value_length";
/// `lfm2.attention.layer_norm_rms_epsilon`.
pub const LFM2_RMS_EPS: &str = "lfm2.attention.layer_norm_rms_epsilon";
/// `lfm2.attention.sliding_window` (the detokenizer).
pub const LFM2_SLIDING_WINDOW: &str = "lfm2.attention.sliding_window";
/// `lfm2.rope.freq_base`.
pub const LFM2_ROPE_FREQ_BASE: &str = "lfm2.rope.freq_base";
/// `lfm2.shortconv.l_cache`.
pub const LFM2_SHORTCONV_L_CACHE: &str = "lfm2.shortconv.l_cache";

/// `clip.projector_type` (`lfm2a`).
pub const CLIP_PROJECTOR_TYPE: &str = "clip.projector_type";
/// `clip.audio.projector_type`: the projector of a file with several modalities.
pub const CLIP_AUDIO_PROJECTOR_TYPE: &str = "clip.audio.projector_type";
/// `clip.has_audio_encoder`.
pub const CLIP_HAS_AUDIO_ENCODER: &str = "clip.has_audio_encoder";
/// `clip.audio.embedding_length` (the conformer width).
pub const CLIP_AUDIO_EMBEDDING_LENGTH: &str = "clip.audio.embedding_length";
/// `clip.audio.feed_forward_length`.
pub const CLIP_AUDIO_FEED_FORWARD_LENGTH: &str = "clip.audio.feed_forward_length";
/// `clip.audio.block_count`.
pub const CLIP_AUDIO_BLOCK_COUNT: &str = "clip.audio.block_count";
/// `clip.audio.projection_dim` (the adapter's output: the backbone width).
pub const CLIP_AUDIO_PROJECTION_DIM: &str = "clip.audio.projection_dim";
/// `clip.audio.attention.head_count`.
pub const CLIP_AUDIO_HEAD_COUNT: &str = "clip.audio.attention.head_count";
/// `clip.audio.attention.layer_norm_epsilon`.
pub const CLIP_AUDIO_LAYER_NORM_EPS: &str = "clip.audio.attention.layer_norm_epsilon";
/// `clip.audio.num_mel_bins`.
pub const CLIP_AUDIO_NUM_MEL_BINS: &str = "clip.audio.num_mel_bins";
/// The encoder head count as this project's converter spelled it before it matched upstream;
/// read only as a fallback for [`CLIP_AUDIO_HEAD_COUNT`].
pub const LEGACY_CLIP_AUDIO_HEAD_COUNT: &str = "clip.audio.head_count";

/// `depthformer_n_layer` (vocoder).
pub const DEPTHFORMER_N_LAYER: &str = "depthformer_n_layer";
/// `depthformer_n_embd` (vocoder).
pub const DEPTHFORMER_N_EMBD: &str = "depthformer_n_embd";
/// Optional `depthformer_rope_theta` (vocoder; default 1e6).
pub const DEPTHFORMER_ROPE_THETA: &str = "depthformer_rope_theta";
/// Optional `depthformer_norm_eps` (vocoder; default 1e-5).
pub const DEPTHFORMER_NORM_EPS: &str = "depthformer_norm_eps";
/// Optional `interleaved_n_text`: text steps per interleaved block (vocoder; EN default 6).
pub const INTERLEAVED_N_TEXT: &str = "interleaved_n_text";
/// Optional `interleaved_n_audio`: frames per interleaved block (vocoder; EN default 12).
pub const INTERLEAVED_N_AUDIO: &str = "interleaved_n_audio";

/// Every key above, for the test that checks their spelling against the pinned tree.
#[cfg_attr(not(feature = "testkit"), allow(dead_code))]
pub const ALL: &[&str] = &[
    GENERAL_ARCHITECTURE,
    GENERAL_TYPE,
    GENERAL_NAME,
    GENERAL_SIZE_LABEL,
    GENERAL_FILE_TYPE,
    GENERAL_QUANTIZATION_VERSION,
    GENERAL_LANGUAGES,
    TOKENIZER_MODEL,
    TOKENIZER_PRE,
    TOKENIZER_TOKENS,
    TOKENIZER_TOKEN_TYPE,
    TOKENIZER_MERGES,
    TOKENIZER_BOS_ID,
    TOKENIZER_EOS_ID,
    TOKENIZER_UNK_ID,
    TOKENIZER_SEP_ID,
    TOKENIZER_PAD_ID,
    TOKENIZER_CLS_ID,
    TOKENIZER_MASK_ID,
    TOKENIZER_EOT_ID,
    TOKENIZER_EOM_ID,
    TOKENIZER_FIM_PRE_ID,
    TOKENIZER_FIM_SUF_ID,
    TOKENIZER_FIM_MID_ID,
    TOKENIZER_FIM_PAD_ID,
    TOKENIZER_FIM_REP_ID,
    TOKENIZER_FIM_SEP_ID,
    TOKENIZER_PREFIX_ID,
    TOKENIZER_SUFFIX_ID,
    TOKENIZER_MIDDLE_ID,
    TOKENIZER_ADD_BOS,
    TOKENIZER_ADD_EOS,
    TOKENIZER_ADD_SEP,
    TOKENIZER_CHAT_TEMPLATE,
    LFM2_CONTEXT_LENGTH,
    LFM2_EMBEDDING_LENGTH,
    LFM2_EMBEDDING_LENGTH_OUT,
    LFM2_BLOCK_COUNT,
    LFM2_FEED_FORWARD_LENGTH,
    LFM2_VOCAB_SIZE,
    LFM2_HEAD_COUNT,
    LFM2_HEAD_COUNT_KV,
    LFM2_KEY_LENGTH,
    LFM2_VALUE_LENGTH,
    LFM2_RMS_EPS,
    LFM2_SLIDING_WINDOW,
    LFM2_ROPE_FREQ_BASE,
    LFM2_SHORTCONV_L_CACHE,
    CLIP_PROJECTOR_TYPE,
    CLIP_AUDIO_PROJECTOR_TYPE,
    CLIP_HAS_AUDIO_ENCODER,
    CLIP_AUDIO_EMBEDDING_LENGTH,
    CLIP_AUDIO_FEED_FORWARD_LENGTH,
    CLIP_AUDIO_BLOCK_COUNT,
    CLIP_AUDIO_PROJECTION_DIM,
    CLIP_AUDIO_HEAD_COUNT,
    CLIP_AUDIO_LAYER_NORM_EPS,
    CLIP_AUDIO_NUM_MEL_BINS,
    LEGACY_CLIP_AUDIO_HEAD_COUNT,
    DEPTHFORMER_N_LAYER,
    DEPTHFORMER_N_EMBD,
    DEPTHFORMER_ROPE_THETA,
    DEPTHFORMER_NORM_EPS,
    INTERLEAVED_N_TEXT,
    INTERLEAVED_N_AUDIO,
];

/// Keys kept only so that older files still load (each is a fallback for an upstream key).
#[cfg_attr(not(feature = "testkit"), allow(dead_code))]
pub const LEGACY: &[&str] = &[LEGACY_CLIP_AUDIO_HEAD_COUNT];

/// The `(key, legacy spelling)` pairs loaders fall back on.
pub const FALLBACKS: &[(&str, &str)] = &[(CLIP_AUDIO_HEAD_COUNT, LEGACY_CLIP_AUDIO_HEAD_COUNT)];

/// Which spelling of `key` `metadata` holds: `key` itself, else its legacy spelling (logged at
/// debug level, naming `file`), else `None`.
pub fn resolve<'k>(
    metadata: &crate::ggml::gguf::GgufMetadata,
    key: &'k str,
    file: &std::path::Path,
) -> Option<&'k str> {
    if metadata.get(key).is_some() {
        return Some(key);
    }
    let (_, legacy) = FALLBACKS.iter().find(|(k, _)| *k == key)?;
    metadata.get(legacy)?;
    tracing::debug!(
        file = %file.display(),
        key,
        legacy,
        "metadata key found under its older spelling"
    );
    Some(legacy)
}
