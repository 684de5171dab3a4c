//! The `columnDefinitions` of each printed kind, as kube-apiserver 1.33
//! registers them in `pkg/printers/internalversion` (names, types,
//! priorities and the swagger-doc descriptions they borrow).

use serde_json::{json, Value};

/// One column: name, type, whether it is the `name`-formatted column,
/// priority (1 = `-o wide` only) and description.
struct Col(&'static str, &'static str, bool, u8, &'static str);

const META_NAME: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const META_CREATED: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const CONTAINERS: &str = "Names of each container in the template.";
const IMAGES: &str = "Images referenced by each container in the template.";
const POD_READY_WORKLOAD: &str = "Number of the pod with ready state";
const NODE_ADDRESSES: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";
const JOB_SELECTOR: &str = "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";

const NAME: Col = Col("Name", "string", true, 0, META_NAME);
const AGE: Col = Col("Age", "string", false, 0, META_CREATED);
const WIDE_CONTAINERS: Col = Col("Containers", "string", false, 1, CONTAINERS);
const WIDE_IMAGES: Col = Col("Images", "string", false, 1, IMAGES);

const POD: &[Col] = &[
    NAME,
    Col("Ready", "string", false, 0, "The aggregate readiness state of this pod for accepting traffic."),
    Col("Status", "string", false, 0, "The aggregate status of the containers in this pod."),
    Col("Restarts", "string", false, 0, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
    AGE,
    Col("IP", "string", false, 1, "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."),
    Col("Node", "string", false, 1, "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename"),
    Col("Nominated Node", "string", false, 1, "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled."),
    Col("Readiness Gates", "string", false, 1, "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates"),
];

const NODE: &[Col] = &[
    NAME,
    Col("Status", "string", false, 0, "The status of the node"),
    Col("Roles", "string", false, 0, "The roles of the node"),
    AGE,
    Col("Version", "string", false, 0, "Kubelet Version reported by the node."),
    Col("Internal-IP", "string", false, 1, NODE_ADDRESSES),
    Col("External-IP", "string", false, 1, NODE_ADDRESSES),
    Col("OS-Image", "string", false, 1, "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."),
    Col("Kernel-Version", "string", false, 1, "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."),
    Col("Container-Runtime", "string", false, 1, "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2)."),
];

const NAMESPACE: &[Col] = &[
    NAME,
    Col("Status", "string", false, 0, "The status of the namespace"),
    AGE,
];

const EVENT: &[Col] = &[
    Col("Last Seen", "string", false, 0, "The time at which the most recent occurrence of this event was recorded."),
    Col("Type", "string", false, 0, "Type of this event (Normal, Warning), new types could be added in the future"),
    Col("Reason", "string", false, 0, "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
    Col("Object", "string", false, 0, "The object that this event is about."),
    Col("Subobject", "string", false, 1, "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object."),
    Col("Source", "string", false, 1, "The component reporting this event. Should be a short machine understandable string."),
    Col("Message", "string", false, 0, "A human-readable description of the status of this operation."),
    Col("First Seen", "string", false, 1, "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)"),
    Col("Count", "string", false, 1, "The number of times this event has occurred."),
    Col("Name", "string", true, 1, META_NAME),
];

const CONFIG_MAP: &[Col] = &[
    NAME,
    Col("Data", "string", false, 0, "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process."),
    AGE,
];

const SECRET: &[Col] = &[
    NAME,
    Col("Type", "string", false, 0, "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types"),
    Col("Data", "string", false, 0, "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4"),
    AGE,
];

const SERVICE: &[Col] = &[
    NAME,
    Col("Type", "string", false, 0, "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types"),
    Col("Cluster-IP", "string", false, 0, "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies"),
    Col("External-IP", "string", false, 0, "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system."),
    Col("Port(s)", "string", false, 0, "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies"),
    AGE,
    Col("Selector", "string", false, 1, "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/"),
];

const ENDPOINTS: &[Col] = &[
    NAME,
    Col("Endpoints", "string", false, 0, "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service."),
    AGE,
];

const SERVICE_ACCOUNT: &[Col] = &[
    NAME,
    Col("Secrets", "string", false, 0, "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret"),
    AGE,
];

const LEASE: &[Col] = &[
    NAME,
    Col("Holder", "string", false, 0, "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field."),
    AGE,
];

const DEPLOYMENT: &[Col] = &[
    NAME,
    Col("Ready", "string", false, 0, POD_READY_WORKLOAD),
    Col("Up-to-date", "string", false, 0, "Total number of non-terminating pods targeted by this deployment that have the desired template spec."),
    Col("Available", "string", false, 0, "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment."),
    AGE,
    WIDE_CONTAINERS,
    WIDE_IMAGES,
    Col("Selector", "string", false, 1, "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment."),
];

const REPLICA_SET: &[Col] = &[
    NAME,
    Col("Desired", "integer", false, 0, "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset"),
    Col("Current", "integer", false, 0, "Replicas is the most recently observed number of non-terminating pods. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset"),
    Col("Ready", "integer", false, 0, "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition."),
    AGE,
    WIDE_CONTAINERS,
    WIDE_IMAGES,
    Col("Selector", "string", false, 1, "Selector is a label query over pods that should match the replica count. If the selector is empty, it is defaulted to the labels present on the pod template. Label keys and values that must match in order to be controlled by this replica set. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"),
];

const JOB: &[Col] = &[
    NAME,
    Col("Status", "string", false, 0, "Status of the job."),
    Col("Completions", "string", false, 0, "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs."),
    Col("Duration", "string", false, 0, "Time required to complete the job."),
    AGE,
    WIDE_CONTAINERS,
    WIDE_IMAGES,
    Col("Selector", "string", false, 1, JOB_SELECTOR),
];

const STATEFUL_SET: &[Col] = &[
    NAME,
    Col("Ready", "string", false, 0, POD_READY_WORKLOAD),
    AGE,
    WIDE_CONTAINERS,
    WIDE_IMAGES,
];

const DAEMON_SET: &[Col] = &[
    NAME,
    Col("Desired", "integer", false, 0, "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/"),
    Col("Current", "integer", false, 0, "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/"),
    Col("Ready", "integer", false, 0, "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready."),
    Col("Up-to-date", "integer", false, 0, "The total number of nodes that are running updated daemon pod"),
    Col("Available", "integer", false, 0, "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)"),
    Col("Node Selector", "string", false, 0, "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/"),
    AGE,
    WIDE_CONTAINERS,
    WIDE_IMAGES,
    Col("Selector", "string", false, 1, "A label query over pods that are managed by the daemon set. Must match in order to be controlled. If empty, defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"),
];

const CRON_JOB: &[Col] = &[
    NAME,
    Col("Schedule", "string", false, 0, "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
    Col("Timezone", "string", false, 0, "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones"),
    Col("Suspend", "boolean", false, 0, "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false."),
    Col("Active", "integer", false, 0, "A list of pointers to currently running jobs."),
    Col("Last Schedule", "string", false, 0, "Information when was the last time the job was successfully scheduled."),
    AGE,
    WIDE_CONTAINERS,
    WIDE_IMAGES,
    Col("Selector", "string", false, 1, JOB_SELECTOR),
];

const PV_SPEC_VOLUME_MODE: &str = "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state. Value of Filesystem is implied when not included in spec.";

const PERSISTENT_VOLUME: &[Col] = &[
    NAME,
    Col("Capacity", "string", false, 0, "capacity is the description of the persistent volume's resources and capacity. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity"),
    Col("Access Modes", "string", false, 0, "accessModes contains all ways the volume can be mounted. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes"),
    Col("Reclaim Policy", "string", false, 0, "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim. Valid options are Retain (default for manually created PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), and Recycle (deprecated). Recycle must be supported by the volume plugin underlying this PersistentVolume. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming"),
    Col("Status", "string", false, 0, "phase indicates if a volume is available, bound to a claim, or released by a claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase"),
    Col("Claim", "string", false, 0, "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the authoritative bind between PV and PVC. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding"),
    Col("StorageClass", "string", false, 0, "StorageClass of the pv"),
    Col("VolumeAttributesClass", "string", false, 0, "VolumeAttributesClass of the pv"),
    Col("Reason", "string", false, 0, "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI."),
    AGE,
    Col("VolumeMode", "string", false, 1, PV_SPEC_VOLUME_MODE),
];

const PERSISTENT_VOLUME_CLAIM: &[Col] = &[
    NAME,
    Col("Status", "string", false, 0, "phase represents the current phase of PersistentVolumeClaim."),
    Col("Volume", "string", false, 0, "volumeName is the binding reference to the PersistentVolume backing this claim."),
    Col("Capacity", "string", false, 0, "capacity represents the actual resources of the underlying volume."),
    Col("Access Modes", "string", false, 0, "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1"),
    Col("StorageClass", "string", false, 0, "StorageClass of the pvc"),
    Col("VolumeAttributesClass", "string", false, 0, "VolumeAttributesClass of the pvc"),
    AGE,
    Col("VolumeMode", "string", false, 1, "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec."),
];

const STORAGE_CLASS: &[Col] = &[
    NAME,
    Col("Provisioner", "string", false, 0, "provisioner indicates the type of the provisioner."),
    Col("ReclaimPolicy", "string", false, 0, "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete."),
    Col("VolumeBindingMode", "string", false, 0, "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature."),
    Col("AllowVolumeExpansion", "string", false, 0, "allowVolumeExpansion shows whether the storage class allow volume expand."),
    AGE,
];

/// The generic apiserver table (`rest.NewDefaultTableConvertor`) used for
/// kinds without a printer: the name and an RFC 3339 creation date.
const DEFAULT: &[Col] = &[NAME, Col("Created At", "date", false, 0, META_CREATED)];

fn columns(kind: &str) -> &'static [Col] {
    match kind {
        "Pod" => POD,
        "Node" => NODE,
        "Namespace" => NAMESPACE,
        "Event" => EVENT,
        "ConfigMap" => CONFIG_MAP,
        "Secret" => SECRET,
        "Service" => SERVICE,
        "Endpoints" => ENDPOINTS,
        "ServiceAccount" => SERVICE_ACCOUNT,
        "Lease" => LEASE,
        "Deployment" => DEPLOYMENT,
        "ReplicaSet" => REPLICA_SET,
        "Job" => JOB,
        "StatefulSet" => STATEFUL_SET,
        "DaemonSet" => DAEMON_SET,
        "CronJob" => CRON_JOB,
        "PersistentVolume" => PERSISTENT_VOLUME,
        "PersistentVolumeClaim" => PERSISTENT_VOLUME_CLAIM,
        "StorageClass" => STORAGE_CLASS,
        _ => DEFAULT,
    }
}

/// Whether `kind` has a dedicated printer (otherwise the default table).
pub(super) fn has_printer(kind: &str) -> bool {
    !std::ptr::eq(columns(kind), DEFAULT)
}

pub(super) fn definitions(kind: &str) -> Vec<Value> {
    columns(kind)
        .iter()
        .map(|Col(name, ty, is_name, priority, description)| {
            json!({
                "name": name,
                "type": ty,
                "format": if *is_name { "name" } else { "" },
                "description": description,
                "priority": priority,
            })
        })
        .collect()
}
