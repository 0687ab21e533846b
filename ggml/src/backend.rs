//! Compute backends (`ggml_backend_t`) and the device registry.

use std::ffi::{c_int, c_void, CStr, CString};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use ggml_sys as sys;

use super::buffer_type::{
    buffer_type_name, cpu_device, cpu_extra_buffer_types, is_cpu_extra, BufferType,
};
use super::c_str::c_string;
use super::dtype::GgmlType;
use super::error::{ComputeStatus, GgmlError, Result};
use super::graph::Graph;
use super::log;
use super::tensor::Tensor;
use super::thread_budget::ThreadBudget;

/// Kind of a backend device (`enum ggml_backend_dev_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// The CPU, using system memory.
    Cpu,
    /// A GPU with dedicated memory.
    Gpu,
    /// An integrated GPU sharing host memory.
    IntegratedGpu,
    /// An accelerator used together with the CPU backend (BLAS, AMX, ...).
    Accelerator,
    /// A meta device spanning several devices.
    Meta,
    /// A kind this crate does not know.
    Other(u32),
}

impl DeviceKind {
    fn from_raw(t: sys::ggml_backend_dev_type) -> DeviceKind {
        match t {
            sys::GGML_BACKEND_DEVICE_TYPE_CPU => DeviceKind::Cpu,
            sys::GGML_BACKEND_DEVICE_TYPE_GPU => DeviceKind::Gpu,
            sys::GGML_BACKEND_DEVICE_TYPE_IGPU => DeviceKind::IntegratedGpu,
            sys::GGML_BACKEND_DEVICE_TYPE_ACCEL => DeviceKind::Accelerator,
            sys::GGML_BACKEND_DEVICE_TYPE_META => DeviceKind::Meta,
            other => DeviceKind::Other(other),
        }
    }
}

/// A device known to ggml's backend registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Registry name (e.g. `"CPU"`, `"CUDA0"`); pass it to [`Backend::from_device_name`].
    pub name: String,
    /// Human-readable description.
    pub description: String,
    /// Device kind.
    pub kind: DeviceKind,
    /// Free memory in bytes, as reported by the device.
    pub memory_free: usize,
    /// Total memory in bytes.
    pub memory_total: usize,
    /// PCI bus id or similar, if known.
    pub device_id: Option<String>,
}

fn device_info(dev: NonNull<sys::ggml_backend_device>) -> DeviceInfo {
    let mut props = sys::ggml_backend_dev_props::default();
    // SAFETY: `dev` is a registered device and `props` is a valid out-parameter.
    unsafe { sys::ggml_backend_dev_get_props(dev.as_ptr(), &mut props) };
    DeviceInfo {
        name: c_string(props.name).unwrap_or_default(),
        description: c_string(props.description).unwrap_or_default(),
        kind: DeviceKind::from_raw(props.type_),
        memory_free: props.memory_free,
        memory_total: props.memory_total,
        device_id: c_string(props.device_id),
    }
}

/// Every device in ggml's backend registry (the CPU, plus GPUs when compiled in).
pub fn devices() -> Vec<DeviceInfo> {
    log::ensure_installed();
    // SAFETY: the registry is initialised on first use and only read here.
    let n = unsafe { sys::ggml_backend_dev_count() };
    (0..n)
        .filter_map(|i| {
            // SAFETY: `i < ggml_backend_dev_count()`.
            NonNull::new(unsafe { sys::ggml_backend_dev_get(i) })
        })
        .map(device_info)
        .collect()
}

/// The devices of the backend registry named `registry` (`"Vulkan"`, `"CUDA"`, ...), in the
/// registry's order, each with a label `NAME (description)`; empty when no such registry is
/// compiled in.
pub(crate) fn devices_of_registry(
    registry: &CStr,
) -> Vec<(NonNull<sys::ggml_backend_device>, String)> {
    log::ensure_installed();
    // SAFETY: `registry` is NUL-terminated; ggml returns null for an unknown name.
    let Some(reg) = NonNull::new(unsafe { sys::ggml_backend_reg_by_name(registry.as_ptr()) })
    else {
        return Vec::new();
    };
    // SAFETY: `reg` is a registered backend registry (registries live for the program).
    let n = unsafe { sys::ggml_backend_reg_dev_count(reg.as_ptr()) };
    (0..n)
        .filter_map(|i| {
            // SAFETY: `i` is below the registry's device count.
            NonNull::new(unsafe { sys::ggml_backend_reg_dev_get(reg.as_ptr(), i) })
        })
        .map(|dev| {
            let info = device_info(dev);
            (dev, format!("{} ({})", info.name, info.description))
        })
        .collect()
}

