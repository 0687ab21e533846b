//! Server settings: command-line flags over a TOML or JSON config file over defaults.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Parser;
use serde::Deserialize;

/// `serve`: an HTTP server for LFM2-Audio voice assistants.
#[derive(Debug, Clone, Parser, Default)]
#[command(name = "serve", version, about)]
pub struct Cli {
    /// Model package directory (the four GGUF files), or `hf:REPO[:QUANT]`; without it (and
    /// without `models` in the config file) the built-in demo package is served.
    #[arg(long, conflicts_with = "hf")]
    pub model: Option<PathBuf>,
    /// A model repository on the Hugging Face Hub and optionally its quantization (default
    /// Q4_0), e.g. LiquidAI/LFM2.5-Audio-1.5B-GGUF:Q4_0, fetched into the Hugging Face cache
    /// (the same as `--model hf:REPO[:QUANT]`).
    #[arg(long, value_name = "REPO[:QUANT]")]
    pub hf: Option<String>,
    /// Hub packages from the Hugging Face cache only, no request (also `HF_HUB_OFFLINE=1`).
    #[arg(long)]
    pub offline: bool,
    /// Config file (`.toml` or `.json`); flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Model id prefix for `--model` (ids `<id>-s2s`, `<id>-asr`, `<id>-tts`).
    #[arg(long)]
    pub model_id: Option<String>,
    /// Listen address.
    #[arg(long)]
    pub host: Option<String>,
    /// Listen port (0: any free port).
    #[arg(long)]
    pub port: Option<u16>,
    /// Sessions per loaded model (parallel requests).
    #[arg(long)]
    pub slots: Option<usize>,
    /// Compute threads per graph (default: the cores); the slots share the cores between them.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Device the models run on: cpu, vulkan:N, cuda:N or metal (the build needs its feature;
    /// default: CUDA or Metal when built in, otherwise the CPU).
    #[arg(long, value_name = "DEVICE")]
    pub device: Option<audio_engine::ggml::Device>,
    /// Most replies whose next step one graph computes (default 1: each reply computes its own
    /// steps). Above 1, the replies of the slots running at once are batched up to this once
    /// `--batch-from` of them run; bytes never change.
    #[arg(long)]
    pub batch: Option<usize>,
    /// Replies generating at once from which their steps batch (default 3: fewer compute each
    /// on its own, which is faster for two on a 2-core machine).
    #[arg(long)]
    pub batch_from: Option<usize>,
    /// Realtime sockets with server VAD start a turn's encode and prefill once the speaker
    /// has been silent this long, ms, before the silence duration ends the turn (0: off;
    /// default 200). Bytes never change; only when the reply starts does.
    #[arg(long)]
    pub early_turn_ms: Option<u32>,
    /// The end-of-turn model's weights for Realtime `semantic_vad` (smart-turn v3.2 converted by
    /// scripts/smart_turn_weights.sh; default: $VAD_SMART_TURN_WEIGHTS, else
    /// ~/.cache/voice-activity/smart-turn-v3.2.safetensors). A file named here or by the
    /// variable must load; a missing default file makes semantic_vad a silence timer.
    #[arg(long, value_name = "FILE")]
    pub smart_turn_weights: Option<PathBuf>,
    /// Longest wait for a free session, ms (0: unbounded); a request may ask for less.
    #[arg(long)]
    pub busy_timeout_ms: Option<u64>,
    /// Most requests waiting for a session per model; more are answered 503 at once.
    #[arg(long)]
    pub max_queue: Option<usize>,
    /// Largest request body, bytes.
    #[arg(long)]
    pub max_body_bytes: Option<usize>,
    /// Longest audio input, seconds.
    #[arg(long)]
    pub max_audio_seconds: Option<f64>,
    /// Largest `max_tokens` a request may ask for.
    #[arg(long)]
    pub max_tokens: Option<usize>,
    /// Most concurrent streamed responses.
    #[arg(long)]
    pub max_streams: Option<usize>,
    /// CORS origins (`*` for any); CORS is off without this.
    #[arg(long = "cors-origin")]
    pub cors_origins: Vec<String>,
    /// API key required as `Authorization: Bearer KEY` (also env `SERVE_API_KEY`).
    #[arg(long, env = "SERVE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Directory whose files requests may name as server-side audio paths (off without it).
    #[arg(long)]
    pub audio_dir: Option<PathBuf>,
    /// On SIGTERM/SIGINT, how long in-flight requests may run before they are cut, ms.
    #[arg(long)]
    pub shutdown_timeout_ms: Option<u64>,
}

