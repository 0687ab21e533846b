//! What a static link of `libaudiocpp.a` needs besides it, one list for both pkg-config files:
//! the installed one (`xtask install`) and the build tree's (`build.rs`), each of which
//! includes this file by `#[path]`.

/// The system libraries rustc's std and ggml's C/C++ code use, by target OS
/// (`std::env::consts::OS` spelling), for the `Libs.private` field.
pub fn libs_private(os: &str) -> &'static str {
    match os {
        "macos" => "-lc++ -framework Accelerate -framework Foundation -lSystem",
        _ => "-lstdc++ -lpthread -lm -ldl -lrt -lutil -lgcc_s -lc",
    }
}
