//! The one request model every front end uses. A front end translates its wire format into a
//! [`Request`] (task, inputs, history, options by name); [`Request::resolve`] checks it against
//! the one option table ([`options::REQUEST_OPTIONS`]) and builds the [`Job`]; the job runs on a
//! session ([`Session::run`](crate::lfm2_audio::Session::run)), events go to one sink as they
//! are produced, and an [`Outcome`] comes back. The C ABI and the HTTP server add no default,
//! range or rule of their own, so a request means the same thing through each of them.

pub mod job;
pub mod options;
pub mod outcome;
pub mod request;
mod run;
#[cfg(feature = "testkit")]
pub mod task_calls;
pub mod vars;

pub use job::{AsrJob, Job, TtsJob};
pub use options::{OptionMap, OptionSpec, OptionType, OptionValue, REQUEST_OPTIONS};
pub use outcome::Outcome;
pub use request::{Request, RequestContext, ResolvedRequest};
