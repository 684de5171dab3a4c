//! Patch strategies of the built-in kinds, for strategic merge patch.
//!
//! Upstream reads the `patchStrategy`/`patchMergeKey` struct tags of the Go
//! types in k8s.io/api (and `ObjectMeta` in apimachinery). Here the same
//! facts live in a small type graph: a [`Schema`] is the list of fields of
//! one object type that have a non-default strategy or lead to one, and each
//! field names the schema of its value (for a list: of its elements). So
//! `spec.template.spec.containers` of a Deployment reaches the very same
//! `POD_SPEC` table as `spec.containers` of a Pod.
//!
//! Fields that are not listed get the default strategy: objects merge
//! recursively, lists are atomic (replaced whole). That is upstream's rule
//! for, e.g., `tolerations`, `args`, `command`, `envFrom`, node `taints` and
//! endpoint `subsets`, none of which carry a patch strategy.

/// How a field is patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// No tag: objects merge recursively, lists are replaced whole.
    Default,
    /// `patchStrategy:"merge"`: a list merged by the given key, or, with no
    /// key, a list of primitives merged as a set.
    Merge(Option<&'static str>),
    /// `patchStrategy:"replace"`: an object replaced whole.
    Replace,
}

/// The fields of one object type that need more than the default strategy.
pub(crate) type Schema = &'static [Field];

/// One field of an object type.
#[derive(Debug)]
pub(crate) struct Field {
    name: &'static str,
    strategy: Strategy,
    /// Schema of the value, or of each element when the value is a list.
    schema: Schema,
}

/// A field merged by `key` whose elements have the fields `schema`.
const fn merge(name: &'static str, key: &'static str, schema: Schema) -> Field {
    Field {
        name,
        strategy: Strategy::Merge(Some(key)),
        schema,
    }
}

/// A list of primitives merged as a set (e.g. `metadata.finalizers`).
const fn set(name: &'static str) -> Field {
    Field {
        name,
        strategy: Strategy::Merge(None),
        schema: &[],
    }
}

/// An object field with the default strategy that leads to other fields.
const fn nested(name: &'static str, schema: Schema) -> Field {
    Field {
        name,
        strategy: Strategy::Default,
        schema,
    }
}

/// An object field replaced whole.
const fn replace(name: &'static str) -> Field {
    Field {
        name,
        strategy: Strategy::Replace,
        schema: &[],
    }
}

const OBJECT_META: Schema = &[set("finalizers"), merge("ownerReferences", "uid", &[])];
const META: Field = nested("metadata", OBJECT_META);

/// core/v1 Container and EphemeralContainerCommon.
const CONTAINER: Schema = &[
    merge("ports", "containerPort", &[]),
    merge("env", "name", &[]),
    merge("volumeMounts", "mountPath", &[]),
    merge("volumeDevices", "devicePath", &[]),
];

const POD_SPEC: Schema = &[
    merge("volumes", "name", &[]),
    merge("initContainers", "name", CONTAINER),
    merge("containers", "name", CONTAINER),
    merge("ephemeralContainers", "name", CONTAINER),
    merge("imagePullSecrets", "name", &[]),
    merge("hostAliases", "ip", &[]),
    merge("topologySpreadConstraints", "topologyKey", &[]),
    merge("schedulingGates", "name", &[]),
    merge("resourceClaims", "name", &[]),
];

const CONDITIONS: Field = merge("conditions", "type", &[]);
const STATUS_CONDITIONS: Schema = &[CONDITIONS];

const POD_STATUS: Schema = &[
    CONDITIONS,
    merge("hostIPs", "ip", &[]),
    merge("podIPs", "ip", &[]),
    merge("resourceClaimStatuses", "name", &[]),
];

const POD_TEMPLATE_SPEC: Schema = &[META, nested("spec", POD_SPEC)];
/// Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, ReplicationController.
const WORKLOAD_SPEC: Schema = &[nested("template", POD_TEMPLATE_SPEC)];
const JOB_TEMPLATE_SPEC: Schema = &[META, nested("spec", WORKLOAD_SPEC)];

