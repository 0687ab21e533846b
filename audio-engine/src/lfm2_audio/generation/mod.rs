//! Generation: the one loop every task runs ([`reply`]), which modality each step takes
//! ([`schedule`]), how a token or code is drawn ([`sampling`]) and how many threads the
//! per-frame graphs get ([`frame_threads`]).

pub mod frame_threads;
pub mod reply;
pub mod sampling;
pub mod schedule;
