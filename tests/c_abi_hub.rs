//! `audiocpp_model_load` with an `hf:REPO[:QUANT]` model path (feature `hub`, include/lfm2e.h)
//! against a stand-in hub on loopback (audio-engine's `tests/hub_server`) serving the demo
//! package: the package is fetched into the Hugging Face cache the environment names and
//! loaded; without `:QUANT` the config's weight_id would name it, and a bad spec is
//! INVALID_ARGUMENT, a repository that is not there LOAD_FAILED naming it. Run by `.ci/run` as
//! `cargo test --features hub --test c_abi_hub`.

mod common;
#[path = "../audio-engine/tests/hub_server/mod.rs"]
mod hub_server;

use std::ffi::{c_int, CString};
use std::ptr::{null, null_mut};

use audio_tooling::demo::ensure_demo_package;

use common::capi::*;
use hub_server::{File, HubServer};

/// Loads `path` through the C ABI: the status and the message.
fn load(path: &str) -> (c_int, String) {
    let path = CString::new(path).unwrap();
    // SAFETY: valid C strings and out pointers; every handle is freed once.
    unsafe {
        let (mut reg, mut model) = (null_mut(), null_mut());
        assert_eq!(audiocpp_registry_create(null(), &mut reg), 0);
        let st = audiocpp_model_load(reg, path.as_ptr(), null(), null(), &mut model);
        let msg = last_error();
        if st == 0 {
            audiocpp_model_free(model);
        }
        audiocpp_registry_free(reg);
        (st, msg)
    }
}

#[test]
fn an_hf_model_path_is_fetched_into_the_cache_and_loaded() {
    let paths = ensure_demo_package(common::demo_package()).unwrap();
    let files = File::package(&paths);
    let mut srv = HubServer::start();
    srv.add_repo("test-org/Demo-GGUF", &"c".repeat(40), files);
    let cache = std::env::temp_dir().join(format!("c-abi-hub-{}", std::process::id()));
    // why here: this binary has this one test, so nothing else reads the environment meanwhile.
    std::env::set_var("HF_ENDPOINT", srv.endpoint());
    std::env::set_var("HF_HUB_CACHE", &cache);
    std::env::remove_var("HF_HUB_OFFLINE");

    assert_eq!(load("hf:test-org/Demo-GGUF:F32"), (0, String::new()));
    assert!(cache
        .join("models--test-org--Demo-GGUF/snapshots")
        .join("c".repeat(40))
        .join(paths.backbone.file_name().unwrap())
        .is_file());
    let (st, msg) = load("hf:test-org/Missing-GGUF:F32");
    assert_eq!(st, 3, "{msg}");
    assert!(msg.contains("test-org/Missing-GGUF"), "{msg}");
    let (st, msg) = load("hf:no-slash");
    assert_eq!(st, 1, "{msg}");
    // The default Q4_0 is not in the repository: the message lists what is.
    let (st, msg) = load("hf:test-org/Demo-GGUF");
    assert_eq!(st, 3, "{msg}");
    assert!(msg.contains("F32") && msg.contains("Q4_0"), "{msg}");

    // The hub gone: the cached package still loads.
    srv.stop();
    assert_eq!(load("hf:test-org/Demo-GGUF:F32").0, 0);
    let _ = std::fs::remove_dir_all(&cache);
}
