//! Safe handles over llama-sys: models, contexts, batches and the recurrent/KV memory.
//!
//! This is the only place that touches libllama's raw pointers; the crate root builds the
//! multi-sequence API on top. Handles own their pointers (RAII); a context keeps its model alive
//! through an `Arc`, so neither needs a lifetime and both can move between threads.

use lfm2_ggml::gguf::{GgufMetadata, GgufWriter};
use llama_sys as sys;
use std::ffi::{c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::ptr::NonNull;
use std::sync::{Arc, Once};

/// Errors from libllama handles.
#[derive(Debug, thiserror::Error)]
pub enum LlamaError {
    /// The model file could not be loaded (libllama logs the detail).
    #[error("failed to load model {path}: libllama rejected it (see the log for the reason)")]
    LoadFile {
        /// The file.
        path: String,
    },
    /// The model could not be written.
    #[error("failed to write model {path}: {reason}")]
    Save {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// A model built from metadata was rejected.
    #[error("failed to build a model from metadata: {0}")]
    FromMetadata(String),
    /// The context could not be created.
    #[error("failed to create a llama context: {0}")]
    Context(String),
    /// `llama_decode` failed.
    #[error("decode failed with status {status}: {reason}")]
    Decode {
        /// libllama's return code.
        status: i32,
        /// What the code means.
        reason: &'static str,
    },
    /// A batch was filled past its capacity or with an invalid entry.
    #[error("invalid batch: {0}")]
    Batch(String),
    /// A sequence id outside `0..n_seq_max`.
    #[error("sequence {seq} is out of range (context has {n_seq_max} sequences)")]
    Sequence {
        /// The sequence id.
        seq: i32,
        /// The context's capacity.
        n_seq_max: u32,
    },
}

/// Result alias for this module.
pub type Result<T> = std::result::Result<T, LlamaError>;

static BACKEND_INIT: Once = Once::new();

pub use lfm2_ggml::log::add_log_hook;

/// Initialises libllama once per process and routes its log through [`lfm2_ggml::log`].
fn init_backend() {
    BACKEND_INIT.call_once(|| {
        // SAFETY: called exactly once (guarded by `Once`) before any other libllama call.
        unsafe { sys::llama_backend_init() };
        // SAFETY: the trampoline is a valid `extern "C"` function for the whole program, never
        // unwinds, and ignores its user data, so null is fine. libllama also sets it for ggml.
        unsafe { sys::llama_log_set(Some(lfm2_ggml::log::trampoline), std::ptr::null_mut()) };
    });
}

/// Owner of a `llama_model*`.
struct ModelPtr(NonNull<sys::llama_model>);

// SAFETY: a loaded llama_model is immutable (weights, hparams, vocab); libllama creates any number
// of contexts from one model, on any thread, and only reads it. Freeing happens once, in Drop,
// after the last Arc (held by every context) is gone.
unsafe impl Send for ModelPtr {}
// SAFETY: see `Send`: shared access is read-only.
unsafe impl Sync for ModelPtr {}

impl Drop for ModelPtr {
    fn drop(&mut self) {
        // SAFETY: the pointer came from a successful load and is freed exactly once.
        unsafe { sys::llama_model_free(self.0.as_ptr()) };
    }
}

/// A tensor libllama asks the caller to fill while building a model from metadata.
pub struct TensorRequest<'a> {
    /// The tensor's name, e.g. `blk.0.attn_q.weight`.
    pub name: &'a str,
    /// Shape in ggml order (`ne[0]` fastest).
    pub shape: [i64; 4],
    /// ggml type id (F32 unless the metadata overrides it).
    pub ggml_type: u32,
    /// Bytes the data must have.
    pub n_bytes: usize,
}

/// A model shared by contexts (cheap to clone).
#[derive(Clone)]
pub struct LlamaModel {
    ptr: Arc<ModelPtr>,
}

impl std::fmt::Debug for LlamaModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaModel")
            .field("arch", &self.architecture())
            .field("n_vocab", &self.n_vocab())
            .field("n_embd", &self.n_embd())
            .finish()
    }
}

struct FillState<'a> {
    fill: &'a mut dyn FnMut(&TensorRequest<'_>) -> Vec<u8>,
    error: Option<String>,
}

