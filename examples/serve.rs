//! The HTTP server for voice assistants (the `serve` crate): audio.cpp's task routes, OpenAI's
//! audio and chat routes, metrics and the voice page. Without `--model` it serves the built-in
//! demo package.
//!
//! `cargo run --release --example serve -- --model DIR [--port 8080] [--slots 2] ...`
//! (`--help` lists the flags; same as `cargo run --release -p lfm2-audio-serve -- ...`).

fn main() {
    serve::main_with_args(std::env::args_os())
}
