//! LFM2-Audio: LiquidAI's speech-in/speech-out model on top of the LFM2 backbone.

pub mod audio;
pub mod backbone_config;
pub mod features;
