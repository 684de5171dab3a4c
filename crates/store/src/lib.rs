//! skiff-store: the revisioned key-value store every Skiff component talks
//! through (via the API server), with two backends behind one [`Store`] trait:
//!
//! - [`sqlite::SqliteStore`], the embedded default: one file, group commit,
//!   watches fed from the committed write path;
//! - [`etcd::EtcdStore`], an etcd v3 cluster for more than one machine.
//!
//! Semantics both backends share (and the conformance suite in
//! `tests/conformance` checks): one global revision, +1 per write; an
//! object's revision is the revision of its last write; create fails if the
//! key exists; update and delete compare-and-swap on revision; a list is one
//! consistent snapshot; a watch from revision R delivers every event after R
//! exactly once, in order; history older than the compaction point answers
//! [`Error::Compacted`].
//!
//! This crate knows nothing of Kubernetes objects: values are opaque bytes.

pub mod compactor;
pub mod error;
pub mod etcd;
pub mod sqlite;
mod types;
pub mod watch;

pub use compactor::{CompactionPolicy, Compactor};
pub use error::{Error, Result};
pub use types::{
    check_value_size, encode_continue, prefix_end, Deleted, Event, EventKind, KeyValue,
    ListOptions, ListResult, Store, MAX_VALUE_BYTES,
};
pub use watch::WatchStream;
