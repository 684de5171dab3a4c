//! [`PodApi`]: what a pod's worker writes to the API about its pod (its
//! status, and at the end its deletion). The agent implements it over its
//! kube client, the [`super::manager`] wraps it to batch status writes,
//! and tests record the calls.
//!
//! This module only declares the seam; it makes no request itself.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, PodStatus};

use crate::api_error::ApiError;

/// What the worker writes to the API about its pod.
#[async_trait]
pub trait PodApi: Send + Sync + std::fmt::Debug {
    /// Replaces the pod's status.
    async fn patch_status(&self, pod: &Pod, status: &PodStatus) -> Result<(), ApiError>;
    /// Deletes the pod object with grace 0 (its UID as precondition).
    async fn delete(&self, pod: &Pod) -> Result<(), ApiError>;
}
