//! Helpers for the tiny-model tests: RAII handles over the raw gguf/libllama pointers (so nothing
//! leaks when an assertion fails half-way), a quiet log filter, and the weight initialiser used
//! as `llama_model_init_from_user`'s `set_tensor_data` callback.
//!
//! Every `unsafe` block here is a single FFI call (or a raw-pointer write into memory libllama
//! allocated for us) and carries a `SAFETY:` note.
#![allow(dead_code)]

use llama_sys as sys;
use std::ffi::{c_char, c_void, CStr, CString};
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, Once};

static INIT: Once = Once::new();

/// Level of the last message that was not a continuation (`GGML_LOG_LEVEL_CONT` inherits it).
static LAST_LEVEL: AtomicU32 = AtomicU32::new(sys::GGML_LOG_LEVEL_INFO);

/// Drops libllama/ggml messages below WARN; warnings and errors go to stderr (captured per test).
unsafe extern "C" fn quiet_log(level: sys::ggml_log_level, text: *const c_char, _: *mut c_void) {
    let level = if level == sys::GGML_LOG_LEVEL_CONT {
        LAST_LEVEL.load(Ordering::Relaxed)
    } else {
        LAST_LEVEL.store(level, Ordering::Relaxed);
        level
    };
    if level < sys::GGML_LOG_LEVEL_WARN || text.is_null() {
        return;
    }
    // SAFETY: ggml/libllama pass a NUL-terminated string that lives for the duration of the call.
    let text = unsafe { CStr::from_ptr(text) };
    eprint!("{}", text.to_string_lossy());
}

/// Initialises the backends and installs the log filter, once per test process.
pub fn init() {
    INIT.call_once(|| {
        // SAFETY: runs once (guarded by `Once`) before any other libllama call of this process;
        // `quiet_log` is a plain function that stays valid for the life of the process.
        unsafe {
            sys::llama_log_set(Some(quiet_log), std::ptr::null_mut());
            sys::llama_backend_init();
        }
    });
}

fn cstr(s: &str) -> CString {
    CString::new(s).expect("key/value without interior NUL")
}

/// An owned `gguf_context` holding model metadata (no tensors).
pub struct Gguf(NonNull<sys::gguf_context>);

impl Gguf {
    pub fn new() -> Self {
        // SAFETY: plain constructor; the result is checked for null and freed in `Drop`.
        let ptr = unsafe { sys::gguf_init_empty() };
        Self(NonNull::new(ptr).expect("gguf_init_empty returned null"))
    }

    pub fn as_ptr(&self) -> *mut sys::gguf_context {
        self.0.as_ptr()
    }

    pub fn u32(&mut self, key: &str, val: u32) -> &mut Self {
        let key = cstr(key);
        // SAFETY: valid context and NUL-terminated key; gguf copies the key.
        unsafe { sys::gguf_set_val_u32(self.as_ptr(), key.as_ptr(), val) };
        self
    }

    pub fn f32(&mut self, key: &str, val: f32) -> &mut Self {
        let key = cstr(key);
        // SAFETY: valid context and NUL-terminated key; gguf copies the key.
        unsafe { sys::gguf_set_val_f32(self.as_ptr(), key.as_ptr(), val) };
        self
    }

    pub fn str(&mut self, key: &str, val: &str) -> &mut Self {
        let (key, val) = (cstr(key), cstr(val));
        // SAFETY: valid context and NUL-terminated strings; gguf copies both.
        unsafe { sys::gguf_set_val_str(self.as_ptr(), key.as_ptr(), val.as_ptr()) };
        self
    }

    pub fn arr_u32(&mut self, key: &str, vals: &[u32]) -> &mut Self {
        self.arr(key, sys::GGUF_TYPE_UINT32, vals)
    }

    pub fn arr_i32(&mut self, key: &str, vals: &[i32]) -> &mut Self {
        self.arr(key, sys::GGUF_TYPE_INT32, vals)
    }

