//! Encoder + adapter part of the converter (work in progress).
