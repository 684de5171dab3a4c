//! What the API server knows about storing objects, kind by kind and for
//! all kinds: the shared write path (`write`: create, update with
//! retries, dry run), deletion (`delete`: grace periods, finalizers,
//! preconditions), what follows an update that empties finalizers
//! (`finalize`) and every stored create or delete (`observe`: quota
//! usage, the kind's storage hooks), managedFields (`managed`) and
//! conversion between served and stored forms (`convert`). Handlers call
//! into it; it calls the store, admission and the kinds' hooks through
//! the catalog, and names no kind.
//!
//! The write path reads as upstream's pipeline: decode → default →
//! mutating admission → validate → validating admission → storage hooks
//! → store → observers.

pub mod convert;
pub mod delete;
pub mod finalize;
pub mod managed;
pub mod observe;
pub mod write;
