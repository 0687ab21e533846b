//! The C interface's surface: the headers (`include/audiocpp.h`, `include/lfm2e.h`) against the
//! built library's exported symbols and the Rust definitions of the entry points, and the
//! struct and enum layout a C compiler sees against the Rust side's.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use common::*;

/// `name -> (return type, parameter types)`, types in a canonical C spelling.
type Signatures = BTreeMap<String, (String, Vec<String>)>;

/// Whitespace collapsed, none around `*`: `const char * const *` -> `const char*const*`.
fn canonical(t: &str) -> String {
    let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
    t.replace(" *", "*").replace("* ", "*")
}

fn strip_c_comments(src: &str) -> String {
    let mut out = String::new();
    let mut rest = src;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        let j = rest[i..].find("*/").expect("closed comment");
        rest = &rest[i + j + 2..];
    }
    out.push_str(rest);
    out.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Drops a C parameter's name: the trailing identifier after the type.
fn c_param_type(p: &str) -> String {
    let p = canonical(p);
    let cut = p
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    canonical(&p[..cut])
}

fn header_signatures() -> Signatures {
    let mut sigs = Signatures::new();
    for h in ["audiocpp.h", "lfm2e.h"] {
        let src =
            strip_c_comments(&std::fs::read_to_string(root().join("include").join(h)).unwrap());
        for decl in src.split(';') {
            let Some(i) = decl.find("AUDIOCPP_API") else {
                continue;
            };
            let decl = &decl[i + "AUDIOCPP_API".len()..];
            let open = decl.find('(').unwrap();
            let close = decl.rfind(')').unwrap();
            let head = canonical(&decl[..open]);
            let name_at = head
                .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            let name = head[name_at..].to_owned();
            let ret = canonical(&head[..name_at]);
            let params = canonical(&decl[open + 1..close]);
            let params: Vec<String> = if params == "void" {
                Vec::new()
            } else {
                params.split(',').map(c_param_type).collect()
            };
            assert!(
                sigs.insert(name.clone(), (ret, params)).is_none(),
                "{name} twice"
            );
        }
    }
    sigs
}

/// The C spelling of a Rust type of the entry points.
fn c_of_rust(t: &str) -> String {
    let t = t.trim();
    for (prefix, is_const) in [("*const ", true), ("*mut ", false)] {
        if let Some(rest) = t.strip_prefix(prefix) {
            let pointee = c_of_rust(rest);
            return match (is_const, pointee.ends_with('*')) {
                (true, true) => format!("{pointee}const*"),
                (true, false) => format!("const {pointee}*"),
                (false, _) => format!("{pointee}*"),
            };
        }
    }
    match t {
        "c_char" => "char",
        "c_int" => "int",
        "c_void" | "()" | "" => "void",
        "usize" => "size_t",
        "i64" => "int64_t",
        "u32" => "uint32_t",
        "u64" => "uint64_t",
        "f32" => "float",
        "f64" => "double",
        other => other,
    }
    .to_owned()
}

fn rust_signatures() -> Signatures {
    let mut sigs = Signatures::new();
    let dir = root().join("src/capi");
    for e in std::fs::read_dir(&dir).unwrap() {
        let src = std::fs::read_to_string(e.unwrap().path()).unwrap();
        let mut rest = src.as_str();
        while let Some(i) = rest.find("extern \"C\" fn ") {
            rest = &rest[i + "extern \"C\" fn ".len()..];
            let open = rest.find('(').unwrap();
            let name = rest[..open].trim().to_owned();
            let close = rest.find(')').unwrap();
            let params: Vec<String> = rest[open + 1..close]
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| c_of_rust(p.split_once(':').expect("name: type").1))
                .collect();
            let body = rest.find('{').unwrap();
            let ret = rest[close + 1..body].trim();
            let ret = c_of_rust(ret.strip_prefix("->").unwrap_or("").trim());
            assert!(
                sigs.insert(name.clone(), (ret, params)).is_none(),
                "{name} twice"
            );
            rest = &rest[body..];
        }
    }
    sigs
}

