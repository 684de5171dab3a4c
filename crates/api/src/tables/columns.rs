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

const ROLE_REF: &str = "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.";

/// Role and ClusterRole (`roleColumnDefinitions`).
const ROLE: &[Col] = &[NAME, Col("Created At", "date", false, 0, META_CREATED)];

const ROLE_BINDING: &[Col] = &[
    NAME,
    Col("Role", "string", false, 0, ROLE_REF),
    AGE,
    Col("Users", "string", false, 1, "Users in the roleBinding"),
    Col("Groups", "string", false, 1, "Groups in the roleBinding"),
    Col(
        "ServiceAccounts",
        "string",
        false,
        1,
        "ServiceAccounts in the roleBinding",
    ),
];

const CLUSTER_ROLE_BINDING: &[Col] = &[
    NAME,
    Col("Role", "string", false, 0, ROLE_REF),
    AGE,
    Col(
        "Users",
        "string",
        false,
        1,
        "Users in the clusterRoleBinding",
    ),
    Col(
        "Groups",
        "string",
        false,
        1,
        "Groups in the clusterRoleBinding",
    ),
    Col(
        "ServiceAccounts",
        "string",
        false,
        1,
        "ServiceAccounts in the clusterRoleBinding",
    ),
];

const API_SERVICE: &[Col] = &[
    NAME,
    Col(
        "Service",
        "string",
        false,
        0,
        "The reference to the service that hosts this API endpoint.",
    ),
    Col(
        "Available",
        "string",
        false,
        0,
        "Whether this service is available.",
    ),
    AGE,
];

const REPLICATION_CONTROLLER: &[Col] = &[
    NAME,
    Col("Desired", "integer", false, 0, "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller"),
    Col("Current", "integer", false, 0, "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller"),
    Col("Ready", "integer", false, 0, "The number of ready replicas for this replication controller."),
    AGE,
    WIDE_CONTAINERS,
    WIDE_IMAGES,
    Col("Selector", "string", false, 1, "Selector is a label query over pods that should match the Replicas count. If Selector is empty, it is defaulted to the labels present on the Pod template. Label keys and values that must match in order to be controlled by this replication controller, if empty defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"),
];

const POD_TEMPLATE: &[Col] = &[
    NAME,
    Col("Containers", "string", false, 0, CONTAINERS),
    Col("Images", "string", false, 0, IMAGES),
    Col(
        "Pod Labels",
        "string",
        false,
        0,
        "The labels for the pod template.",
    ),
];

const CONTROLLER_REVISION: &[Col] = &[
    NAME,
    Col("Controller", "string", false, 0, "Controller of the object"),
    Col(
        "Revision",
        "string",
        false,
        0,
        "Revision indicates the revision of the state represented by Data.",
    ),
    AGE,
];

const HORIZONTAL_POD_AUTOSCALER: &[Col] = &[
    NAME,
    Col("Reference", "string", false, 0, "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count."),
    Col("Targets", "string", false, 0, "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond."),
    Col("MinPods", "string", false, 0, "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available."),
    Col("MaxPods", "integer", false, 0, "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas."),
    Col("Replicas", "integer", false, 0, "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler."),
    AGE,
];

const COMPONENT_STATUS: &[Col] = &[
    NAME,
    Col(
        "Status",
        "string",
        false,
        0,
        "Status of the component conditions",
    ),
    Col(
        "Message",
        "string",
        false,
        0,
        "Message of the component conditions",
    ),
    Col(
        "Error",
        "string",
        false,
        0,
        "Error of the component conditions",
    ),
];

// Cluster-level kinds (printers in tables/cluster.rs); descriptions are
// the first paragraph of the swagger docs upstream borrows.
const INGRESS: &[Col] = &[
    NAME,
    Col(
        "Class",
        "string",
        false,
        0,
        "The name of the IngressClass resource that should be used for additional configuration",
    ),
    Col(
        "Hosts",
        "string",
        false,
        0,
        "Hosts that incoming requests are matched against before the ingress rule",
    ),
    Col(
        "Address",
        "string",
        false,
        0,
        "Address is a list containing ingress points for the load-balancer",
    ),
    Col(
        "Ports",
        "string",
        false,
        0,
        "Ports of TLS configurations that open",
    ),
    AGE,
];

