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
    #[arg(long, conflicts_with = "hf", env = "SERVE_MODEL")]
    pub model: Option<PathBuf>,
    /// A model repository on the Hugging Face Hub and optionally its quantization (default
    /// Q8_0: Q4_0 replies were seen looping to max_tokens, see README), e.g. LiquidAI/LFM2.5-Audio-1.5B-GGUF:Q4_0, fetched into the Hugging Face cache
    /// (the same as `--model hf:REPO[:QUANT]`).
    #[arg(long, value_name = "REPO[:QUANT]", env = "SERVE_HF")]
    pub hf: Option<String>,
    /// Hub packages from the Hugging Face cache only, no request (also `HF_HUB_OFFLINE=1`).
    #[arg(long, env = "SERVE_OFFLINE")]
    pub offline: bool,
    /// Config file (`.toml` or `.json`); flags override it.
    #[arg(long, env = "SERVE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Model id prefix for `--model` (ids `<id>-s2s`, `<id>-asr`, `<id>-tts`).
    #[arg(long, env = "SERVE_MODEL_ID")]
    pub model_id: Option<String>,
    /// Listen address.
    #[arg(long, env = "SERVE_HOST")]
    pub host: Option<String>,
    /// Listen port (0: any free port).
    #[arg(long, env = "SERVE_PORT")]
    pub port: Option<u16>,
    /// Sessions per loaded model (parallel requests).
    #[arg(long, env = "SERVE_SLOTS")]
    pub slots: Option<usize>,
    /// Compute threads per graph (default: the cores); the slots share the cores between them.
    #[arg(long, env = "SERVE_THREADS")]
    pub threads: Option<usize>,
    /// Device the models run on: cpu, vulkan:N, cuda:N or metal (the build needs its feature;
    /// default: CUDA or Metal when built in, otherwise the CPU).
    #[arg(long, value_name = "DEVICE", env = "SERVE_DEVICE")]
    pub device: Option<audio_engine::ggml::Device>,
    /// Most replies whose next step one graph computes (default 1: each reply computes its own
    /// steps). Above 1, the replies of the slots running at once are batched up to this once
    /// `--batch-from` of them run; bytes never change.
    #[arg(long, env = "SERVE_BATCH")]
    pub batch: Option<usize>,
    /// Replies generating at once from which their steps batch (default 3: fewer compute each
    /// on its own, which is faster for two on a 2-core machine).
    #[arg(long, env = "SERVE_BATCH_FROM")]
    pub batch_from: Option<usize>,
    /// Realtime sockets with server VAD start a turn's encode and prefill once the speaker
    /// has been silent this long, ms, before the silence duration ends the turn (0: off;
    /// default 200). Bytes never change; only when the reply starts does.
    #[arg(long, env = "SERVE_EARLY_TURN_MS")]
    pub early_turn_ms: Option<u32>,
    /// The end-of-turn model's weights for Realtime `semantic_vad` (smart-turn v3.2 converted by
    /// scripts/smart_turn_weights.sh; default: $VAD_SMART_TURN_WEIGHTS, else
    /// ~/.cache/voice-activity/smart-turn-v3.2.safetensors). A file named here or by the
    /// variable must load; a missing default file makes semantic_vad a silence timer.
    #[arg(long, value_name = "FILE", env = "SERVE_SMART_TURN_WEIGHTS")]
    pub smart_turn_weights: Option<PathBuf>,
    /// Longest wait for a free session, ms (0: unbounded); a request may ask for less.
    #[arg(long, env = "SERVE_BUSY_TIMEOUT_MS")]
    pub busy_timeout_ms: Option<u64>,
    /// Most requests waiting for a session per model; more are answered 503 at once.
    #[arg(long, env = "SERVE_MAX_QUEUE")]
    pub max_queue: Option<usize>,
    /// Largest request body, bytes.
    #[arg(long, env = "SERVE_MAX_BODY_BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Longest audio input, seconds.
    #[arg(long, env = "SERVE_MAX_AUDIO_SECONDS")]
    pub max_audio_seconds: Option<f64>,
    /// Most bytes one Realtime socket's conversation may hold (its questions' audio, texts and
    /// reply artifacts); an item past it is refused with an `error` event.
    #[arg(long, env = "SERVE_MAX_CONVERSATION_BYTES")]
    pub max_conversation_bytes: Option<usize>,
    /// Largest `max_tokens` a request may ask for.
    #[arg(long, env = "SERVE_MAX_TOKENS")]
    pub max_tokens: Option<usize>,
    /// Most concurrent streamed responses.
    #[arg(long, env = "SERVE_MAX_STREAMS")]
    pub max_streams: Option<usize>,
    /// CORS origins (`*` for any; repeat the flag or separate by commas); CORS is off
    /// without this.
    #[arg(long = "cors-origin", env = "SERVE_CORS_ORIGIN", value_delimiter = ',')]
    pub cors_origins: Vec<String>,
    /// API key required as `Authorization: Bearer KEY` (also env `SERVE_API_KEY`).
    #[arg(long, env = "SERVE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Directory whose files requests may name as server-side audio paths (off without it).
    #[arg(long, env = "SERVE_AUDIO_DIR")]
    pub audio_dir: Option<PathBuf>,
    /// On SIGTERM/SIGINT, how long in-flight requests may run before they are cut, ms.
    #[arg(long, env = "SERVE_SHUTDOWN_TIMEOUT_MS")]
    pub shutdown_timeout_ms: Option<u64>,
    /// Most open Realtime sockets (0: no limit; default 256); more are answered 503 before
    /// the upgrade.
    #[arg(long, env = "SERVE_MAX_SOCKETS")]
    pub max_sockets: Option<usize>,
    /// Most open Realtime sockets per client address (0: no limit; default 16); more are
    /// answered 429 before the upgrade.
    #[arg(long, env = "SERVE_MAX_SOCKETS_PER_CLIENT")]
    pub max_sockets_per_client: Option<usize>,
    /// The client address of the per-client limit is the last `X-Forwarded-For` entry (the one
    /// the proxy in front added) instead of the peer address: only behind a proxy that sets it.
    #[arg(long, env = "SERVE_TRUST_FORWARDED")]
    pub trust_forwarded: bool,
    /// Browser origins (`scheme://host[:port]`, `*` for any; repeat or separate by commas) that
    /// may open Realtime sockets besides the server's own pages; requests without `Origin`
    /// (non-browser clients) are always let through. Others get 403.
    #[arg(long, env = "SERVE_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Vec<String>,
    /// Longest HTTP request, ms, to the response's head (0: none; default 600000): a streamed
    /// body (SSE, chunked) is bounded until its first byte only. Not the Realtime socket.
    #[arg(long, env = "SERVE_REQUEST_TIMEOUT_MS")]
    pub request_timeout_ms: Option<u64>,
    /// A Realtime socket with no client event and no running response for this long, ms, is
    /// closed with code 4408 (0: never; default 300000).
    #[arg(long, env = "SERVE_IDLE_TIMEOUT_MS")]
    pub idle_timeout_ms: Option<u64>,
    /// Log lines as `text` (default) or `json` (one object a line).
    #[arg(long, env = "SERVE_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object a line (tracing-subscriber's json formatter).
    Json,
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
    pub max_conversation_bytes: Option<usize>,
    pub max_tokens: Option<usize>,
    pub max_streams: Option<usize>,
    pub cors_origins: Vec<String>,
    pub api_key: Option<String>,
    pub audio_dir: Option<PathBuf>,
    pub shutdown_timeout_ms: Option<u64>,
    pub offline: Option<bool>,
    pub max_sockets: Option<usize>,
    pub max_sockets_per_client: Option<usize>,
    pub trust_forwarded: Option<bool>,
    pub allowed_origins: Vec<String>,
    pub request_timeout_ms: Option<u64>,
    pub idle_timeout_ms: Option<u64>,
    pub log_format: Option<LogFormat>,
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

