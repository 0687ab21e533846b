//! Generation: the one loop every task runs ([`reply`]), which modality each step takes
//! ([`schedule`]), how many threads the per-frame graphs get ([`frame_threads`]) and the one way
//! a job runs on a worker thread and hands out its events ([`worker`]). How a
//! token or code is drawn is the model's
//! [`sampling`](crate::lfm2_audio::model::sampling), since the depthformer samples inside its
//! frame.

pub mod frame_threads;
pub mod reply;
pub mod schedule;
pub mod worker;
