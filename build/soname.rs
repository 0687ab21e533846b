//! The shared library's own name, as audio.cpp's is named (SOVERSION 0), so a program linked
//! with `-laudiocpp` records `libaudiocpp.so.0` and finds it at run time.

/// Prints the cdylib link argument that sets the name for `target_os`.
pub fn emit(target_os: &str) {
    match target_os {
        "macos" | "ios" => {
            println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/libaudiocpp.0.dylib");
        }
        "windows" => {}
        _ => println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libaudiocpp.so.0"),
    }
}