const POD: Schema = &[META, nested("spec", POD_SPEC), nested("status", POD_STATUS)];
const POD_TEMPLATE: Schema = &[META, nested("template", POD_TEMPLATE_SPEC)];
const WORKLOAD: Schema = &[
    META,
    nested("spec", WORKLOAD_SPEC),
    nested("status", STATUS_CONDITIONS),
];
const CRON_JOB: Schema = &[
    META,
    nested("spec", &[nested("jobTemplate", JOB_TEMPLATE_SPEC)]),
];
const NODE: Schema = &[
    META,
    nested("spec", &[set("podCIDRs")]),
    nested("status", &[CONDITIONS, merge("addresses", "type", &[])]),
];
const SERVICE: Schema = &[
    META,
    nested("spec", &[merge("ports", "port", &[])]),
    nested("status", STATUS_CONDITIONS),
];
const WITH_STATUS_CONDITIONS: Schema = &[META, nested("status", STATUS_CONDITIONS)];
const POD_DISRUPTION_BUDGET: Schema = &[
    META,
    nested("spec", &[replace("selector")]),
    nested("status", STATUS_CONDITIONS),
];
const SERVICE_ACCOUNT: Schema = &[META, merge("secrets", "name", &[])];
const COMPONENT_STATUS: Schema = &[META, CONDITIONS];
const WEBHOOK_CONFIGURATION: Schema = &[
    META,
    merge("webhooks", "name", &[merge("matchConditions", "name", &[])]),
];
const VALIDATING_ADMISSION_POLICY: Schema = &[
    META,
    nested(
        "spec",
        &[
            merge("matchConditions", "name", &[]),
            merge("variables", "name", &[]),
        ],
    ),
    nested("status", STATUS_CONDITIONS),
];
const CSI_NODE: Schema = &[META, nested("spec", &[merge("drivers", "name", &[])])];
const METADATA_ONLY: Schema = &[META];

/// The schema at the root of an object of `kind`, or `None` when the kind
/// is not built in (custom resources don't support strategic merge patch).
pub(crate) fn root(kind: &str) -> Option<Schema> {
    use crate::kinds::Layout;
    Some(match crate::kinds::layout(kind)? {
        Layout::Pod => POD,
        Layout::PodTemplate => POD_TEMPLATE,
        Layout::Workload => WORKLOAD,
        Layout::CronJob => CRON_JOB,
        Layout::Node => NODE,
        Layout::Service => SERVICE,
        Layout::WithStatusConditions => WITH_STATUS_CONDITIONS,
        Layout::PodDisruptionBudget => POD_DISRUPTION_BUDGET,
        Layout::ServiceAccount => SERVICE_ACCOUNT,
        Layout::ComponentStatus => COMPONENT_STATUS,
        Layout::WebhookConfiguration => WEBHOOK_CONFIGURATION,
        Layout::ValidatingAdmissionPolicy => VALIDATING_ADMISSION_POLICY,
        Layout::CsiNode => CSI_NODE,
        // No patch strategies beyond metadata in these Go types.
        Layout::RoleBinding | Layout::NetworkPolicy | Layout::Plain => METADATA_ONLY,
    })
}

/// The strategy of field `name` in `schema`, and the schema of its value.
/// One field's patch strategy as OpenAPI carries it
/// (`x-kubernetes-patch-strategy`, `x-kubernetes-patch-merge-key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchExtension {
    /// Property names from the kind's root (list elements are implicit).
    pub path: Vec<&'static str>,
    /// `merge` or `replace`.
    pub strategy: &'static str,
    pub merge_key: Option<&'static str>,
}

