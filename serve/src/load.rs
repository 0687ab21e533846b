//! Loading a served model: a package directory, an `hf:REPO[:QUANT]` path through the Hugging
//! Face cache (feature `hub`), or the built-in demo package.

use std::path::Path;

use audio_engine::lfm2_audio::{Lfm2Audio, ModelOptions};

use crate::config::Settings;

/// Loads one package (`None`: the demo package).
pub fn load_model(path: Option<&Path>, settings: &Settings) -> anyhow::Result<Lfm2Audio> {
    let opts = ModelOptions {
        n_threads: settings.threads,
        device: settings.device,
        max_batch: settings.batch,
        batch_from: settings.batch_from,
        max_audio_seconds: settings.max_audio_seconds,
        ..crate::config::model_defaults()
    };
    #[cfg(feature = "hub")]
    if let Some(spec) = path.and_then(|p| p.to_str()).and_then(hub_spec) {
        return load_from_hub(&spec?, settings, opts);
    }
    match path {
        Some(p) => Ok(Lfm2Audio::load(p, opts)?),
        #[cfg(feature = "demo")]
        None => Ok(audio_tooling::load_demo(
            &audio_tooling::default_demo_dir(),
            opts,
        )?),
        #[cfg(not(feature = "demo"))]
        None => anyhow::bail!("no --model given and the demo package is not built in"),
    }
}

/// The hub spec of an `hf:REPO[:QUANT]` model path (`None` for a directory).
#[cfg(feature = "hub")]
fn hub_spec(path: &str) -> Option<anyhow::Result<audio_engine::lfm2_audio::hub::HubSpec>> {
    audio_engine::lfm2_audio::hub::HubSpec::from_model_path(path).map(|r| Ok(r?))
}

/// Fetches a hub package into the Hugging Face cache (the environment's `HF_*` settings,
/// `--offline`) and loads it.
#[cfg(feature = "hub")]
fn load_from_hub(
    spec: &audio_engine::lfm2_audio::hub::HubSpec,
    settings: &Settings,
    opts: ModelOptions,
) -> anyhow::Result<Lfm2Audio> {
    use crate::config::DEFAULT_HUB_QUANT;
    use anyhow::Context;
    use audio_engine::lfm2_audio::hub::{fetch, HubOptions};
    let mut spec = spec.clone();
    if spec.quant.is_none() {
        tracing::info!("{spec} names no quantization: using {DEFAULT_HUB_QUANT}");
        spec.quant = Some(DEFAULT_HUB_QUANT);
    }
    let spec = &spec;
    let mut hub = HubOptions::from_vars(&crate::config::env_var);
    hub.offline |= settings.hub_offline;
    let got = fetch(spec, &hub).with_context(|| format!("fetching {spec}"))?;
    tracing::info!(
        "{spec}: commit {} ({} files downloaded, {} hashed{})",
        got.commit,
        got.downloaded.len(),
        got.hashed.len(),
        if got.offline_fallback {
            ", hub unreachable: from the cache"
        } else {
            ""
        }
    );
    let package = audio_engine::lfm2_audio::ModelPackage::open_paths(got.paths)?;
    Ok(Lfm2Audio::from_package(package, opts)?)
}
