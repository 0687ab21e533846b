//! Generation: the one loop every task runs ([`reply`]), which modality each step takes
//! ([`schedule`]) and how a token or code is drawn ([`sampling`]).

pub mod reply;
pub mod sampling;
pub mod schedule;