/// One served model entry.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// The id requests name.
    pub id: String,
    /// Package directory, or `hf:REPO[:QUANT]` for a package from the Hugging Face Hub;
    /// absent: the demo package.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// Model family (only `lfm2_audio`).
    #[serde(default = "default_family")]
    pub family: String,
    /// `s2s`, `asr` or `tts`.
    #[serde(default = "default_task")]
    pub task: String,
    /// `offline` or `streaming` (informational: every entry streams).
    #[serde(default = "default_mode")]
    pub mode: String,
}

fn default_family() -> String {
    "lfm2_audio".into()
}
fn default_task() -> String {
    "s2s".into()
}
fn default_mode() -> String {
    "streaming".into()
}

/// The config file.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct FileConfig {
    pub host: Option<String>,
    pub port: Option<u16>,
    pub threads: Option<usize>,
    pub device: Option<String>,
    pub batch: Option<usize>,
    pub batch_from: Option<usize>,
    pub slots: Option<usize>,
    pub early_turn_ms: Option<u32>,
    pub smart_turn_weights: Option<PathBuf>,
    pub busy_timeout_ms: Option<u64>,
    pub max_queue: Option<usize>,
    pub max_request_body_bytes: Option<usize>,
    pub max_audio_seconds: Option<f64>,
    pub max_tokens: Option<usize>,
    pub max_streams: Option<usize>,
    pub cors_origins: Vec<String>,
    pub api_key: Option<String>,
    pub audio_dir: Option<PathBuf>,
    pub shutdown_timeout_ms: Option<u64>,
    pub prefill_slots: Option<usize>,
    pub kept_questions: Option<usize>,
    pub models: Vec<ModelEntry>,
}

impl FileConfig {
    /// Reads a `.json` file as JSON, anything else as TOML.
    pub fn read(path: &Path) -> anyhow::Result<FileConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        let cfg = if path.extension().is_some_and(|e| e == "json") {
            serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
        } else {
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
        };
        Ok(cfg)
    }
}

/// The default `--early-turn-ms`: long enough that the gaps between words rarely start a turn
/// early for nothing, short enough that most of the encode and prefill is done when the
/// default 500 ms of silence ends the turn.
pub const DEFAULT_EARLY_TURN_MS: u32 = 200;

/// Resolved settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub host: String,
    pub port: u16,
    pub threads: usize,
    /// The device the models run on (`None`: the best this build has).
    pub device: Option<audio_engine::ggml::Device>,
    /// The model's `max_batch`: replies per step tick.
    pub batch: usize,
    /// The model's `batch_from`: replies generating at once before their steps batch.
    pub batch_from: usize,
    pub slots: usize,
    /// Realtime server VAD: silence after which a turn starts early, ms (0: never).
    pub early_turn_ms: u32,
    /// `--smart-turn-weights`: semantic_vad's model file, when given explicitly.
    pub smart_turn_weights: Option<PathBuf>,
    pub busy_timeout_ms: u64,
    pub max_queue: usize,
    pub max_body_bytes: usize,
    pub max_audio_seconds: f64,
    pub max_tokens: usize,
    pub max_streams: usize,
    pub cors_origins: Vec<String>,
    pub api_key: Option<String>,
    pub audio_dir: Option<PathBuf>,
    pub shutdown_timeout_ms: u64,
    pub prefill_slots: usize,
    pub kept_questions: usize,
    pub models: Vec<ModelEntry>,
    /// Hub packages (`hf:` paths) from the cache only (`--offline`).
    pub hub_offline: bool,
}

/// An environment variable, for the engine's documented ones (`LFM2_*`, `LLAMA_LOG`): the
/// server is a binary, and the engine library reads no environment itself.
pub fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The engine's model options with the environment's `LFM2_*` variables applied.
pub fn model_defaults() -> audio_engine::lfm2_audio::ModelOptions {
    audio_engine::lfm2_audio::ModelOptions::default().with_vars(&env_var)
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            host: "127.0.0.1".into(),
            port: 8080,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            device: None,
            batch: model_defaults().max_batch,
            batch_from: model_defaults().batch_from,
            slots: 2,
            early_turn_ms: DEFAULT_EARLY_TURN_MS,
            smart_turn_weights: None,
            busy_timeout_ms: 300_000,
            max_queue: 64,
            max_body_bytes: 64 << 20,
            max_audio_seconds: 60.0,
            max_tokens: 4096,
            max_streams: 64,
            cors_origins: Vec::new(),
            api_key: None,
            audio_dir: None,
            shutdown_timeout_ms: 10_000,
            prefill_slots: 4,
            kept_questions: 32,
            models: Vec::new(),
            hub_offline: false,
        }
    }
}