const INGRESS_CLASS: &[Col] = &[
    NAME,
    Col(
        "Controller",
        "string",
        false,
        0,
        "Controller that is responsible for handling this class",
    ),
    Col(
        "Parameters",
        "string",
        false,
        0,
        "A reference to a resource with additional parameters",
    ),
    AGE,
];

const NETWORK_POLICY: &[Col] = &[
    NAME,
    Col("Pod-Selector", "string", false, 0, "Selects the pods to which this NetworkPolicy object applies.  The array of ingress rules is applied to any pods selected by this field. Multiple network policies can select the same set of pods.  In this case, the ingress rules for each are combined additively. This field is NOT optional and follows standard label selector semantics. An empty podSelector matches all pods in this namespace."),
    AGE,
];

const ENDPOINT_SLICE: &[Col] = &[
    NAME,
    Col("AddressType", "string", false, 0, "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name."),
    Col("Ports", "string", false, 0, "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. When ports is empty, it indicates that there are no defined ports. When a port is defined with a nil port value, it indicates \"all ports\". Each slice may include a maximum of 100 ports."),
    Col("Endpoints", "string", false, 0, "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints."),
    AGE,
];

const CSI_DRIVER: &[Col] = &[
    NAME,
    Col("AttachRequired", "boolean", false, 0, "attachRequired indicates this CSI volume driver requires an attach operation (because it implements the CSI ControllerPublishVolume() method), and that the Kubernetes attach detach controller should call the attach volume interface which checks the volumeattachment status and waits until the volume is attached before proceeding to mounting. The CSI external-attacher coordinates with CSI volume driver and updates the volumeattachment status when the attach operation is complete. If the CSIDriverRegistry feature gate is enabled and the value is specified to false, the attach operation will be skipped. Otherwise the attach operation will be called.\n\nThis field is immutable."),
    Col("PodInfoOnMount", "boolean", false, 0, "podInfoOnMount indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations, if set to true. If set to false, pod information will not be passed on mount. Default is false."),
    Col("StorageCapacity", "boolean", false, 0, "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity that the driver deployment will report by creating CSIStorageCapacity objects with capacity information, if set to true."),
    Col("TokenRequests", "string", false, 0, "tokenRequests indicates the CSI driver needs pods' service account tokens it is mounting volume for to do necessary authentication. Kubelet will pass the tokens in VolumeContext in the CSI NodePublishVolume calls."),
    Col("RequiresRepublish", "boolean", false, 0, "requiresRepublish indicates the CSI driver wants `NodePublishVolume` being periodically called to reflect any possible change in the mounted volume. This field defaults to false."),
    Col("Modes", "string", false, 0, "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports. The default if the list is empty is \"Persistent\", which is the usage defined by the CSI specification and implemented in Kubernetes via the usual PV/PVC mechanism."),
    AGE,
];

const CSI_NODE: &[Col] = &[
    NAME,
    Col(
        "Drivers",
        "integer",
        false,
        0,
        "Drivers indicates the number of CSI drivers registered on the node",
    ),
    AGE,
];

const VOLUME_ATTACHMENT: &[Col] = &[
    NAME,
    Col("Attacher", "string", true, 0, "attacher indicates the name of the volume driver that MUST handle this request. This is the name returned by GetPluginName()."),
    Col("PV", "string", false, 0, "persistentVolumeName represents the name of the persistent volume to attach."),
    Col("Node", "string", false, 0, "nodeName represents the node that the volume should be attached to."),
    Col("Attached", "boolean", false, 0, "attached indicates the volume is successfully attached. This field must only be set by the entity completing the attach operation, i.e. the external-attacher."),
    AGE,
];

const CSI_STORAGE_CAPACITY: &[Col] = &[
    NAME,
    Col("StorageClassName", "string", false, 0, "storageClassName represents the name of the StorageClass that the reported capacity applies to. It must meet the same requirements as the name of a StorageClass object (non-empty, DNS subdomain). If that object no longer exists, the CSIStorageCapacity object is obsolete and should be removed by its creator. This field is immutable."),
    Col("Capacity", "string", false, 0, "capacity is the value reported by the CSI driver in its GetCapacityResponse for a GetCapacityRequest with topology and parameters that match the previous fields."),
];

/// Upstream borrows ObjectMeta's (absent) `handler` doc: empty.
const RUNTIME_CLASS: &[Col] = &[NAME, Col("Handler", "string", false, 0, ""), AGE];

