//! Graphs computed through ggml's backend scheduler (`ggml_backend_sched`): a device backend
//! first and the CPU as fallback, so that the nodes the device has no kernel for run on the
//! CPU, with the copies between the two inserted by ggml.
//!
//! The scheduler allocates a graph's intermediate tensors (and copies of the inputs each backend
//! needs) in its own per-backend buffers. Like a [`GraphAllocator`](super::GraphAllocator), it
//! gives the graph's context a lease on them: until that context is dropped, the scheduler
//! refuses to allocate another graph ([`GgmlError::AllocatorInUse`]).
//!
//! After [`Scheduler::alloc_graph`], [`Scheduler::placements`] tells which backend each node
//! was assigned to and [`Scheduler::fallback`] sums up the nodes that run on the CPU although a
//! device was asked for.

use std::collections::BTreeMap;
use std::ffi::c_int;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use ggml_sys as sys;

use super::backend::{check_indices, Backend};
use super::buffer_type::is_cpu_extra;
use super::context::Retained;
use super::error::{ComputeStatus, GgmlError, Result};
use super::graph::Graph;
use super::tensor::Tensor;

struct SchedState {
    raw: NonNull<sys::ggml_backend_sched>,
    /// Contexts alive with tensors in the scheduler's buffers (0 or 1).
    leases: usize,
    /// The graph of the current allocation (only meaningful while `leases > 0`).
    graph: *mut sys::ggml_cgraph,
    /// Each node's sources as the caller built them, by node index.
    ///
    /// why: splitting the graph across backends points a node's sources at the scheduler's
    /// copies of them in the node's backend (filled only during the compute), so what the
    /// caller set (an input's row indices) and where it lives are read through these.
    sources: Vec<[*mut sys::ggml_tensor; sys::GGML_MAX_SRC as usize]>,
}

// SAFETY: the scheduler is heap state with no thread affinity; it only lives inside a mutex,
// which serialises every use, and the backends it drives are locked around every compute.
unsafe impl Send for SchedState {}

pub(crate) struct SchedInner {
    state: Mutex<SchedState>,
    /// The backends in priority order: the device, then the CPU (just the CPU when the device is
    /// the CPU). Kept alive as long as the scheduler that uses them.
    backends: Vec<Backend>,
    /// Node and leaf capacity of the scheduler's hash set.
    graph_size: usize,
    /// The address of each backend's `ggml_backend`, in `backends`' order: what a node's
    /// assignment is compared with (an address only, never dereferenced).
    addresses: Vec<usize>,
}

impl Drop for SchedInner {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        // SAFETY: freed once, after every lease is gone (leases hold this `Arc`); the backends
        // are still alive (fields drop after this).
        unsafe { sys::ggml_backend_sched_free(state.raw.as_ptr()) }
    }
}

/// Keeps a scheduler's buffers alive (and the scheduler unusable for new graphs) while a context
/// with tensors in them is alive.
pub(crate) struct SchedLease(Arc<SchedInner>);

impl Drop for SchedLease {
    fn drop(&mut self) {
        let mut state = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        state.leases = state.leases.saturating_sub(1);
    }
}

/// A device backend with the CPU behind it: ggml's backend scheduler.
///
/// Each node runs on the device when the device supports it (and its data is in memory the
/// device can use), otherwise on the CPU. Inputs (tensors marked with
/// [`Tensor::set_input`]) are placed in host memory and copied to the device where needed;
/// weights and caches allocated in the device's buffers stay there.
///
/// Cloning is cheap (the handle is reference-counted).
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<SchedInner>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field(
                "backends",
                &self
                    .inner
                    .backends
                    .iter()
                    .map(Backend::name)
                    .collect::<Vec<_>>(),
            )
            .field("graph_size", &self.inner.graph_size)
            .finish()
    }
}

/// Where the scheduler placed one graph node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlacement {
    /// The node's index in the graph's execution order.
    pub index: usize,
    /// The node's name.
    pub name: String,
    /// ggml's name of its operation (`MUL_MAT`, `ROPE`, ...).
    pub op: String,
    /// The name of the backend it runs on (`Vulkan0`, `CPU`, ...).
    pub backend: String,
    /// Whether that backend is the CPU fallback (false for every node of a CPU-only scheduler).
    pub on_fallback: bool,
}

