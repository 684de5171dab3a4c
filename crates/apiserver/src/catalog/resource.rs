//! [`Resource`]: what a URL's group, version and plural name, as a plain
//! value (scope, short names, categories, subresources, storage name),
//! and the kinds its subresources speak. It knows no kind's rules.

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
        "token" => ("authentication.k8s.io", "v1", "TokenRequest", &["create"]),
        "log" => ("", "v1", "Pod", &["get"]),
        "exec" => ("", "v1", "PodExecOptions", &["create", "get"]),
        "attach" => ("", "v1", "PodAttachOptions", &["create", "get"]),
        "portforward" => ("", "v1", "PodPortForwardOptions", &["create", "get"]),
        "scale" => ("autoscaling", "v1", "Scale", &["get", "patch", "update"]),
        "finalize" => (r.group, r.version, r.kind, &["update"]),
        _ => (r.group, r.version, r.kind, &["get", "patch", "update"]),
    }
}

/// Categories and short names.
pub const ALL: &[&str] = &["all"];
pub const NONE: &[&str] = &[];

/// A served resource whose storage name is its plural.
#[allow(clippy::too_many_arguments)] // the table's columns, named at each use
pub const fn resource(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    subresources: &'static [&'static str],
) -> Resource {
    Resource {
        group,
        version,
        plural,
        singular,
        kind,
        namespaced,
        short_names,
        categories,
        subresources,
        storage: plural,
    }
}
