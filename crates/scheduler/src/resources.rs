//! Resource quantities and the resource arithmetic the scheduler needs.
//!
//! This module owns parsing Kubernetes quantity strings (`"100m"`, `"1"`,
//! `"128Mi"`, `"1G"`, `"1e3"`) into integers (milli-units for cpu, plain
//! units such as bytes for everything else, rounded up like upstream
//! `Quantity.MilliValue()` / `Quantity.Value()`), the [`Resource`] vector used
//! for node allocatable and requested sums, and [`pod_requests`], the
//! effective request of a pod (upstream `resourcehelper.PodRequests`: sum of
//! containers, the init-container maximum with restartable sidecars, plus
//! overhead). It does no I/O and knows nothing about nodes or plugins.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Resource names with dedicated fields in [`Resource`].
pub const CPU: &str = "cpu";
/// Memory, in bytes.
pub const MEMORY: &str = "memory";
/// Local ephemeral storage, in bytes.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// The number of pods a node accepts.
pub const PODS: &str = "pods";

/// Default cpu request (milli-cpu) assumed for scoring when a container sets
/// none (upstream `DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Default memory request assumed for scoring (upstream `DefaultMemoryRequest`).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// Errors from parsing quantities.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    /// The string is not a quantity (upstream `ErrFormatWrong` wording).
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {0:?}")]
    Format(String),
    /// The quantity is valid but does not fit in 64 bits at the requested scale.
    #[error("quantity {0:?} is out of range")]
    Overflow(String),
    /// A named resource in a resource list carries a bad quantity.
    #[error("resource {name}: {source}")]
    Invalid {
        /// The resource name (`cpu`, `memory`, ...).
        name: String,
        /// What was wrong with its quantity.
        #[source]
        source: Box<ResourceError>,
    },
}

/// Result alias for this module.
pub type Result<T, E = ResourceError> = std::result::Result<T, E>;

pub use skiff_api::quantity::ParsedQuantity;

/// Parses `s` and returns its value in milli-units, rounded up (cpu).
pub fn parse_milli(s: &str) -> Result<i64> {
    skiff_api::quantity::parse_milli(s).map_err(ResourceError::from)
}

/// Parses `s` and returns its value in whole units, rounded up (bytes, counts).
pub fn parse_value(s: &str) -> Result<i64> {
    skiff_api::quantity::parse_value(s).map_err(ResourceError::from)
}

impl From<skiff_api::quantity::QuantityError> for ResourceError {
    fn from(e: skiff_api::quantity::QuantityError) -> Self {
        use skiff_api::quantity::QuantityError;
        match e {
            QuantityError::Format(s) => ResourceError::Format(s),
            QuantityError::Overflow(s) => ResourceError::Overflow(s),
        }
    }
}

/// A vector of resources: cpu in milli-cpu, memory and ephemeral storage in
/// bytes, the pod count, and every other ("scalar": extended, hugepages)
/// resource in whole units.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resource {
    /// Milli-cpu.
    pub milli_cpu: i64,
    /// Bytes of memory.
    pub memory: i64,
    /// Bytes of ephemeral storage.
    pub ephemeral_storage: i64,
    /// Pods (only meaningful for node allocatable).
    pub allowed_pod_number: i64,
    /// Every other resource, by name.
    pub scalar: BTreeMap<String, i64>,
}

/// A resource name resolved once: the first-class resources by variant,
/// any other (extended) resource by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceKey {
    /// `cpu`.
    Cpu,
    /// `memory`.
    Memory,
    /// `ephemeral-storage`.
    EphemeralStorage,
    /// `pods`.
    Pods,
    /// Anything else, e.g. `example.com/gpu`.
    Scalar(String),
}

impl ResourceKey {
    /// Resolves a resource name.
    pub fn new(name: &str) -> Self {
        match name {
            CPU => Self::Cpu,
            MEMORY => Self::Memory,
            EPHEMERAL_STORAGE => Self::EphemeralStorage,
            PODS => Self::Pods,
            other => Self::Scalar(other.to_string()),
        }
    }

    /// Whether this is an extended (scalar) resource.
    pub fn is_scalar(&self) -> bool {
        matches!(self, Self::Scalar(_))
    }
}

impl Resource {
    /// Builds a resource vector from a Kubernetes resource list.
    pub fn from_list(list: &BTreeMap<String, Quantity>) -> Result<Self> {
        let mut r = Resource::default();
        for (name, q) in list {
            r.add_named(name, &q.0)?;
        }
        Ok(r)
    }