/// The quantization `--hf REPO` (and `hf:REPO`) loads when it names none.
///
/// why not the engine's hub default (Q4_0): audio.cpp measured Q4_0 speech-to-speech replies
/// repeating until `max_tokens` in 2 of 30 (CUDA, M3 CPU) and 2 of 60 (x86 CPU) ten-turn runs,
/// and none with Q8_0 (issue #40). A server answers whoever calls; the examples and the bench
/// keep naming Q4_0 where they mean it.
pub const DEFAULT_HUB_QUANT: audio_engine::lfm2_audio::Quant =
    audio_engine::lfm2_audio::Quant::Q8_0;

/// The quantization a package label (`<model>-<QUANT>`) names, as published (`Q8_0`).
pub fn quantization_of(label: &str) -> Option<&'static str> {
    audio_engine::lfm2_audio::Quant::ALL
        .into_iter()
        .map(audio_engine::lfm2_audio::Quant::file_suffix)
        .find(|q| label.strip_suffix(q).is_some_and(|m| m.ends_with('-')))
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
    /// `--max-conversation-bytes`: the bound on one Realtime socket's conversation.
    pub max_conversation_bytes: usize,
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
    /// Most open Realtime sockets (0: no limit).
    pub max_sockets: usize,
    /// Most open Realtime sockets per client address (0: no limit).
    pub max_sockets_per_client: usize,
    /// The per-client address comes from `X-Forwarded-For` (`--trust-forwarded`).
    pub trust_forwarded: bool,
    /// Browser origins allowed on the Realtime socket besides same-origin pages.
    pub allowed_origins: Vec<String>,
    /// Longest HTTP request to its response's head, ms (0: none).
    pub request_timeout_ms: u64,
    /// Longest idle Realtime socket, ms (0: never closed for idleness).
    pub idle_timeout_ms: u64,
    /// Text or JSON log lines.
    pub log_format: LogFormat,
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
            max_conversation_bytes: 64 << 20,
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
            max_sockets: 256,
            max_sockets_per_client: 16,
            trust_forwarded: false,
            allowed_origins: Vec::new(),
            request_timeout_ms: 600_000,
            idle_timeout_ms: 300_000,
            log_format: LogFormat::Text,
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
            max_conversation_bytes: cli
                .max_conversation_bytes
                .or(file.max_conversation_bytes)
                .unwrap_or(d.max_conversation_bytes),
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
            hub_offline: cli.offline || file.offline.unwrap_or(false),
            max_sockets: cli
                .max_sockets
                .or(file.max_sockets)
                .unwrap_or(d.max_sockets),
            max_sockets_per_client: cli
                .max_sockets_per_client
                .or(file.max_sockets_per_client)
                .unwrap_or(d.max_sockets_per_client),
            trust_forwarded: cli.trust_forwarded || file.trust_forwarded.unwrap_or(false),
            allowed_origins: if cli.allowed_origins.is_empty() {
                file.allowed_origins
            } else {
                cli.allowed_origins.clone()
            },
            request_timeout_ms: cli
                .request_timeout_ms
                .or(file.request_timeout_ms)
                .unwrap_or(d.request_timeout_ms),
            idle_timeout_ms: cli
                .idle_timeout_ms
                .or(file.idle_timeout_ms)
                .unwrap_or(d.idle_timeout_ms),
            log_format: cli.log_format.or(file.log_format).unwrap_or(d.log_format),
        };
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every flag with its `SERVE_*` variable and a value for it (not the default).
    const FLAGS: &[(&str, &str)] = &[
        ("--model-id", "m"),
        ("--host", "0.0.0.0"),
        ("--port", "9123"),
        ("--slots", "3"),
        ("--threads", "5"),
        ("--device", "cpu"),
        ("--batch", "4"),
        ("--batch-from", "2"),
        ("--early-turn-ms", "150"),
        ("--smart-turn-weights", "/x/w.safetensors"),
        ("--busy-timeout-ms", "1234"),
        ("--max-queue", "7"),
        ("--max-body-bytes", "1000"),
        ("--max-audio-seconds", "12.5"),
        ("--max-conversation-bytes", "123456"),
        ("--max-tokens", "99"),
        ("--max-streams", "6"),
        ("--cors-origin", "https://a.example,https://b.example"),
        ("--api-key", "k"),
        ("--shutdown-timeout-ms", "4321"),
        ("--max-sockets", "8"),
        ("--max-sockets-per-client", "2"),
        ("--allowed-origins", "https://a.example,https://c.example"),
        ("--request-timeout-ms", "777"),
        ("--idle-timeout-ms", "888"),
        ("--log-format", "json"),
    ];

    /// Held by the tests that parse the command line: one of them sets `SERVE_*` variables.
    static ENV: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Switches: set by the flag alone, or by the variable `true`.
    const SWITCHES: &[&str] = &["--offline", "--trust-forwarded"];

    fn env_name(flag: &str) -> String {
        format!(
            "SERVE_{}",
            flag.trim_start_matches("--")
                .replace('-', "_")
                .to_uppercase()
        )
    }

    #[test]
    fn every_flag_has_its_serve_variable() {
        use clap::CommandFactory;
        for arg in Cli::command().get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if matches!(long, "help" | "version") {
                continue;
            }
            let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
            assert_eq!(
                env.as_deref(),
                Some(env_name(long).as_str()),
                "--{long} has no SERVE_ variable"
            );
        }
    }

    #[test]
    fn settings_from_the_environment_equal_settings_from_flags() {
        let mut args = vec!["serve".to_owned()];
        for (f, v) in FLAGS {
            args.push((*f).to_owned());
            args.push((*v).to_owned());
        }
        args.extend(SWITCHES.iter().map(|s| (*s).to_owned()));
        let _env = ENV.lock().unwrap_or_else(|e| e.into_inner());
        let from_flags = Settings::resolve(&Cli::parse_from(&args)).unwrap();
        for (f, v) in FLAGS {
            std::env::set_var(env_name(f), v);
        }
        for s in SWITCHES {
            std::env::set_var(env_name(s), "true");
        }
        let from_env = Settings::resolve(&Cli::parse_from(["serve"]));
        for f in FLAGS
            .iter()
            .map(|(f, _)| *f)
            .chain(SWITCHES.iter().copied())
        {
            std::env::remove_var(env_name(f));
        }
        let from_env = from_env.unwrap();
        assert_eq!(format!("{from_env:?}"), format!("{from_flags:?}"));
        // And the values are the ones given, not defaults on both sides.
        assert_eq!(from_env.port, 9123);
        assert_eq!(from_env.max_sockets_per_client, 2);
        assert_eq!(from_env.allowed_origins.len(), 2);
        assert_eq!(from_env.cors_origins.len(), 2);
        assert!(from_env.trust_forwarded && from_env.hub_offline);
        assert_eq!(from_env.log_format, LogFormat::Json);
    }

    #[test]
    fn the_config_file_sets_the_edges_and_flags_override_it() {
        let dir = std::env::temp_dir().join(format!("serve-config-edges-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("c.toml");
        std::fs::write(
            &p,
            "max_sockets = 5\nmax_sockets_per_client = 1\ntrust_forwarded = true\n\
             allowed_origins = [\"https://x.example\"]\nrequest_timeout_ms = 10\n\
             idle_timeout_ms = 20\nlog_format = \"json\"\n",
        )
        .unwrap();
        let path = p.to_str().unwrap();
        let _env = ENV.lock().unwrap_or_else(|e| e.into_inner());
        let s = Settings::resolve(&Cli::parse_from(["serve", "--config", path])).unwrap();
        assert_eq!((s.max_sockets, s.max_sockets_per_client), (5, 1));
        assert!(s.trust_forwarded);
        assert_eq!(s.allowed_origins, vec!["https://x.example".to_owned()]);
        assert_eq!((s.request_timeout_ms, s.idle_timeout_ms), (10, 20));
        assert_eq!(s.log_format, LogFormat::Json);
        let s = Settings::resolve(&Cli::parse_from([
            "serve",
            "--config",
            path,
            "--max-sockets",
            "9",
            "--log-format",
            "text",
        ]))
        .unwrap();
        assert_eq!((s.max_sockets, s.log_format), (9, LogFormat::Text));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_quantization_comes_from_the_label() {
        assert_eq!(quantization_of("LFM2.5-Audio-1.5B-Q8_0"), Some("Q8_0"));
        assert_eq!(quantization_of("LFM2.5-Audio-1.5B-F16"), Some("F16"));
        assert_eq!(quantization_of("x-Q4_0"), Some("Q4_0"));
        assert_eq!(quantization_of("xQ4_0"), None);
        assert_eq!(quantization_of("demo"), None);
        assert_eq!(DEFAULT_HUB_QUANT.file_suffix(), "Q8_0");
    }
}
