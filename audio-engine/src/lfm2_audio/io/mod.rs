//! Input and output: WAV audio at any rate and channel count ([`audio`]).

pub mod audio;
