//! Admission: the plugins a write passes after defaulting, mutating ones
//! first (they may change the object), then validating ones (they may
//! only refuse), as upstream's admission chain runs them. One plugin per
//! file, registered in [`PLUGINS`]; today NamespaceLifecycle,
//! DefaultTolerationSeconds and DefaultStorageClass, later ServiceAccount,
//! NodeRestriction, LimitRanger, ResourceQuota, Priority and
//! StorageObjectInUseProtection (whose finalizers need the pvc- and
//! pv-protection controllers first).

use async_trait::async_trait;
use serde_json::Value;

use crate::catalog::Resource;
use crate::status::ApiResult;
use std::sync::Arc;

use skiff_store::Store;

use crate::watchcache::{Caches, WatchCache};

mod default_ingress_class;
mod default_storage_class;
mod default_toleration_seconds;
mod limit_ranger;
pub mod memo;
mod namespace_lifecycle;
pub mod node_restriction;
pub mod objects;
mod priority;
mod rbac_escalation;
pub mod resource_quota;
pub mod service_account;
pub use limit_ranger::LimitRanger;
pub use priority::Priority;
pub use rbac_escalation::RbacEscalation;
pub use resource_quota::ResourceQuota;
pub use service_account::ServiceAccount;

pub use default_ingress_class::DefaultIngressClass;
pub use default_storage_class::DefaultStorageClass;
pub use default_toleration_seconds::DefaultTolerationSeconds;
pub use namespace_lifecycle::NamespaceLifecycle;
pub use node_restriction::NodeRestriction;

/// What admission plugins read: the store, the watch caches and what
/// the plugins decoded of them (narrower than the server's state: no
/// plugin writes through the handlers or reaches the allocators).
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub store: &'a dyn Store,
    pub caches: &'a Caches,
    pub admission: &'a memo::Memos,
    /// The authorizer chain, for plugins that ask it (RBAC escalation).
    pub authorizers: &'a [Box<dyn crate::authz::Authorizer>],
    /// The RBAC policy, for what a user holds.
    pub rbac: &'a crate::authz::Rbac,
    /// Plugins turned off by name (upstream's `--disable-admission-plugins`).
    pub disabled: &'a [String],
}

impl Context<'_> {
    /// The watch cache of a resource.
    pub fn cache(&self, resource: &Resource) -> Arc<WatchCache> {
        self.caches.get_or_create(resource.storage)
    }
}

/// What the write does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
}

/// One write as the plugins see it.
#[derive(Debug)]
pub struct Attributes<'a> {
    pub state: &'a Context<'a>,
    pub resource: &'a Resource,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub operation: Operation,
    /// "status", "scale"... or none.
    pub subresource: Option<&'a str>,
    /// The stored object before the write (updates).
    pub old: Option<&'a Value>,
}

/// One admission plugin. Both steps default to doing nothing.
#[async_trait]
pub trait Plugin: Send + Sync {
    fn name(&self) -> &'static str;

    /// May change `object`.
    async fn mutate(&self, _attrs: &Attributes<'_>, _object: &mut Value) -> ApiResult<()> {
        Ok(())
    }

    /// May refuse the write.
    async fn validate(&self, _attrs: &Attributes<'_>, _object: &Value) -> ApiResult<()> {
        Ok(())
    }
}

/// The chain, in upstream's order.
pub static PLUGINS: &[&dyn Plugin] = &[
    &NamespaceLifecycle,
    &LimitRanger,
    &ServiceAccount,
    &NodeRestriction,
    &Priority,
    &DefaultTolerationSeconds,
    &DefaultStorageClass,
    &DefaultIngressClass,
    &ResourceQuota,
    &RbacEscalation,
];

/// The plugins not turned off.
fn enabled<'a>(
    attrs: &'a Attributes<'_>,
) -> impl Iterator<Item = &'static &'static dyn Plugin> + 'a {
    PLUGINS
        .iter()
        .filter(|p| !attrs.state.disabled.iter().any(|d| d == p.name()))
}

/// Runs every plugin's mutating step.
pub async fn mutate(attrs: &Attributes<'_>, object: &mut Value) -> ApiResult<()> {
    for plugin in enabled(attrs) {
        plugin.mutate(attrs, object).await?;
    }
    Ok(())
}

/// Runs every plugin's validating step.
pub async fn validate(attrs: &Attributes<'_>, object: &Value) -> ApiResult<()> {
    for plugin in enabled(attrs) {
        plugin.validate(attrs, object).await?;
    }
    Ok(())
}
