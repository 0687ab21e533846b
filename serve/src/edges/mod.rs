//! The server's edges, the checks a request meets before it reaches a model: Realtime socket
//! limits ([`socket_limits`]), the browser `Origin` allow-list ([`origin`]), the API key
//! ([`api_key`]) and the ephemeral secrets that stand in for it on a browser's socket
//! ([`client_secrets`]), readiness and draining ([`readiness`]), the sockets the server closes
//! itself ([`socket_close`]) and the log format ([`logging`]).

pub mod api_key;
pub mod client_secrets;
pub mod logging;
pub mod origin;
pub mod readiness;
pub mod socket_close;
pub mod socket_limits;
