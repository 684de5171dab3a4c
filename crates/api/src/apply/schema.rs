//! The shapes server-side apply gives the fields of built-in kinds.
//!
//! Upstream reads them from the OpenAPI-derived schema in
//! k8s.io/client-go `applyconfigurations/internal` (`x-kubernetes-list-type`,
//! `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`, falling back on the
//! `patchStrategy`/`patchMergeKey` tags). These are close to, but not the
//! same as, strategic merge patch's (`crate::patch` `merge_keys.rs`): some
//! lists have several keys (container ports by `containerPort` and
//! `protocol`, topology spread constraints by `topologyKey` and
//! `whenUnsatisfiable`), key fields have defaults (`protocol` is `TCP`,
//! required strings are `""`), label selectors, `nodeSelector` and object
//! references are atomic, and `status.hostIPs` or a service account's
//! `imagePullSecrets` are atomic lists.
//!
//! Fields that are not listed are deduced from their value, as upstream
//! does for untyped values: objects merge field by field, lists are atomic
//! (replaced whole), scalars are leaves. Custom resources get only the
//! `metadata` rules.

/// How a field's value is merged and owned.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape {
    /// Deduced from the value (objects are maps, lists atomic).
    Deduced,
    /// A map merged field by field; listed fields have their own shape.
    Map(Schema),
    /// Replaced and owned whole (`atomic` maps, structs and lists).
    Atomic,
    /// `listType=map`: elements are identified by their key fields.
    Keyed(&'static [Key], &'static Shape),
    /// `listType=set`: a list of distinct primitives.
    Set,
}

/// The fields of a map that need more than the deduced shape.
pub(crate) type Schema = &'static [Field];

/// One field with its shape.
#[derive(Debug)]
pub(crate) struct Field {
    name: &'static str,
    shape: Shape,
}

/// A key field of a keyed list, with the default upstream's schema gives it
/// when an element omits it.
#[derive(Debug)]
pub(crate) struct Key {
    pub(crate) name: &'static str,
    pub(crate) default: Option<KeyDefault>,
}

/// The default of a key field.
#[derive(Debug, Clone, Copy)]
pub(crate) enum KeyDefault {
    Str(&'static str),
    Int(i64),
}

/// One field's list or map shape as OpenAPI carries it
/// (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`,
/// `x-kubernetes-map-type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListExtension {
    /// Property names from the kind's root (list elements are implicit).
    pub path: Vec<&'static str>,
    /// `map`, `set` or `atomic` for lists; `None` for a map or struct.
    pub list_type: Option<&'static str>,
    pub list_map_keys: Vec<&'static str>,
    /// `atomic` for a map or struct owned whole.
    pub map_type: Option<&'static str>,
}

/// Every field of `kind` with a list or map shape beyond the deduced one,
/// for the OpenAPI documents. (An atomic field is reported as an atomic
/// list or map; which one depends on its type, which the caller knows.)
pub fn list_extensions(kind: &str) -> Vec<ListExtension> {
    fn walk(shape: &Shape, at: &mut Vec<&'static str>, out: &mut Vec<ListExtension>) {
        let Shape::Map(schema) = shape else { return };
        for f in schema.iter() {
            at.push(f.name);
            let mut ext = ListExtension {
                path: at.clone(),
                list_type: None,
                list_map_keys: Vec::new(),
                map_type: None,
            };
            match &f.shape {
                Shape::Keyed(keys, element) => {
                    ext.list_type = Some("map");
                    ext.list_map_keys = keys.iter().map(|k| k.name).collect();
                    out.push(ext);
                    walk(element, at, out);
                }
                Shape::Set => {
                    ext.list_type = Some("set");
                    out.push(ext);
                }
                Shape::Atomic => {
                    ext.list_type = Some("atomic");
                    ext.map_type = Some("atomic");
                    out.push(ext);
                }
                Shape::Map(_) => walk(&f.shape, at, out),
                Shape::Deduced => {}
            }
            at.pop();
        }
    }
    let mut out = Vec::new();
    walk(&root(kind), &mut Vec::new(), &mut out);
    out
}