const CERTIFICATE_SIGNING_REQUEST: &[Col] = &[
    NAME,
    AGE,
    Col("SignerName", "string", false, 0, "Requested signer for the request. It is a qualified name in the form: `scope-hostname.io/name`. If empty, it will be defaulted:\n 1. If it's a kubelet client certificate, it is assigned\n    \"kubernetes.io/kube-apiserver-client-kubelet\".\n 2. If it's a kubelet serving certificate, it is assigned\n    \"kubernetes.io/kubelet-serving\".\n 3. Otherwise, it is assigned \"kubernetes.io/legacy-unknown\".\nDistribution of trust for signers happens out of band. You can select on this field using `spec.signerName`."),
    Col("Requestor", "string", false, 0, "Base64-encoded PKCS#10 CSR data"),
    Col("RequestedDuration", "string", false, 0, "expirationSeconds is the requested duration of validity of the issued certificate. The certificate signer may issue a certificate with a different validity duration so a client must check the delta between the notBefore and and notAfter fields in the issued certificate to determine the actual duration."),
    Col("Condition", "string", false, 0, "Conditions applied to the request, such as approval or denial."),
];

const FLOW_SCHEMA: &[Col] = &[
    NAME,
    Col("PriorityLevel", "string", false, 0, "`name` is the name of the priority level configuration being referenced Required."),
    Col("MatchingPrecedence", "string", false, 0, "`matchingPrecedence` is used to choose among the FlowSchemas that match a given request. The chosen FlowSchema is among those with the numerically lowest (which we take to be logically highest) MatchingPrecedence.  Each MatchingPrecedence value must be ranged in [1,10000]. Note that if the precedence is not specified, it will be set to 1000 as default."),
    Col("DistinguisherMethod", "string", false, 0, "`distinguisherMethod` defines how to compute the flow distinguisher for requests that match this schema. `nil` specifies that the distinguisher is disabled and thus will always be the empty string."),
    AGE,
    Col("MissingPL", "string", false, 0, "references a broken or non-existent PriorityLevelConfiguration"),
];

const PRIORITY_LEVEL_CONFIGURATION: &[Col] = &[
    NAME,
    Col("Type", "string", false, 0, "`type` indicates whether this priority level is subject to limitation on request execution.  A value of `\"Exempt\"` means that requests of this priority level are not subject to a limit (and thus are never queued) and do not detract from the capacity made available to other priority levels.  A value of `\"Limited\"` means that (a) requests of this priority level _are_ subject to limits and (b) some of the server's limited capacity is made available exclusively to this priority level. Required."),
    Col("NominalConcurrencyShares", "string", false, 0, "`nominalConcurrencyShares` (NCS) contributes to the computation of the NominalConcurrencyLimit (NominalCL) of this level. This is the number of execution seats available at this priority level. This is used both for requests dispatched from this priority level as well as requests dispatched from other priority levels borrowing seats from this level."),
    Col("Queues", "string", false, 0, "`queues` is the number of queues for this priority level. The queues exist independently at each apiserver. The value must be positive.  Setting it to 1 effectively precludes shufflesharding and thus makes the distinguisher method of associated flow schemas irrelevant.  This field has a default value of 64."),
    Col("HandSize", "string", false, 0, "`handSize` is a small positive number that configures the shuffle sharding of requests into queues.  When enqueuing a request at this priority level the request's flow identifier (a string pair) is hashed and the hash value is used to shuffle the list of queues and deal a hand of the size specified here.  The request is put into one of the shortest queues in that hand. `handSize` must be no larger than `queues`, and should be significantly smaller (so that a few heavy flows do not saturate most of the queues).  See the user-facing documentation for more extensive guidance on setting this field.  This field has a default value of 8."),
    Col("QueueLengthLimit", "string", false, 0, "`queueLengthLimit` is the maximum number of requests allowed to be waiting in a given queue of this priority level at a time; excess requests are rejected.  This value must be positive.  If not specified, it will be defaulted to 50."),
    AGE,
];

const WEBHOOK_CONFIGURATION: &[Col] = &[
    NAME,
    Col(
        "Webhooks",
        "integer",
        false,
        0,
        "Webhooks indicates the number of webhooks registered in this configuration",
    ),
    AGE,
];