/// An owned `ggml_backend_t`, freed on drop.
pub(crate) struct RawBackend(NonNull<sys::ggml_backend>);

// SAFETY: a ggml backend (stream) may be used from any thread as long as calls are not
// concurrent; `RawBackend` only lives inside a `Mutex`, which serialises every use.
unsafe impl Send for RawBackend {}

impl RawBackend {
    pub(crate) fn as_ptr(&self) -> *mut sys::ggml_backend {
        self.0.as_ptr()
    }
}

impl Drop for RawBackend {
    fn drop(&mut self) {
        // SAFETY: the backend came from a ggml init function and is freed exactly once.
        unsafe { sys::ggml_backend_free(self.0.as_ptr()) }
    }
}

pub(crate) struct BackendInner {
    raw: Mutex<RawBackend>,
    name: String,
    is_cpu: bool,
    buffer_type: BufferType,
    /// The thread count last set through [`Backend::set_n_threads`] (0: never set).
    threads: std::sync::atomic::AtomicUsize,
    /// The compute threads this instance shares with others ([`Backend::share_thread_budget`]);
    /// `None`: its computes take what they ask for.
    budget: Mutex<Option<Arc<ThreadBudget>>>,
}

/// A compute backend: the CPU, or a GPU when the crate is built with `cuda` or `metal`.
///
/// Cloning is cheap (the handle is reference-counted). The handle is `Send` and `Sync`; calls
/// that use the backend's stream are serialised by an internal lock.
///
/// A CPU backend repacks eligible weights loaded with [`WeightStore::load`]
/// (see [`Backend::with_weight_repack`]).
///
/// [`WeightStore::load`]: super::WeightStore::load
#[derive(Clone)]
pub struct Backend {
    inner: Arc<BackendInner>,
    /// Whether weight stores loaded for this handle use the CPU's extra buffer types.
    repack: bool,
    /// Whether this handle's CPU computes take the AVX-512 VNNI column kernel for repacked
    /// `Q4_0` weights (see [`Backend::with_vnni_q4_0`]).
    vnni_q4_0: bool,
    /// Whether this handle's computes are a running reply's (see [`ThreadBudget`]'s streams).
    stream_priority: bool,
}

/// Whether this build has the AVX-512 VNNI column kernel for repacked `Q4_0` weights (vendor
/// patch 0007; built when ggml is compiled for a CPU with AVX-512 F, BW and VNNI, as a
/// `native` build on such a CPU is).
pub fn vnni_q4_0_built() -> bool {
    // SAFETY: no preconditions; reads a compile-time answer.
    unsafe { sys::ggml_cpu_has_q4_0_vnni() }
}

/// How many chunks of products the VNNI column kernel has computed in this process (a count
/// that only grows): a test reads it before and after a compute to tell that the kernel ran.
pub fn vnni_q4_0_calls() -> u64 {
    // SAFETY: no preconditions; reads a relaxed atomic counter.
    unsafe { sys::ggml_cpu_q4_0_vnni_calls() }
}

/// The fewest columns a `Q4_0` product needs for the column kernel to compute it on AMX tiles
/// (vendor patch 0007, with the same bits), or 0 when it cannot: a build for a CPU without
/// AMX-INT8, or a process the OS refused the tiles' state.
pub fn vnni_q4_0_amx_min_columns() -> usize {
    // SAFETY: no preconditions; the first call asks Linux for the tiles' state once.
    let n = unsafe { sys::ggml_cpu_q4_0_vnni_amx_min_cols() };
    usize::try_from(n).unwrap_or(0)
}

/// How many of [`vnni_q4_0_calls`]' chunks went to AMX tiles (a count that only grows).
pub fn vnni_q4_0_amx_calls() -> u64 {
    // SAFETY: no preconditions; reads a relaxed atomic counter.
    unsafe { sys::ggml_cpu_q4_0_vnni_amx_calls() }
}

/// The fewest columns a `Q4_0` product needs for the VNNI column kernel to take it: 1 on CPUs
/// with AMX-INT8, 2 elsewhere. Either way each column has the bits of ggml's one-column gemv,
/// so this moves only time. why: one column is bound by reading the weights. On the AMD Zen 4
/// machine ggml's repacked gemv was the faster there (an earlier form of the kernel, reading
/// two streams, ran at 0.65-0.88x its speed; not measured there since); on the Sapphire Rapids
/// machine the gemv's step took 67 ms where the kernel's took 34 ms (and ggml's AMX one-column
/// path, which these weights took before the kernel passed over AMX, 30 ms).
pub fn vnni_q4_0_min_columns() -> usize {
    static MIN: OnceLock<usize> = OnceLock::new();
    *MIN.get_or_init(|| match super::cpu::cpu_features().contains(&"amx_int8") {
        true => 1,
        false => 2,
    })
}

