//! The table of served resources: group, version, plural, kind, scope,
//! short names, categories and subresources, as upstream serves them. One
//! place drives discovery, routing and storage keys.

/// One served resource.
#[derive(Debug, Clone, Copy)]
pub struct Resource {
    /// API group ("" for core).
    pub group: &'static str,
    pub version: &'static str,
    /// Plural name in the URL.
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    pub subresources: &'static [&'static str],
    /// Resource name under `/registry/` (events.k8s.io events share core's).
    pub storage: &'static str,
}

impl Resource {
    /// `v1` or `apps/v1`.
    pub fn group_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `deployments.apps`, as in upstream error messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

const ALL: &[&str] = &["all"];
const NONE: &[&str] = &[];

macro_rules! r {
    ($group:expr, $version:expr, $plural:expr, $singular:expr, $kind:expr, $ns:expr, $short:expr, $cat:expr, $sub:expr) => {
        r!($group, $version, $plural, $singular, $kind, $ns, $short, $cat, $sub, $plural)
    };
    ($group:expr, $version:expr, $plural:expr, $singular:expr, $kind:expr, $ns:expr, $short:expr, $cat:expr, $sub:expr, $storage:expr) => {
        Resource {
            group: $group,
            version: $version,
            plural: $plural,
            singular: $singular,
            kind: $kind,
            namespaced: $ns,
            short_names: $short,
            categories: $cat,
            subresources: $sub,
            storage: $storage,
        }
    };
}

/// Every served resource.
pub static RESOURCES: &[Resource] = &[
    NAMESPACES_ENTRY,
    r!(
        "",
        "v1",
        "pods",
        "pod",
        "Pod",
        true,
        &["po"],
        ALL,
        &["status", "binding", "eviction"]
    ),
    r!(
        "",
        "v1",
        "nodes",
        "node",
        "Node",
        false,
        &["no"],
        NONE,
        &["status"]
    ),
    r!(
        "",
        "v1",
        "events",
        "event",
        "Event",
        true,
        &["ev"],
        NONE,
        NONE
    ),
    r!(
        "",
        "v1",
        "configmaps",
        "configmap",
        "ConfigMap",
        true,
        &["cm"],
        NONE,
        NONE
    ),
    r!("", "v1", "secrets", "secret", "Secret", true, NONE, NONE, NONE),
    r!(
        "",
        "v1",
        "services",
        "service",
        "Service",
        true,
        &["svc"],
        ALL,
        &["status"]
    ),
    r!(
        "",
        "v1",
        "endpoints",
        "endpoints",
        "Endpoints",
        true,
        &["ep"],
        NONE,
        NONE
    ),
    r!(
        "",
        "v1",
        "serviceaccounts",
        "serviceaccount",
        "ServiceAccount",
        true,
        &["sa"],
        NONE,
        NONE
    ),
    r!(
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        true,
        NONE,
        NONE,
        NONE
    ),
    r!(
        "apps",
        "v1",
        "deployments",
        "deployment",
        "Deployment",
        true,
        &["deploy"],
        ALL,
        &["status", "scale"]
    ),
    r!(
        "apps",
        "v1",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        true,
        &["rs"],
        ALL,
        &["status", "scale"]
    ),
    r!(
        "batch",
        "v1",
        "jobs",
        "job",
        "Job",
        true,
        NONE,
        ALL,
        &["status"]
    ),
    r!(
        "events.k8s.io",
        "v1",
        "events",
        "event",
        "Event",
        true,
        &["ev"],
        NONE,
        NONE,
        "events"
    ),
];

/// Group, version, kind and verbs of a subresource of `r`.
pub fn subresource_kind(
    r: &Resource,
    sub: &str,
) -> (
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
) {
    match sub {
        "binding" => ("", "v1", "Binding", &["create"]),
        "eviction" => ("policy", "v1", "Eviction", &["create"]),
        "scale" => ("autoscaling", "v1", "Scale", &["get", "patch", "update"]),
        _ => (r.group, r.version, r.kind, &["get", "patch", "update"]),
    }
}

/// The resource served at `group`/`version`/`plural`.
/// The namespaces resource (always served; bootstrap and admission use it).
pub fn namespaces() -> &'static Resource {
    &NAMESPACES
}

const NAMESPACES_ENTRY: Resource = r!(
    "",
    "v1",
    "namespaces",
    "namespace",
    "Namespace",
    false,
    &["ns"],
    NONE,
    &["status"]
);
static NAMESPACES: Resource = NAMESPACES_ENTRY;

pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The distinct non-core (group, version) pairs, in table order.
pub fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in RESOURCES.iter().filter(|r| !r.group.is_empty()) {
        if !out.iter().any(|(g, v)| *g == r.group && *v == r.version) {
            out.push((r.group, r.version));
        }
    }
    out
}
