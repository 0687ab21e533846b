//! The patch series and the strict applier the build uses.

#[allow(dead_code)]
#[path = "../build/patch.rs"]
mod patch;
#[allow(dead_code)]
#[path = "../build/tree.rs"]
mod tree;

use std::fs;
use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ggml-sys-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn upstream() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("upstream")
}

/// Re-applies the committed series to a fresh copy of the pristine pinned tree and checks that
/// every file it touches is byte-identical to the tree this crate was compiled from.
#[test]
fn series_applies_cleanly_to_the_pinned_tree() {
    let pin = tree::Pin::read(&upstream().join("UPSTREAM.toml"));
    let work = scratch("series");
    let search = tree::Search::new(Path::new(env!("CARGO_MANIFEST_DIR")), &work);
    let pristine = tree::locate_pristine(&pin, &search);
    let copy = work.join("tree");
    tree::copy_tree(&pristine, &copy);
    let names = patch::series(&upstream().join("patches"));
    // why after the whole series: a file two patches touch is compared in its final state.
    let mut touched = std::collections::BTreeSet::new();
    for name in &names {
        let text = fs::read_to_string(upstream().join("patches").join(name)).unwrap();
        let files = patch::apply_patch(&text, &copy).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!files.is_empty(), "{name} changes no file");
        touched.extend(files);
    }
    for f in &touched {
        let built = Path::new(ggml_sys::PATCHED_TREE).join(f);
        assert_eq!(
            fs::read(copy.join(f)).ok(),
            fs::read(&built).ok(),
            "{f} differs from the compiled tree"
        );
    }
    println!(
        "{} patches, {} changed files verified",
        names.len(),
        touched.len()
    );
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn applier_is_strict_and_handles_edge_cases() {
    let dir = scratch("applier");
    fs::write(dir.join("a.txt"), "one\ntwo\nthree\nfour\n").unwrap();
    let ok = "--- a/a.txt\n+++ b/a.txt\n@@ -2,2 +2,3 @@\n two\n-three\n+THREE\n+three and a half\n four\n";
    assert_eq!(
        patch::apply_patch(ok, &dir).unwrap(),
        vec!["a.txt".to_string()]
    );
    assert_eq!(
        fs::read_to_string(dir.join("a.txt")).unwrap(),
        "one\ntwo\nTHREE\nthree and a half\nfour\n"
    );
    // The same patch no longer matches: refused, file untouched.
    let err = patch::apply_patch(ok, &dir).unwrap_err();
    assert!(err.contains("does not match line 3"), "{err}");
    assert_eq!(
        fs::read_to_string(dir.join("a.txt")).unwrap(),
        "one\ntwo\nTHREE\nthree and a half\nfour\n"
    );
    // Context at the wrong line number is refused even if it exists elsewhere (no fuzz).
    let shifted = "--- a/a.txt\n+++ b/a.txt\n@@ -1,1 +1,1 @@\n-two\n+2\n";
    assert!(patch::apply_patch(shifted, &dir).is_err());
    // New file, then deletion, with a missing final newline.
    let create = "--- /dev/null\n+++ b/sub/new.h\n@@ -0,0 +1,2 @@\n+#pragma once\n+int x;\n\\ No newline at end of file\n";
    patch::apply_patch(create, &dir).unwrap();
    assert_eq!(
        fs::read_to_string(dir.join("sub/new.h")).unwrap(),
        "#pragma once\nint x;"
    );
    assert!(
        patch::apply_patch(create, &dir).is_err(),
        "creating an existing file"
    );
    let delete = "--- a/sub/new.h\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-#pragma once\n-int x;\n\\ No newline at end of file\n";
    patch::apply_patch(delete, &dir).unwrap();
    assert!(!dir.join("sub/new.h").exists());
    // Truncated hunk.
    let truncated = "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n";
    assert!(patch::apply_patch(truncated, &dir)
        .unwrap_err()
        .contains("truncated"));
    let _ = fs::remove_dir_all(&dir);
}