/// ggml's name of its AMX buffer type (`ggml-cpu/amx/amx.cpp`).
const AMX_BUFFER_TYPE: &str = "AMX";

/// The first CPU extra buffer type that supports a matrix product with a weight of type `ty`
/// and shape `ne` as its first operand (llama.cpp's `weight_buft_supported` for `MUL_MAT`):
/// ggml's own test, against a dummy zero-sized buffer of each type, so it answers for this CPU's
/// features and the weight's shape (e.g. `Q4_0` rows a multiple of 8 with AVX2).
///
/// `column_kernel`: the backend computes with the VNNI column kernel
/// ([`Backend::with_vnni_q4_0`]), so `Q4_0` weights pass over ggml's AMX buffer type (first in
/// its order on CPUs with AMX) for `CPU_REPACK`, the kernel's layout. why: on such a CPU
/// (Sapphire Rapids, 2 threads, full-size package; BENCHMARKS.md, "The kernel on an AMX
/// machine") an 81-position prefill took 288-351 ms with the column kernel against 456-766 ms
/// on AMX, and a batched step at width 4 52 ms against 70 ms; and each column keeps one
/// kernel's bits at every width.
pub(crate) fn extra_buffer_for_matmul(
    ty: GgmlType,
    ne: [i64; 4],
    column_kernel: bool,
) -> Result<Option<BufferType>> {
    let bufts = cpu_extra_buffer_types();
    if bufts.is_empty() {
        return Ok(None);
    }
    let Some(dev) = cpu_device() else {
        return Ok(None);
    };
    let ctx = super::context::Context::metadata_with_graph(3, 0)?;
    let w = ctx.new_tensor(ty, &ne)?;
    let x = ctx.new_tensor(GgmlType::F32, &[ne[0], 512, ne[2], ne[3]])?;
    let op = ctx.mul_mat(w, x)?;
    for &buft in bufts {
        if column_kernel && ty == GgmlType::Q4_0 && buffer_type_name(buft) == AMX_BUFFER_TYPE {
            continue;
        }
        // SAFETY: the buffer type is live; a zero size yields a dummy buffer without memory
        // (or null on failure).
        let dummy = unsafe { sys::ggml_backend_buft_alloc_buffer(buft.0.as_ptr(), 0) };
        if dummy.is_null() {
            continue;
        }
        // SAFETY: `w` is an unallocated tensor of the local context, which only this thread
        // uses; pointing its buffer at the dummy lets `supports_op` see the buffer type (no
        // data is read: `w` has none and the query only inspects types and shapes). The field
        // is reset before the dummy is freed.
        unsafe { (*w.as_ptr()).buffer = dummy };
        // SAFETY: the device and the node (with its sources) are live; the query reads metadata.
        let ok = unsafe { sys::ggml_backend_dev_supports_op(dev.as_ptr(), op.as_ptr()) };
        // SAFETY: as above; then the dummy buffer, referenced by nothing, is freed once.
        unsafe {
            (*w.as_ptr()).buffer = std::ptr::null_mut();
            sys::ggml_backend_buffer_free(dummy);
        }
        if ok {
            return Ok(Some(buft));
        }
    }
    Ok(None)
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("name", &self.inner.name)
            .finish()
    }
}

impl Backend {
    fn from_raw(raw: *mut sys::ggml_backend, what: &str) -> Result<Backend> {
        let raw = NonNull::new(raw).ok_or_else(|| GgmlError::BackendUnavailable {
            what: what.to_owned(),
        })?;
        let raw = RawBackend(raw);
        // SAFETY: `raw` is a live backend.
        let name = c_string(unsafe { sys::ggml_backend_name(raw.as_ptr()) }).unwrap_or_default();
        // SAFETY: `raw` is a live backend.
        let is_cpu = unsafe { sys::ggml_backend_is_cpu(raw.as_ptr()) };
        // SAFETY: `raw` is a live backend; every backend has a default buffer type.
        let buft = unsafe { sys::ggml_backend_get_default_buffer_type(raw.as_ptr()) };
        let buffer_type =
            BufferType(
                NonNull::new(buft).ok_or_else(|| GgmlError::BackendUnavailable {
                    what: format!("{what}: no buffer type"),
                })?,
            );
        Ok(Backend {
            inner: Arc::new(BackendInner {
                raw: Mutex::new(raw),
                name,
                is_cpu,
                buffer_type,
                threads: std::sync::atomic::AtomicUsize::new(0),
                budget: Mutex::new(None),
            }),
            repack: true,
            vnni_q4_0: true,
            stream_priority: false,
        })
    }

