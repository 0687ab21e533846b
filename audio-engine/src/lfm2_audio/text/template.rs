//! LFM2's chat template, the one place its markup is spelled: ChatML turns
//! (`<|im_start|>{role}\n` ... `<|im_end|>\n`) after a `<|startoftext|>`, as the checkpoint's
//! `chat_template` and liquid-audio's `ChatState` write them.
//!
//! Both prompt builders take their markup from here: the one-turn tasks' [`PromptBuilder`]
//! (ASR, TTS, one-shot S2S) and a conversation's `ChatMarkup` (multi-turn S2S, typed turns).
//! Each piece is tokenized on its own by the builders, so the strings here are what the model
//! saw in training, byte for byte.
//!
//! [`PromptBuilder`]: super::prompt::PromptBuilder

/// The first token of every prompt.
pub const START: &str = "<|startoftext|>";
/// The end of a turn.
pub const TURN_END: &str = "<|im_end|>\n";

/// Who speaks a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The system prompt's turn.
    System,
    /// The user's question (audio or text).
    User,
    /// The model's reply.
    Assistant,
    /// A tool's result, answering the calls of the reply before it.
    Tool,
}

impl Role {
    /// The role's name in the template.
    pub fn name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// The markup opening a turn of this role.
    pub fn open(self) -> String {
        format!("<|im_start|>{}\n", self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_chatml() {
        assert_eq!(Role::System.open(), "<|im_start|>system\n");
        assert_eq!(Role::User.open(), "<|im_start|>user\n");
        assert_eq!(Role::Assistant.open(), "<|im_start|>assistant\n");
        assert_eq!(Role::Tool.open(), "<|im_start|>tool\n");
        assert_eq!(TURN_END, "<|im_end|>\n");
        assert_eq!(START, "<|startoftext|>");
    }
}