    fn arr<T: Copy>(&mut self, key: &str, ty: sys::gguf_type, vals: &[T]) -> &mut Self {
        let key = cstr(key);
        // SAFETY: `vals` holds `vals.len()` elements of the 4-byte type `ty` names; gguf copies
        // the data.
        unsafe {
            sys::gguf_set_arr_data(
                self.as_ptr(),
                key.as_ptr(),
                ty,
                vals.as_ptr().cast(),
                vals.len(),
            )
        };
        self
    }
}

impl Default for Gguf {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Gguf {
    fn drop(&mut self) {
        // SAFETY: we own the context; nothing borrows it past this point.
        unsafe { sys::gguf_free(self.as_ptr()) };
    }
}

// ---------------------------------------------------------------------------------------------
// Weights
// ---------------------------------------------------------------------------------------------

/// xorshift64* seeded from the model seed and the tensor name (FNV-1a), so each tensor's values
/// depend only on (seed, name), not on the order libllama creates tensors in.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, name: &str) -> Self {
        let mut h = 0xcbf2_9ce4_8422_2325_u64 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for b in name.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        Self(h | 1)
    }

    /// Uniform in [-1, 1).
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        ((x >> 40) as f32) / ((1u64 << 23) as f32) - 1.0
    }
}

/// Deterministic values for one tensor, chosen by its name.
pub fn tensor_values(seed: u64, name: &str, n: usize) -> Vec<f32> {
    let mut rng = Rng::new(seed, name);
    let mut gen = |f: &dyn Fn(f32) -> f32| (0..n).map(|_| f(rng.next())).collect::<Vec<_>>();
    if name.ends_with(".scale") || name.ends_with(".input_scale") {
        // per-tensor (NVFP4-style) scales: created for every matmul weight when the model comes
        // from user metadata, and multiplied into the product, so they must be 1
        gen(&|_| 1.0)
    } else if name.contains("norm") {
        // RMS-norm gains (incl. lfm2's `token_embd_norm`, qwen35's `ssm_norm`/q/k norms)
        gen(&|u| 1.0 + 0.1 * u)
    } else if name.ends_with(".ssm_a") {
        // qwen35 stores A = -exp(A_log): negative, so the delta rule's state decays
        gen(&|u| -(0.5 + 0.5 * u.abs()))
    } else if name.ends_with("ssm_conv1d.weight") || name.ends_with("shortconv.conv.weight") {
        // depthwise conv taps: larger, so the recurrent/conv path visibly contributes
        gen(&|u| 0.3 * u)
    } else {
        gen(&|u| 0.02 * u)
    }
}

/// Userdata of the `set_tensor_data` callback.
struct Fill {
    seed: u64,
    names: Mutex<Vec<String>>,
    errors: Mutex<Vec<String>>,
}

/// `llama_model_set_tensor_data_t`: fills one (F32) tensor with `tensor_values`.
unsafe extern "C" fn fill_tensor(tensor: *mut sys::ggml_tensor, ud: *mut c_void) {
    // SAFETY: `ud` is the `&Fill` passed to `llama_model_init_from_user`, alive for that call.
    let fill = unsafe { &*(ud as *const Fill) };
    // no unwinding across the FFI boundary: errors are collected and reported after the load
    let res = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: libllama hands us a valid, allocated tensor of its model.
        let t = unsafe { &*tensor };
        // SAFETY: `name` is the tensor's NUL-terminated name buffer.
        let name = unsafe { CStr::from_ptr(t.name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        if t.type_ != sys::GGML_TYPE_F32 {
            return Err(format!("{name}: expected F32, got ggml type {}", t.type_));
        }
        // SAFETY: valid tensor.
        let (n, nbytes) = unsafe { (sys::ggml_nelements(t), sys::ggml_nbytes(t)) };
        let vals = tensor_values(fill.seed, &name, n as usize);
        if let Ok(mut names) = fill.names.lock() {
            names.push(name.clone());
        }
        if nbytes != vals.len() * size_of::<f32>() {
            return Err(format!(
                "{name}: non-contiguous tensor ({nbytes} bytes for {n} floats)"
            ));
        }
        // SAFETY: a null buffer is never host memory; otherwise a valid buffer handle.
        let host = !t.buffer.is_null() && unsafe { sys::ggml_backend_buffer_is_host(t.buffer) };
        if host && !t.data.is_null() {
            // SAFETY: host buffer: `data` points to `nbytes` writable bytes, not aliasing `vals`.
            unsafe {
                std::ptr::copy_nonoverlapping(vals.as_ptr(), t.data.cast::<f32>(), vals.len())
            };
        } else {
            // SAFETY: device tensor of exactly `nbytes` bytes; ggml copies from `vals`.
            unsafe { sys::ggml_backend_tensor_set(tensor, vals.as_ptr().cast(), 0, nbytes) };
        }
        Ok(())
    }));
    let err = match res {
        Ok(Ok(())) => return,
        Ok(Err(e)) => e,
        Err(_) => "panic while filling a tensor".to_owned(),
    };
    if let Ok(mut errors) = fill.errors.lock() {
        errors.push(err);
    }
}