/// The nodes of a graph that run on the CPU fallback although a device was asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FallbackReport {
    /// The device's backend name.
    pub device: String,
    /// Computing nodes (views, reshapes, permutes and transposes left out: they move no data)
    /// assigned to the CPU, by operation name, with their counts.
    pub cpu_ops: BTreeMap<String, usize>,
    /// Computing nodes assigned to the device.
    pub device_nodes: usize,
    /// The number of graph splits (runs of consecutive nodes on one backend); every split
    /// boundary copies the tensors the next split reads.
    pub splits: usize,
    /// Bytes crossing between host and device memory per compute: every tensor a node reads
    /// from the other side's memory (graph inputs, which the scheduler keeps in host memory,
    /// included), counted once, and the graph outputs computed on the device (which the caller
    /// reads back).
    pub copied_bytes: usize,
}

impl FallbackReport {
    /// Whether every computing node runs on the device.
    pub fn is_empty(&self) -> bool {
        self.cpu_ops.is_empty()
    }

    /// The number of computing nodes on the CPU.
    pub fn cpu_nodes(&self) -> usize {
        self.cpu_ops.values().sum()
    }
}

impl std::fmt::Display for FallbackReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} nodes on {}, {} on the CPU fallback",
            self.device_nodes,
            self.device,
            self.cpu_nodes()
        )?;
        if !self.cpu_ops.is_empty() {
            let ops: Vec<String> = self
                .cpu_ops
                .iter()
                .map(|(op, n)| format!("{op}×{n}"))
                .collect();
            write!(f, " ({})", ops.join(", "))?;
        }
        write!(
            f,
            "; {} graph splits, {} bytes across",
            self.splits, self.copied_bytes
        )
    }
}

/// What one component's graphs placed on the CPU fallback, over every graph a labelled
/// [`GraphAllocator`](super::GraphAllocator) allocated on a device since the last
/// [`reset_fallbacks`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ComponentFallback {
    /// Graphs allocated.
    pub graphs: u64,
    /// The widest graph's figures: per op, the most nodes on the CPU in one graph; the most
    /// device nodes, splits and bytes across in one graph.
    pub widest: FallbackReport,
    /// The fewest bytes across of one graph (a single-position step's, for a decoder).
    pub fewest_bytes: usize,
}

static FALLBACKS: Mutex<BTreeMap<&'static str, ComponentFallback>> = Mutex::new(BTreeMap::new());

/// Each labelled component's fallback record (see [`ComponentFallback`]), by label.
pub fn fallbacks() -> BTreeMap<&'static str, ComponentFallback> {
    FALLBACKS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Forgets every component's fallback record.
