//! Computation graphs (`ggml_cgraph`).

use std::collections::HashSet;
use std::ffi::CString;
use std::ptr::NonNull;

use ggml_sys as sys;

use super::context::{Context, MAX_GRAPH_SIZE};
use super::error::{GgmlError, Result};
use super::tensor::Tensor;

/// A forward computation graph living in a [`Context`].
///
/// The graph can reference tensors of any context that outlives `'ctx`. Alongside ggml's graph
/// it keeps the set of member tensors, so expansions that would overflow the graph are refused
/// (ggml aborts) and allocators and backends can validate every member.
pub struct Graph<'ctx> {
    raw: NonNull<sys::ggml_cgraph>,
    ctx: &'ctx Context,
    capacity: usize,
    members: HashSet<*mut sys::ggml_tensor>,
    /// Members in visiting order (leafs and nodes).
    order: Vec<NonNull<sys::ggml_tensor>>,
    n_nodes: usize,
    n_leafs: usize,
}

impl std::fmt::Debug for Graph<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("capacity", &self.capacity)
            .field("n_nodes", &self.n_nodes)
            .field("n_leafs", &self.n_leafs)
            .finish()
    }
}

impl Context {
    /// A new graph with room for `size` nodes and `size` leafs.
    pub fn new_graph(&self, size: usize) -> Result<Graph<'_>> {
        if size == 0 || size > MAX_GRAPH_SIZE {
            return Err(GgmlError::arg(
                "new_graph",
                format!("graph size must be in 1..={MAX_GRAPH_SIZE}"),
            ));
        }
        self.ensure_room(Context::graph_overhead(size))?;
        // SAFETY: the context is live and has room for the graph object (checked above; ggml
        // would dereference a null object otherwise); `size` is small enough for ggml's `int`s.
        let raw = unsafe { sys::ggml_new_graph_custom(self.as_ptr(), size, false) };
        let raw = NonNull::new(raw).ok_or_else(|| GgmlError::alloc("graph"))?;
        Ok(Graph {
            raw,
            ctx: self,
            capacity: size,
            members: HashSet::new(),
            order: Vec::new(),
            n_nodes: 0,
            n_leafs: 0,
        })
    }
}

impl<'ctx> Graph<'ctx> {
    /// Adds `tensor` and every tensor it depends on (not yet in the graph) to the graph.
    pub fn build_forward_expand(&mut self, tensor: Tensor<'ctx>) -> Result<()> {
        // Mirror ggml_visit_parents: depth-first over `src`, post-order, leafs are tensors with
        // no op that are not parameters.
        let mut new_nodes = 0usize;
        let mut new_leafs = 0usize;
        let mut visited: HashSet<*mut sys::ggml_tensor> = HashSet::new();
        let mut added: Vec<NonNull<sys::ggml_tensor>> = Vec::new();
        let mut stack: Vec<(NonNull<sys::ggml_tensor>, bool)> = vec![(tensor.as_non_null(), false)];
        while let Some((t, expanded)) = stack.pop() {
            // SAFETY: `t` is `tensor` or a source of a member of its dependency tree; sources are
            // created before their consumers from inputs that outlive them, so all are live for
            // `'ctx`.
            let hdr = unsafe { Tensor::from_raw(t) }.header();
            if expanded {
                let is_leaf = hdr.op == sys::GGML_OP_NONE
                    && (hdr.flags & sys::GGML_TENSOR_FLAG_PARAM as i32) == 0;
                if is_leaf {
                    new_leafs += 1;
                } else {
                    new_nodes += 1;
                }
                added.push(t);
                continue;
            }
            if self.members.contains(&t.as_ptr()) || !visited.insert(t.as_ptr()) {
                continue;
            }
            stack.push((t, true));
            for src in hdr.src.iter().rev() {
                if let Some(src) = NonNull::new(*src) {
                    if !self.members.contains(&src.as_ptr()) && !visited.contains(&src.as_ptr()) {
                        stack.push((src, false));
                    }
                }
            }
        }
        if self.n_nodes + new_nodes > self.capacity || self.n_leafs + new_leafs > self.capacity {
            return Err(GgmlError::GraphFull {
                capacity: self.capacity,
                needed: (self.n_nodes + new_nodes).max(self.n_leafs + new_leafs),
            });
        }
        // SAFETY: the graph and `tensor` (with all its sources) are live, and the expansion fits
        // in the graph's node and leaf arrays (checked above), so no assert can fire.
        unsafe { sys::ggml_build_forward_expand(self.raw.as_ptr(), tensor.as_ptr()) };
        self.n_nodes += new_nodes;
        self.n_leafs += new_leafs;
        for t in added {
            self.members.insert(t.as_ptr());
            self.order.push(t);
        }
        debug_assert_eq!(self.n_nodes, self.raw_n_nodes());
        Ok(())
    }

    fn raw_n_nodes(&self) -> usize {
        // SAFETY: the graph is live.
        let n = unsafe { sys::ggml_graph_n_nodes(self.raw.as_ptr()) };
        usize::try_from(n).unwrap_or(0)
    }

    /// Number of computed nodes.
    pub fn n_nodes(&self) -> usize {
        self.n_nodes
    }

    /// Number of leafs (inputs and constants).
    pub fn n_leafs(&self) -> usize {
        self.n_leafs
    }

    /// Node and leaf capacity.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The `i`-th computed node, in execution order.
    pub fn node(&self, i: usize) -> Option<Tensor<'ctx>> {
        if i >= self.n_nodes {
            return None;
        }
        // SAFETY: the graph is live and `i < n_nodes`, so ggml returns one of its nodes.
        let p = unsafe { sys::ggml_graph_node(self.raw.as_ptr(), i as i32) };
        // SAFETY: graph members are live for `'ctx` (they were added as `Tensor<'ctx>` trees).
        NonNull::new(p).map(|p| unsafe { Tensor::from_raw(p) })
    }

    /// The member tensor named `name`.
    pub fn tensor_by_name(&self, name: &str) -> Option<Tensor<'ctx>> {
        let name = CString::new(name).ok()?;
        // SAFETY: the graph is live and `name` is NUL-terminated.
        let p = unsafe { sys::ggml_graph_get_tensor(self.raw.as_ptr(), name.as_ptr()) };
        // SAFETY: graph members are live for `'ctx`.
        NonNull::new(p).map(|p| unsafe { Tensor::from_raw(p) })
    }

    /// Every member tensor (leafs and nodes), in the order they were added.
    pub fn tensors(&self) -> Vec<Tensor<'ctx>> {
        self.order
            .iter()
            // SAFETY: graph members are live for `'ctx`.
            .map(|&p| unsafe { Tensor::from_raw(p) })
            .collect()
    }

    /// The context the graph lives in.
    pub fn context(&self) -> &'ctx Context {
        self.ctx
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::ggml_cgraph {
        self.raw.as_ptr()
    }
}