/// Every field of `kind` with a patch strategy, for the OpenAPI documents
/// that kubectl's client-side apply reads.
pub fn extensions(kind: &str) -> Vec<PatchExtension> {
    fn walk(schema: Schema, at: &mut Vec<&'static str>, out: &mut Vec<PatchExtension>) {
        for f in schema {
            at.push(f.name);
            let (strategy, merge_key) = match f.strategy {
                Strategy::Default => (None, None),
                Strategy::Merge(key) => (Some("merge"), key),
                Strategy::Replace => (Some("replace"), None),
            };
            if let Some(strategy) = strategy {
                out.push(PatchExtension {
                    path: at.clone(),
                    strategy,
                    merge_key,
                });
            }
            walk(f.schema, at, out);
            at.pop();
        }
    }
    let mut out = Vec::new();
    if let Some(schema) = root(kind) {
        walk(schema, &mut Vec::new(), &mut out);
    }
    out
}

pub(crate) fn lookup(schema: Schema, name: &str) -> (Strategy, Schema) {
    schema
        .iter()
        .find(|f| f.name == name)
        .map_or((Strategy::Default, &[]), |f| (f.strategy, f.schema))
}

/// Whether the values of merge key `key` are integers (container and
/// service ports); all other merge keys are strings.
pub(crate) fn numeric_key(key: &str) -> bool {
    matches!(key, "containerPort" | "port")
}

/// The strategy of a field given by its path from the object root, e.g.
/// `["spec", "template", "spec", "containers", "env"]` (list elements are
/// transparent). Unknown kinds and fields get [`Strategy::Default`].
#[cfg(test)]
pub(crate) fn strategy_at(kind: &str, path: &[&str]) -> Strategy {
    let mut schema = root(kind).unwrap_or(&[]);
    let mut strategy = Strategy::Default;
    for name in path {
        (strategy, schema) = lookup(schema, name);
    }
    strategy
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_paths_share_pod_spec_rules() {
        let cases: &[(&str, &[&str], Strategy)] = &[
            (
                "Pod",
                &["spec", "containers"],
                Strategy::Merge(Some("name")),
            ),
            (
                "Deployment",
                &["spec", "template", "spec", "containers"],
                Strategy::Merge(Some("name")),
            ),
            (
                "ReplicaSet",
                &["spec", "template", "spec", "initContainers", "env"],
                Strategy::Merge(Some("name")),
            ),
            (
                "Job",
                &["spec", "template", "spec", "volumes"],
                Strategy::Merge(Some("name")),
            ),
            (
                "CronJob",
                &[
                    "spec",
                    "jobTemplate",
                    "spec",
                    "template",
                    "spec",
                    "containers",
                    "ports",
                ],
                Strategy::Merge(Some("containerPort")),
            ),
            (
                "Pod",
                &["spec", "containers", "volumeMounts"],
                Strategy::Merge(Some("mountPath")),
            ),
            ("Pod", &["spec", "tolerations"], Strategy::Default),
            ("Pod", &["spec", "containers", "args"], Strategy::Default),
            ("Pod", &["spec", "containers", "envFrom"], Strategy::Default),
            (
                "Pod",
                &["status", "conditions"],
                Strategy::Merge(Some("type")),
            ),
            ("Node", &["spec", "taints"], Strategy::Default),
            (
                "Node",
                &["status", "addresses"],
                Strategy::Merge(Some("type")),
            ),
            ("Service", &["spec", "ports"], Strategy::Merge(Some("port"))),
            ("Endpoints", &["subsets"], Strategy::Default),
            (
                "ConfigMap",
                &["metadata", "finalizers"],
                Strategy::Merge(None),
            ),
            (
                "Deployment",
                &["spec", "template", "metadata", "ownerReferences"],
                Strategy::Merge(Some("uid")),
            ),
            (
                "PodDisruptionBudget",
                &["spec", "selector"],
                Strategy::Replace,
            ),
        ];
        for (kind, path, want) in cases {
            assert_eq!(strategy_at(kind, path), *want, "{kind} {}", path.join("."));
        }
        assert!(root("Widget").is_none());
    }
}