/// The shape of field `name` of a map with `schema`.
pub(crate) fn lookup(schema: Schema, name: &str) -> Shape {
    schema
        .iter()
        .find(|f| f.name == name)
        .map_or(Shape::Deduced, |f| f.shape)
}

/// The shape of an object of `kind` (wire form).
pub(crate) fn root(kind: &str) -> Shape {
    use crate::kinds::Layout;
    Shape::Map(match crate::kinds::layout(kind) {
        Some(Layout::Pod) => POD,
        Some(Layout::PodTemplate) => POD_TEMPLATE,
        Some(Layout::Workload) => WORKLOAD,
        Some(Layout::CronJob) => CRON_JOB,
        Some(Layout::Node) => NODE,
        Some(Layout::Service) => SERVICE,
        Some(Layout::WithStatusConditions) => WITH_STATUS_CONDITIONS,
        Some(Layout::PodDisruptionBudget) => POD_DISRUPTION_BUDGET,
        Some(Layout::ServiceAccount) => SERVICE_ACCOUNT,
        Some(Layout::ComponentStatus) => COMPONENT_STATUS,
        Some(Layout::WebhookConfiguration) => WEBHOOK_CONFIGURATION,
        Some(Layout::ValidatingAdmissionPolicy) => VALIDATING_ADMISSION_POLICY,
        Some(Layout::CsiNode) => CSI_NODE,
        Some(Layout::RoleBinding) => ROLE_BINDING,
        Some(Layout::NetworkPolicy) => NETWORK_POLICY,
        Some(Layout::Plain) | None => METADATA_ONLY,
    })
}

const fn field(name: &'static str, shape: Shape) -> Field {
    Field { name, shape }
}

const fn map(name: &'static str, schema: Schema) -> Field {
    field(name, Shape::Map(schema))
}

const fn atomic(name: &'static str) -> Field {
    field(name, Shape::Atomic)
}

const fn keyed(name: &'static str, keys: &'static [Key], element: &'static Shape) -> Field {
    field(name, Shape::Keyed(keys, element))
}

/// A required string key (upstream default `""`).
const fn key(name: &'static str) -> Key {
    Key {
        name,
        default: Some(KeyDefault::Str("")),
    }
}

const BY_NAME: &[Key] = &[key("name")];
const BY_TYPE: &[Key] = &[key("type")];
const BY_IP: &[Key] = &[key("ip")];
const PLAIN: &Shape = &Shape::Map(&[]);
const WHOLE: &Shape = &Shape::Atomic;

const OBJECT_META: Schema = &[
    field("finalizers", Shape::Set),
    keyed("ownerReferences", &[key("uid")], WHOLE),
];
const META: Field = map("metadata", OBJECT_META);

const CONTAINER_PORT_KEYS: &[Key] = &[
    Key {
        name: "containerPort",
        default: Some(KeyDefault::Int(0)),
    },
    Key {
        name: "protocol",
        default: Some(KeyDefault::Str("TCP")),
    },
];
const SERVICE_PORT_KEYS: &[Key] = &[
    Key {
        name: "port",
        default: Some(KeyDefault::Int(0)),
    },
    Key {
        name: "protocol",
        default: Some(KeyDefault::Str("TCP")),
    },
];

const ENV_VAR: Schema = &[map(
    "valueFrom",
    &[
        atomic("configMapKeyRef"),
        atomic("secretKeyRef"),
        atomic("fieldRef"),
        atomic("resourceFieldRef"),
        atomic("fileKeyRef"),
    ],
)];

/// core/v1 Container and EphemeralContainer.
const CONTAINER: Schema = &[
    keyed("ports", CONTAINER_PORT_KEYS, PLAIN),
    keyed("env", BY_NAME, &Shape::Map(ENV_VAR)),
    keyed("volumeMounts", &[key("mountPath")], PLAIN),
    keyed("volumeDevices", &[key("devicePath")], PLAIN),
    map("resources", &[keyed("claims", BY_NAME, PLAIN)]),
];
const CONTAINERS: &Shape = &Shape::Map(CONTAINER);

