//! The names llama.cpp knows tokens and pre-tokenizers by: the load-time fix-ups find
//! end-of-turn, fill-in-the-middle and end-of-generation tokens by their text, and the
//! pre-tokenizer's name picks its splitting expression.

// Token texts llama.cpp recognises by name at load time (from llama-vocab.cpp).
pub(super) const EOT_NAMES: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
pub(super) const EOM_NAMES: &[&str] = &["<|eom_id|>"];
pub(super) const FIM_PRE_NAMES: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
pub(super) const FIM_SUF_NAMES: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
pub(super) const FIM_MID_NAMES: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
pub(super) const FIM_PAD_NAMES: &[&str] =
    &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
pub(super) const FIM_REP_NAMES: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
pub(super) const FIM_SEP_NAMES: &[&str] = &["<|file_sep|>"];
pub(super) const EOG_NAMES: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];
pub(super) const ALWAYS_RENDERED_NAMES: &[&str] =
    &["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

/// Pre-tokenizer names llama.cpp maps to the llama3 expression with whole-word look-up first
/// (`ignore_merges`) and BOS added by default.
pub(super) const LLAMA3_PRES: &[&str] = &[
    "llama3",
    "llama-v3",
    "llama-bpe",
    "falcon3",
    "falcon-h1",
    "pixtral",
    "midm-2.0",
    "lfm2",
    "jina-v5-nano",
];
/// Pre-tokenizer names that use the llama3 expression with plain BPE.
pub(super) const LLAMA3_PLAIN_PRES: &[&str] = &["dbrx", "smaug-bpe"];
/// Pre-tokenizer names that use GPT-2's expression alone.
pub(super) const GPT2_PRES: &[&str] = &[
    "gpt-2",
    "phi-2",
    "jina-es",
    "jina-de",
    "gigachat",
    "jina-v2-es",
    "jina-v2-de",
    "a.x-4.0",
    "mellum",
    "modern-bert",
    "exaone4",
    "mpt",
    "olmo",
    "jais",
    "trillion",
    "granite-docling",
];
