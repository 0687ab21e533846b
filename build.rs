//! Build script of the C-ABI library: names the shared library as audio.cpp's is named
//! (SOVERSION 0), so a program linked with `-laudiocpp` against the installed copy records
//! `libaudiocpp.so.0` and finds it at run time.
//!
//! The export surface needs no linker map: rustc exports from a cdylib exactly its
//! `#[no_mangle] pub extern "C"` functions (every other symbol, ggml's included, is local),
//! which here are the `audiocpp_*` and `lfm2e_*` entry points; `tests/c_abi_surface.rs`
//! checks the exported dynamic symbols against the headers.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    match std::env::var("CARGO_CFG_TARGET_OS").as_deref() {
        Ok("macos") | Ok("ios") => {
            println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/libaudiocpp.0.dylib");
        }
        Ok("windows") => {}
        _ => println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libaudiocpp.so.0"),
    }
}