    /// This handle with its computes marked as a running reply's (or not): under a thread
    /// budget they are served before other computes, which hold at most half the budget while
    /// replies stream (see [`ThreadBudget`]). Other clones keep their setting.
    pub fn with_stream_priority(mut self, on: bool) -> Backend {
        self.stream_priority = on;
        self
    }

    /// This handle with weight repacking turned on or off: a CPU backend with it on places each
    /// weight that [`WeightStore::load`](super::WeightStore::load) may repack, and for which
    /// ggml's CPU backend has a kernel for this CPU (`Q4_0` with AVX2, ...), in the CPU's
    /// extra buffer type (`CPU_REPACK`), laid out for that kernel. Faster matrix products; the
    /// results round differently from the plain kernels. Default: on.
    /// Other clones of the backend keep their setting.
    pub fn with_weight_repack(mut self, on: bool) -> Backend {
        self.repack = on;
        self
    }

    /// Whether weight stores loaded for this handle repack eligible weights (a CPU backend with
    /// repacking on).
    pub fn weight_repack(&self) -> bool {
        self.repack && self.inner.is_cpu
    }

    /// This handle with the AVX-512 VNNI column kernel for repacked `Q4_0` weights turned on
    /// or off (where the build has it: [`vnni_q4_0_built`]). It computes products of two
    /// columns and more, and of one column on CPUs with AMX-INT8; elsewhere one column keeps
    /// ggml's one-column kernel, which reads the weights as one stream and is bound by that
    /// read. The kernel gives every column that kernel's bits (the same float operations in the
    /// same order; only the exact integer dot of each block is computed another way), so
    /// outputs do not change, at any width, and it is faster from two columns (BENCHMARKS.md).
    /// With it on, weight stores loaded for this handle put `Q4_0` matrices in `CPU_REPACK`
    /// rather than ggml's AMX buffer type, whose kernels round otherwise: on CPUs with AMX the
    /// setting at load changes output bits. Default: on. Other clones of
    /// the backend keep their setting.
    pub fn with_vnni_q4_0(mut self, on: bool) -> Backend {
        self.vnni_q4_0 = on;
        self
    }

    /// Whether this handle's computes take the VNNI column kernel (a CPU backend, the kernel
    /// built and turned on).
    pub fn vnni_q4_0(&self) -> bool {
        self.vnni_q4_0 && self.inner.is_cpu && vnni_q4_0_built()
    }

    /// The CPU backend.
    pub fn cpu() -> Result<Backend> {
        log::ensure_installed();
        // SAFETY: no preconditions; returns null on failure.
        Backend::from_raw(unsafe { sys::ggml_backend_cpu_init() }, "CPU")
    }

    /// The best backend this build offers: CUDA device 0 with feature `cuda`, Metal with
    /// feature `metal`, otherwise (or if the GPU fails to initialise) the CPU.
    pub fn best_available() -> Result<Backend> {
        log::ensure_installed();
        #[cfg(feature = "cuda")]
        {
            // SAFETY: device 0 is a valid index (ggml returns null when no device exists).
            let raw = unsafe { sys::cuda::ggml_backend_cuda_init(0) };
            if let Ok(b) = Backend::from_raw(raw, "CUDA0") {
                return Ok(b);
            }
        }
        #[cfg(feature = "metal")]
        {
            // SAFETY: no preconditions; returns null when Metal is unavailable.
            let raw = unsafe { sys::metal::ggml_backend_metal_init() };
            if let Ok(b) = Backend::from_raw(raw, "Metal") {
                return Ok(b);
            }
        }
        Backend::cpu()
    }

    /// A backend on the registered device `dev` (with its default parameters).
    pub(crate) fn from_device(dev: NonNull<sys::ggml_backend_device>) -> Result<Backend> {
        let name = device_info(dev).name;
        // SAFETY: `dev` is a registered device (devices live for the program); null params
        // select the device's defaults; ggml returns null on failure.
        let raw = unsafe { sys::ggml_backend_dev_init(dev.as_ptr(), std::ptr::null()) };
        Backend::from_raw(raw, &name)
    }

    /// The backend of the registry device named `name` (see [`devices`]).
    pub fn from_device_name(name: &str) -> Result<Backend> {
        log::ensure_installed();
        let c = CString::new(name).map_err(|_| GgmlError::BackendUnavailable {
            what: format!("{name:?}"),
        })?;
        // SAFETY: `c` is NUL-terminated; null params select defaults; returns null if unknown.
        let raw = unsafe { sys::ggml_backend_init_by_name(c.as_ptr(), std::ptr::null()) };
        Backend::from_raw(raw, name)
    }

