//! What the API server knows about storing objects, kind by kind and for
//! all kinds: the shared write path (`write`: create, update with
//! retries, dry run), deletion (`delete`: grace periods, finalizers,
//! preconditions), managedFields (`managed`) and conversion
//! between served and stored forms (`convert`). Handlers call into it; it
//! calls the store.

pub mod convert;
pub mod delete;
pub mod managed;
pub mod write;
