//! What is known about one pod when it is explained: the pod, its events,
//! its node, its claims, the tail of its containers' previous logs and the
//! Services that select it. Plain data, filled by `gather` (or by a test);
//! the checks read it and never fetch anything.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Event, Node, PersistentVolumeClaim, Pod,
};

/// A Service that selects the pod, with its endpoints' readiness.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceFacts {
    pub name: String,
    pub ready: usize,
    pub not_ready: usize,
}

/// Everything the checks may look at.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub pod: Pod,
    /// The pod's events, oldest first.
    pub events: Vec<Event>,
    /// The node the pod is bound to, when it could be read.
    pub node: Option<Node>,
    /// Each claim the pod's volumes name: `None` when it does not exist.
    pub claims: BTreeMap<String, Option<PersistentVolumeClaim>>,
    /// The last lines each restarted container printed before it ended.
    pub previous_logs: BTreeMap<String, String>,
    pub services: Vec<ServiceFacts>,
    /// The pod's start-up timeline as the node recorded it (Skiff's
    /// `StartupTimeline` event's `skiff.dev/startup-timeline` JSON), when
    /// there is one.
    pub timeline: Option<serde_json::Value>,
    /// The workload the pod was found through (`deployment/web`), for
    /// fixes that change the template rather than the pod.
    pub workload: Option<Workload>,
}

/// The owner a pod was found through, with its conditions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workload {
    /// `deployment`, `statefulset` or `job`.
    pub kind: String,
    pub name: String,
    /// (type, status, reason, message) of each condition.
    pub conditions: Vec<(String, String, String, String)>,
}

impl Workload {
    pub fn reference(&self) -> String {
        format!("{}/{}", self.kind, self.name)
    }
}

impl Facts {
    pub fn name(&self) -> &str {
        self.pod.metadata.name.as_deref().unwrap_or_default()
    }

    pub fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or("default")
    }

    /// The pod's containers and init containers with their statuses, init
    /// containers first.
    pub fn containers(&self) -> Vec<(bool, &Container, Option<&ContainerStatus>)> {
        let spec = self.pod.spec.as_ref();
        let status = self.pod.status.as_ref();
        fn find<'a>(
            list: Option<&'a Vec<ContainerStatus>>,
            name: &str,
        ) -> Option<&'a ContainerStatus> {
            list.and_then(|l| l.iter().find(|s| s.name == name))
        }
        let mut out = Vec::new();
        for c in spec
            .and_then(|s| s.init_containers.as_ref())
            .into_iter()
            .flatten()
        {
            let st = find(
                status.and_then(|s| s.init_container_statuses.as_ref()),
                &c.name,
            );
            out.push((true, c, st));
        }
        for c in spec.map(|s| &s.containers).into_iter().flatten() {
            let st = find(status.and_then(|s| s.container_statuses.as_ref()), &c.name);
            out.push((false, c, st));
        }
        out
    }

    /// A condition of the pod by type.
    pub fn condition(&self, kind: &str) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
        self.pod
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == kind)
    }

    /// The events with `reason`, oldest first.
    pub fn events_with(&self, reason: &str) -> Vec<&Event> {
        self.events
            .iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect()
    }

    /// The events with `reason` about container `name` (by their
    /// fieldPath; events without one count for every container), oldest
    /// first.
    pub fn container_events(&self, reason: &str, name: &str) -> Vec<&Event> {
        let suffix = format!("{{{name}}}");
        self.events_with(reason)
            .into_iter()
            .filter(|e| {
                e.involved_object
                    .field_path
                    .as_deref()
                    .is_none_or(|p| p.ends_with(&suffix))
            })
            .collect()
    }

    /// Milliseconds of the timeline's phase `name`, when recorded.
    pub fn timeline_phase_ms(&self, name: &str) -> Option<i64> {
        self.timeline
            .as_ref()?
            .get("phases")?
            .as_array()?
            .iter()
            .find(|p| p.get("name").and_then(|n| n.as_str()) == Some(name))?
            .get("durationMs")?
            .as_i64()
    }

    /// The last event with `reason` whose message starts with `prefix`.
    pub fn last_event(&self, reason: &str, prefix: &str) -> Option<&Event> {
        self.events.iter().rev().find(|e| {
            e.reason.as_deref() == Some(reason)
                && e.message.as_deref().unwrap_or_default().starts_with(prefix)
        })
    }

    /// Whether the pod is bound to a node.
    pub fn scheduled(&self) -> bool {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
    }

    /// What a fix that changes the pod's template should name: the
    /// workload, else the pod (whose spec is mostly immutable: such a fix
    /// means recreating it).
    pub fn owner_ref(&self) -> String {
        match &self.workload {
            Some(w) => w.reference(),
            None => format!("pod/{}", self.name()),
        }
    }

    pub fn node_name(&self) -> &str {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or_default()
    }
}

/// An event as evidence: `event REASON (xN): MESSAGE`.
pub fn describe_event(e: &Event) -> String {
    let count = e.count.unwrap_or(1);
    let times = if count > 1 {
        format!(" (x{count})")
    } else {
        String::new()
    };
    let mut message = e.message.clone().unwrap_or_default();
    if let Some(path) = e.involved_object.field_path.as_deref() {
        message = format!("{path}: {message}");
    }
    format!(
        "event {}{times}: {}",
        e.reason.as_deref().unwrap_or("?"),
        message.trim_end()
    )
}
