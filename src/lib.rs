//! C-ABI library for the LFM2-Audio engine (see `include/lfm2_engine.h`).