extern "C" fn fill_tensor(tensor: *mut sys::ggml_tensor, ud: *mut c_void) {
    // SAFETY: `ud` is the `FillState` that `LlamaModel::from_metadata` keeps alive across the
    // libllama call that invokes this callback; no one else accesses it meanwhile.
    let state = unsafe { &mut *(ud as *mut FillState<'_>) };
    if state.error.is_some() || tensor.is_null() {
        return;
    }
    // SAFETY: libllama passes a live, allocated tensor of the model being built.
    let t = unsafe { &*tensor };
    // SAFETY: the tensor's name is a NUL-terminated array inside the tensor.
    let name = unsafe { CStr::from_ptr(t.name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: `tensor` is valid (above); ggml_nbytes only reads its shape and type.
    let n_bytes = unsafe { sys::ggml_nbytes(tensor) };
    let req = TensorRequest {
        name: &name,
        shape: t.ne,
        ggml_type: t.type_,
        n_bytes,
    };
    let data = match catch_unwind(AssertUnwindSafe(|| (state.fill)(&req))) {
        Ok(d) => d,
        Err(_) => {
            state.error = Some(format!("the fill function panicked on {name}"));
            return;
        }
    };
    if data.len() != n_bytes {
        state.error = Some(format!(
            "{name}: fill gave {} bytes, tensor has {n_bytes}",
            data.len()
        ));
        return;
    }
    // SAFETY: the tensor is allocated in a backend buffer (libllama allocates before filling) and
    // `data` holds exactly ggml_nbytes(tensor) bytes.
    unsafe { sys::ggml_backend_tensor_set(tensor, data.as_ptr().cast(), 0, n_bytes) };
}

/// libllama's model parameters as this crate loads models with: libllama's defaults, so every
/// layer goes to the GPUs it finds (none in a CPU build). With the recurrent state in device
/// memory, the gated delta net's in-place update runs on that device: Vulkan, CUDA and Metal
/// have its kernel (vendor patches 0006 and 0002), and a device without one keeps libllama's
/// gathered path (patch 0003 asks the device).
fn model_params() -> sys::llama_model_params {
    // SAFETY: plain value constructor.
    unsafe { sys::llama_model_default_params() }
}

impl LlamaModel {
    /// Loads a GGUF model file (weights memory-mapped), with every layer on the GPUs libllama
    /// finds (none in a CPU build; see `model_params`).
    pub fn load(path: &Path) -> Result<LlamaModel> {
        Self::load_with(path, model_params())
    }

    /// Loads a GGUF model file with every layer on the CPU, whatever devices the build has
    /// (to compare against work that runs on the CPU).
    pub fn load_cpu(path: &Path) -> Result<LlamaModel> {
        let mut params = model_params();
        params.n_gpu_layers = 0;
        Self::load_with(path, params)
    }

    fn load_with(path: &Path, params: sys::llama_model_params) -> Result<LlamaModel> {
        init_backend();
        let err = || LlamaError::LoadFile {
            path: path.display().to_string(),
        };
        let c_path = CString::new(path.to_string_lossy().as_bytes()).map_err(|_| err())?;
        // SAFETY: `c_path` is a valid C string for the call; libllama copies what it keeps.
        let raw = unsafe { sys::llama_model_load_from_file(c_path.as_ptr(), params) };
        NonNull::new(raw)
            .map(|p| LlamaModel {
                ptr: Arc::new(ModelPtr(p)),
            })
            .ok_or_else(err)
    }

    /// Builds a model from GGUF metadata alone: libllama creates the tensors the architecture
    /// needs (F32 unless overridden) and calls `fill` for each one's bytes.
    pub fn from_metadata(
        metadata: &GgufMetadata,
        fill: &mut dyn FnMut(&TensorRequest<'_>) -> Vec<u8>,
    ) -> Result<LlamaModel> {
        init_backend();
        let mut writer = GgufWriter::new();
        writer
            .extend_metadata(metadata)
            .map_err(|e| LlamaError::FromMetadata(e.to_string()))?;
        let mut bytes = Vec::new();
        writer
            .write(&mut bytes)
            .map_err(|e| LlamaError::FromMetadata(e.to_string()))?;
        let gguf = CGguf::from_bytes(&bytes)
            .ok_or_else(|| LlamaError::FromMetadata("ggml rejected the metadata".into()))?;
        let mut state = FillState { fill, error: None };
        let params = model_params();
        // SAFETY: `gguf` outlives the call (libllama borrows it); `state` outlives the call and
        // is only accessed by `fill_tensor` during it.
        let raw = unsafe {
            sys::llama_model_init_from_user(
                gguf.0.as_ptr(),
                Some(fill_tensor),
                (&mut state as *mut FillState<'_>).cast(),
                params,
            )
        };
        let model = NonNull::new(raw).map(|p| LlamaModel {
            ptr: Arc::new(ModelPtr(p)),
        });
        match (model, state.error) {
            (_, Some(e)) => Err(LlamaError::FromMetadata(e)),
            (Some(m), None) => Ok(m),
            (None, None) => Err(LlamaError::FromMetadata(
                "libllama rejected the model (see the log for the reason)".into(),
            )),
        }
    }

    /// Writes the model (metadata and weights) as a GGUF file that [`LlamaModel::load`] reads.
    pub fn save(&self, path: &Path) -> Result<()> {
        let err = |reason: String| LlamaError::Save {
            path: path.display().to_string(),
            reason,
        };
        let c_path = CString::new(path.to_string_lossy().as_bytes())
            .map_err(|_| err("the path contains a NUL byte".into()))?;
        // libllama reports a failed write only in its log, so make sure no older file can pass
        // for the result, then check that the file appeared.
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(err(e.to_string())),
            _ => {}
        }
        // SAFETY: the model is alive and only read; `c_path` is a valid C string for the call.
        unsafe { sys::llama_model_save_to_file(self.raw(), c_path.as_ptr()) };
        match std::fs::metadata(path) {
            Ok(m) if m.len() > 0 => Ok(()),
            _ => Err(err("libllama could not write the file (see the log)".into())),
        }
    }

    fn raw(&self) -> *mut sys::llama_model {
        self.ptr.0.as_ptr()
    }

    /// Vocabulary size.
    pub fn n_vocab(&self) -> usize {
        // SAFETY: the model is alive; the vocab pointer lives as long as the model.
        let vocab = unsafe { sys::llama_model_get_vocab(self.raw()) };
        // SAFETY: `vocab` belongs to the live model.
        unsafe { sys::llama_vocab_n_tokens(vocab) }.max(0) as usize
    }

    /// Embedding width.
    pub fn n_embd(&self) -> usize {
        // SAFETY: the model is alive.
        unsafe { sys::llama_model_n_embd(self.raw()) }.max(0) as usize
    }

    /// Number of layers.
    pub fn n_layer(&self) -> usize {
        // SAFETY: the model is alive.
        unsafe { sys::llama_model_n_layer(self.raw()) }.max(0) as usize
    }

    /// A string metadata value (`general.architecture`, ...).
    pub fn meta_str(&self, key: &str) -> Option<String> {
        let key = CString::new(key).ok()?;
        let mut buf = vec![0u8; 256];
        // SAFETY: the model is alive, `key` is a C string, `buf` is writable for its length.
        let n = unsafe {
            sys::llama_model_meta_val_str(
                self.raw(),
                key.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n < 0 {
            return None;
        }
        buf.truncate((n as usize).min(buf.len() - 1));
        String::from_utf8(buf).ok()
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> String {
        self.meta_str("general.architecture").unwrap_or_default()
    }
}

/// Owner of a C `gguf_context*` (only used to hand metadata to libllama).
struct CGguf(NonNull<sys::gguf_context>);

impl CGguf {
    fn from_bytes(bytes: &[u8]) -> Option<CGguf> {
        let params = sys::gguf_init_params {
            no_alloc: true,
            ctx: std::ptr::null_mut(),
        };
        // SAFETY: `bytes` is valid for reads of its length during the call; ggml copies what it
        // keeps into the new context.
        let raw = unsafe { sys::gguf_init_from_buffer(bytes.as_ptr().cast(), bytes.len(), params) };
        NonNull::new(raw).map(CGguf)
    }
}

impl Drop for CGguf {
    fn drop(&mut self) {
        // SAFETY: created by gguf_init_from_buffer and freed once.
        unsafe { sys::gguf_free(self.0.as_ptr()) };
    }
}

/// Options for a context.
#[derive(Debug, Clone)]
pub struct ContextOptions {
    /// Total context positions (shared by all sequences unless `kv_unified` is false).
    pub n_ctx: u32,
    /// Logical batch size (tokens per `decode`).
    pub n_batch: u32,
    /// Physical micro-batch size.
    pub n_ubatch: u32,
    /// Parallel sequences.
    pub n_seq_max: u32,
    /// Recurrent-state snapshots kept per sequence for speculative rollback (0 = none).
    pub n_rs_seq: u32,
    /// Threads for decode and for batch prefill.
    pub n_threads: i32,
    /// Keep the attention K/V cache in F32 (libllama's default is F16) and compute attention
    /// without flash attention (whose CPU kernel rounds through F16): for comparisons against
    /// other implementations to float rounding.
    pub exact_attention: bool,
}

impl Default for ContextOptions {
    fn default() -> Self {
        ContextOptions {
            n_ctx: 512,
            n_batch: 512,
            n_ubatch: 512,
            n_seq_max: 1,
            n_rs_seq: 0,
            n_threads: 2,
            exact_attention: false,
        }
    }
}

/// Something that watches graph nodes as they are computed (through libllama's `cb_eval`).
pub trait EvalObserver: Send {
    /// Whether to observe this node; observing splits the graph at it (no change to results).
    fn wants(&mut self, op: u32, name: &str, op_params: &[i32; 16]) -> bool;
    /// Called after a wanted node was computed.
    fn computed(&mut self, op: u32, name: &str, op_params: &[i32; 16]);
}

extern "C" fn eval_callback(t: *mut sys::ggml_tensor, ask: bool, ud: *mut c_void) -> bool {
    if t.is_null() || ud.is_null() {
        return false;
    }
    // SAFETY: `ud` points at the Box<dyn EvalObserver> owned by the LlamaContext that registered
    // this callback; it is only used during `llama_decode` on that context (&mut self).
    let obs = unsafe { &mut *(ud as *mut Box<dyn EvalObserver>) };
    // SAFETY: the scheduler passes a live graph node.
    let t = unsafe { &*t };
    // SAFETY: the name is a NUL-terminated array inside the tensor.
    let name = unsafe { CStr::from_ptr(t.name.as_ptr()) }.to_string_lossy();
    let mut params = [0i32; 16];
    for (i, p) in params.iter_mut().enumerate() {
        *p = t.op_params[i];
    }
    catch_unwind(AssertUnwindSafe(|| {
        if ask {
            obs.wants(t.op, &name, &params)
        } else {
            obs.computed(t.op, &name, &params);
            true
        }
    }))
    .unwrap_or(false)
}

/// A libllama context: its own memory (KV cache / recurrent state) over a shared model.
pub struct LlamaContext {
    ptr: NonNull<sys::llama_context>,
    n_seq_max: u32,
    n_vocab: usize,
    // Boxed twice so the pointer handed to libllama stays put when `self` moves.
    _observer: Option<Box<Box<dyn EvalObserver>>>,
    // Dropped after `ptr` is freed (field order is irrelevant: Drop frees ptr first).
    _model: LlamaModel,
}

// SAFETY: a llama_context is not thread-safe for concurrent use, but it has no thread affinity:
// moving it to another thread is fine. `&mut self` on every mutating call and `!Sync` (raw
// pointer field) keep concurrent use out.
unsafe impl Send for LlamaContext {}

impl Drop for LlamaContext {
    fn drop(&mut self) {
        // SAFETY: created by llama_init_from_model and freed once; the model outlives it because
        // `_model` is dropped after this body runs.
        unsafe { sys::llama_free(self.ptr.as_ptr()) };
    }
}

impl LlamaContext {
    /// Creates a context; `observer` (if any) sees graph nodes as they are computed.
    pub fn new(
        model: &LlamaModel,
        opts: &ContextOptions,
        observer: Option<Box<dyn EvalObserver>>,
    ) -> Result<LlamaContext> {
        if opts.n_seq_max == 0 || opts.n_ctx == 0 || opts.n_batch == 0 {
            return Err(LlamaError::Context(
                "n_seq_max, n_ctx and n_batch must be positive".into(),
            ));
        }
        // SAFETY: plain value constructor.
        let mut p = unsafe { sys::llama_context_default_params() };
        p.n_ctx = opts.n_ctx;
        p.n_batch = opts.n_batch;
        p.n_ubatch = opts.n_ubatch.min(opts.n_batch);
        p.n_seq_max = opts.n_seq_max;
        p.n_rs_seq = opts.n_rs_seq;
        p.n_threads = opts.n_threads;
        p.n_threads_batch = opts.n_threads;
        p.no_perf = true;
        if opts.exact_attention {
            p.type_k = sys::GGML_TYPE_F32;
            p.type_v = sys::GGML_TYPE_F32;
            p.flash_attn_type = sys::LLAMA_FLASH_ATTN_TYPE_DISABLED;
        }
        let mut observer = observer.map(Box::new);
        if let Some(obs) = observer.as_mut() {
            p.cb_eval = Some(eval_callback);
            p.cb_eval_user_data = (&mut **obs as *mut Box<dyn EvalObserver>).cast();
        }
        // SAFETY: the model is alive (and kept alive by the context); params are initialised.
        let raw = unsafe { sys::llama_init_from_model(model.raw(), p) };
        let ptr = NonNull::new(raw).ok_or_else(|| {
            LlamaError::Context("libllama rejected the parameters (see log)".into())
        })?;
        Ok(LlamaContext {
            ptr,
            n_seq_max: opts.n_seq_max,
            n_vocab: model.n_vocab(),
            _observer: observer,
            _model: model.clone(),
        })
    }

    /// Parallel sequences this context holds.
    pub fn n_seq_max(&self) -> u32 {
        self.n_seq_max
    }

    /// Vocabulary size (length of a logits row).
    pub fn n_vocab(&self) -> usize {
        self.n_vocab
    }

    /// Runs the batch. Logits of the entries marked as outputs are readable until the next call.
    pub fn decode(&mut self, batch: &LlamaBatch) -> Result<()> {
        if batch.is_empty() {
            return Err(LlamaError::Batch("empty batch".into()));
        }
        if let Some(&s) = batch
            .seq_ids
            .iter()
            .find(|&&s| s < 0 || s as u32 >= self.n_seq_max)
        {
            return Err(LlamaError::Sequence {
                seq: s,
                n_seq_max: self.n_seq_max,
            });
        }
        if let Some(&t) = batch
            .tokens
            .iter()
            .find(|&&t| t < 0 || t as usize >= self.n_vocab)
        {
            return Err(LlamaError::Batch(format!(
                "token {t} outside the vocabulary of {}",
                self.n_vocab
            )));
        }
        let mut seq_ptrs = Vec::with_capacity(batch.len());
        let raw = batch.as_raw(&mut seq_ptrs);
        // SAFETY: `raw` points into `batch`'s vectors and `seq_ptrs`, which stay alive and
        // unmodified for the call; libllama only reads them. The context is exclusively borrowed.
        let status = unsafe { sys::llama_decode(self.ptr.as_ptr(), raw) };
        match status {
            0 => Ok(()),
            1 => Err(LlamaError::Decode {
                status,
                reason: "no memory slot for the batch",
            }),
            2 => Err(LlamaError::Decode {
                status,
                reason: "aborted",
            }),
            -1 => Err(LlamaError::Decode {
                status,
                reason: "invalid batch",
            }),
            _ => Err(LlamaError::Decode {
                status,
                reason: "compute failed",
            }),
        }
    }

    /// Logits of batch entry `i` (which must have been marked as an output) after `decode`.
    pub fn logits(&self, i: usize) -> Option<&[f32]> {
        // SAFETY: the context is alive; libllama returns null for entries without logits.
        let p = unsafe { sys::llama_get_logits_ith(self.ptr.as_ptr(), i as i32) };
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-null row holds n_vocab floats owned by the context; it stays valid until
        // the next decode, which needs `&mut self` and so cannot overlap this borrow.
        Some(unsafe { std::slice::from_raw_parts(p, self.n_vocab) })
    }

    fn memory(&self) -> sys::llama_memory_t {
        // SAFETY: the context is alive; the memory lives as long as the context.
        unsafe { sys::llama_get_memory(self.ptr.as_ptr()) }
    }

    fn check_seq(&self, seq: i32) -> Result<()> {
        if seq < 0 || seq as u32 >= self.n_seq_max {
            return Err(LlamaError::Sequence {
                seq,
                n_seq_max: self.n_seq_max,
            });
        }
        Ok(())
    }

    /// Removes positions `[p0, p1)` of a sequence (`p1 = None`: to the end). Returns false when
    /// the memory cannot do it (a recurrent state cannot drop a middle range).
    pub fn seq_rm(&mut self, seq: i32, p0: i32, p1: Option<i32>) -> Result<bool> {
        self.check_seq(seq)?;
        // SAFETY: valid memory handle and sequence id.
        Ok(unsafe { sys::llama_memory_seq_rm(self.memory(), seq, p0, p1.unwrap_or(-1)) })
    }

    /// Copies sequence `src` into `dst` (a fork: both continue from the same state).
    pub fn seq_cp(&mut self, src: i32, dst: i32) -> Result<()> {
        self.check_seq(src)?;
        self.check_seq(dst)?;
        // SAFETY: valid memory handle and sequence ids.
        unsafe { sys::llama_memory_seq_cp(self.memory(), src, dst, -1, -1) };
        Ok(())
    }

    /// Highest position stored for a sequence, or None when it is empty.
    pub fn seq_pos_max(&self, seq: i32) -> Result<Option<i32>> {
        self.check_seq(seq)?;
        // SAFETY: valid memory handle and sequence id.
        let p = unsafe { sys::llama_memory_seq_pos_max(self.memory(), seq) };
        Ok((p >= 0).then_some(p))
    }

    /// Clears every sequence; `data` also wipes the buffers.
    pub fn clear(&mut self, data: bool) {
        // SAFETY: valid memory handle.
        unsafe { sys::llama_memory_clear(self.memory(), data) };
    }
}

/// A batch of tokens for [`LlamaContext::decode`], owned on the Rust side.
#[derive(Debug, Default, Clone)]
pub struct LlamaBatch {
    tokens: Vec<i32>,
    pos: Vec<i32>,
    // libllama wants one seq-id array per token; we keep exactly one sequence per token.
    seq_ids: Vec<i32>,
    n_seq: Vec<i32>,
    logits: Vec<i8>,
}

impl LlamaBatch {
    /// An empty batch.
    pub fn new() -> LlamaBatch {
        LlamaBatch::default()
    }

    /// Entries in the batch.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.tokens.clear();
        self.pos.clear();
        self.seq_ids.clear();
        self.n_seq.clear();
        self.logits.clear();
    }

    /// Adds a token at `pos` of sequence `seq`; `output` asks for its logits. Returns its index.
    pub fn push(&mut self, token: i32, pos: i32, seq: i32, output: bool) -> usize {
        self.tokens.push(token);
        self.pos.push(pos);
        self.seq_ids.push(seq);
        self.n_seq.push(1);
        self.logits.push(output as i8);
        self.tokens.len() - 1
    }

    /// The C view of the batch; `seq_ptrs` receives the per-token seq-id pointers and must
    /// outlive the returned value's use. libllama only reads through these pointers.
    fn as_raw(&self, seq_ptrs: &mut Vec<*mut i32>) -> sys::llama_batch {
        let base = self.seq_ids.as_ptr() as *mut i32;
        // `wrapping_add` stays in bounds of `seq_ids` for every i < len.
        seq_ptrs.extend((0..self.seq_ids.len()).map(|i| base.wrapping_add(i)));
        sys::llama_batch {
            n_tokens: self.tokens.len() as i32,
            token: self.tokens.as_ptr() as *mut i32,
            embd: std::ptr::null_mut(),
            pos: self.pos.as_ptr() as *mut i32,
            n_seq_id: self.n_seq.as_ptr() as *mut i32,
            seq_id: seq_ptrs.as_mut_ptr(),
            logits: self.logits.as_ptr() as *mut i8,
        }
    }
}
