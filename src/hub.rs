//! `hf:REPO[:QUANT]` model paths for `audiocpp_model_load` (feature `hub`; see lfm2e.h).

use std::path::PathBuf;

use audio_engine::lfm2_audio::hub::{fetch, HubOptions, HubSpec};
use audio_engine::lfm2_audio::Quant;

use crate::status::{AbiError, AbiResult, Status};

/// For an `hf:` model path: the package's directory in the Hugging Face cache (fetched into it
/// first when missing, as the environment's `HF_*` variables say) and its quantization, the
/// spec's, else `weight_id`'s, else Q4_0. `None` for any other path.
pub fn model_path(path: &str, weight_id: Option<&str>) -> AbiResult<Option<(PathBuf, String)>> {
    let Some(spec) = HubSpec::from_model_path(path) else {
        return Ok(None);
    };
    let mut spec = spec.map_err(|e| AbiError::invalid(e.to_string()))?;
    if spec.quant.is_none() {
        if let Some(w) = weight_id {
            let q = w
                .parse::<Quant>()
                .map_err(|e| AbiError::invalid(format!("weight_id: {e}")))?;
            spec.quant = Some(q);
        }
    }
    // why no progress bars: a library must not draw on its host program's terminal.
    let opts = HubOptions {
        progress: false,
        ..HubOptions::from_vars(&crate::engine::env_var)
    };
    let got = fetch(&spec, &opts)
        .map_err(|e| AbiError::new(Status::LoadFailed, format!("{path}: {e}")))?;
    let dir = got
        .paths
        .backbone
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default();
    Ok(Some((dir, got.paths.quant.to_string())))
}