// ---------------------------------------------------------------------------------------------
// Model / context / batch
// ---------------------------------------------------------------------------------------------

/// An owned `llama_model`, with the names of the weights libllama asked us to fill.
pub struct Model {
    ptr: NonNull<sys::llama_model>,
    tensors: Vec<String>,
}

impl Model {
    /// Builds a model from metadata only; every weight is created (F32) by libllama and filled
    /// by `fill_tensor` with values derived from `seed`.
    pub fn from_metadata(meta: &Gguf, seed: u64) -> Self {
        init();
        let fill = Fill {
            seed,
            names: Mutex::new(Vec::new()),
            errors: Mutex::new(Vec::new()),
        };
        // SAFETY: plain constructor of a by-value struct.
        let mut params = unsafe { sys::llama_model_default_params() };
        params.n_gpu_layers = 0;
        // SAFETY: `meta` is a valid gguf context (libllama only reads it, during this call);
        // `fill` outlives the call and `fill_tensor` matches `llama_model_set_tensor_data_t`.
        let ptr = unsafe {
            sys::llama_model_init_from_user(
                meta.as_ptr(),
                Some(fill_tensor),
                &fill as *const Fill as *mut c_void,
                params,
            )
        };
        let model = NonNull::new(ptr).map(|ptr| Self {
            ptr,
            tensors: fill.names.into_inner().unwrap_or_default(),
        });
        let errors = fill.errors.into_inner().unwrap_or_default();
        assert!(errors.is_empty(), "filling weights failed: {errors:?}");
        model.expect("llama_model_init_from_user failed (see the log above)")
    }

    pub fn as_ptr(&self) -> *mut sys::llama_model {
        self.ptr.as_ptr()
    }

    /// Names of all weights of the model (every tensor libllama created, optional ones included).
    pub fn tensors(&self) -> &[String] {
        &self.tensors
    }

    pub fn has_tensor(&self, name: &str) -> bool {
        self.tensors.iter().any(|t| t == name)
    }

    pub fn n_vocab(&self) -> usize {
        // SAFETY: valid model; the vocab lives as long as the model.
        let n = unsafe { sys::llama_vocab_n_tokens(sys::llama_model_get_vocab(self.as_ptr())) };
        usize::try_from(n).expect("negative vocab size")
    }

    pub fn n_layer(&self) -> i32 {
        // SAFETY: valid model.
        unsafe { sys::llama_model_n_layer(self.as_ptr()) }
    }

    pub fn n_embd(&self) -> i32 {
        // SAFETY: valid model.
        unsafe { sys::llama_model_n_embd(self.as_ptr()) }
    }

    pub fn is_hybrid(&self) -> bool {
        // SAFETY: valid model.
        unsafe { sys::llama_model_is_hybrid(self.as_ptr()) }
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: we own the model; contexts borrow it (`Context<'m>`), so none is alive here.
        unsafe { sys::llama_model_free(self.as_ptr()) };
    }
}

/// An owned `llama_context`, borrowing its model.
pub struct Context<'m> {
    ptr: NonNull<sys::llama_context>,
    n_vocab: usize,
    _model: PhantomData<&'m Model>,
}