    /// Adds one named quantity.
    pub fn add_named(&mut self, name: &str, quantity: &str) -> Result<()> {
        let wrap = |e| ResourceError::Invalid {
            name: name.to_string(),
            source: Box::new(e),
        };
        if name == CPU {
            self.milli_cpu += parse_milli(quantity).map_err(wrap)?;
        } else {
            let v = parse_value(quantity).map_err(wrap)?;
            match name {
                MEMORY => self.memory += v,
                EPHEMERAL_STORAGE => self.ephemeral_storage += v,
                PODS => self.allowed_pod_number += v,
                other => *self.scalar.entry(other.to_string()).or_default() += v,
            }
        }
        Ok(())
    }

    /// The amount of a resource named by a pre-resolved key (no string
    /// matching: plugins resolve their resource names once).
    pub fn amount(&self, key: &ResourceKey) -> i64 {
        match key {
            ResourceKey::Cpu => self.milli_cpu,
            ResourceKey::Memory => self.memory,
            ResourceKey::EphemeralStorage => self.ephemeral_storage,
            ResourceKey::Pods => self.allowed_pod_number,
            ResourceKey::Scalar(name) => self.scalar.get(name).copied().unwrap_or(0),
        }
    }

    /// The amount of the named resource.
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.milli_cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.allowed_pod_number,
            other => self.scalar.get(other).copied().unwrap_or(0),
        }
    }

    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Resource) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        self.allowed_pod_number += other.allowed_pod_number;
        for (k, v) in &other.scalar {
            *self.scalar.entry(k.clone()).or_default() += v;
        }
    }

    /// Subtracts `other` from `self`.
    pub fn sub(&mut self, other: &Resource) {
        self.milli_cpu -= other.milli_cpu;
        self.memory -= other.memory;
        self.ephemeral_storage -= other.ephemeral_storage;
        self.allowed_pod_number -= other.allowed_pod_number;
        for (k, v) in &other.scalar {
            *self.scalar.entry(k.clone()).or_default() -= v;
        }
    }

    /// Raises every component of `self` to at least the one in `other`.
    pub fn set_max(&mut self, other: &Resource) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        self.allowed_pod_number = self.allowed_pod_number.max(other.allowed_pod_number);
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_default();
            *e = (*e).max(*v);
        }
    }

    /// True when nothing at all is requested (upstream's "best effort" check
    /// in NodeResourcesFit: cpu, memory, ephemeral storage and scalars zero).
    pub fn is_empty_request(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalar.values().all(|v| *v == 0)
    }
}

/// How [`pod_requests`] treats containers without cpu/memory requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissingRequests {
    /// Count them as zero (filtering, node `requested`).
    #[default]
    Zero,
    /// Count them as 100m cpu / 200Mi memory (scoring, node `non_zero_requested`).
    NonZeroDefaults,
}

fn container_requests(c: &Container, missing: MissingRequests) -> Result<Resource> {
    let requests = c.resources.as_ref().and_then(|r| r.requests.as_ref());
    let mut r = match requests {
        Some(list) => Resource::from_list(list)?,
        None => Resource::default(),
    };
    if missing == MissingRequests::NonZeroDefaults {
        let has = |k: &str| requests.is_some_and(|l| l.contains_key(k));
        if !has(CPU) {
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if !has(MEMORY) {
            r.memory = DEFAULT_MEMORY_REQUEST;
        }
    }
    Ok(r)
}

/// Whether an init container is a restartable sidecar (`restartPolicy: Always`).
pub fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// The effective request of a pod: the sum of its containers and sidecars,
/// raised to the largest init-container requirement (an init container `i`
/// needs its own request plus the sidecars started before it), plus the
/// pod overhead.
pub fn pod_requests(pod: &Pod, missing: MissingRequests) -> Result<Resource> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(Resource::default());
    };
    let mut reqs = Resource::default();
    for c in &spec.containers {
        reqs.add(&container_requests(c, missing)?);
    }
    let mut sidecars = Resource::default();
    let mut init_max = Resource::default();
    for c in spec.init_containers.iter().flatten() {
        let own = container_requests(c, missing)?;
        let in_use = if is_sidecar(c) {
            reqs.add(&own);
            sidecars.add(&own);
            sidecars.clone()
        } else {
            let mut tmp = own;
            tmp.add(&sidecars);
            tmp
        };
        init_max.set_max(&in_use);
    }
    reqs.set_max(&init_max);
    if let Some(overhead) = spec.overhead.as_ref() {
        reqs.add(&Resource::from_list(overhead)?);
    }
    Ok(reqs)
}

#[cfg(test)]
#[path = "resources_tests.rs"]
mod tests;
