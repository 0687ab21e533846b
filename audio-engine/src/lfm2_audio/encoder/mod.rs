//! FastConformer audio encoder and adapter (work in progress).