    /// A new backend on the same device: its own stream (CPU: its own worker threads, thread
    /// count and work buffer), so graphs computed on it never wait for this one's. Buffers and
    /// weights of this backend's device are usable by it.
    pub fn new_instance(&self) -> Result<Backend> {
        let dev = {
            let raw = self.lock();
            // SAFETY: the backend is live.
            unsafe { sys::ggml_backend_get_device(raw.as_ptr()) }
        };
        let Some(dev) = NonNull::new(dev) else {
            return Err(GgmlError::BackendUnavailable {
                what: format!("{}: no device", self.name()),
            });
        };
        // SAFETY: `dev` is a registered device (devices live for the program); null params
        // select the device's defaults; ggml returns null on failure.
        let raw = unsafe { sys::ggml_backend_dev_init(dev.as_ptr(), std::ptr::null()) };
        let instance = Backend::from_raw(raw, self.name())?
            .with_weight_repack(self.repack)
            .with_vnni_q4_0(self.vnni_q4_0);
        if let Some(b) = self.thread_budget() {
            instance.share_thread_budget(b);
        }
        Ok(instance)
    }

    /// Makes this backend's CPU graph computes (and those of instances made from it
    /// afterwards with [`Backend::new_instance`]) take their threads from `budget`: a compute
    /// waits until the threads it runs with are free, and runs with at most the budget's
    /// total. Other devices ignore it.
    pub fn share_thread_budget(&self, budget: Arc<ThreadBudget>) {
        *self.inner.budget.lock().unwrap_or_else(|e| e.into_inner()) = Some(budget);
    }