impl<'m> Context<'m> {
    /// A context with a per-sequence KV cache (`kv_unified` false, libllama's default): libllama
    /// pads each sequence's share `n_ctx / n_seq_max` up to a multiple of 256.
    pub fn new(model: &'m Model, n_ctx: u32, n_batch: u32, n_seq_max: u32, n_threads: i32) -> Self {
        // SAFETY: plain constructor of a by-value struct.
        let mut params = unsafe { sys::llama_context_default_params() };
        params.n_ctx = n_ctx;
        params.n_batch = n_batch;
        params.n_ubatch = n_batch;
        params.n_seq_max = n_seq_max;
        params.n_threads = n_threads;
        params.n_threads_batch = n_threads;
        // SAFETY: valid model that outlives the context (lifetime `'m`).
        let ptr = unsafe { sys::llama_init_from_model(model.as_ptr(), params) };
        Self {
            ptr: NonNull::new(ptr).expect("llama_init_from_model failed (see the log above)"),
            n_vocab: model.n_vocab(),
            _model: PhantomData,
        }
    }

    /// `llama_decode`; panics on a non-zero status.
    pub fn decode(&mut self, batch: &Batch) {
        // SAFETY: valid context; the batch's arrays hold `n_tokens` initialised entries.
        let status = unsafe { sys::llama_decode(self.ptr.as_ptr(), batch.raw) };
        assert_eq!(status, 0, "llama_decode failed");
    }

    /// Copies the logits of batch entry `i` (which must have requested logits).
    pub fn logits(&mut self, i: i32) -> Vec<f32> {
        // SAFETY: valid context; returns null for an entry without logits.
        let ptr = unsafe { sys::llama_get_logits_ith(self.ptr.as_ptr(), i) };
        assert!(!ptr.is_null(), "no logits for batch entry {i}");
        // SAFETY: libllama's logits row for entry `i` holds `n_vocab` floats, valid until the
        // next decode; we copy it out right away.
        unsafe { std::slice::from_raw_parts(ptr, self.n_vocab) }.to_vec()
    }
}

impl Drop for Context<'_> {
    fn drop(&mut self) {
        // SAFETY: we own the context.
        unsafe { sys::llama_free(self.ptr.as_ptr()) };
    }
}

/// An owned token batch (one sequence id per token).
pub struct Batch {
    raw: sys::llama_batch,
    capacity: usize,
}

impl Batch {
    pub fn new(capacity: usize) -> Self {
        let cap = i32::try_from(capacity).expect("batch capacity fits i32");
        // SAFETY: allocates token/pos/n_seq_id/seq_id/logits arrays of `cap` entries, each
        // `seq_id[i]` with room for one id; freed in `Drop`.
        let raw = unsafe { sys::llama_batch_init(cap, 0, 1) };
        assert!(!raw.token.is_null(), "llama_batch_init failed");
        Self { raw, capacity }
    }

    pub fn clear(&mut self) {
        self.raw.n_tokens = 0;
    }

    pub fn n_tokens(&self) -> usize {
        self.raw.n_tokens as usize
    }

    /// Appends a token; returns its index in the batch (for `Context::logits`).
    pub fn push(&mut self, token: i32, pos: i32, seq: i32, logits: bool) -> i32 {
        let i = self.n_tokens();
        assert!(i < self.capacity, "batch full ({} tokens)", self.capacity);
        // SAFETY: `i < capacity`, and `llama_batch_init` allocated every array with `capacity`
        // entries (and one seq id per `seq_id[i]`).
        unsafe {
            *self.raw.token.add(i) = token;
            *self.raw.pos.add(i) = pos;
            *self.raw.n_seq_id.add(i) = 1;
            *(*self.raw.seq_id.add(i)) = seq;
            *self.raw.logits.add(i) = i8::from(logits);
        }
        self.raw.n_tokens += 1;
        i as i32
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        // SAFETY: `raw` came from `llama_batch_init` and is freed once.
        unsafe { sys::llama_batch_free(self.raw) };
    }
}
