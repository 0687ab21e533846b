//! Registry and model handles.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use audio_engine::ggml::Device;

use crate::engine::{self, FailureKind, Package};
use crate::options::{self, Row, Scope};
use crate::status::{c_string, AbiError, AbiResult, Status};
use crate::vocab::{Mode, FAMILY};

/// The families this build knows.
#[derive(Debug)]
pub struct Registry {
    /// Family names as C strings.
    pub families: Vec<CString>,
}

impl Registry {
    /// The built-in registry.
    pub fn builtin() -> Registry {
        Registry {
            families: vec![c_string(FAMILY)],
        }
    }
}

/// `audiocpp_registry`.
pub struct RegistryHandle(pub Arc<Registry>);

/// What `audiocpp_model_config` asks for, read from C.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelConfig {
    /// `family_hint`.
    pub family_hint: Option<String>,
    /// `config_id`.
    pub config_id: Option<String>,
    /// `weight_id`.
    pub weight_id: Option<String>,
    /// `model_spec_override`.
    pub model_spec_override: Option<String>,
}

/// One option row as C strings.
pub struct RowC {
    /// Name.
    pub name: CString,
    /// Value type.
    pub value_name: CString,
    /// Description.
    pub description: CString,
    /// Default.
    pub default: CString,
    /// Minimum.
    pub min: CString,
    /// Maximum.
    pub max: CString,
    /// Required.
    pub required: bool,
}

impl RowC {
    fn of(r: Row) -> RowC {
        RowC {
            name: c_string(&r.name),
            value_name: c_string(&r.value_name),
            description: c_string(&r.description),
            default: c_string(&r.default),
            min: c_string(&r.min),
            max: c_string(&r.max),
            required: r.required,
        }
    }
}

/// A loaded model, shared by its handle and its sessions.
pub struct ModelInner {
    _registry: Arc<Registry>,
    /// The family name.
    pub family: CString,
    /// One line about the model.
    pub description: CString,
    /// Its language tag.
    pub language: String,
    /// Its languages as C strings.
    pub languages: Vec<CString>,
    package: Package,
    /// The loaded weights, shared by every session (each with its own thread count).
    engine: engine::Model,
    /// The same package loaded on other devices, each at the first session that asks for it
    /// (`audiocpp_backend_config`), then shared like `engine`.
    on_devices: Mutex<Vec<(Device, engine::Model)>>,
    rows: OnceLock<[Vec<RowC>; 3]>,
}

/// `audiocpp_model`.
pub struct ModelHandle(pub Arc<ModelInner>);

fn load_failed(message: impl Into<String>) -> AbiError {
    AbiError::new(Status::LoadFailed, message)
}

fn nonempty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

impl ModelInner {
    /// `audiocpp_model_load`.
    pub fn load(
        registry: Arc<Registry>,
        path: &str,
        config: &ModelConfig,
        load_options: &BTreeMap<String, String>,
    ) -> AbiResult<ModelInner> {
        if let Some(f) = nonempty(&config.family_hint) {
            if f != FAMILY {
                return Err(AbiError::new(
                    Status::UnsupportedFamily,
                    format!("family `{f}` is not in this registry (it has {FAMILY})"),
                ));
            }
        }
        if let Some(c) = nonempty(&config.config_id) {
            return Err(AbiError::invalid(format!(
                "config_id `{c}`: {FAMILY} has no configs"
            )));
        }
        if let Some(m) = nonempty(&config.model_spec_override) {
            return Err(AbiError::invalid(format!(
                "model_spec_override `{m}`: {FAMILY} takes no model spec"
            )));
        }
        options::load_options(load_options)?;
        // `hf:REPO[:QUANT]` (feature `hub`, lfm2e.h): the package's snapshot directory in the
        // Hugging Face cache, fetched first, and its quantization as the weight id.
        #[cfg(feature = "hub")]
        let hub = crate::hub::model_path(path, nonempty(&config.weight_id))?;
        #[cfg(not(feature = "hub"))]
        let hub: Option<(std::path::PathBuf, String)> = None;
        let (dir, weight_id) = match &hub {
            Some((d, q)) => (d.as_path(), Some(q.as_str())),
            None => (Path::new(path), nonempty(&config.weight_id)),
        };
        if dir.is_file() {
            return Err(load_failed(format!(
                "{path} is a file: {FAMILY} loads a package directory holding the four GGUF \
                 files of one quantization (<model>-<q>.gguf, mmproj-, vocoder-, tokenizer-); \
                 the published GGUFs embed no model spec, so a single file cannot be loaded"
            )));
        }
        if !dir.is_dir() {
            return Err(load_failed(format!("{path}: no such directory")));
        }
        let detecting = nonempty(&config.family_hint).is_none();
        let package = Package::find(dir, weight_id).map_err(|f| match f.kind {
            FailureKind::Invalid => AbiError::invalid(format!("weight_id: {}", f.message)),
            _ if detecting => load_failed(format!(
                "cannot detect the family of {path}: it is not an {FAMILY} package ({})",
                f.message
            )),
            _ => load_failed(f.message),
        })?;
        let engine = package
            .load(1, Device::Cpu)
            .map_err(|f| load_failed(f.message))?;
        let language = engine.language();
        Ok(ModelInner {
            _registry: registry,
            family: c_string(FAMILY),
            description: c_string(&engine.description()),
            languages: vec![c_string(&language)],
            language,
            package,
            engine,
            on_devices: Mutex::new(Vec::new()),
            rows: OnceLock::new(),
        })
    }

    /// Whether the model runs `task` in `mode` (tokens).
    pub fn supports(&self, task: &str, mode: &str) -> bool {
        match (crate::vocab::task_from_token(task), Mode::from_token(mode)) {
            (Some(t), Some(m)) => crate::vocab::supports(t, m),
            _ => false,
        }
    }

    /// The files the model loaded, by role.
    pub fn files(&self) -> [(&'static str, &Path); 4] {
        self.package.files()
    }

    /// The option rows of a scope (built on first use).
    pub fn rows(&self, scope: Scope) -> &[RowC] {
        let all = self.rows.get_or_init(|| {
            let files = self.files();
            [Scope::Request, Scope::Session, Scope::Load].map(|s| {
                options::rows(s, &self.language, &files)
                    .into_iter()
                    .map(RowC::of)
                    .collect()
            })
        });
        &all[scope as usize]
    }

    /// What the model's step scheduler has run (its sessions' steps, batched).
    pub fn step_stats(&self) -> audio_engine::lfm2_audio::TickStats {
        self.engine.step_stats()
    }

    /// The engine for sessions of `threads` threads on `device`.
    ///
    /// why per model and device: sessions share the one copy of the weights on each device;
    /// only the compute threads differ. The CPU copy is the one `audiocpp_model_load` made;
    /// another device's is loaded at its first session (a missing device fails that session
    /// with `NOT_AVAILABLE`, naming it).
    pub fn engine(&self, threads: usize, device: Device) -> AbiResult<engine::Model> {
        if device == Device::Cpu {
            return Ok(self.engine.with_threads(threads));
        }
        let mut loaded = self.on_devices.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, m)) = loaded.iter().find(|(d, _)| *d == device) {
            return Ok(m.with_threads(threads));
        }
        let m = self
            .package
            .load(threads, device)
            .map_err(|f| AbiError::not_available(format!("{device}: {}", f.message)))?;
        loaded.push((device, m.clone()));
        Ok(m)
    }
}
