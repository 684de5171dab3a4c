//! What the ReplicaSet controller reads of its owner kind, so that
//! ReplicaSets (apps/v1) and ReplicationControllers (core/v1) share one
//! logic, as upstream runs the ReplicationController through the
//! ReplicaSet controller with an adapter.
//!
//! This module owns only that reading; no logic.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{PodTemplateSpec, ReplicationController};
use kube::core::NamespaceResourceScope;
use kube::Resource;
use skiff_client::informer::Watched;
use skiff_client::selectors::{Selector, SelectorError};

/// An owner of replicated pods.
pub trait Replicated:
    Watched + Resource<Scope = NamespaceResourceScope> + serde::Serialize
{
    /// The events' component (upstream's).
    const COMPONENT: &'static str;
    /// The controller's name (logs and `--controllers`).
    const CONTROLLER: &'static str;
    /// spec.replicas (default 1).
    fn replicas(&self) -> i32;
    /// spec.minReadySeconds.
    fn min_ready_seconds(&self) -> i32;
    /// The pods it selects.
    fn selector(&self) -> Result<Selector, SelectorError>;
    /// spec.template.
    fn template(&self) -> Option<&PodTemplateSpec>;
}

impl Replicated for ReplicaSet {
    const COMPONENT: &'static str = "replicaset-controller";
    const CONTROLLER: &'static str = "replicaset";

    fn replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }

    fn min_ready_seconds(&self) -> i32 {
        self.spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0)
    }

    fn selector(&self) -> Result<Selector, SelectorError> {
        match self.spec.as_ref() {
            Some(spec) => Selector::from_label_selector(Some(&spec.selector)),
            None => Ok(Selector::nothing()),
        }
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref()?.template.as_ref()
    }
}

impl Replicated for ReplicationController {
    const COMPONENT: &'static str = "replication-controller";
    const CONTROLLER: &'static str = "replicationcontroller";

    fn replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }

    fn min_ready_seconds(&self) -> i32 {
        self.spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0)
    }

    fn selector(&self) -> Result<Selector, SelectorError> {
        // The API server defaults an empty selector to the template's
        // labels; one still empty selects nothing.
        match self.spec.as_ref().and_then(|s| s.selector.as_ref()) {
            Some(set) if !set.is_empty() => Ok(Selector::from_set(set)),
            _ => Ok(Selector::nothing()),
        }
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref()?.template.as_ref()
    }
}