const VALIDATING_ADMISSION_POLICY: &[Col] = &[
    NAME,
    Col(
        "Validations",
        "integer",
        false,
        0,
        "Validations indicates the number of validation rules defined in this configuration",
    ),
    Col(
        "ParamKind",
        "string",
        false,
        0,
        "ParamKind specifies the kind of resources used to parameterize this policy",
    ),
    AGE,
];

const VALIDATING_ADMISSION_POLICY_BINDING: &[Col] = &[
    NAME,
    Col(
        "PolicyName",
        "string",
        false,
        0,
        "PolicyName indicates the policy definition which the policy binding binded to",
    ),
    Col(
        "ParamRef",
        "string",
        false,
        0,
        "ParamRef indicates the param resource which sets the configration param",
    ),
    AGE,
];

const PRIORITY_CLASS: &[Col] = &[
    NAME,
    Col("Value", "integer", false, 0, "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec."),
    Col("Global-Default", "boolean", false, 0, "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority."),
    AGE,
    Col("PreemptionPolicy", "string", false, 0, "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset."),
];

const RESOURCE_QUOTA: &[Col] = &[
    NAME,
    AGE,
    Col("Request", "string", false, 0, "Request represents a minimum amount of cpu/memory that a container may consume."),
    Col("Limit", "string", false, 0, "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
];

const LIMIT_RANGE: &[Col] = &[NAME, Col("Created At", "date", false, 0, META_CREATED)];

const POD_DISRUPTION_BUDGET: &[Col] = &[
    NAME,
    Col(
        "Min Available",
        "string",
        false,
        0,
        "The minimum number of pods that must be available.",
    ),
    Col(
        "Max Unavailable",
        "string",
        false,
        0,
        "The maximum number of pods that may be unavailable.",
    ),
    Col(
        "Allowed Disruptions",
        "integer",
        false,
        0,
        "Calculated number of pods that may be disrupted at this time.",
    ),
    AGE,
];

const SERVICE_CIDR: &[Col] = &[
    NAME,
    Col("CIDRs", "string", false, 0, "CIDRs defines the IP blocks in CIDR notation (e.g. \"192.168.0.0/24\" or \"2001:db8::/64\") from which to assign service cluster IPs. Max of two CIDRs is allowed, one of each IP family. This field is immutable."),
    AGE,
];

const IP_ADDRESS: &[Col] = &[
    NAME,
    Col("ParentRef", "string", false, 0, "ParentRef references the resource that an IPAddress is attached to. An IPAddress must reference a parent object."),
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
        "PriorityClass" => PRIORITY_CLASS,
        "ResourceQuota" => RESOURCE_QUOTA,
        "LimitRange" => LIMIT_RANGE,
        "PodDisruptionBudget" => POD_DISRUPTION_BUDGET,
        "ServiceCIDR" => SERVICE_CIDR,
        "IPAddress" => IP_ADDRESS,
        "Ingress" => INGRESS,
        "IngressClass" => INGRESS_CLASS,
        "NetworkPolicy" => NETWORK_POLICY,
        "EndpointSlice" => ENDPOINT_SLICE,
        "CSIDriver" => CSI_DRIVER,
        "CSINode" => CSI_NODE,
        "VolumeAttachment" => VOLUME_ATTACHMENT,
        "CSIStorageCapacity" => CSI_STORAGE_CAPACITY,
        "RuntimeClass" => RUNTIME_CLASS,
        "CertificateSigningRequest" => CERTIFICATE_SIGNING_REQUEST,
        "FlowSchema" => FLOW_SCHEMA,
        "PriorityLevelConfiguration" => PRIORITY_LEVEL_CONFIGURATION,
        "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration" => WEBHOOK_CONFIGURATION,
        "ValidatingAdmissionPolicy" => VALIDATING_ADMISSION_POLICY,
        "ValidatingAdmissionPolicyBinding" => VALIDATING_ADMISSION_POLICY_BINDING,
        "ReplicationController" => REPLICATION_CONTROLLER,
        "PodTemplate" => POD_TEMPLATE,
        "ControllerRevision" => CONTROLLER_REVISION,
        "HorizontalPodAutoscaler" => HORIZONTAL_POD_AUTOSCALER,
        "ComponentStatus" => COMPONENT_STATUS,
        "Role" | "ClusterRole" => ROLE,
        "RoleBinding" => ROLE_BINDING,
        "ClusterRoleBinding" => CLUSTER_ROLE_BINDING,
        "APIService" => API_SERVICE,
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