const POD_SPEC: Schema = &[
    keyed("containers", BY_NAME, CONTAINERS),
    keyed("initContainers", BY_NAME, CONTAINERS),
    keyed("ephemeralContainers", BY_NAME, CONTAINERS),
    keyed("volumes", BY_NAME, PLAIN),
    keyed("imagePullSecrets", BY_NAME, WHOLE),
    keyed("hostAliases", BY_IP, PLAIN),
    keyed(
        "topologySpreadConstraints",
        &[key("topologyKey"), key("whenUnsatisfiable")],
        &Shape::Map(&[atomic("labelSelector")]),
    ),
    keyed("schedulingGates", BY_NAME, PLAIN),
    keyed("resourceClaims", BY_NAME, PLAIN),
    atomic("nodeSelector"),
    map(
        "affinity",
        &[map(
            "nodeAffinity",
            &[atomic("requiredDuringSchedulingIgnoredDuringExecution")],
        )],
    ),
];

const CONDITIONS: Field = keyed("conditions", BY_TYPE, PLAIN);
const STATUS_CONDITIONS: Schema = &[CONDITIONS];

const POD_STATUS: Schema = &[
    CONDITIONS,
    keyed("podIPs", BY_IP, PLAIN),
    keyed("resourceClaimStatuses", BY_NAME, PLAIN),
];

const POD_TEMPLATE_SPEC: Schema = &[META, map("spec", POD_SPEC)];
/// Deployment, ReplicaSet, StatefulSet, DaemonSet, Job (label selectors)
/// and ReplicationController (an atomic map selector).
const WORKLOAD_SPEC: Schema = &[atomic("selector"), map("template", POD_TEMPLATE_SPEC)];
const JOB_TEMPLATE_SPEC: Schema = &[META, map("spec", WORKLOAD_SPEC)];

const POD: Schema = &[META, map("spec", POD_SPEC), map("status", POD_STATUS)];
const POD_TEMPLATE: Schema = &[META, map("template", POD_TEMPLATE_SPEC)];
const WORKLOAD: Schema = &[
    META,
    map("spec", WORKLOAD_SPEC),
    map("status", STATUS_CONDITIONS),
];
const CRON_JOB: Schema = &[META, map("spec", &[map("jobTemplate", JOB_TEMPLATE_SPEC)])];
const NODE: Schema = &[
    META,
    map("spec", &[field("podCIDRs", Shape::Set)]),
    map("status", &[CONDITIONS, keyed("addresses", BY_TYPE, PLAIN)]),
];
const SERVICE: Schema = &[
    META,
    map(
        "spec",
        &[keyed("ports", SERVICE_PORT_KEYS, PLAIN), atomic("selector")],
    ),
    map("status", STATUS_CONDITIONS),
];
const WITH_STATUS_CONDITIONS: Schema = &[META, map("status", STATUS_CONDITIONS)];
const POD_DISRUPTION_BUDGET: Schema = &[
    META,
    map("spec", &[atomic("selector")]),
    map("status", STATUS_CONDITIONS),
];
/// `secrets` are ObjectReferences (atomic, `name` without a default).
const SERVICE_ACCOUNT: Schema = &[
    META,
    keyed(
        "secrets",
        &[Key {
            name: "name",
            default: None,
        }],
        WHOLE,
    ),
];
const COMPONENT_STATUS: Schema = &[META, CONDITIONS];
const WEBHOOK_CONFIGURATION: Schema = &[
    META,
    keyed(
        "webhooks",
        BY_NAME,
        &Shape::Map(&[
            keyed("matchConditions", BY_NAME, PLAIN),
            atomic("namespaceSelector"),
            atomic("objectSelector"),
        ]),
    ),
];
const VALIDATING_ADMISSION_POLICY: Schema = &[
    META,
    map(
        "spec",
        &[
            keyed("matchConditions", BY_NAME, PLAIN),
            keyed("variables", BY_NAME, WHOLE),
        ],
    ),
    map("status", STATUS_CONDITIONS),
];
const CSI_NODE: Schema = &[META, map("spec", &[keyed("drivers", BY_NAME, PLAIN)])];
const ROLE_BINDING: Schema = &[META, atomic("roleRef")];
const NETWORK_POLICY: Schema = &[META, map("spec", &[atomic("podSelector")])];
const METADATA_ONLY: Schema = &[META];
