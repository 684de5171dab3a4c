//! Served resources: group, version, plural, kind, scope, short names,
//! categories and subresources, as upstream serves them (each kind's entry
//! is in its file under `registry::kinds`). One list drives discovery,
//! routing and storage keys.

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

/// Every served resource, from the kinds' files (`registry::kinds`), in
/// their order.
pub static RESOURCES: std::sync::LazyLock<Vec<Resource>> = std::sync::LazyLock::new(|| {
    crate::registry::kinds::KINDS
        .iter()
        .filter_map(|k| k.resource)
        .collect()
});

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

/// The namespaces resource (always served; bootstrap and admission use it).
#[expect(
    clippy::expect_used,
    reason = "registry::kinds serves namespaces; its test checks every kind is found"
)]
pub fn namespaces() -> &'static Resource {
    find("", "v1", "namespaces").expect("namespaces are served")
}

/// The resource served at `group`/`version`/`plural`.
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