/// The three entries (`<id>-s2s`, `<id>-asr`, `<id>-tts`) of one package.
pub fn entries_for(id: &str, path: Option<PathBuf>) -> Vec<ModelEntry> {
    ["s2s", "asr", "tts"]
        .iter()
        .map(|t| ModelEntry {
            id: format!("{id}-{t}"),
            path: path.clone(),
            family: default_family(),
            task: (*t).into(),
            mode: default_mode(),
        })
        .collect()
}

impl Settings {
    /// Flags over the config file over the defaults.
    pub fn resolve(cli: &Cli) -> anyhow::Result<Settings> {
        let file = match &cli.config {
            Some(p) => FileConfig::read(p)?,
            None => FileConfig::default(),
        };
        let d = Settings::default();
        let mut models = file.models;
        if let Some(m) = &cli.model {
            let id = cli.model_id.clone().unwrap_or_else(|| "lfm2-audio".into());
            models = entries_for(&id, Some(m.clone()));
        }
        if let Some(hf) = &cli.hf {
            let id = cli.model_id.clone().unwrap_or_else(|| "lfm2-audio".into());
            models = entries_for(&id, Some(PathBuf::from(format!("hf:{hf}"))));
        }
        if models.is_empty() {
            let id = cli.model_id.clone().unwrap_or_else(|| "lfm2-audio".into());
            models = entries_for(&id, None);
        }
        for m in &models {
            if m.family != "lfm2_audio" {
                anyhow::bail!(
                    "model `{}`: family `{}` is not served (only lfm2_audio)",
                    m.id,
                    m.family
                );
            }
            if !["s2s", "asr", "tts"].contains(&m.task.as_str()) {
                anyhow::bail!("model `{}`: task `{}` is not s2s, asr or tts", m.id, m.task);
            }
            if !["offline", "streaming"].contains(&m.mode.as_str()) {
                anyhow::bail!(
                    "model `{}`: mode `{}` is not offline or streaming",
                    m.id,
                    m.mode
                );
            }
        }
        let s = Settings {
            host: cli.host.clone().or(file.host).unwrap_or(d.host),
            port: cli.port.or(file.port).unwrap_or(d.port),
            threads: cli.threads.or(file.threads).unwrap_or(d.threads).max(1),
            device: match (cli.device, &file.device) {
                (Some(d), _) => Some(d),
                (None, Some(s)) => Some(s.parse().context("config file: device")?),
                (None, None) => d.device,
            },
            batch: cli.batch.or(file.batch).unwrap_or(d.batch).clamp(1, 64),
            batch_from: cli
                .batch_from
                .or(file.batch_from)
                .unwrap_or(d.batch_from)
                .clamp(1, 64),
            slots: cli.slots.or(file.slots).unwrap_or(d.slots).clamp(1, 64),
            early_turn_ms: cli
                .early_turn_ms
                .or(file.early_turn_ms)
                .unwrap_or(d.early_turn_ms),
            smart_turn_weights: cli.smart_turn_weights.clone().or(file.smart_turn_weights),
            busy_timeout_ms: cli
                .busy_timeout_ms
                .or(file.busy_timeout_ms)
                .unwrap_or(d.busy_timeout_ms),
            max_queue: cli.max_queue.or(file.max_queue).unwrap_or(d.max_queue),
            max_body_bytes: cli
                .max_body_bytes
                .or(file.max_request_body_bytes)
                .unwrap_or(d.max_body_bytes),
            max_audio_seconds: cli
                .max_audio_seconds
                .or(file.max_audio_seconds)
                .unwrap_or(d.max_audio_seconds),
            max_tokens: cli.max_tokens.or(file.max_tokens).unwrap_or(d.max_tokens),
            max_streams: cli
                .max_streams
                .or(file.max_streams)
                .unwrap_or(d.max_streams),
            cors_origins: if cli.cors_origins.is_empty() {
                file.cors_origins
            } else {
                cli.cors_origins.clone()
            },
            api_key: cli.api_key.clone().or(file.api_key),
            audio_dir: cli.audio_dir.clone().or(file.audio_dir),
            shutdown_timeout_ms: cli
                .shutdown_timeout_ms
                .or(file.shutdown_timeout_ms)
                .unwrap_or(d.shutdown_timeout_ms),
            prefill_slots: file.prefill_slots.unwrap_or(d.prefill_slots),
            kept_questions: file.kept_questions.unwrap_or(d.kept_questions),
            models,
            hub_offline: cli.offline,
        };
        Ok(s)
    }
}