    /// The thread budget this backend's computes take from, if any.
    pub fn thread_budget(&self) -> Option<Arc<ThreadBudget>> {
        self.inner
            .budget
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The backend's name (e.g. `"CPU"`).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Whether this is the CPU backend.
    pub fn is_cpu(&self) -> bool {
        self.inner.is_cpu
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, RawBackend> {
        self.inner.raw.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn buffer_type(&self) -> BufferType {
        self.inner.buffer_type
    }

    /// The device this backend runs on, if it has one.
    pub fn device(&self) -> Option<DeviceInfo> {
        let raw = self.lock();
        // SAFETY: the backend is live.
        let dev = unsafe { sys::ggml_backend_get_device(raw.as_ptr()) };
        NonNull::new(dev).map(device_info)
    }

    /// The CPU thread count last set with [`Backend::set_n_threads`] (`None` before any, or
    /// on another device).
    pub fn n_threads(&self) -> Option<usize> {
        match self
            .inner
            .threads
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            0 => None,
            n => Some(n),
        }
    }

    /// Sets the number of worker threads (CPU backend, or a backend that exposes
    /// `ggml_backend_set_n_threads`).
    pub fn set_n_threads(&self, n_threads: usize) -> Result<()> {
        if n_threads == 0 || n_threads > sys::GGML_MAX_N_THREADS as usize {
            return Err(GgmlError::arg(
                "set_n_threads",
                format!("thread count must be in 1..={}", sys::GGML_MAX_N_THREADS),
            ));
        }
        let n = n_threads as c_int;
        let raw = self.lock();
        if self.inner.is_cpu {
            // SAFETY: the backend is live and is a CPU backend (the function asserts that).
            unsafe { sys::ggml_backend_cpu_set_n_threads(raw.as_ptr(), n) };
            self.inner
                .threads
                .store(n_threads, std::sync::atomic::Ordering::Relaxed);
            return Ok(());
        }
        let setter = set_n_threads_proc(&raw).ok_or_else(|| {
            GgmlError::arg(
                "set_n_threads",
                format!("{} has no thread setting", self.name()),
            )
        })?;
        // SAFETY: `setter` is the backend registry's `ggml_backend_set_n_threads_t` for this
        // backend's device, called with the live backend and a positive thread count.
        unsafe { setter(raw.as_ptr(), n) };
        Ok(())
    }

    /// Whether the backend can compute `t`'s operation with its current types and layout.
    pub fn supports_op(&self, t: Tensor<'_>) -> bool {
        let raw = self.lock();
        // SAFETY: the backend and the tensor (with its sources, live for the handle's lifetime)
        // are live; the query only reads metadata.
        unsafe { sys::ggml_backend_supports_op(raw.as_ptr(), t.as_ptr()) }
    }

    /// Computes `graph` (synchronously).
    ///
    /// Every member must be allocated in memory this backend can use: a buffer of a type the
    /// backend supports, or (CPU only) a host context's pool. Every node's operation must be
    /// supported. Row indices of `get_rows` / `set_rows` whose index tensor is a graph input are
    /// range-checked first (ggml aborts on an out-of-range index). A member used in place in a
    /// file mapping whose file has shrunk since it was mapped is
    /// [`GgmlError::FileChanged`] (reading it would raise `SIGBUS`; see
    /// [`mapped_file`](super::mapped_file)). On a CPU backend with a thread budget
    /// ([`Backend::share_thread_budget`]) the compute first waits for its threads.
    pub fn compute(&self, graph: &Graph<'_>) -> Result<()> {
        self.compute_with(graph, false)
    }

    /// Computes `graph` like [`Backend::compute`], with every matrix product on a CPU backend
    /// taking ggml's one-column dot kernel whatever its column count, so that each column's
    /// bits do not depend on how many columns the product has.
    ///
    /// why: ggml picks a product's kernel by its width. One column takes the per-row dot
    /// (`vec_dot`, or the repacked gemv); several take a multi-column kernel (llamafile's
    /// tinyBLAS, the tiled K-quant path, the repacked gemm) that sums in another order. Decode
    /// steps of several sequences batched into one graph must give each sequence the bits it
    /// gets alone, so they are computed this way at every width, one included (where it is the
    /// kernel ggml takes anyway). Other backends compute as [`Backend::compute`].
    pub fn compute_column_stable(&self, graph: &Graph<'_>) -> Result<()> {
        self.compute_with(graph, true)
    }

    fn compute_with(&self, graph: &Graph<'_>, column_stable: bool) -> Result<()> {
        self.validate(graph)?;
        let set = self
            .n_threads()
            .unwrap_or(sys::GGML_DEFAULT_N_THREADS as usize);
        // why before the lock: a compute waiting for threads must not block this handle's
        // other calls.
        let permit = match self.thread_budget() {
            Some(b) if self.inner.is_cpu => Some(b.acquire(set, self.stream_priority)),
            _ => None,
        };
        let raw = self.lock();
        // Granted fewer threads than the handle is set to (the budget's share, or its total):
        // this compute runs on those.
        let limited = permit.as_ref().map(|p| p.threads()).filter(|&n| n < set);
        if let Some(n) = limited {
            // SAFETY: the backend is live and a CPU backend; `n` is at least 1.
            unsafe { sys::ggml_backend_cpu_set_n_threads(raw.as_ptr(), n as c_int) };
        }
        if self.inner.is_cpu {
            let min_cols = match self.vnni_q4_0 {
                true => vnni_q4_0_min_columns() as c_int,
                false => 0,
            };
            // SAFETY: the backend is live and a CPU backend; the value only selects a kernel
            // (and is ignored where the build lacks it).
            unsafe { sys::ggml_backend_cpu_set_q4_0_vnni(raw.as_ptr(), min_cols) };
        }
        let column_stable = column_stable && self.inner.is_cpu;
        if column_stable {
            // SAFETY: the backend is live and a CPU backend; the flag only selects kernels.
            unsafe { sys::ggml_backend_cpu_set_use_ref(raw.as_ptr(), true) };
        }
        // SAFETY: the backend and the graph are live, and every member tensor is allocated in
        // memory the backend accepts, has a supported op and in-range row indices (checked by
        // `validate`), so the compute cannot read or write outside tensor memory.
        let status = unsafe { sys::ggml_backend_graph_compute(raw.as_ptr(), graph.as_ptr()) };
        if column_stable {
            // SAFETY: as above.
            unsafe { sys::ggml_backend_cpu_set_use_ref(raw.as_ptr(), false) };
        }
        if limited.is_some() {
            // SAFETY: as above; `set` is the count the handle had (in 1..=GGML_MAX_N_THREADS).
            unsafe { sys::ggml_backend_cpu_set_n_threads(raw.as_ptr(), set as c_int) };
        }
        drop(raw);
        drop(permit);
        match status {
            sys::GGML_STATUS_SUCCESS => Ok(()),
            s => Err(GgmlError::ComputeFailed {
                backend: self.name().to_owned(),
                status: match s {
                    sys::GGML_STATUS_ALLOC_FAILED => ComputeStatus::AllocFailed,
                    sys::GGML_STATUS_FAILED => ComputeStatus::Failed,
                    sys::GGML_STATUS_ABORTED => ComputeStatus::Aborted,
                    other => ComputeStatus::Other(other),
                },
            }),
        }
    }

    fn validate(&self, graph: &Graph<'_>) -> Result<()> {
        let raw = self.lock();
        let ctx = graph.context();
        // The distinct buffers the members' data lives in (a handful per graph).
        let mut buffers: Vec<*mut sys::ggml_backend_buffer> = Vec::new();
        for t in graph.tensors() {
            let hdr = t.header();
            if hdr.data.is_null() {
                return Err(GgmlError::NotAllocated { tensor: t.name() });
            }
            let root = if hdr.view_src.is_null() {
                hdr
            } else {
                // SAFETY: the view source of a graph member is live for the graph's lifetime.
                unsafe { hdr.view_src.read() }
            };
            if root.buffer.is_null() {
                if !self.inner.is_cpu {
                    return Err(GgmlError::IncompatibleTensor {
                        tensor: t.name(),
                        detail: format!("host context memory cannot be used by {}", self.name()),
                    });
                }
            } else {
                if !buffers.contains(&root.buffer) {
                    buffers.push(root.buffer);
                }
                // SAFETY: `root.buffer` is the live buffer holding the tensor's data (buffers are
                // retained by the contexts whose tensors they hold).
                let buft = unsafe { sys::ggml_backend_buffer_get_type(root.buffer) };
                // SAFETY: the backend and the buffer type are live.
                let ok = unsafe { sys::ggml_backend_supports_buft(raw.as_ptr(), buft) };
                if !ok {
                    return Err(GgmlError::IncompatibleTensor {
                        tensor: t.name(),
                        detail: format!("its buffer cannot be used by {}", self.name()),
                    });
                }
            }
            if hdr.op == sys::GGML_OP_NONE {
                continue;
            }
            // why: a node writes its own data; views, reshapes, permutes and transposes are
            // computed as no-ops. Any other node whose data is a shared weight's would write it
            // while other threads read it (see `weights`).
            let aliases = matches!(
                hdr.op,
                sys::GGML_OP_VIEW
                    | sys::GGML_OP_RESHAPE
                    | sys::GGML_OP_PERMUTE
                    | sys::GGML_OP_TRANSPOSE
            );
            // why: a node whose data is its graph context's own cannot be a weight; only the few
            // writing into other contexts' memory (caches, weights) need the registry.
            let own = |p: *mut sys::ggml_tensor| p.is_null() || ctx.owns_ptr(p);
            let foreign = !own(t.as_ptr()) || !own(hdr.view_src);
            if !aliases && foreign && super::read_only::is_read_only(t.as_ptr()) {
                return Err(GgmlError::ReadOnly { tensor: t.name() });
            }
            if self.inner.is_cpu && !cpu_extra_buffer_types().is_empty() {
                check_repacked_sources(&raw, t, aliases)?;
            }
            // SAFETY: as in `supports_op`.
            let supported = unsafe { sys::ggml_backend_supports_op(raw.as_ptr(), t.as_ptr()) };
            if !supported {
                return Err(GgmlError::UnsupportedOp {
                    backend: self.name().to_owned(),
                    op: t.op_name(),
                    tensor: t.name(),
                });
            }
            match hdr.op {
                sys::GGML_OP_GET_ROWS => {
                    // src[0] = data, src[1] = indices into data's rows.
                    check_indices(t, hdr.src[1], ne_of(hdr.src[0])[1])?;
                }
                sys::GGML_OP_SET_ROWS => {
                    // src[1] = indices into the destination's rows (the node is a view of it).
                    check_indices(t, hdr.src[1], hdr.ne[1])?;
                }
                _ => {}
            }
        }
        // why: last, once per graph: weights used in place read their file's pages, and a file
        // truncated since it was mapped would kill the process with SIGBUS inside the compute.
        super::mapped_buffers::check_mapped_files(&buffers)
    }
}

/// Refuses node `t` if one of its sources lies in a CPU extra buffer (a repacked weight, or a
/// view of one) and the node is not an operation that buffer type computes on it.
///
/// why: ggml's CPU backend asks an extra buffer type about a node only for the first four
/// sources, and answers "supported" for views, reshapes, permutes and transposes whatever their
/// source; a kernel handed repacked bytes through any of those paths would read them as plain
/// rows and compute garbage. So a repacked weight may only be the first operand, itself (not a
/// view), of a node its buffer type supports (a matrix product).
fn check_repacked_sources(raw: &RawBackend, t: Tensor<'_>, aliases: bool) -> Result<()> {
    let hdr = t.header();
    for (i, &src) in hdr.src.iter().enumerate() {
        if src.is_null() {
            continue;
        }
        // SAFETY: sources of graph members are live for the graph's lifetime; these fields are
        // only read.
        let (view_src, own_buffer) = unsafe { ((*src).view_src, (*src).buffer) };
        let buffer = if view_src.is_null() {
            own_buffer
        } else {
            // SAFETY: a view's source is live as long as the view.
            unsafe { (*view_src).buffer }
        };
        if buffer.is_null() {
            continue;
        }
        // SAFETY: `buffer` is the live buffer holding the source's data.
        let buft = unsafe { sys::ggml_backend_buffer_get_type(buffer) };
        if !is_cpu_extra(buft) {
            continue;
        }
        let detail = if aliases {
            "a view, reshape, permute or transpose of a repacked weight would be read as plain rows"
        } else if !view_src.is_null() {
            "the source is a view of a repacked weight, whose bytes are not plain rows"
        } else if i != 0 {
            "a repacked weight can only be the first operand"
        } else {
            // SAFETY: as in `Backend::supports_op`.
            let ok = unsafe { sys::ggml_backend_supports_op(raw.as_ptr(), t.as_ptr()) };
            if ok {
                continue;
            }
            "the buffer type has no kernel for this node"
        };
        let weight = if view_src.is_null() { src } else { view_src };
        let weight = match NonNull::new(weight) {
            // SAFETY: as above; the handle only reads the tensor's name.
            Some(w) => unsafe { Tensor::from_raw(w) }.name(),
            None => String::new(),
        };
        let buffer = buffer_type_name(BufferType(
            NonNull::new(buft).unwrap_or_else(|| unreachable!("checked non-null above")),
        ));
        return Err(GgmlError::RepackedWeight {
            node: t.name(),
            weight,
            detail: format!("{} with it in {buffer}: {detail}", t.op_name()),
        });
    }
    Ok(())
}

pub(crate) fn ne_of(p: *mut sys::ggml_tensor) -> [i64; 4] {
    match NonNull::new(p) {
        // SAFETY: sources of graph members are live for the graph's lifetime.
        Some(p) => unsafe { Tensor::from_raw(p) }.ne(),
        None => [0; 4],
    }
}

/// Fails if the index tensor `idx` of `node` is a graph input holding a value outside `0..bound`.
pub(crate) fn check_indices(
    node: Tensor<'_>,
    idx: *mut sys::ggml_tensor,
    bound: i64,
) -> Result<()> {
    let Some(idx) = NonNull::new(idx) else {
        return Ok(());
    };
    // SAFETY: sources of graph members are live for the graph's lifetime.
    let idx = unsafe { Tensor::from_raw(idx) };
    if idx.header().op != sys::GGML_OP_NONE {
        // Computed indices are only known during the computation.
        return Ok(());
    }
    let width = match idx.ty() {
        GgmlType::I32 => 4,
        GgmlType::I64 => 8,
        _ => return Ok(()),
    };
    let bytes = idx.get_bytes()?;
    let (ne, nb) = (idx.ne(), idx.nb());
    for i3 in 0..ne[3] as usize {
        for i2 in 0..ne[2] as usize {
            for i1 in 0..ne[1] as usize {
                for i0 in 0..ne[0] as usize {
                    let off = i0 * nb[0] + i1 * nb[1] + i2 * nb[2] + i3 * nb[3];
                    let v = if width == 4 {
                        let b = &bytes[off..off + 4];
                        i64::from(i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                    } else {
                        let b = &bytes[off..off + 8];
                        i64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
                    };
                    if v < 0 || v >= bound {
                        return Err(GgmlError::oob(format!(
                            "{} of {:?}: row index {v} not in 0..{bound}",
                            node.op_name(),
                            node.name()
                        )));
                    }
                }
            }
        }
    }
    Ok(())
}

type SetNThreads = unsafe extern "C" fn(sys::ggml_backend_t, c_int);

fn set_n_threads_proc(raw: &RawBackend) -> Option<SetNThreads> {
    // SAFETY: the backend is live.
    let dev = NonNull::new(unsafe { sys::ggml_backend_get_device(raw.as_ptr()) })?;
    // SAFETY: `dev` is a registered device.
    let reg = NonNull::new(unsafe { sys::ggml_backend_dev_backend_reg(dev.as_ptr()) })?;
    let name = c"ggml_backend_set_n_threads";
    // SAFETY: `reg` is a live registry entry and `name` is NUL-terminated.
    let p: *mut c_void =
        unsafe { sys::ggml_backend_reg_get_proc_address(reg.as_ptr(), name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: ggml documents the "ggml_backend_set_n_threads" proc address as a
    // `ggml_backend_set_n_threads_t`, i.e. `void (*)(ggml_backend_t, int)`.
    Some(unsafe { std::mem::transmute::<*mut c_void, SetNThreads>(p) })
}
