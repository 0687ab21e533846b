//! Prometheus text metrics, kept by hand (a few counters and histograms).

use audio_engine::lfm2_audio::TickStats;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// A histogram with fixed upper bounds.
pub struct Histogram {
    bounds: &'static [f64],
    state: Mutex<(Vec<u64>, f64, u64)>,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            state: Mutex::new((vec![0; bounds.len()], 0.0, 0)),
        }
    }

    /// Records one value.
    pub fn observe(&self, v: f64) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for (i, b) in self.bounds.iter().enumerate() {
            if v <= *b {
                s.0[i] += 1;
            }
        }
        s.1 += v;
        s.2 += 1;
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (i, b) in self.bounds.iter().enumerate() {
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {}", s.0[i]);
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", s.2);
        let _ = writeln!(out, "{name}_sum {}", s.1);
        let _ = writeln!(out, "{name}_count {}", s.2);
    }
}

const SECONDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
const RATIOS: &[f64] = &[0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0];

/// One pool's gauges.
pub struct PoolGauges {
    /// The model's label.
    pub model: String,
    /// The server's `--max-queue` (bounds `queued`).
    pub max_queue: usize,
    /// Sessions in the pool.
    pub size: usize,
    /// Sessions leased.
    pub active: usize,
    /// Requests waiting for a session.
    pub queued: usize,
    /// Leases that got their conversation's session.
    pub affinity_hits: u64,
    /// The model's step scheduler: ticks and steps run, the widest tick.
    pub steps: TickStats,
}

/// The server's metrics.
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    /// Request start to the first audio sent, seconds.
    pub time_to_first_audio: Histogram,
    /// Wall time over audio duration of generated speech.
    pub real_time_factor: Histogram,
    /// Prefill positions restored from kept blocks.
    pub resumed_positions: AtomicU64,
    /// Earlier questions whose encoder output was reused.
    pub reused_questions: AtomicU64,
    /// Streams cut because the client went away.
    pub disconnects: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: Mutex::new(BTreeMap::new()),
            time_to_first_audio: Histogram::new(SECONDS),
            real_time_factor: Histogram::new(RATIOS),
            resumed_positions: AtomicU64::new(0),
            reused_questions: AtomicU64::new(0),
            disconnects: AtomicU64::new(0),
        }
    }
}

impl Metrics {
    /// Counts one request of `route` answered with `status`.
    pub fn request(&self, route: &str, status: u16) {
        let mut r = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        *r.entry((route.to_owned(), status)).or_default() += 1;
    }

    /// The Prometheus text, with the pools' gauges.
    pub fn render(&self, pools: &[PoolGauges]) -> String {
        let mut out = String::new();
        out.push_str("# HELP serve_requests_total Requests by route and status.\n");
        out.push_str("# TYPE serve_requests_total counter\n");
        for ((route, status), n) in self
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            let _ = writeln!(
                out,
                "serve_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
            );
        }
        let gauge = |out: &mut String,
                     name: &str,
                     help: &str,
                     kind: &str,
                     f: &dyn Fn(&PoolGauges) -> u64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for p in pools {
                let _ = writeln!(out, "{name}{{model=\"{}\"}} {}", p.model, f(p));
            }
        };
        gauge(
            &mut out,
            "serve_queue_depth",
            "Requests waiting for a session.",
            "gauge",
            &|p| p.queued as u64,
        );
        gauge(
            &mut out,
            "serve_sessions_free",
            "Sessions not leased (a new request starts at once).",
            "gauge",
            &|p| p.size.saturating_sub(p.active) as u64,
        );
        gauge(
            &mut out,
            "serve_queue_limit",
            "Most requests that may wait for a session (--max-queue).",
            "gauge",
            &|p| p.max_queue as u64,
        );
        gauge(
            &mut out,
            "serve_sessions_active",
            "Sessions leased.",
            "gauge",
            &|p| p.active as u64,
        );
        gauge(
            &mut out,
            "serve_sessions",
            "Sessions in the pool.",
            "gauge",
            &|p| p.size as u64,
        );
        gauge(
            &mut out,
            "serve_affinity_hits_total",
            "Leases that got their conversation's session.",
            "counter",
            &|p| p.affinity_hits,
        );
        gauge(
            &mut out,
            "serve_step_ticks_total",
            "Batched step graphs run (each runs the next step of up to --batch replies).",
            "counter",
            &|p| p.steps.ticks,
        );
        gauge(
            &mut out,
            "serve_steps_total",
            "Reply steps run in those ticks.",
            "counter",
            &|p| p.steps.steps,
        );
        gauge(
            &mut out,
            "serve_step_tick_widest",
            "The most steps one tick has run.",
            "gauge",
            &|p| p.steps.max_width as u64,
        );
        let counter = |out: &mut String, name: &str, help: &str, v: &AtomicU64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                v.load(Ordering::Relaxed)
            );
        };
        counter(
            &mut out,
            "serve_prefill_positions_resumed_total",
            "Prefill positions restored from kept blocks.",
            &self.resumed_positions,
        );
        counter(
            &mut out,
            "serve_questions_reused_total",
            "Earlier questions whose encoder output was reused.",
            &self.reused_questions,
        );
        counter(
            &mut out,
            "serve_client_disconnects_total",
            "Streams cut because the client went away.",
            &self.disconnects,
        );
        self.time_to_first_audio.render(
            &mut out,
            "serve_time_to_first_audio_seconds",
            "Request start to the first audio sent.",
        );
        self.real_time_factor.render(
            &mut out,
            "serve_real_time_factor",
            "Generation wall time over the duration of the audio generated.",
        );
        out
    }
}

/// The server-wide gauges: open Realtime sockets and whether the server drains.
pub fn render_server(out: &mut String, open_sockets: usize, draining: bool) {
    let _ = writeln!(
        out,
        "# HELP serve_realtime_sockets Open Realtime sockets.\n\
         # TYPE serve_realtime_sockets gauge\nserve_realtime_sockets {open_sockets}"
    );
    let _ = writeln!(
        out,
        "# HELP serve_draining 1 while the server drains after SIGTERM, else 0.\n\
         # TYPE serve_draining gauge\nserve_draining {}",
        u8::from(draining)
    );
}
