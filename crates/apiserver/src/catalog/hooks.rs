//! Storage hooks: what a kind does around the store beyond its write
//! rules, as upstream's `BeginCreate`, `BeginUpdate` and `AfterDelete`
//! decorators of a REST storage: a Service's ClusterIPs and NodePorts
//! are taken before the object is stored and given back when the store
//! refused it or the object is gone. Hooks hold server state (the
//! allocators), so each server registers its own in its catalog; the
//! shared write path calls them and knows no kind by name.

use async_trait::async_trait;
use serde_json::Value;

use crate::status::ApiResult;

/// What a kind does around the store.
#[async_trait]
pub trait StorageHooks: Send + Sync + std::fmt::Debug {
    /// A new object (stored form, validated and admitted) about to be
    /// stored: may set what the server allocates. The returned
    /// [`Pending`] is finished once the store answered.
    async fn begin_create(&self, obj: &mut Value, dry_run: bool) -> ApiResult<Box<dyn Pending>>;
    /// Before an update is validated: may carry over from `old` what the
    /// client left out (a Service's allocated values).
    fn before_update_validation(&self, _old: &Value, _new: &mut Value) {}
    /// An update (validated and admitted) about to be stored.
    async fn begin_update(
        &self,
        old: &Value,
        new: &mut Value,
        dry_run: bool,
    ) -> ApiResult<Box<dyn Pending>>;
    /// After an object left the store.
    async fn after_delete(&self, obj: &Value);
}

/// What a write took, to keep or give back once the store answered.
#[async_trait]
pub trait Pending: Send {
    /// `stored`: whether the store took the write.
    async fn finish(self: Box<Self>, stored: bool);
}

/// Nothing to finish.
#[derive(Debug)]
pub struct NothingPending;

#[async_trait]
impl Pending for NothingPending {
    async fn finish(self: Box<Self>, _stored: bool) {}
}
