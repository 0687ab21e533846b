//! Generation: the one loop every task runs ([`reply`]), which modality each step takes
//! ([`schedule`]) and how many threads the per-frame graphs get ([`frame_threads`]). How a
//! token or code is drawn is the model's
//! [`sampling`](crate::lfm2_audio::model::sampling), since the depthformer samples inside its
//! frame.

pub mod frame_threads;
pub mod reply;
pub mod schedule;
