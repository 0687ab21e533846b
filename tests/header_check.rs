//! The build script's header check (`build/header_check.rs`, included here by path as
//! `build.rs` includes it): it passes on the checkout's headers and sources, and reports a
//! header with a function taken out, one added and one with a parameter dropped, each by name
//! and file; its scanners skip what only looks like a declaration.

#[path = "../build/header_check.rs"]
mod header_check;

use std::path::{Path, PathBuf};

use header_check::{c_declarations, check, compare, rust_definitions, FileFunctions, Mismatch};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn names(functions: &[header_check::Function]) -> Vec<(&str, usize)> {
    functions
        .iter()
        .map(|f| (f.name.as_str(), f.params))
        .collect()
}

/// A copy of the package's `include/` and `src/capi/` under a fresh directory.
fn copy_of_checkout(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("header-check-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for sub in ["include", "src/capi"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        for e in std::fs::read_dir(root().join(sub)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.join(sub).join(e.file_name())).unwrap();
        }
    }
    dir
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert_eq!(text.matches(from).count(), 1, "{from:?} once in {path:?}");
    std::fs::write(path, text.replace(from, to)).unwrap();
}

#[test]
fn the_checkout_passes_with_every_function_declared_and_defined() {
    let checked = check(&root()).unwrap_or_else(|e| panic!("{e}"));
    // As many as the headers declare, counted here another way: each declaration starts a
    // line with the export macro.
    let mut declared = 0;
    for h in ["audiocpp.h", "lfm2e.h"] {
        let text = std::fs::read_to_string(root().join("include").join(h)).unwrap();
        declared += text
            .lines()
            .filter(|l| l.starts_with("AUDIOCPP_API "))
            .count();
    }
    assert_eq!(checked.functions, declared);
    assert!(declared > 70, "{declared}");
}

