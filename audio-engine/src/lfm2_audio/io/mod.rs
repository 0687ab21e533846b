//! Input and output: WAV audio at any rate and channel count ([`audio`]), and the four-file
//! model package ([`package`]).

pub mod audio;
pub mod package;
