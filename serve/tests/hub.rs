//! `serve --hf REPO[:QUANT]` (and `hf:` model paths) against a stand-in hub on loopback (the
//! audio-engine tests' `hub_server`) serving the demo package: the settings name the package
//! by an `hf:` path, `load_model` fetches it into the Hugging Face cache the environment names
//! and it transcribes exactly as the demo package loaded from its directory; with the server
//! gone, `--offline` loads it from the cache alone. Without a quantization it asks for Q8_0.

mod common;
#[path = "../../audio-engine/tests/hub_server/mod.rs"]
mod hub_server;

use std::path::{Path, PathBuf};

use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::AsrOptions;
use audio_tooling::{default_demo_dir, ensure_demo_package};
use clap::Parser;
use serve::config::{Cli, Settings};

use hub_server::{File, HubServer};

const REPO: &str = "test-org/Demo-GGUF";

#[test]
fn serve_hf_fetches_the_package_and_loads_it_offline_later() {
    let paths = ensure_demo_package(&default_demo_dir()).unwrap();
    let files = File::package(&paths);
    let mut srv = HubServer::start();
    srv.add_repo(REPO, "feedc0de00000000000000000000000000000000", files);
    let cache: PathBuf = common::scratch("serve-hub-cache");
    let _ = std::fs::remove_dir_all(&cache);
    // why here: this binary has this one test, so nothing else reads the environment meanwhile.
    std::env::set_var("HF_ENDPOINT", srv.endpoint());
    std::env::set_var("HF_HUB_CACHE", &cache);
    std::env::remove_var("HF_HUB_OFFLINE");
    std::env::remove_var("HF_TOKEN");

    let spec = format!("{REPO}:F32");
    let cli = Cli::try_parse_from(["serve", "--hf", &spec, "--threads", "1"]).unwrap();
    let settings = Settings::resolve(&cli).unwrap();
    assert_eq!(settings.models.len(), 3);
    let hf_path = PathBuf::from(format!("hf:{spec}"));
    assert!(settings
        .models
        .iter()
        .all(|m| m.path.as_deref() == Some(hf_path.as_path())));
    assert!(Cli::try_parse_from(["serve", "--hf", &spec, "--model", "/x"]).is_err());

    let hub = serve::load_model(Some(&hf_path), &settings).unwrap();
    let local = common::model();
    let wav = common::question(0);
    let opts = AsrOptions {
        max_new_tokens: 8,
        ..Default::default()
    };
    let (a, b) = (
        hub.asr_wav(&wav, &opts).unwrap(),
        local.asr_wav(&wav, &opts).unwrap(),
    );
    assert_eq!((a.tokens, a.text), (b.tokens, b.text));
    assert!(cache
        .join("models--test-org--Demo-GGUF/refs/main")
        .is_file());

    // Without a quantization serve asks for Q8_0 (README: Q4_0 replies were seen looping),
    // which this stand-in repository (F32 only) does not have.
    let bare = PathBuf::from(format!("hf:{REPO}"));
    let e = serve::load_model(Some(&bare), &settings).unwrap_err();
    assert!(
        format!("{e:#}").contains("no complete Q8_0 package"),
        "{e:#}"
    );

    // The hub gone: `--offline` loads from the cache; a bad spec is an error that says so.
    srv.stop();
    let cli = Cli::try_parse_from(["serve", "--hf", &spec, "--offline", "--threads", "1"]).unwrap();
    let offline = Settings::resolve(&cli).unwrap();
    assert!(offline.hub_offline);
    serve::load_model(Some(&hf_path), &offline).unwrap();
    let e = serve::load_model(Some(Path::new("hf:not a repo")), &offline).unwrap_err();
    assert!(format!("{e:#}").contains("not a repo"), "{e:#}");
    let _ = std::fs::remove_dir_all(&cache);
}
