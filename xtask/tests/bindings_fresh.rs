//! The committed bindings must match what bindgen produces from the patched tree today: a patch
//! that changes a header without regenerating them fails here.

#[test]
fn committed_bindings_are_fresh() {
    if !xtask::bindings::libclang_available() {
        ci_skip::skip(
            "committed_bindings_are_fresh",
            "libclang not found (apt-get install libclang-dev)",
        );
        return;
    }
    let mut stale = Vec::new();
    for b in xtask::bindings::all() {
        let path = xtask::workspace_root().join(b.path);
        let committed = std::fs::read_to_string(&path).expect("committed bindings");
        let fresh = b.generate().expect("bindgen runs");
        if committed != fresh {
            stale.push(b.path);
        }
    }
    assert!(
        stale.is_empty(),
        "stale bindings: {stale:?}; run `cargo run -p xtask -- bindings` and commit the result"
    );
}
