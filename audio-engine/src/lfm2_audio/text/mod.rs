//! Text: the checkpoint's tokenizer ([`tokenizer`]) and the [`prompt`] every task builds.

pub mod prompt;
pub mod template;
pub mod tokenizer;
pub mod tools;