pub fn reset_fallbacks() {
    FALLBACKS.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// Adds `graph`'s placement (just allocated by `sched`) to `label`'s record.
pub(crate) fn record_fallback(label: &'static str, sched: &Scheduler, graph: &Graph<'_>) {
    let Ok(report) = sched.fallback(graph) else {
        return;
    };
    if !report.is_empty() {
        tracing::debug!(component = label, "{report}");
    }
    let mut all = FALLBACKS.lock().unwrap_or_else(|e| e.into_inner());
    let entry = all.entry(label).or_default();
    entry.fewest_bytes = if entry.graphs == 0 {
        report.copied_bytes
    } else {
        entry.fewest_bytes.min(report.copied_bytes)
    };
    entry.graphs += 1;
    let w = &mut entry.widest;
    w.device.clone_from(&report.device);
    for (op, n) in report.cpu_ops {
        let e = w.cpu_ops.entry(op).or_default();
        *e = (*e).max(n);
    }
    w.device_nodes = w.device_nodes.max(report.device_nodes);
    w.splits = w.splits.max(report.splits);
    w.copied_bytes = w.copied_bytes.max(report.copied_bytes);
}

/// Whether a node with this op only reinterprets its source's memory.
fn is_alias_op(op: sys::ggml_op) -> bool {
    matches!(
        op,
        sys::GGML_OP_NONE
            | sys::GGML_OP_VIEW
            | sys::GGML_OP_RESHAPE
            | sys::GGML_OP_PERMUTE
            | sys::GGML_OP_TRANSPOSE
    )
}

/// The source a node updates in place, if its op does: the cache of the gated delta net's cache
/// form (`GGML_OP_GATED_DELTA_NET` with `op_params[2] == 1`, vendor patch 0001).
fn updated_in_place(hdr: &sys::ggml_tensor) -> Option<NonNull<sys::ggml_tensor>> {
    if hdr.op == sys::GGML_OP_GATED_DELTA_NET && hdr.op_params[2] == 1 {
        NonNull::new(hdr.src[5])
    } else {
        None
    }
}

/// The buffer that holds `t`'s data (its view source's for a view); null when unallocated.
fn data_buffer(t: Tensor<'_>) -> *mut sys::ggml_backend_buffer {
    let hdr = t.header();
    if hdr.view_src.is_null() {
        hdr.buffer
    } else {
        // SAFETY: the view source of a graph member is live for the graph's lifetime.
        unsafe { (*hdr.view_src).buffer }
    }
}

impl Scheduler {
    /// A scheduler over `device` with a CPU backend of its own as the fallback, for graphs of
    /// up to `graph_size` members (nodes plus leafs). With a CPU `device`, the CPU alone.
    ///
    /// The CPU fallback computes with `cpu_threads` threads.
    pub fn new(device: &Backend, graph_size: usize, cpu_threads: usize) -> Result<Scheduler> {
        if graph_size == 0 || graph_size > super::context::MAX_GRAPH_SIZE * 2 {
            return Err(GgmlError::arg(
                "Scheduler::new",
                format!(
                    "graph size must be in 1..={}",
                    super::context::MAX_GRAPH_SIZE * 2
                ),
            ));
        }
        let mut backends = vec![device.clone()];
        if !device.is_cpu() {
            backends.push(Backend::cpu()?);
        }
        let cpu = backends
            .last()
            .unwrap_or_else(|| unreachable!("one backend at least"));
        cpu.set_n_threads(cpu_threads)?;
        let mut raws: Vec<*mut sys::ggml_backend> = {
            let guards: Vec<_> = backends.iter().map(Backend::lock).collect();
            guards.iter().map(|g| g.as_ptr()).collect()
        };
        // SAFETY: `raws` holds live backends (kept alive by `backends`, which the scheduler
        // owns), the last one a CPU backend as ggml requires; null buffer types select each
        // backend's default (which it supports); at most two backends
        // (< GGML_SCHED_MAX_BACKENDS). No parallel copies; ops on host weights are not offloaded.
        let raw = unsafe {
            sys::ggml_backend_sched_new(
                raws.as_mut_ptr(),
                std::ptr::null_mut(),
                raws.len() as c_int,
                graph_size,
                false,
                false,
            )
        };
        let raw = NonNull::new(raw).ok_or_else(|| GgmlError::alloc("backend scheduler"))?;
        Ok(Scheduler {
            inner: Arc::new(SchedInner {
                state: Mutex::new(SchedState {
                    raw,
                    leases: 0,
                    graph: std::ptr::null_mut(),
                    sources: Vec::new(),
                }),
                backends,
                graph_size,
                addresses: raws.iter().map(|&r| r as usize).collect(),
            }),
        })
    }

    /// The scheduler's backends in priority order (the device first, the CPU last).
    pub fn backends(&self) -> &[Backend] {
        &self.inner.backends
    }

    /// The device backend (the first).
    pub fn device(&self) -> &Backend {
        &self.inner.backends[0]
    }

    /// The most members (nodes plus leafs) of a graph the scheduler takes.
    pub fn graph_size(&self) -> usize {
        self.inner.graph_size
    }

    /// Whether a context holding the scheduler's current allocation is alive.
    pub(crate) fn in_use(&self) -> bool {
        self.inner
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .leases
            > 0
    }

    /// Checks what ggml would abort on when splitting and allocating `graph`.
    fn check_graph(&self, graph: &Graph<'_>) -> Result<()> {
        let members = graph.n_nodes() + graph.n_leafs();
        if members > self.inner.graph_size {
            return Err(GgmlError::GraphFull {
                capacity: self.inner.graph_size,
                needed: members,
            });
        }
        let ctx = graph.context();
        let guards: Vec<_> = self.inner.backends.iter().map(Backend::lock).collect();
        for t in graph.tensors() {
            let hdr = t.header();
            if hdr.data.is_null() && !ctx.owns(t) {
                return Err(GgmlError::NotAllocated { tensor: t.name() });
            }
            let buffer = data_buffer(t);
            let buft = (!buffer.is_null()).then(|| {
                // SAFETY: the buffer is live (retained by the context that holds the tensor).
                unsafe { sys::ggml_backend_buffer_get_type(buffer) }
            });
            if let Some(buft) = buft {
                // why: the CPU backend would read a repacked weight reached through a view, or
                // as a second operand, as plain rows; the device cannot read it at all.
                if is_cpu_extra(buft) {
                    return Err(GgmlError::IncompatibleTensor {
                        tensor: t.name(),
                        detail: "weights repacked for the CPU cannot be used through the \
                                 scheduler (load them with repacking off)"
                            .into(),
                    });
                }
            }
            let alias = is_alias_op(hdr.op);
            if !alias && super::read_only::is_read_only(t.as_ptr()) {
                return Err(GgmlError::ReadOnly { tensor: t.name() });
            }
            if alias && buft.is_none() {
                continue;
            }
            // SAFETY: the backends and the tensor (with its sources) are live; the queries read
            // metadata.
            let ok = |g: &super::backend::RawBackend| unsafe {
                sys::ggml_backend_supports_op(g.as_ptr(), t.as_ptr())
                    && buft.is_none_or(|b| sys::ggml_backend_supports_buft(g.as_ptr(), b))
            };
            // why: ggml aborts when no backend can run a node, or when a tensor already placed
            // in a buffer (a weight, a cache written in place) has no backend that both uses
            // that buffer and runs its op.
            if !guards.iter().any(|g| ok(g)) {
                let names: Vec<&str> = self.inner.backends.iter().map(Backend::name).collect();
                return Err(GgmlError::UnsupportedOp {
                    backend: names.join(" or "),
                    op: t.op_name(),
                    tensor: t.name(),
                });
            }
            // why: the cache form of the gated delta net (vendor patch 0001) updates its cache
            // (src[5]) in place, so ggml runs it on a backend that uses the cache's buffer and
            // aborts when the backends that have the op cannot.
            if let Some(updated) = updated_in_place(&hdr) {
                // SAFETY: sources of graph members are live for the graph's lifetime.
                let ub = data_buffer(unsafe { Tensor::from_raw(updated) });
                if !ub.is_null() {
                    // SAFETY: the buffer is live (retained by the cache's context).
                    let ubt = unsafe { sys::ggml_backend_buffer_get_type(ub) };
                    // SAFETY: as for `ok`.
                    let usable = guards.iter().any(|g| unsafe {
                        sys::ggml_backend_supports_op(g.as_ptr(), t.as_ptr())
                            && sys::ggml_backend_supports_buft(g.as_ptr(), ubt)
                    });
                    if !usable {
                        return Err(GgmlError::IncompatibleTensor {
                            tensor: t.name(),
                            detail: format!(
                                "{} updates its cache in place, and no backend that runs it can \
                                 use the cache's buffer ({})",
                                t.op_name(),
                                self.inner
                                    .backends
                                    .iter()
                                    .map(Backend::name)
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Splits `graph` between the backends and allocates its unallocated tensors (which must
    /// belong to the graph's context) in the scheduler's buffers. Set the inputs afterwards,
    /// then call [`Scheduler::compute`].
    ///
    /// The graph's context holds a lease on the buffers until it is dropped.
    pub fn alloc_graph(&self, graph: &Graph<'_>) -> Result<()> {
        self.check_graph(graph)?;
        let mut state = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.leases > 0 {
            return Err(GgmlError::AllocatorInUse);
        }
        let sources = (0..graph.n_nodes())
            .map(|i| {
                graph
                    .node(i)
                    .map_or([std::ptr::null_mut(); sys::GGML_MAX_SRC as usize], |t| {
                        t.header().src
                    })
            })
            .collect();
        // SAFETY: the scheduler is live; no context holds tensors in its buffers (no lease), so
        // forgetting the previous allocation invalidates nothing in use.
        unsafe { sys::ggml_backend_sched_reset(state.raw.as_ptr()) };
        // SAFETY: the scheduler and graph are live; the graph fits the scheduler's hash set and
        // every node can run on one of its backends (checked above, where ggml would abort);
        // every tensor it places belongs to the graph's context, which receives a lease below.
        let ok = unsafe { sys::ggml_backend_sched_alloc_graph(state.raw.as_ptr(), graph.as_ptr()) };
        if !ok {
            return Err(GgmlError::alloc("backend scheduler buffers"));
        }
        state.leases += 1;
        state.graph = graph.as_ptr();
        state.sources = sources;
        drop(state);
        graph.context().retain(Retained::Lease {
            _lease: Box::new(SchedLease(self.inner.clone())),
        });
        Ok(())
    }

    /// The backend each computing node of `graph` (allocated last with
    /// [`Scheduler::alloc_graph`]) runs on, in execution order.
    pub fn placements(&self, graph: &Graph<'_>) -> Result<Vec<NodePlacement>> {
        let state = self.allocated(graph)?;
        Ok(self
            .assignments(&state, graph)
            .into_iter()
            .map(|(index, t, backend)| NodePlacement {
                index,
                name: t.name(),
                op: t.op_name(),
                backend: backend.map_or_else(
                    || "<unassigned>".to_owned(),
                    |b| self.inner.backends[b].name().to_owned(),
                ),
                on_fallback: self.is_fallback(backend),
            })
            .collect())
    }

    /// Each computing node of `graph` (the scheduler's current allocation, whose `state` is
    /// held) with the index in `backends` of the backend it runs on.
    ///
    /// why addresses: a node's assignment is compared with the backends' addresses kept at
    /// construction, so no backend is locked (a compute on it may be running) and no name is
    /// built; this runs at every graph a device allocator places.
    fn assignments<'g>(
        &self,
        state: &SchedState,
        graph: &Graph<'g>,
    ) -> Vec<(usize, Tensor<'g>, Option<usize>)> {
        let mut out = Vec::with_capacity(graph.n_nodes());
        for index in 0..graph.n_nodes() {
            let Some(t) = graph.node(index) else { continue };
            if is_alias_op(t.header().op) {
                continue;
            }
            // SAFETY: the scheduler is live and holds the assignment of this allocated graph;
            // the node is a member of it.
            let b = unsafe {
                sys::ggml_backend_sched_get_tensor_backend(state.raw.as_ptr(), t.as_ptr())
            };
            let backend = self.inner.addresses.iter().position(|&a| a == b as usize);
            out.push((index, t, backend));
        }
        out
    }

    /// Whether the backend at `index` is the CPU fallback of a device.
    fn is_fallback(&self, index: Option<usize>) -> bool {
        let n = self.inner.backends.len();
        n > 1 && index == Some(n - 1)
    }

    /// The nodes of `graph` (allocated last) that run on the CPU fallback, by operation.
    pub fn fallback(&self, graph: &Graph<'_>) -> Result<FallbackReport> {
        let state = self.allocated(graph)?;
        // SAFETY: the scheduler is live.
        let splits = unsafe { sys::ggml_backend_sched_get_n_splits(state.raw.as_ptr()) };
        let mut report = FallbackReport {
            device: self.device().name().to_owned(),
            splits: usize::try_from(splits).unwrap_or(0),
            ..FallbackReport::default()
        };
        let two_sides = self.inner.backends.len() > 1;
        let mut crossed: Vec<NonNull<sys::ggml_tensor>> = Vec::new();
        for (index, node, backend) in self.assignments(&state, graph) {
            let on_fallback = self.is_fallback(backend);
            let sources = state.sources.get(index).filter(|_| two_sides);
            for src in sources
                .into_iter()
                .flatten()
                .filter_map(|&s| NonNull::new(s))
            {
                // SAFETY: a source of a graph member is live for the graph's lifetime.
                let src_t = unsafe { Tensor::from_raw(src) };
                let buffer = data_buffer(src_t);
                if buffer.is_null() || crossed.contains(&src) {
                    continue;
                }
                // SAFETY: the buffer is live (retained by the context holding the tensor).
                let in_host = unsafe { sys::ggml_backend_buffer_is_host(buffer) };
                if in_host != on_fallback {
                    crossed.push(src);
                    report.copied_bytes += src_t.nbytes();
                }
            }
            if on_fallback {
                *report.cpu_ops.entry(node.op_name()).or_default() += 1;
            } else {
                report.device_nodes += 1;
                // A graph output on the device is read back to the host.
                let output = node.header().flags & (sys::GGML_TENSOR_FLAG_OUTPUT as i32) != 0;
                if two_sides && output {
                    report.copied_bytes += node.nbytes();
                }
            }
        }
        Ok(report)
    }

    /// The scheduler's state, if `graph` is the graph it holds an allocation for.
    fn allocated(&self, graph: &Graph<'_>) -> Result<std::sync::MutexGuard<'_, SchedState>> {
        let state = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.leases == 0 || state.graph != graph.as_ptr() {
            return Err(GgmlError::WrongContextKind {
                detail: "the graph is not the scheduler's current allocation; call \
                         Scheduler::alloc_graph first"
                    .into(),
            });
        }
        Ok(state)
    }

    /// Computes `graph` (synchronously), which must be the scheduler's current allocation
    /// ([`Scheduler::alloc_graph`]) with its inputs set.
    ///
    /// Row indices of `get_rows` / `set_rows` whose index tensor is a graph input are
    /// range-checked first (ggml aborts on an out-of-range index), and weights used in place in
    /// a file mapping are checked against their file (see [`Backend::compute`]).
    pub fn compute(&self, graph: &Graph<'_>) -> Result<()> {
        let state = self.allocated(graph)?;
        let mut buffers: Vec<*mut sys::ggml_backend_buffer> = Vec::new();
        for t in graph.tensors() {
            let buffer = data_buffer(t);
            if !buffer.is_null() && !buffers.contains(&buffer) {
                buffers.push(buffer);
            }
        }
        for (i, src) in state.sources.iter().enumerate() {
            let Some(t) = graph.node(i) else { continue };
            match t.header().op {
                sys::GGML_OP_GET_ROWS => {
                    check_indices(t, src[1], super::backend::ne_of(src[0])[1])?
                }
                sys::GGML_OP_SET_ROWS => check_indices(t, src[1], t.ne()[1])?,
                _ => {}
            }
        }
        super::mapped_buffers::check_mapped_files(&buffers)?;
        // why: the backends' streams are shared with their other handles; holding their locks
        // (device first, then CPU, the one order every scheduler takes them in) keeps their
        // other users out while the scheduler drives them.
        let guards: Vec<_> = self.inner.backends.iter().map(Backend::lock).collect();
        // SAFETY: the scheduler, its backends (locked) and the graph are live; the graph is the
        // scheduler's current allocation (checked), so every member has memory, every node a
        // backend that runs it, and every row index is in range (checked above).
        let status =
            unsafe { sys::ggml_backend_sched_graph_compute(state.raw.as_ptr(), graph.as_ptr()) };
        drop(guards);
        match status {
            sys::GGML_STATUS_SUCCESS => Ok(()),
            s => Err(GgmlError::ComputeFailed {
                backend: self.device().name().to_owned(),
                status: match s {
                    sys::GGML_STATUS_ALLOC_FAILED => ComputeStatus::AllocFailed,
                    sys::GGML_STATUS_FAILED => ComputeStatus::Failed,
                    sys::GGML_STATUS_ABORTED => ComputeStatus::Aborted,
                    other => ComputeStatus::Other(other),
                },
            }),
        }
    }

    /// The bytes of the scheduler's compute buffer on each backend, in priority order.
    pub fn buffer_sizes(&self) -> Vec<(String, usize)> {
        let state = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        self.inner
            .backends
            .iter()
            .map(|be| {
                let raw = be.lock();
                // SAFETY: the scheduler is live and `raw` is one of its backends.
                let n = unsafe {
                    sys::ggml_backend_sched_get_buffer_size(state.raw.as_ptr(), raw.as_ptr())
                };
                (be.name().to_owned(), n)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Context, GgmlType};

    fn scheduler() -> Scheduler {
        Scheduler::new(&Backend::cpu().unwrap(), 64, 1).unwrap()
    }

    #[test]
    fn cpu_only_scheduler_computes_and_reports_no_fallback() {
        let sched = scheduler();
        assert_eq!(sched.backends().len(), 1);
        let ctx = Context::metadata_with_graph(8, 16).unwrap();
        let a = ctx.new_tensor(GgmlType::F32, &[4, 2]).unwrap();
        let b = ctx.new_tensor(GgmlType::F32, &[4, 3]).unwrap();
        a.set_input();
        b.set_input();
        let p = ctx.mul_mat(a, b).unwrap();
        let out = ctx.silu(p).unwrap();
        out.set_output();
        let mut g = ctx.new_graph(16).unwrap();
        g.build_forward_expand(out).unwrap();
        assert!(sched.fallback(&g).is_err(), "not allocated yet");
        sched.alloc_graph(&g).unwrap();
        a.set_f32(&[1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0])
            .unwrap();
        b.set_f32(&[1.0, 2.0, 3.0, 4.0, -1.0, -2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
            .unwrap();
        sched.compute(&g).unwrap();
        let silu = |x: f32| x / (1.0 + (-x).exp());
        let want = [silu(1.0), silu(2.0), silu(-1.0), silu(-2.0), 0.0, 0.0];
        assert_eq!(out.get_f32().unwrap(), want);
        let placements = sched.placements(&g).unwrap();
        let ops: Vec<&str> = placements.iter().map(|p| p.op.as_str()).collect();
        assert_eq!(ops, ["MUL_MAT", "SILU"]);
        assert!(placements
            .iter()
            .all(|p| p.backend == "CPU" && !p.on_fallback));
        let report = sched.fallback(&g).unwrap();
        assert!(report.is_empty());
        assert_eq!(report.device_nodes, 2);
        assert_eq!(
            report.to_string(),
            "2 nodes on CPU, 0 on the CPU fallback; 1 graph splits, 0 bytes across"
        );
    }

    #[test]
    fn a_second_graph_waits_for_the_first_context() {
        let sched = scheduler();
        let c1 = Context::metadata_with_graph(4, 8).unwrap();
        let a = c1.new_tensor(GgmlType::F32, &[4]).unwrap();
        a.set_input();
        let mut g1 = c1.new_graph(8).unwrap();
        g1.build_forward_expand(c1.scale(a, 2.0).unwrap()).unwrap();
        sched.alloc_graph(&g1).unwrap();

        let c2 = Context::metadata_with_graph(4, 8).unwrap();
        let b = c2.new_tensor(GgmlType::F32, &[4]).unwrap();
        b.set_input();
        let s = c2.scale(b, 3.0).unwrap();
        let mut g2 = c2.new_graph(8).unwrap();
        g2.build_forward_expand(s).unwrap();
        assert_eq!(sched.alloc_graph(&g2), Err(GgmlError::AllocatorInUse));
        assert!(matches!(
            sched.compute(&g2),
            Err(GgmlError::WrongContextKind { .. })
        ));
        drop(g1);
        drop(c1);
        sched.alloc_graph(&g2).unwrap();
        b.set_f32(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        sched.compute(&g2).unwrap();
        assert_eq!(s.get_f32().unwrap(), [3.0, 6.0, 9.0, 12.0]);
    }

    #[test]
    fn graphs_larger_than_the_scheduler_and_bad_indices_are_errors() {
        let sched = Scheduler::new(&Backend::cpu().unwrap(), 4, 1).unwrap();
        let ctx = Context::metadata_with_graph(16, 32).unwrap();
        let mut x = ctx.new_tensor(GgmlType::F32, &[4]).unwrap();
        x.set_input();
        for _ in 0..5 {
            x = ctx.scale(x, 1.0).unwrap();
        }
        let mut g = ctx.new_graph(32).unwrap();
        g.build_forward_expand(x).unwrap();
        assert!(matches!(
            sched.alloc_graph(&g),
            Err(GgmlError::GraphFull { capacity: 4, .. })
        ));

        let sched = scheduler();
        let ctx = Context::metadata_with_graph(8, 16).unwrap();
        let table = ctx.new_tensor(GgmlType::F32, &[4, 3]).unwrap();
        let idx = ctx.new_tensor(GgmlType::I32, &[2]).unwrap();
        table.set_input();
        idx.set_input();
        let rows = ctx.get_rows(table, idx).unwrap();
        let mut g = ctx.new_graph(16).unwrap();
        g.build_forward_expand(rows).unwrap();
        sched.alloc_graph(&g).unwrap();
        table.set_f32(&[0.0; 12]).unwrap();
        idx.set_i32(&[0, 3]).unwrap();
        assert!(matches!(
            sched.compute(&g),
            Err(GgmlError::OutOfBounds { .. })
        ));
        assert!(Scheduler::new(&Backend::cpu().unwrap(), 0, 1).is_err());
    }
}