#[test]
fn the_headers_declare_74_abi_functions_and_our_extensions() {
    let h = header_signatures();
    let abi = h.keys().filter(|n| n.starts_with("audiocpp_")).count();
    let ext = h.keys().filter(|n| n.starts_with("lfm2e_")).count();
    assert_eq!(abi, 74, "audio.cpp's ABI 0.2.0 has 74 entry points");
    assert_eq!(ext, 4);
    assert_eq!(abi + ext, h.len());
}

#[test]
fn the_library_exports_exactly_the_headers_functions() {
    let o = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(cdylib())
        .output()
        .expect("nm (binutils) runs");
    assert!(o.status.success());
    let listing = String::from_utf8_lossy(&o.stdout);
    let exported: BTreeSet<String> = listing
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .nth(2)
                .map(|s| s.split('@').next().unwrap().to_owned())
        })
        .collect();
    // Every export is a function in the text section (`T`): no data symbol is part of the ABI.
    for l in listing.lines() {
        let kind = l.split_whitespace().nth(1);
        assert_eq!(kind, Some("T"), "not an exported function: {l}");
    }
    let declared: BTreeSet<String> = header_signatures().into_keys().collect();
    let extra: Vec<_> = exported.difference(&declared).collect();
    let missing: Vec<_> = declared.difference(&exported).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "exported but not declared: {extra:?}; declared but not exported: {missing:?}"
    );
    // The shared library carries audio.cpp's SONAME (SOVERSION 0).
    let o = Command::new("readelf")
        .arg("-d")
        .arg(cdylib())
        .output()
        .expect("readelf runs");
    assert!(String::from_utf8_lossy(&o.stdout).contains("[libaudiocpp.so.0]"));
}

#[test]
fn the_headers_prototypes_match_the_rust_definitions() {
    let h = header_signatures();
    let r = rust_signatures();
    assert_eq!(
        h.keys().collect::<Vec<_>>(),
        r.keys().collect::<Vec<_>>(),
        "the same entry points"
    );
    for (name, sig) in &h {
        assert_eq!(sig, &r[name], "{name}: header vs src/capi");
    }
}

#[test]
fn struct_and_enum_layout_match_what_a_c_compiler_sees() {
    let exe = c_program("layout");
    let o = Command::new(&exe).output().unwrap();
    assert!(o.status.success());
    let c: BTreeMap<String, i64> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_owned(), v.parse().unwrap())
        })
        .collect();
    let mut rust: BTreeMap<String, i64> = lfm2_engine::layout::c_layout().into_iter().collect();
    let abi = (rust["AUDIOCPP_ABI_VERSION_MAJOR"] << 16)
        | (rust["AUDIOCPP_ABI_VERSION_MINOR"] << 8)
        | rust["AUDIOCPP_ABI_VERSION_PATCH"];
    rust.insert("audiocpp_abi_version()".into(), abi);
    assert_eq!(c, rust);
    assert_eq!(abi, 0x000200);
}

#[test]
fn the_headers_compile_as_c_and_cpp() {
    let dir = scratch("headers");
    let src = dir.join("h.c");
    std::fs::write(
        &src,
        "#include \"lfm2e.h\"\n#include \"audiocpp.h\"\nint main(void) { return 0; }\n",
    )
    .unwrap();
    compile(
        std::slice::from_ref(&src),
        &dir.join("h"),
        &["-fsyntax-only".into()],
    );
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let cpp = dir.join("h.cpp");
    std::fs::copy(&src, &cpp).unwrap();
    match Command::new(&cxx)
        .args(["-std=c++11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"])
        .arg(format!("-I{}", root().join("include").display()))
        .arg(&cpp)
        .output()
    {
        Ok(o) => assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => ci_skip::skip(
            "the C++ check of include/audiocpp.h",
            &format!("{cxx} cannot run ({e})"),
        ),
    }
}
