//! `--hf REPO[:QUANT]` and `--offline`: a package from the Hugging Face Hub, through the cache
//! that Python's `huggingface_hub` shares (see `audio_engine::lfm2_audio::hub`).

use std::path::Path;

use anyhow::{Context, Result};
use audio_engine::lfm2_audio::hub::{fetch, HubOptions, HubSpec, DEFAULT_QUANT};
use audio_engine::lfm2_audio::{Lfm2Audio, ModelOptions, ModelPackage, PackagePaths, Quant};

/// The hub flags, flattened into an example's arguments (next to its `--model`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct HubArgs {
    /// A model repository on the Hugging Face Hub and optionally its quantization (F32, F16,
    /// Q8_0, Q4_0; default Q4_0), e.g. LiquidAI/LFM2.5-Audio-1.5B-GGUF:Q4_0. Its four files
    /// are downloaded once into the Hugging Face cache (HF_HOME, HF_HUB_CACHE; HF_TOKEN and
    /// HF_ENDPOINT are honoured).
    #[arg(long, value_name = "REPO[:QUANT]")]
    pub hf: Option<String>,
    /// With --hf: use the Hugging Face cache only, make no request (also HF_HUB_OFFLINE=1).
    #[arg(long, requires = "hf")]
    pub offline: bool,
}

impl HubArgs {
    /// Whether a hub package was asked for.
    pub fn is_set(&self) -> bool {
        self.hf.is_some()
    }

    /// The package `--hf` names, fetched into the cache (`None` without `--hf`). Without
    /// `:QUANT` the quantization is `default_quant` (else Q4_0), and it says so.
    pub fn fetch(&self, default_quant: Option<Quant>) -> Result<Option<PackagePaths>> {
        let Some(hf) = &self.hf else {
            return Ok(None);
        };
        let mut spec = HubSpec::parse(hf)?;
        if spec.quant.is_none() {
            let q = default_quant.unwrap_or(DEFAULT_QUANT);
            println!("--hf {hf} names no quantization: using {q} (add :F32, :F16, :Q8_0 or :Q4_0)");
            spec.quant = Some(q);
        }
        let mut opts = HubOptions::from_vars(&|name| std::env::var(name).ok());
        opts.offline |= self.offline;
        let got = fetch(&spec, &opts).with_context(|| format!("fetching {spec}"))?;
        let dir = got.paths.backbone.parent().unwrap_or(Path::new("."));
        if got.offline_fallback {
            eprintln!(
                "{} cannot be reached: using {spec} from the cache",
                opts.endpoint
            );
        }
        println!(
            "{spec}: commit {} in {} ({} downloaded, {} hashed)",
            &got.commit[..got.commit.len().min(12)],
            dir.display(),
            got.downloaded.len(),
            got.hashed.len()
        );
        Ok(Some(got.paths))
    }
}

/// Loads `--hf` when given, else `--model DIR` or the demo package (see
/// [`super::open_model`]).
pub fn open_model_or_hub(
    model: Option<&Path>,
    hub: &HubArgs,
    options: ModelOptions,
    noise: &str,
) -> Result<Lfm2Audio> {
    match hub.fetch(None)? {
        Some(paths) => {
            let label = paths.label();
            let package =
                ModelPackage::open_paths(paths).with_context(|| format!("opening {label}"))?;
            Lfm2Audio::from_package(package, options).with_context(|| format!("loading {label}"))
        }
        None => super::open_model(model, options, noise),
    }
}
