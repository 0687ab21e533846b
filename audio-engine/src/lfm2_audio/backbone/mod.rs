//! LFM2 backbone graphs and the decode cache (work in progress).