#[test]
fn a_broken_header_is_reported_function_by_function() {
    let dir = copy_of_checkout("broken");
    let h = dir.join("include/audiocpp.h");
    // Missing: the declaration of a function src/capi/base.rs defines.
    edit(&h, "AUDIOCPP_API size_t audiocpp_task_count(void);\n", "");
    // Extra: a declaration no source defines.
    edit(
        &h,
        "AUDIOCPP_API void audiocpp_options_free(audiocpp_options * options);\n",
        "AUDIOCPP_API void audiocpp_options_free(audiocpp_options * options);\n\
         AUDIOCPP_API int audiocpp_not_there(const char * a,\n    int b);\n",
    );
    // Wrong count: audiocpp_options_set without its value.
    edit(
        &h,
        "const char * key,\n                                                  const char * value);",
        "const char * key);",
    );
    let err = check(&dir).expect_err("the broken header fails the check");
    let header_check::CheckError::Mismatches(ms) = &err else {
        panic!("not a mismatch: {err}");
    };
    let mut got: Vec<&Mismatch> = ms.iter().collect();
    got.sort_by(|a, b| a.name().cmp(b.name()));
    assert_eq!(got.len(), 3, "{err}");
    assert!(
        matches!(got[0], Mismatch::NotDefined { name, header, .. }
            if name == "audiocpp_not_there" && header == "include/audiocpp.h"),
        "{err}"
    );
    assert!(
        matches!(got[1], Mismatch::ParamCount { name, header, declared: 2, source, defined: 3 }
            if name == "audiocpp_options_set" && header.starts_with("include/audiocpp.h:")
                && source.starts_with("src/capi/base.rs:")),
        "{err}"
    );
    assert!(
        matches!(got[2], Mismatch::NotDeclared { name, source, .. }
            if name == "audiocpp_task_count" && source == "src/capi/base.rs"),
        "{err}"
    );
    // The build's message names each function and its file.
    let msg = err.to_string();
    for needle in [
        "audiocpp_not_there",
        "audiocpp_options_set",
        "audiocpp_task_count",
        "include/audiocpp.h",
        "src/capi/base.rs",
        "3 problem(s)",
    ] {
        assert!(msg.contains(needle), "{needle} not in:\n{msg}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_declaration_in_two_headers_and_a_no_mangle_static_are_refused() {
    let dir = copy_of_checkout("twice");
    edit(
        &dir.join("include/lfm2e.h"),
        "#ifdef __cplusplus\n}\n#endif",
        "AUDIOCPP_API size_t audiocpp_task_count(void);\n#ifdef __cplusplus\n}\n#endif",
    );
    let err = check(&dir).expect_err("a declaration twice");
    let header_check::CheckError::Mismatches(ms) = &err else {
        panic!("not a mismatch: {err}");
    };
    assert_eq!(ms.len(), 1, "{err}");
    assert!(
        matches!(&ms[0], Mismatch::Duplicate { name, first, second }
            if name == "audiocpp_task_count" && first.starts_with("include/audiocpp.h:")
                && second.starts_with("include/lfm2e.h:")),
        "{err}"
    );

    let src = "#[no_mangle]\npub static AUDIOCPP_THING: u32 = 1;\n";
    let (line, what) = rust_definitions(src).unwrap_err();
    assert_eq!(line, 1);
    assert!(what.contains("not an `extern \"C\" fn"), "{what}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_c_scanner_takes_declarations_only() {
    let header = r#"
/* AUDIOCPP_API int in_a_comment(void); */
// AUDIOCPP_API int in_a_line_comment(void);
#define AUDIOCPP_API __attribute__((visibility("default")))
#define LONG_MACRO(x) \
    int in_a_macro(x);
#ifdef __cplusplus
extern "C" {
#endif
typedef int (*callback_t)(void * user, int code);
typedef struct s {
    int (*hook)(int a, int b);
    const char * name;
} s;
typedef enum e { E_A = 0, E_B = 1 } e;
static inline int inline_helper(int a) { return a + 1; }
AUDIOCPP_API int no_params(void);
AUDIOCPP_API const char * two_lines(const s * a,
                                    size_t b);
AUDIOCPP_API void with_callback(void (*cb)(void *, int), void * user, const char * label);
int (*a_pointer)(int);
#ifdef __cplusplus
}
#endif
"#;
    let found = c_declarations(header);
    assert_eq!(
        names(&found),
        [("no_params", 0), ("two_lines", 2), ("with_callback", 3)]
    );
    assert_eq!(found[1].line, 18, "the line the declaration starts on");
}

#[test]
fn the_rust_scanner_takes_the_items_after_no_mangle() {
    let src = r##"
/// Doc text that mentions #[no_mangle] in passing.
#[no_mangle]
pub extern "C" fn plain() -> u32 { 0 }

#[no_mangle]
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub unsafe extern "C" fn multi_line(
    a: *const c_char,
    cb: Option<unsafe extern "C" fn(*mut c_void, c_int) -> c_int>,
    out: *mut *const c_char,
) -> audiocpp_status {
    let s = "#[no_mangle] pub extern \"C\" fn in_a_string(a: i32) {}";
    let c = '"';
    0
}

#[unsafe(no_mangle)]
pub(crate) extern "C" fn edition_2024(x: Vec<(u8, u8)>, y: [u8; 2]) {}

pub extern "C" fn not_exported(a: i32) {}
"##;
    let found = rust_definitions(src).unwrap();
    assert_eq!(
        names(&found),
        [("plain", 0), ("multi_line", 3), ("edition_2024", 2)]
    );
    assert_eq!(found[1].line, 6, "the attribute's line");
}

#[test]
fn compare_counts_the_agreeing_functions_and_refuses_an_empty_header_set() {
    let f = |name: &str, params| header_check::Function {
        name: name.into(),
        params,
        line: 1,
    };
    let h = [FileFunctions {
        file: "include/x.h".into(),
        functions: vec![f("a", 1), f("b", 0)],
    }];
    let r = [FileFunctions {
        file: "src/capi/x.rs".into(),
        functions: vec![f("a", 1), f("b", 0)],
    }];
    assert_eq!(compare(&h, &r).unwrap().functions, 2);
    // Nothing declared at all is an error, not an empty agreement.
    let none = [FileFunctions {
        file: "include/x.h".into(),
        functions: vec![],
    }];
    assert!(compare(&none, &none).is_err());
}
