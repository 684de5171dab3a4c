//! A fuzz pass over the write path, through the real handlers (the
//! in-process loopback: authentication, admission, handlers, store): many
//! mutations of valid objects of every served kind — wrong JSON types at
//! every field path, nulls, huge and empty values, deep nesting, invalid
//! names, bad patches of each type, bad options bodies and query
//! parameters. It asserts that no answer is a 5xx, every refusal is a
//! Status with the answer's code, a refused request changed nothing, and
//! every stored object reads back and decodes as its type.
//!
//! Deterministic (seeded) and bounded: `SKIFF_FUZZ_CASES` (default 1500)
//! requests, `SKIFF_FUZZ_SEED` to replay another run.

mod support;

use axum::body::Body;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tower::ServiceExt;

/// (URL collection path, a valid object).
fn bases() -> Vec<(&'static str, Value)> {
    let pod_spec = json!({"containers": [{"name": "c", "image": "busybox:1.36",
        "ports": [{"containerPort": 80}], "env": [{"name": "A", "value": "b"}],
        "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}}}],
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]});
    let template = json!({"metadata": {"labels": {"app": "x"}}, "spec": pod_spec});
    vec![
        (
            "/api/v1/namespaces/fuzz/pods",
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"app": "x"}, "annotations": {"a": "b"}}, "spec": pod_spec}),
        ),
        (
            "/api/v1/namespaces/fuzz/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c"}, "data": {"k": "v"}}),
        ),
        (
            "/api/v1/namespaces/fuzz/secrets",
            json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s"}, "stringData": {"k": "v"}, "type": "Opaque"}),
        ),
        (
            "/api/v1/namespaces/fuzz/services",
            json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "svc"}, "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}}),
        ),
        (
            "/api/v1/namespaces/fuzz/serviceaccounts",
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "sa"}}),
        ),
        (
            "/api/v1/namespaces/fuzz/resourcequotas",
            json!({"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "q"}, "spec": {"hard": {"pods": "100000", "count/deployments.apps": "100000"}}}),
        ),
        (
            "/api/v1/namespaces/fuzz/limitranges",
            json!({"apiVersion": "v1", "kind": "LimitRange",
            "metadata": {"name": "lr"}, "spec": {"limits": [{"type": "PersistentVolumeClaim", "min": {"storage": "1"}}]}}),
        ),
        (
            "/apis/policy/v1/namespaces/fuzz/poddisruptionbudgets",
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}}}),
        ),
        (
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "fuzz-pc"}, "value": 100, "description": "d"}),
        ),
        (
            "/apis/networking.k8s.io/v1/servicecidrs",
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
            "metadata": {"name": "extra"}, "spec": {"cidrs": ["10.96.0.0/16"]}}),
        ),
        (
            "/apis/networking.k8s.io/v1/ipaddresses",
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
            "metadata": {"name": "10.43.200.1"}, "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "fuzz", "name": "svc"}}}),
        ),
        (
            "/api/v1/namespaces/fuzz/endpoints",
            json!({"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": "ep"}, "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]}),
        ),
        (
            "/api/v1/namespaces/fuzz/events",
            json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "ev"}, "involvedObject": {"kind": "Pod", "name": "p", "namespace": "fuzz"},
            "reason": "R", "message": "m", "type": "Normal", "count": 1}),
        ),
        (
            "/apis/events.k8s.io/v1/namespaces/fuzz/events",
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "ev2"}, "eventTime": "2026-01-01T00:00:00.000000Z", "type": "Normal",
            "reason": "R", "action": "A", "reportingController": "example.com/c", "reportingInstance": "i",
            "regarding": {"kind": "Pod", "name": "p", "namespace": "fuzz"}}),
        ),
        (
            "/apis/apps/v1/namespaces/fuzz/deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}}, "template": template}}),
        ),
        (
            "/apis/apps/v1/namespaces/fuzz/replicasets",
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "rs"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}}, "template": template}}),
        ),
        (
            "/apis/batch/v1/namespaces/fuzz/jobs",
            json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j"}, "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}}),
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/fuzz/leases",
            json!({"apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease", "metadata": {"name": "l"}, "spec": {"holderIdentity": "h", "leaseDurationSeconds": 15}}),
        ),
        (
            "/api/v1/nodes",
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "fuzz-node",
            "labels": {"kubernetes.io/hostname": "n"}}, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "4", "memory": "8Gi"}}}),
        ),
        ("/api/v1/persistentvolumes", persistent_volume()),
        (
            "/api/v1/namespaces/fuzz/persistentvolumeclaims",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "claim"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "manual", "volumeMode": "Filesystem"}}),
        ),
        ("/apis/storage.k8s.io/v1/storageclasses", storage_class()),
        (
            "/apis/networking.k8s.io/v1/namespaces/fuzz/ingresses",
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "ing"},
            "spec": {"ingressClassName": "fuzz-class", "tls": [{"hosts": ["a.example.com"], "secretName": "s"}],
            "rules": [{"host": "a.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "svc", "port": {"number": 80}}}}]}}]}}),
        ),
        (
            "/apis/networking.k8s.io/v1/ingressclasses",
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "fuzz-class"},
            "spec": {"controller": "example.com/ingress", "parameters": {"kind": "P", "name": "p", "scope": "Namespace", "namespace": "fuzz"}}}),
        ),
        (
            "/apis/networking.k8s.io/v1/namespaces/fuzz/networkpolicies",
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "np"},
            "spec": {"podSelector": {"matchLabels": {"app": "x"}}, "ingress": [{"from": [{"ipBlock":
            {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}], "ports": [{"port": 80, "endPort": 90}]}]}}),
        ),
        (
            "/apis/discovery.k8s.io/v1/namespaces/fuzz/endpointslices",
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "es"},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["10.2.3.4"], "hostname": "h", "conditions": {"ready": true}}]}),
        ),
        (
            "/apis/storage.k8s.io/v1/csidrivers",
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "csi.example.com"},
            "spec": {"attachRequired": true, "tokenRequests": [{"audience": "a", "expirationSeconds": 3600}]}}),
        ),
        (
            "/apis/storage.k8s.io/v1/csinodes",
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "fuzz-node"},
            "spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n", "allocatable": {"count": 3}}]}}),
        ),
        (
            "/apis/storage.k8s.io/v1/volumeattachments",
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "va"},
            "spec": {"attacher": "csi.example.com", "nodeName": "fuzz-node", "source": {"persistentVolumeName": "pv"}}}),
        ),
        (
            "/apis/storage.k8s.io/v1/namespaces/fuzz/csistoragecapacities",
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity", "metadata": {"name": "cap"},
            "storageClassName": "fuzz-sc", "capacity": "1Gi", "nodeTopology": {"matchLabels": {"zone": "a"}}}),
        ),
        (
            "/apis/node.k8s.io/v1/runtimeclasses",
            json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "rc"},
            "handler": "runc", "overhead": {"podFixed": {"cpu": "100m"}},
            "scheduling": {"nodeSelector": {"a": "b"}, "tolerations": [{"key": "k", "operator": "Exists"}]}}),
        ),
        (
            "/apis/certificates.k8s.io/v1/certificatesigningrequests",
            certificate_signing_request(),
        ),
        (
            "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations",
            json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"name": "pl"}, "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 10,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 16, "handSize": 4, "queueLengthLimit": 20}}}}}),
        ),
        (
            "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
            json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "fs"},
            "spec": {"priorityLevelConfiguration": {"name": "pl"}, "matchingPrecedence": 500,
            "distinguisherMethod": {"type": "ByNamespace"}, "rules": [{"subjects": [{"kind": "User", "user": {"name": "u"}}],
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]}]}}),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mwc"}, "webhooks": [{"name": "m.example.com", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "clientConfig": {"service": {"name": "s", "namespace": "fuzz", "path": "/m"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "matchConditions": [{"name": "c", "expression": "true"}]}]}),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "vwc"}, "webhooks": [{"name": "v.example.com", "sideEffects": "NoneOnDryRun",
            "admissionReviewVersions": ["v1", "v1beta1"], "clientConfig": {"url": "https://v.example.com/v"},
            "namespaceSelector": {"matchExpressions": [{"key": "k", "operator": "In", "values": ["a"]}]}}]}),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "vap"}, "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["deployments"]}]},
            "validations": [{"expression": "true", "message": "m"}],
            "auditAnnotations": [{"key": "k", "valueExpression": "'v'"}]}}),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "vapb"}, "spec": {"policyName": "vap", "validationActions": ["Warn", "Audit"],
            "paramRef": {"selector": {"matchLabels": {"a": "b"}}}}}),
        ),
        (
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "fuzzes.fuzz.example.com"},
            "spec": {"group": "fuzz.example.com", "scope": "Namespaced",
                "names": {"plural": "fuzzes", "singular": "fuzz", "kind": "Fuzz", "shortNames": ["fz"]},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas"}},
                    "additionalPrinterColumns": [{"name": "R", "type": "integer", "jsonPath": ".spec.replicas"}],
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {
                            "replicas": {"type": "integer", "minimum": 0, "default": 1},
                            "text": {"type": "string", "maxLength": 10, "pattern": "^[a-z]*$"},
                            "list": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}}}]}}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/fuzz/roles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["p"]}]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/fuzz/rolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "sa", "namespace": "fuzz"}]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "fuzz-cr"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}],
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"},
                "matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}]}}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "fuzz-crb"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "fuzz-cr"},
            "subjects": [{"kind": "Group", "name": "g"}]}),
        ),
        (
            "/apis/apiregistration.k8s.io/v1/apiservices",
            json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.fuzz.example.com"},
            "spec": {"group": "fuzz.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10,
            "service": {"namespace": "fuzz", "name": "svc", "port": 443}}}),
        ),
        (
            "/api/v1/namespaces/fuzz/replicationcontrollers",
            json!({"apiVersion": "v1", "kind": "ReplicationController",
            "metadata": {"name": "rc"}, "spec": {"replicas": 1, "selector": {"app": "x"}, "template": template}}),
        ),
        (
            "/api/v1/namespaces/fuzz/podtemplates",
            json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "pt"}, "template": template}),
        ),
        (
            "/apis/apps/v1/namespaces/fuzz/statefulsets",
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "sts"}, "spec": {"replicas": 1, "serviceName": "sts",
            "selector": {"matchLabels": {"app": "x"}}, "template": template,
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}]}}),
        ),
        (
            "/apis/apps/v1/namespaces/fuzz/daemonsets",
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "ds"}, "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template,
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%", "maxSurge": 0}}}}),
        ),
        (
            "/apis/apps/v1/namespaces/fuzz/controllerrevisions",
            json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": "cr"}, "data": {"spec": {"template": template}}, "revision": 1}),
        ),
        (
            "/apis/batch/v1/namespaces/fuzz/cronjobs",
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj"},
            "spec": {"schedule": "*/5 * * * *", "timeZone": "Etc/UTC", "concurrencyPolicy": "Forbid",
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
            "containers": [{"name": "c", "image": "busybox"}]}}}}}}),
        ),
        (
            "/apis/autoscaling/v2/namespaces/fuzz/horizontalpodautoscalers",
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "hpa"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
            "minReplicas": 1, "maxReplicas": 3, "metrics": [{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 50}}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60,
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 30}]}}}}),
        ),
        (
            "/apis/autoscaling/v1/namespaces/fuzz/horizontalpodautoscalers",
            json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "hpa1",
            "annotations": {"autoscaling.alpha.kubernetes.io/metrics":
                "[{\"type\":\"Pods\",\"pods\":{\"metricName\":\"qps\",\"targetAverageValue\":\"1k\"}}]"}},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d"}, "maxReplicas": 3,
            "targetCPUUtilizationPercentage": 50}}),
        ),
    ]
}

fn persistent_volume() -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "fuzz-pv"},
    "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
    "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "manual",
    "hostPath": {"path": "/tmp/fuzz-pv", "type": "DirectoryOrCreate"},
    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions":
        [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n"]}]}]}}}})
}

/// A CSR whose request is a real PEM certificate request.
fn certificate_signing_request() -> Value {
    use base64::Engine;
    let key = rcgen::KeyPair::generate().expect("key");
    let params =
        rcgen::CertificateParams::new(vec!["fuzz.example.com".to_string()]).expect("params");
    let pem = params
        .serialize_request(&key)
        .expect("csr")
        .pem()
        .expect("pem");
    json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
    "metadata": {"name": "csr"}, "spec": {"request": base64::engine::general_purpose::STANDARD.encode(pem),
    "signerName": "example.com/fuzz", "usages": ["digital signature", "server auth"], "expirationSeconds": 3600}})
}

fn storage_class() -> Value {
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fuzz-sc"},
    "provisioner": "example.com/fuzz", "parameters": {"type": "ssd"}, "reclaimPolicy": "Delete",
    "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": true, "mountOptions": ["ro"]})
}

/// Every path to a value in `v`.
fn paths(v: &Value, at: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                at.push(json!(k));
                paths(c, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                at.push(json!(i));
                paths(c, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn get_mut<'a>(v: &'a mut Value, path: &[Value]) -> Option<&'a mut Value> {
    let mut cur = v;
    for step in path {
        cur = match step {
            Value::String(k) => cur.get_mut(k.as_str())?,
            Value::Number(n) => cur.get_mut(n.as_u64()? as usize)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn deep(levels: usize) -> Value {
    let mut v = json!("leaf");
    for i in 0..levels {
        v = if i % 2 == 0 {
            json!([v])
        } else {
            json!({"a": v})
        };
    }
    v
}

/// A replacement value: wrong types, nulls, empties, huge, deep, bad names.
fn junk(rng: &mut StdRng) -> Value {
    match rng.random_range(0..14) {
        0 => Value::Null,
        1 => json!("x"),
        2 => json!(5),
        3 => json!(-1.5),
        4 => json!(true),
        5 => json!([]),
        6 => json!({}),
        7 => json!(""),
        8 => json!("x".repeat(70_000)),
        9 => deep(110),
        10 => json!({"bad key!": 1, "k": [1, "2"]}),
        11 => json!("Bad Name!"),
        12 => json!(["a", 1, null]),
        _ => json!(i64::MAX),
    }
}

fn mutate(rng: &mut StdRng, mut obj: Value) -> Value {
    let mut all = Vec::new();
    paths(&obj, &mut Vec::new(), &mut all);
    let n = rng.random_range(1..=3);
    for _ in 0..n {
        let path = all[rng.random_range(0..all.len())].clone();
        if path.is_empty() {
            continue;
        }
        if rng.random_bool(0.1) {
            // A patch directive of any shape beside a field (strategic
            // merge patches read them; other bodies must not trip on them).
            if let Some(Value::Object(m)) = get_mut(&mut obj, &path) {
                let field = m.keys().next().cloned().unwrap_or_default();
                let key = match rng.random_range(0..4) {
                    0 => "$patch".to_string(),
                    1 => "$retainKeys".to_string(),
                    2 => format!("$setElementOrder/{field}"),
                    _ => format!("$deleteFromPrimitiveList/{field}"),
                };
                let value = match rng.random_range(0..3) {
                    0 => json!("delete"),
                    1 => json!([{"$patch": "delete"}, {"name": 1}]),
                    _ => junk(rng),
                };
                m.insert(key, value);
                continue;
            }
        }
        if rng.random_bool(0.15) {
            let (last, parent) = path.split_last().unwrap();
            if let (Some(Value::Object(m)), Value::String(k)) = (get_mut(&mut obj, parent), last) {
                m.remove(k.as_str());
            }
            continue;
        }
        if let Some(slot) = get_mut(&mut obj, &path) {
            *slot = junk(rng);
        }
    }
    obj
}

fn json_patch(rng: &mut StdRng, obj: &Value) -> Value {
    let mut all = Vec::new();
    paths(obj, &mut Vec::new(), &mut all);
    let pointer = |p: &Vec<Value>| -> String {
        p.iter()
            .map(|s| match s {
                Value::String(k) => format!("/{}", k.replace('~', "~0").replace('/', "~1")),
                other => format!("/{other}"),
            })
            .collect()
    };
    let a = pointer(&all[rng.random_range(0..all.len())]);
    let b = pointer(&all[rng.random_range(0..all.len())]);
    match rng.random_range(0..7) {
        0 => json!([{"op": "replace", "path": a, "value": junk(rng)}]),
        1 => json!([{"op": "remove", "path": a}]),
        2 => json!([{"op": "copy", "from": "", "path": a}]),
        3 => json!([{"op": "copy", "from": b, "path": a}, {"op": "copy", "from": "", "path": b}]),
        4 => json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "1"}]),
        5 => json!([{"op": "bogus", "path": a}]),
        _ => json!({"not": "a list"}),
    }
}

struct Case {
    method: &'static str,
    uri: String,
    content_type: &'static str,
    body: Vec<u8>,
}

async fn send(app: &axum::Router, case: &Case) -> (u16, Vec<u8>) {
    let req = http::Request::builder()
        .method(case.method)
        .uri(&case.uri)
        .header("content-type", case.content_type)
        .body(Body::from(case.body.clone()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (code, body.to_vec())
}

/// A loopback server (kept alive by the caller) and its router, with the
/// namespace `fuzz` the cases write in.
async fn with_fuzz_namespace() -> (support::TestServer, axum::Router) {
    let server = support::TestServer::start_loopback().await;
    let app = server.loopback.clone().expect("loopback");
    let ns = Case {
        method: "POST",
        uri: "/api/v1/namespaces".into(),
        content_type: "application/json",
        body: br#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"fuzz"}}"#.to_vec(),
    };
    assert_eq!(send(&app, &ns).await.0, 201);
    (server, app)
}

/// A POST of the JSON `body` to `uri`.
fn post_json(uri: impl Into<String>, body: &Value) -> Case {
    Case {
        method: "POST",
        uri: uri.into(),
        content_type: "application/json",
        body: serde_json::to_vec(body).unwrap(),
    }
}

async fn get(app: &axum::Router, uri: &str) -> (u16, Vec<u8>) {
    let case = Case {
        method: "GET",
        uri: uri.to_string(),
        content_type: "",
        body: vec![],
    };
    send(app, &case).await
}

/// The stored object decodes as its type (`GET` then the typed decoder).
fn decodes(kind: &str, group: &str, body: &[u8]) -> Result<(), String> {
    match skiff_apiserver::resources::builtin().find_kind(group, kind) {
        Some(k) => k.typed.check(body),
        None => Ok(()),
    }
}

fn group_of(collection: &str) -> &'static str {
    for g in [
        "events.k8s.io",
        "apps",
        "batch",
        "coordination.k8s.io",
        "storage.k8s.io",
        "rbac.authorization.k8s.io",
        "apiregistration.k8s.io",
        "autoscaling",
    ] {
        if collection.starts_with(&format!("/apis/{g}/")) {
            return g;
        }
    }
    ""
}

#[tokio::test]
async fn hostile_writes_never_fail_the_server_or_poison_the_store() {
    let server = support::TestServer::start_loopback().await;
    let app = server.loopback.clone().expect("loopback");
    let seed: u64 = std::env::var("SKIFF_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(11);
    let cases: usize = std::env::var("SKIFF_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1500);
    let mut rng = StdRng::seed_from_u64(seed);
    let ns = Case {
        method: "POST",
        uri: "/api/v1/namespaces".into(),
        content_type: "application/json",
        body: br#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"fuzz"}}"#.to_vec(),
    };
    assert_eq!(send(&app, &ns).await.0, 201);
    let bases = bases();
    // Each kind's valid object exists, so updates and patches have a target.
    for (collection, obj) in &bases {
        let case = post_json(collection.to_string(), obj);
        let (code, body) = send(&app, &case).await;
        assert_eq!(
            code,
            201,
            "{collection}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    let bad_queries = [
        "",
        "",
        "",
        "?dryRun=Bogus",
        "?fieldValidation=Nope",
        "?fieldManager=",
        "?limit=abc",
        "?dryRun=All",
        "?fieldValidation=Strict",
        "?force=true",
    ];
    let mut counts = std::collections::BTreeMap::<u16, usize>::new();
    for i in 0..cases {
        let (collection, base) = &bases[rng.random_range(0..bases.len())];
        let name = base["metadata"]["name"].as_str().unwrap();
        let kind = base["kind"].as_str().unwrap();
        let group = group_of(collection);
        let item = format!("{collection}/{name}");
        let query = bad_queries[rng.random_range(0..bad_queries.len())];
        let mutated = mutate(&mut rng, base.clone());
        let case = match rng.random_range(0..9) {
            0 | 1 => {
                let mut body = mutated;
                if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.insert("name".into(), json!(format!("n{i}")));
                }
                post_json(format!("{collection}{query}"), &body)
            }
            2 => Case {
                method: "PUT",
                uri: format!("{item}{query}"),
                content_type: "application/json",
                body: serde_json::to_vec(&mutated).unwrap(),
            },
            3 => Case {
                method: "PATCH",
                uri: format!("{item}{query}"),
                content_type: "application/merge-patch+json",
                body: serde_json::to_vec(&mutated).unwrap(),
            },
            4 => Case {
                method: "PATCH",
                uri: format!("{item}{query}"),
                content_type: "application/strategic-merge-patch+json",
                body: serde_json::to_vec(&mutated).unwrap(),
            },
            5 => Case {
                method: "PATCH",
                uri: format!("{item}{query}"),
                content_type: "application/json-patch+json",
                body: serde_json::to_vec(&json_patch(&mut rng, base)).unwrap(),
            },
            6 => Case {
                method: "PATCH",
                uri: format!("{item}?fieldManager=fuzz&force=true"),
                content_type: "application/apply-patch+yaml",
                body: serde_json::to_vec(&mutated).unwrap(),
            },
            7 => Case {
                method: "PUT",
                uri: format!("{item}/status"),
                content_type: "application/json",
                body: serde_json::to_vec(&mutated).unwrap(),
            },
            _ => {
                let opts = json!({"kind": "DeleteOptions", "apiVersion": "v1",
                    "dryRun": [junk(&mut rng)], "gracePeriodSeconds": junk(&mut rng)});
                Case {
                    method: "DELETE",
                    uri: format!("{collection}{query}"),
                    content_type: "application/json",
                    body: serde_json::to_vec(&opts).unwrap(),
                }
            }
        };
        let before = get(&app, &item).await;
        let (code, body) = send(&app, &case).await;
        *counts.entry(code).or_default() += 1;
        let shown = || {
            format!(
                "{} {} -> {code}: {}",
                case.method,
                case.uri,
                String::from_utf8_lossy(&body[..body.len().min(600)])
            )
        };
        assert!(code < 500, "server error: {}", shown());
        if code >= 400 {
            let status: Value = serde_json::from_slice(&body)
                .unwrap_or_else(|_| panic!("not a Status: {}", shown()));
            assert_eq!(status["kind"], "Status", "{}", shown());
            assert_eq!(status["code"], code, "{}", shown());
            let after = get(&app, &item).await;
            assert_eq!(
                before,
                after,
                "a refused request changed {item}: {}",
                shown()
            );
        }
        // Whatever is stored now reads back and decodes as its type.
        let (code, now) = get(&app, &item).await;
        if code == 200 {
            decodes(kind, group, &now)
                .unwrap_or_else(|e| panic!("{item} no longer decodes ({e}) after {}", shown()));
        }
        // A deleted victim is put back for the next cases.
        if code == 404 {
            let restore = post_json(collection.to_string(), base);
            let _ = send(&app, &restore).await;
        }
    }
    // Every list still decodes item by item.
    for (collection, base) in &bases {
        let (code, body) = get(&app, collection).await;
        assert_eq!(code, 200, "{collection}");
        let list: Value = serde_json::from_slice(&body).unwrap();
        for item in list["items"].as_array().unwrap() {
            decodes(
                base["kind"].as_str().unwrap(),
                group_of(collection),
                &serde_json::to_vec(item).unwrap(),
            )
            .unwrap_or_else(|e| panic!("{collection}: an item does not decode: {e}"));
        }
    }
    eprintln!("fuzz seed {seed}: {cases} cases, answers by code: {counts:?}");
    assert!(
        counts.keys().any(|c| *c < 300) && counts.keys().any(|c| *c >= 400),
        "{counts:?}"
    );
}

/// The storage kinds' bodies, each refused in upstream's words (or, where
/// upstream takes it, stored and still served): wrong JSON types, huge
/// and negative quantities, 10k access modes, nesting, oversized maps.
/// A refusal stores nothing; whatever is stored decodes, lists, and
/// prints as a table.
#[tokio::test]
async fn hostile_storage_bodies_are_refused_in_upstreams_words() {
    let (_server, app) = with_fuzz_namespace().await;

    let pv = |f: &dyn Fn(&mut Value)| {
        let mut v = persistent_volume();
        v["metadata"]["name"] = json!("pv-x");
        f(&mut v);
        v
    };
    let pvc = |f: &dyn Fn(&mut Value)| {
        let mut v = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "claim-x"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}});
        f(&mut v);
        v
    };
    let sc = |f: &dyn Fn(&mut Value)| {
        let mut v = storage_class();
        v["metadata"]["name"] = json!("sc-x");
        f(&mut v);
        v
    };
    let nested = |levels: usize| -> Value {
        serde_json::from_str(&format!("{}{}", "[".repeat(levels), "]".repeat(levels))).unwrap()
    };
    let quantity = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
    let pv_decode = |detail: &str| {
        format!(
            "PersistentVolume in version \"v1\" cannot be handled as a PersistentVolume: {detail}"
        )
    };
    let pvc_decode = |detail: &str| {
        format!(
            "PersistentVolumeClaim in version \"v1\" cannot be handled as a PersistentVolumeClaim: {detail}"
        )
    };
    let sc_decode = |detail: &str| {
        format!("StorageClass in version \"v1\" cannot be handled as a StorageClass: {detail}")
    };
    let modes = "supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"";
    // (what, collection, body, code, the start of the message).
    let cases: Vec<(&str, &str, Value, u16, String)> = vec![
        (
            "a negative capacity",
            "/api/v1/persistentvolumes",
            pv(&|v| v["spec"]["capacity"]["storage"] = json!("-1Gi")),
            422,
            "PersistentVolume \"pv-x\" is invalid: [spec.capacity[storage]: Invalid value: -1073741824: must be a valid resource quantity, spec.capacity[storage]: Invalid value: \"-1Gi\": must be greater than zero]".into(),
        ),
        (
            "a capacity that is no quantity",
            "/api/v1/persistentvolumes",
            pv(&|v| v["spec"]["capacity"]["storage"] = json!("lots")),
            400,
            pv_decode(quantity),
        ),
        (
            "a capacity that is an object",
            "/api/v1/persistentvolumes",
            pv(&|v| v["spec"]["capacity"]["storage"] = json!({"a": 1})),
            400,
            pv_decode("json: cannot unmarshal object into Go struct field PersistentVolumeSpec.spec.capacity of type resource.Quantity"),
        ),
        (
            "capacity as a list",
            "/api/v1/persistentvolumes",
            pv(&|v| v["spec"]["capacity"] = json!(["1Gi"])),
            400,
            // Upstream names the type v1.ResourceList (Skiff's decoder
            // spells out the map), so only this much is compared.
            pv_decode("json: cannot unmarshal array into Go struct field PersistentVolumeSpec.spec.capacity of type "),
        ),
        (
            "1000 capacities",
            "/api/v1/persistentvolumes",
            pv(&|v| {
                v["spec"]["capacity"] = Value::Object(
                    (0..1000).map(|i| (format!("r{i}"), json!("1"))).collect(),
                )
            }),
            422,
            "PersistentVolume \"pv-x\" is invalid: spec.capacity: Unsupported value: core.ResourceList{".into(),
        ),
        (
            "access modes as a string",
            "/api/v1/persistentvolumes",
            pv(&|v| v["spec"]["accessModes"] = json!("ReadWriteOnce")),
            400,
            pv_decode("json: cannot unmarshal string into Go struct field PersistentVolumeSpec.spec.accessModes of type []string"),
        ),
        (
            "10k unsupported access modes",
            "/api/v1/persistentvolumes",
            pv(&|v| v["spec"]["accessModes"] = json!(vec!["Bogus"; 10_000])),
            422,
            format!("PersistentVolume \"pv-x\" is invalid: [spec.accessModes: Unsupported value: \"Bogus\": {modes}, "),
        ),
        (
            "a spec that is a list",
            "/api/v1/persistentvolumes",
            pv(&|v| v["spec"] = json!([])),
            400,
            pv_decode("json: cannot unmarshal array into Go struct field PersistentVolume.spec of type v1.PersistentVolumeSpec"),
        ),
        (
            "nested junk for node affinity",
            "/api/v1/persistentvolumes",
            pv(&|v| v["spec"]["nodeAffinity"] = nested(120)),
            400,
            pv_decode(""),
        ),
        (
            "a reclaim policy of junk",
            "/api/v1/persistentvolumes",
            pv(&|v| v["spec"]["persistentVolumeReclaimPolicy"] = json!("Shred")),
            422,
            "PersistentVolume \"pv-x\" is invalid: spec.persistentVolumeReclaimPolicy: Unsupported value: \"Shred\": supported values: \"Delete\", \"Recycle\", \"Retain\"".into(),
        ),
        (
            "a claim asking for nothing",
            "/api/v1/namespaces/fuzz/persistentvolumeclaims",
            pvc(&|v| v["spec"]["resources"]["requests"]["storage"] = json!("0")),
            422,
            "PersistentVolumeClaim \"claim-x\" is invalid: spec.resources[storage]: Invalid value: \"0\": must be greater than zero".into(),
        ),
        (
            "a claim asking for less than nothing",
            "/api/v1/namespaces/fuzz/persistentvolumeclaims",
            pvc(&|v| v["spec"]["resources"]["requests"]["storage"] = json!(-5)),
            422,
            "PersistentVolumeClaim \"claim-x\" is invalid: spec.resources[storage]: Invalid value: \"-5\": must be greater than zero".into(),
        ),
        (
            "a claim whose other request is junk",
            "/api/v1/namespaces/fuzz/persistentvolumeclaims",
            pvc(&|v| v["spec"]["resources"]["requests"]["cpu"] = json!("junk")),
            400,
            pvc_decode(quantity),
        ),
        (
            "a claim of 10k unsupported access modes",
            "/api/v1/namespaces/fuzz/persistentvolumeclaims",
            pvc(&|v| v["spec"]["accessModes"] = json!(vec!["Nope"; 10_000])),
            422,
            format!("PersistentVolumeClaim \"claim-x\" is invalid: [spec.accessModes: Unsupported value: \"Nope\": {modes}, "),
        ),
        (
            "a claim whose class is a number",
            "/api/v1/namespaces/fuzz/persistentvolumeclaims",
            pvc(&|v| v["spec"]["storageClassName"] = json!(5)),
            400,
            pvc_decode("json: cannot unmarshal number into Go struct field PersistentVolumeClaimSpec.spec.storageClassName of type string"),
        ),
        (
            "a claim whose spec is a string",
            "/api/v1/namespaces/fuzz/persistentvolumeclaims",
            pvc(&|v| v["spec"] = json!("x")),
            400,
            pvc_decode("json: cannot unmarshal string into Go struct field PersistentVolumeClaim.spec of type v1.PersistentVolumeClaimSpec"),
        ),
        (
            "a claim with nested junk for a data source",
            "/api/v1/namespaces/fuzz/persistentvolumeclaims",
            pvc(&|v| v["spec"]["dataSource"] = nested(120)),
            400,
            pvc_decode(""),
        ),
        (
            "a claim of an unknown volume mode",
            "/api/v1/namespaces/fuzz/persistentvolumeclaims",
            pvc(&|v| v["spec"]["volumeMode"] = json!("Raw")),
            422,
            "PersistentVolumeClaim \"claim-x\" is invalid: spec.volumeMode: Unsupported value: \"Raw\": supported values: \"Block\", \"Filesystem\"".into(),
        ),
        (
            "a class parameter that is a number",
            "/apis/storage.k8s.io/v1/storageclasses",
            sc(&|v| v["parameters"]["n"] = json!(5)),
            400,
            sc_decode("json: cannot unmarshal number into Go struct field StorageClass.parameters of type string"),
        ),
        (
            "600 class parameters",
            "/apis/storage.k8s.io/v1/storageclasses",
            sc(&|v| {
                v["parameters"] =
                    Value::Object((0..600).map(|i| (format!("k{i}"), json!("v"))).collect())
            }),
            422,
            "StorageClass.storage.k8s.io \"sc-x\" is invalid: parameters: Too long: may not be more than 512 bytes".into(),
        ),
        (
            "300 KiB of class parameters",
            "/apis/storage.k8s.io/v1/storageclasses",
            sc(&|v| v["parameters"]["big"] = json!("v".repeat(300 * 1024))),
            422,
            "StorageClass.storage.k8s.io \"sc-x\" is invalid: parameters: Too long: may not be more than 262144 bytes".into(),
        ),
        (
            "a provisioner that is a number",
            "/apis/storage.k8s.io/v1/storageclasses",
            sc(&|v| v["provisioner"] = json!(5)),
            400,
            sc_decode("json: cannot unmarshal number into Go struct field StorageClass.provisioner of type string"),
        ),
        (
            "no provisioner",
            "/apis/storage.k8s.io/v1/storageclasses",
            sc(&|v| v["provisioner"] = json!("")),
            422,
            "StorageClass.storage.k8s.io \"sc-x\" is invalid: provisioner: Required value".into(),
        ),
        (
            "nested junk for allowed topologies",
            "/apis/storage.k8s.io/v1/storageclasses",
            sc(&|v| v["allowedTopologies"] = nested(120)),
            400,
            sc_decode(""),
        ),
        (
            "volume expansion as a string",
            "/apis/storage.k8s.io/v1/storageclasses",
            sc(&|v| v["allowVolumeExpansion"] = json!("yes")),
            400,
            sc_decode("json: cannot unmarshal string into Go struct field StorageClass.allowVolumeExpansion of type bool"),
        ),
    ];
    for (what, collection, body, code, message) in cases {
        let name = body["metadata"]["name"].as_str().unwrap().to_string();
        let case = post_json(collection.to_string(), &body);
        let (got, answer) = send(&app, &case).await;
        let status: Value = serde_json::from_slice(&answer)
            .unwrap_or_else(|_| panic!("{what}: not JSON: {}", String::from_utf8_lossy(&answer)));
        let said = status["message"].as_str().unwrap_or_default();
        assert_eq!(got, code, "{what}: {said:.600}");
        assert_eq!(status["kind"], "Status", "{what}");
        assert_eq!(status["code"], code, "{what}");
        assert!(said.starts_with(&message), "{what}: {said:.600}");
        let (after, _) = get(&app, &format!("{collection}/{name}")).await;
        assert_eq!(after, 404, "{what}: the refused object was stored");
    }

    // What upstream takes is stored, and every reader copes with it.
    let taken: Vec<(&str, Value)> = vec![
        (
            "/api/v1/persistentvolumes",
            pv(&|v| {
                v["metadata"]["name"] = json!("pv-huge");
                v["spec"]["capacity"]["storage"] = json!("999999999999999999999Ei");
            }),
        ),
        (
            "/api/v1/persistentvolumes",
            pv(&|v| {
                v["metadata"]["name"] = json!("pv-googol");
                v["spec"]["capacity"]["storage"] = json!("1e100");
                v["spec"]["accessModes"] = json!(vec!["ReadWriteOnce"; 10_000]);
            }),
        ),
        (
            "/api/v1/namespaces/fuzz/persistentvolumeclaims",
            pvc(&|v| {
                v["metadata"]["name"] = json!("claim-googol");
                v["spec"]["resources"]["requests"]["storage"] = json!("1e100");
                v["spec"]["resources"]["limits"] = json!({"storage": "999999999999999999999Ei"});
            }),
        ),
        (
            "/apis/storage.k8s.io/v1/storageclasses",
            sc(&|v| v["mountOptions"] = json!(vec!["ro"; 10_000])),
        ),
    ];
    for (collection, body) in &taken {
        let case = post_json(collection.to_string(), body);
        let (code, answer) = send(&app, &case).await;
        assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
    }
    for (collection, kind, group) in [
        ("/api/v1/persistentvolumes", "PersistentVolume", ""),
        (
            "/api/v1/namespaces/fuzz/persistentvolumeclaims",
            "PersistentVolumeClaim",
            "",
        ),
        (
            "/apis/storage.k8s.io/v1/storageclasses",
            "StorageClass",
            "storage.k8s.io",
        ),
    ] {
        let (code, body) = get(&app, collection).await;
        assert_eq!(code, 200, "{collection}");
        let list: Value = serde_json::from_slice(&body).unwrap();
        for item in list["items"].as_array().unwrap() {
            decodes(kind, group, &serde_json::to_vec(item).unwrap())
                .unwrap_or_else(|e| panic!("{collection}: an item does not decode: {e}"));
        }
        // kubectl get's table.
        let req = http::Request::builder()
            .uri(collection)
            .header(
                "accept",
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            )
            .body(Body::empty())
            .unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{collection} as a table");
    }
}

/// Workload and Node bodies out of their fields' ranges or enums are a
/// 422 Invalid whose causes name upstream's field path (the probe's
/// findings: a Node's pod CIDR that is no CIDR, a Deployment strategy
/// type that is neither RollingUpdate nor Recreate, a negative
/// revisionHistoryLimit), and nothing is stored; a Node's pod CIDR may be
/// set once, never changed.
#[tokio::test]
async fn hostile_workload_and_node_bodies_are_refused_in_upstreams_words() {
    let server = support::TestServer::start_loopback().await;
    let app = server.loopback.clone().expect("loopback");
    let post = |uri: &str, body: &Value| post_json(uri, body);
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fuzz"}});
    assert_eq!(send(&app, &post("/api/v1/namespaces", &ns)).await.0, 201);
    let template = json!({"metadata": {"labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let apps = |kind: &str, name: &str, extra: Value| {
        let mut v = json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template.clone()}});
        for (k, val) in extra.as_object().unwrap() {
            v["spec"][k] = val.clone();
        }
        v
    };
    let node = |name: &str, spec: Value| json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec});
    let deployments = "/apis/apps/v1/namespaces/fuzz/deployments";
    // (what, collection, body, the field, its message).
    let cases: Vec<(&str, &str, Value, &str, &str)> = vec![
        (
            "a pod CIDR that is no CIDR",
            "/api/v1/nodes",
            node("n-cidr", json!({"podCIDR": "x"})),
            "spec.podCIDRs[0]",
            "Invalid value: \"x\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
        ),
        (
            "two pod CIDRs of one family",
            "/api/v1/nodes",
            node("n-two", json!({"podCIDRs": ["10.0.0.0/24", "10.1.0.0/24"]})),
            "spec.podCIDRs",
            "Invalid value: []string{\"10.0.0.0/24\", \"10.1.0.0/24\"}: may specify no more than one CIDR for each IP family",
        ),
        (
            "a strategy type that is neither",
            deployments,
            apps("Deployment", "d-type", json!({"strategy": {"type": "Foo"}})),
            "spec.strategy",
            "Unsupported value: apps.DeploymentStrategy{Type:\"Foo\", RollingUpdate:(*apps.RollingUpdateDeployment)(nil)}: supported values: \"Recreate\", \"RollingUpdate\"",
        ),
        (
            "rollingUpdate with Recreate",
            deployments,
            apps(
                "Deployment",
                "d-recreate",
                json!({"strategy": {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}}),
            ),
            "spec.strategy.rollingUpdate",
            "Forbidden: may not be specified when strategy `type` is 'Recreate'",
        ),
        (
            "maxSurge and maxUnavailable both 0",
            deployments,
            apps(
                "Deployment",
                "d-zero",
                json!({"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}}),
            ),
            "spec.strategy.rollingUpdate.maxUnavailable",
            "Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0",
        ),
        (
            "a Deployment's negative revisionHistoryLimit",
            deployments,
            apps("Deployment", "d-history", json!({"revisionHistoryLimit": -1})),
            "spec.revisionHistoryLimit",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "a StatefulSet's negative revisionHistoryLimit",
            "/apis/apps/v1/namespaces/fuzz/statefulsets",
            apps("StatefulSet", "s-history", json!({"revisionHistoryLimit": -1})),
            "spec.revisionHistoryLimit",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "a DaemonSet's negative revisionHistoryLimit",
            "/apis/apps/v1/namespaces/fuzz/daemonsets",
            apps("DaemonSet", "ds-history", json!({"revisionHistoryLimit": -1})),
            "spec.revisionHistoryLimit",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "a Job's negative backoffLimit",
            "/apis/batch/v1/namespaces/fuzz/jobs",
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j-backoff"},
                "spec": {"backoffLimit": -1, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}]}}}}),
            "spec.backoffLimit",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "a volume mount naming no volume",
            "/api/v1/namespaces/fuzz/pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p-mount"},
                "spec": {"containers": [{"name": "c", "image": "busybox",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}}),
            "spec.containers[0].volumeMounts[0].name",
            "Not found: \"data\"",
        ),
        (
            "an externalTrafficPolicy that is neither",
            "/api/v1/namespaces/fuzz/services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s-policy"},
                "spec": {"type": "NodePort", "externalTrafficPolicy": "Nearest",
                "ports": [{"port": 80}]}}),
            "spec.externalTrafficPolicy",
            "Unsupported value: \"Nearest\": supported values: \"Cluster\", \"Local\"",
        ),
        (
            "a TLS Secret without its key",
            "/api/v1/namespaces/fuzz/secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls-x"},
                "type": "kubernetes.io/tls", "data": {"tls.crt": ""}}),
            "data[tls.key]",
            "Required value",
        ),
    ];
    for (what, collection, body, field, message) in cases {
        let name = body["metadata"]["name"].as_str().unwrap().to_string();
        let (got, answer) = send(&app, &post(collection, &body)).await;
        let status: Value = serde_json::from_slice(&answer)
            .unwrap_or_else(|_| panic!("{what}: not JSON: {}", String::from_utf8_lossy(&answer)));
        let said = status["message"].as_str().unwrap_or_default();
        assert_eq!(got, 422, "{what}: {said:.600}");
        assert_eq!(status["reason"], "Invalid", "{what}");
        assert!(
            said.contains(&format!("{field}: {message}")),
            "{what}: {said:.600}"
        );
        let causes = status["details"]["causes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            causes
                .iter()
                .any(|c| c["field"] == field && c["message"] == message),
            "{what}: {causes:?}"
        );
        let (after, _) = get(&app, &format!("{collection}/{name}")).await;
        assert_eq!(after, 404, "{what}: the refused object was stored");
    }

    // podCIDR is authoritative and leads podCIDRs; once set it stays.
    let body = node(
        "n-set",
        json!({"podCIDR": "10.0.0.0/24", "podCIDRs": ["10.9.0.0/24"]}),
    );
    let (code, answer) = send(&app, &post("/api/v1/nodes", &body)).await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
    let stored: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(stored["spec"]["podCIDRs"], json!(["10.0.0.0/24"]));
    let patch = Case {
        method: "PATCH",
        uri: "/api/v1/nodes/n-set".into(),
        content_type: "application/merge-patch+json",
        body: br#"{"spec":{"podCIDR":"10.1.0.0/24","podCIDRs":["10.1.0.0/24"]}}"#.to_vec(),
    };
    let (code, answer) = send(&app, &patch).await;
    let status: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "Node \"n-set\" is invalid: spec.podCIDRs: Forbidden: node updates may not change podCIDR except from \"\" to valid"
    );
    // From none to one is how the controller manager assigns it.
    let body = node("n-later", json!({}));
    assert_eq!(send(&app, &post("/api/v1/nodes", &body)).await.0, 201);
    let assign = Case {
        method: "PATCH",
        uri: "/api/v1/nodes/n-later".into(),
        content_type: "application/merge-patch+json",
        body: br#"{"spec":{"podCIDR":"10.2.0.0/24","podCIDRs":["10.2.0.0/24"]}}"#.to_vec(),
    };
    let (code, answer) = send(&app, &assign).await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&answer));
}

/// Quantities whose exponents sit at i32's limits are refused or stored,
/// never an overflow (a panic in debug builds, a wrap in release ones).
#[tokio::test]
async fn quantities_with_exponents_at_the_i32_limits_are_refused_or_stored() {
    let server = support::TestServer::start_loopback().await;
    let app = server.loopback.clone().expect("loopback");
    for q in ["0.5e-2147483648", "1e2147483647"] {
        let mut body = persistent_volume();
        body["spec"]["capacity"]["storage"] = json!(q);
        let case = post_json("/api/v1/persistentvolumes", &body);
        let (code, _) = send(&app, &case).await;
        assert!(code < 500, "{q}: {code}");
        let _ = send(
            &app,
            &Case {
                method: "DELETE",
                uri: "/api/v1/persistentvolumes/fuzz-pv".into(),
                content_type: "application/json",
                body: vec![],
            },
        )
        .await;
    }
}

/// The collection URL of `r` in namespace `fuzz` (cluster-scoped: none).
fn collection_of(r: &skiff_apiserver::catalog::Resource) -> String {
    let base = if r.group.is_empty() {
        format!("/api/{}", r.version)
    } else {
        format!("/apis/{}/{}", r.group, r.version)
    };
    if r.namespaced {
        format!("{base}/namespaces/fuzz/{}", r.plural)
    } else {
        format!("{base}/{}", r.plural)
    }
}

/// Every served kind, whatever else its body carries, refuses a metadata
/// field of the wrong JSON type (`metadata.name` included, also beside a
/// `generateName`) and a number beyond float64 anywhere in the body, with
/// upstream's 400, and creates nothing. The kinds with a valid object in
/// [`bases`] are also updated and patched with those bodies, which change
/// nothing.
#[tokio::test]
async fn every_kind_refuses_mistyped_metadata_and_numbers_beyond_float64() {
    let (_server, app) = with_fuzz_namespace().await;
    // (metadata, what Go's decoder says after "cannot unmarshal ").
    let metadata = [
        (
            json!({"name": 5}),
            "number into Go struct field ObjectMeta.metadata.name of type string",
        ),
        (
            json!({"name": {"a": 1}, "generateName": "g-"}),
            "object into Go struct field ObjectMeta.metadata.name of type string",
        ),
        (
            json!({"generateName": true}),
            "bool into Go struct field ObjectMeta.metadata.generateName of type string",
        ),
        (
            json!({"name": "m", "namespace": ["fuzz"]}),
            "array into Go struct field ObjectMeta.metadata.namespace of type string",
        ),
        (
            json!({"name": "m", "uid": 7}),
            "number into Go struct field ObjectMeta.metadata.uid of type string",
        ),
        (
            json!({"name": "m", "resourceVersion": false}),
            "bool into Go struct field ObjectMeta.metadata.resourceVersion of type string",
        ),
        (
            json!({"name": "m", "labels": ["a"]}),
            "array into Go struct field ObjectMeta.metadata.labels of type map[string]string",
        ),
        (
            json!({"name": "m", "finalizers": "a"}),
            "string into Go struct field ObjectMeta.metadata.finalizers of type []string",
        ),
    ];
    let mut checked = Vec::new();
    for r in skiff_apiserver::resources::builtin()
        .builtin()
        .iter()
        .copied()
    {
        let collection = collection_of(r);
        let list_before = get(&app, &collection).await;
        if list_before.0 != 200 {
            continue; // not listed (reviews): no store to change
        }
        let served = format!(
            "{} in version \"{}\" cannot be handled as a {}: json: cannot unmarshal",
            r.kind, r.version, r.kind
        );
        let mut bodies: Vec<(Value, String)> = metadata
            .iter()
            .map(|(m, why)| {
                (
                    json!({"apiVersion": r.group_version(), "kind": r.kind, "metadata": m}),
                    format!("{served} {why}"),
                )
            })
            .collect();
        bodies.push((
            json!({"apiVersion": r.group_version(), "kind": r.kind, "metadata": "m"}),
            format!(
                "{served} string into Go struct field {}.metadata of type v1.ObjectMeta",
                r.kind
            ),
        ));
        let mut refused = 0;
        for (body, want) in &bodies {
            let case = post_json(collection.clone(), body);
            let (code, answer) = send(&app, &case).await;
            if code == 405 {
                break; // not created through this URL (componentstatuses)
            }
            let status: Value = serde_json::from_slice(&answer).unwrap_or_default();
            assert_eq!(
                (code, status["message"].as_str().unwrap_or_default()),
                (400, want.as_str()),
                "POST {collection} {body}"
            );
            refused += 1;
        }
        // A number beyond float64 in a field the type does not have.
        let huge = format!(
            r#"{{"apiVersion":"{}","kind":"{}","metadata":{{"name":"huge"}},"zz":{{"a":[1e400]}}}}"#,
            r.group_version(),
            r.kind
        );
        let case = Case {
            method: "POST",
            uri: collection.clone(),
            content_type: "application/json",
            body: huge.into_bytes(),
        };
        let (code, answer) = send(&app, &case).await;
        if code != 405 {
            let status: Value = serde_json::from_slice(&answer).unwrap_or_default();
            assert_eq!(
                (code, status["message"].as_str().unwrap_or_default()),
                (
                    400,
                    format!("{served} number 1e400 into Go value of type float64").as_str()
                ),
                "POST {collection} with 1e400"
            );
        }
        // The items, not the list's resourceVersion: that is the store's
        // revision, which any write in the cluster moves (a controller's, a
        // lease's).
        assert_eq!(
            without_status(&get(&app, &collection).await),
            without_status(&list_before),
            "{collection}: a refused create changed the collection"
        );
        if refused > 0 {
            checked.push(r.plural);
        }
    }
    assert!(
        checked.len() > 40,
        "only {} kinds checked: {checked:?}",
        checked.len()
    );

    // Updates and patches of existing objects change nothing either
    // (namespaced kinds: custom resources and APIServices are registered
    // process-wide, and the other tests of this file create the same).
    for (collection, base) in bases() {
        if !collection.contains("/namespaces/") {
            continue;
        }
        let create = post_json(collection.to_string(), &base);
        assert_eq!(send(&app, &create).await.0, 201, "{collection}");
        let item = format!(
            "{collection}/{}",
            base["metadata"]["name"].as_str().unwrap()
        );
        let before = get(&app, &item).await;
        let mut named = base.clone();
        named["metadata"]["name"] = json!(5);
        let mut huge = serde_json::to_string(&base).unwrap();
        huge.insert_str(huge.len() - 1, r#","zz":-1e999"#);
        let cases = [
            (
                "PUT",
                "application/json",
                serde_json::to_vec(&named).unwrap(),
            ),
            ("PUT", "application/json", huge.clone().into_bytes()),
            (
                "PATCH",
                "application/merge-patch+json",
                br#"{"metadata":{"labels":{"a":1}}}"#.to_vec(),
            ),
            (
                "PATCH",
                "application/merge-patch+json",
                br#"{"metadata":{"annotations":{"a":"b"}},"zz":1e400}"#.to_vec(),
            ),
            (
                "PATCH",
                "application/strategic-merge-patch+json",
                br#"{"metadata":{"name":[1]}}"#.to_vec(),
            ),
            (
                "PATCH",
                "application/json-patch+json",
                br#"[{"op":"add","path":"/metadata/annotations","value":{"a":1e400}}]"#.to_vec(),
            ),
        ];
        for (method, content_type, body) in cases {
            let case = Case {
                method,
                uri: item.clone(),
                content_type,
                body: body.clone(),
            };
            let (code, answer) = send(&app, &case).await;
            // A kind upstream serves without patch strategies: 415.
            let smp = content_type == "application/strategic-merge-patch+json";
            assert!(
                code == 400 || (smp && code == 415),
                "{method} {item} {}: {}",
                String::from_utf8_lossy(&body),
                String::from_utf8_lossy(&answer)
            );
            assert_eq!(
                without_status(&get(&app, &item).await),
                without_status(&before),
                "{method} {item} changed it"
            );
        }
    }
}

/// An answer's object without what controllers write beside the test
/// (status, and so resourceVersion): a CustomResourceDefinition is
/// established while the test runs.
fn without_status((code, body): &(u16, Vec<u8>)) -> (u16, Value) {
    let mut obj: Value = serde_json::from_slice(body).unwrap_or_default();
    if let Some(o) = obj.as_object_mut() {
        o.remove("status");
    }
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    (*code, obj)
}

/// A request upstream refuses before doing anything is refused here too
/// and changes nothing: strategic-merge directives of the wrong shape, a
/// DELETE whose body is another kind, an `Accept` naming only a Table
/// version not served; and a patch that puts a cluster-scoped object in
/// a namespace has the namespace dropped, as upstream's BeforeUpdate does.
#[tokio::test]
async fn requests_upstream_refuses_change_nothing() {
    let server = support::TestServer::start_loopback().await;
    let app = server.loopback.clone().expect("loopback");
    let post = |uri: &str, body: Value| post_json(uri, &body);
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "spec": {"podCIDR": "10.9.0.0/24", "podCIDRs": ["10.9.0.0/24"],
                 "taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoExecute"}]}});
    assert_eq!(send(&app, &post("/api/v1/nodes", node)).await.0, 201);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "finalizers": ["example.com/x"]}, "data": {"a": "b"}});
    assert_eq!(
        send(&app, &post("/api/v1/namespaces/default/configmaps", cm))
            .await
            .0,
        201
    );
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d"}, "spec": {"replicas": 2,
        "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}},
                     "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    for (uri, obj) in [
        ("/apis/apps/v1/namespaces/default/deployments", deployment),
        ("/api/v1/namespaces/default/pods", pod),
    ] {
        let (code, answer) = send(&app, &post(uri, obj)).await;
        assert_eq!(code, 201, "{uri}: {}", String::from_utf8_lossy(&answer));
    }
    let smp = "application/strategic-merge-patch+json";
    let refused: Vec<(&str, &str, &str, Value, &str)> = vec![
        (
            "PATCH",
            "/api/v1/nodes/n1",
            smp,
            json!({"spec": {"$deleteFromPrimitiveList/podCIDRs": "10.9.0.0/24"}}),
            "invalid patch format of primitive list",
        ),
        (
            "PATCH",
            "/api/v1/nodes/n1",
            smp,
            json!({"spec": {"$setElementOrder/taints": "a"}}),
            "invalid patch format of setElementOrder list",
        ),
        (
            "PATCH",
            "/api/v1/nodes/n1",
            smp,
            json!({"spec": {"$setElementOrder/taints": [{"key": "b"}, {"key": "a"}]}}),
            "invalid patch format of setElementOrder list",
        ),
        (
            "PATCH",
            "/api/v1/nodes/n1",
            smp,
            json!({"spec": {"taints": [{"$patch": "delete", "effect": "NoSchedule"}]}}),
            "is not a list merged by key",
        ),
        (
            "PATCH",
            "/api/v1/nodes/n1",
            smp,
            json!({"spec": {"taints": [{"$patch": "delete", "key": "a"}]}}),
            "is not a list merged by key",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/c",
            smp,
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": {"x": 1}}}),
            "invalid patch format of primitive list",
        ),
        (
            "DELETE",
            "/api/v1/namespaces/default/configmaps/c",
            "application/json",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "c"}}),
            "no kind \"Pod\" is registered for version \"v1\"",
        ),
        (
            "DELETE",
            "/api/v1/namespaces/default/configmaps/c",
            "application/json",
            json!({"apiVersion": "meta.k8s.io/v1", "kind": "ListOptions"}),
            "decoded object cannot be converted to DeleteOptions",
        ),
        (
            "DELETE",
            "/api/v1/nodes/n1",
            "application/json",
            json!({"apiVersion": "v1", "kind": "Node", "gracePeriodSeconds": 0}),
            "no kind \"Node\" is registered",
        ),
        // Go's decoder reads `Kind` as kind.
        (
            "DELETE",
            "/api/v1/namespaces/default/configmaps/c",
            "application/json",
            json!({"apiVersion": "v1", "kind": "DeleteOptions", "Kind": "ConfigMap"}),
            "no kind \"ConfigMap\" is registered",
        ),
        (
            "DELETE",
            "/api/v1/namespaces/default/configmaps/c",
            "application/json",
            json!({"apiVersion": "a/b/c", "kind": "DeleteOptions"}),
            "unexpected GroupVersion string: a/b/c",
        ),
        (
            "DELETE",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            json!({"KIND": 5}),
            "cannot unmarshal number into Go struct field .kind of type string",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "Kind": "Secret", "metadata": {"name": "k"}}),
            "the kind in the data (Secret) does not match the expected kind (ConfigMap)",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            json!({"APIVERSION": "apps/v1", "metadata": {"name": "k"}}),
            "the API version in the data (apps/v1) does not match",
        ),
        // Subresource bodies are typed too.
        (
            "PUT",
            "/apis/apps/v1/namespaces/default/deployments/d/scale",
            "application/json",
            json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                   "metadata": {"name": "d", "namespace": "default"}, "spec": {"replicas": "3"}}),
            "Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal string into Go struct field ScaleSpec.spec.replicas of type int32",
        ),
        (
            "PATCH",
            "/apis/apps/v1/namespaces/default/deployments/d/scale",
            "application/merge-patch+json",
            json!({"metadata": {"labels": {"a": 5}}, "spec": {"replicas": 4}}),
            "cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/pods/p/binding",
            "application/json",
            json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": 5},
                   "target": {"kind": "Node", "name": "n1"}}),
            "Binding in version \"v1\" cannot be handled as a Binding: json: cannot unmarshal number into Go struct field ObjectMeta.metadata.name of type string",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/pods/p/binding",
            "application/json",
            json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
                   "target": {"kind": 5, "name": "n1"}}),
            "cannot unmarshal number into Go struct field ObjectReference.target.kind of type string",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/pods/p/eviction",
            "application/json",
            json!({"apiVersion": "policy/v1", "kind": "Eviction",
                   "metadata": {"name": "p", "labels": {"a": 5}}}),
            "Eviction in version \"v1\" cannot be handled as a Eviction",
        ),
    ];
    for (method, uri, content_type, body, want) in refused {
        // What the request would change: the object, or the subresource's
        // parent.
        let target = ["/scale", "/binding", "/eviction"]
            .iter()
            .find_map(|sub| uri.strip_suffix(sub))
            .unwrap_or(uri);
        let before = get(&app, target).await;
        let case = Case {
            method,
            uri: uri.into(),
            content_type,
            body: serde_json::to_vec(&body).unwrap(),
        };
        let (code, answer) = send(&app, &case).await;
        let status: Value = serde_json::from_slice(&answer).unwrap_or_default();
        assert_eq!(code, 400, "{method} {uri} {body}: {status}");
        assert_eq!(status["reason"], "BadRequest", "{status}");
        assert!(
            status["message"]
                .as_str()
                .unwrap_or_default()
                .contains(want),
            "{method} {uri} {body}: {status}"
        );
        assert_eq!(
            get(&app, target).await,
            before,
            "{method} {uri} {body} changed it"
        );
    }
    // A well-formed delete-by-key still works on a list merged by key.
    let patch = Case {
        method: "PATCH",
        uri: "/api/v1/namespaces/default/configmaps/c".into(),
        content_type: smp,
        body: br#"{"metadata":{"$deleteFromPrimitiveList/finalizers":["example.com/x"]}}"#.to_vec(),
    };
    let (code, answer) = send(&app, &patch).await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&answer));
    let patched: Value = serde_json::from_slice(&answer).unwrap();
    let left = patched["metadata"]["finalizers"].as_array().cloned();
    assert!(left.unwrap_or_default().is_empty(), "{patched}");

    // Accept: only a Table version we do not serve is 406; with a
    // fallback the object comes back; a served Table version is a Table.
    let accepts = [
        ("application/json;as=Table;v=v2;g=meta.k8s.io", 406, None),
        ("application/json;as=Table;v=v1;g=example.com", 406, None),
        (
            "application/json;as=Table;v=v2;g=meta.k8s.io,application/json",
            200,
            Some("ConfigMap"),
        ),
        (
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            200,
            Some("Table"),
        ),
        (
            "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
            200,
            Some("Table"),
        ),
    ];
    for (accept, want_code, want_kind) in accepts {
        for uri in [
            "/api/v1/namespaces/default/configmaps/c",
            "/api/v1/namespaces/default/configmaps",
        ] {
            let req = http::Request::builder()
                .uri(uri)
                .header("accept", accept)
                .body(Body::empty())
                .unwrap();
            let resp = app.clone().oneshot(req).await.unwrap();
            let code = resp.status().as_u16();
            let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
                .await
                .unwrap();
            let answer: Value = serde_json::from_slice(&body).unwrap_or_default();
            assert_eq!(code, want_code, "{uri} Accept {accept}: {answer}");
            match want_kind {
                None => assert_eq!(answer["reason"], "NotAcceptable", "{answer}"),
                Some("ConfigMap") => assert!(
                    matches!(answer["kind"].as_str(), Some("ConfigMap" | "ConfigMapList")),
                    "{answer}"
                ),
                Some(kind) => assert_eq!(answer["kind"], kind, "{uri} Accept {accept}"),
            }
        }
    }

    // A repeated key whose first value has the wrong type is refused, as
    // Go's decoder reads every one (the tree keeps only the last).
    let repeated: [(&str, &str, &str, &str); 3] = [
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup","labels":{"a":5},"labels":{"a":"b"}}}"#,
            "cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup","generation":"x","generation":1}}"#,
            "cannot unmarshal string into Go struct field ObjectMeta.metadata.generation of type int64",
        ),
        (
            "PUT",
            "/api/v1/namespaces/default/configmaps/c",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":7,"name":"c","namespace":"default"},"data":{"z":"z"}}"#,
            "cannot unmarshal number into Go struct field ObjectMeta.metadata.name of type string",
        ),
    ];
    for (method, uri, body, want) in repeated {
        let before = get(&app, "/api/v1/namespaces/default/configmaps").await;
        let case = Case {
            method,
            uri: uri.into(),
            content_type: "application/json",
            body: body.as_bytes().to_vec(),
        };
        let (code, answer) = send(&app, &case).await;
        let status: Value = serde_json::from_slice(&answer).unwrap_or_default();
        assert_eq!(code, 400, "{method} {uri} {body}: {status}");
        assert!(
            status["message"]
                .as_str()
                .unwrap_or_default()
                .contains(want),
            "{method} {uri} {body}: {status}"
        );
        assert_eq!(
            get(&app, "/api/v1/namespaces/default/configmaps").await,
            before,
            "{method} {uri} {body} changed the configmaps"
        );
    }

    // An update that changes nothing writes nothing: the resourceVersion
    // stays (upstream's GuaranteedUpdate); a change still writes.
    let uri = "/api/v1/namespaces/default/configmaps/c";
    let (_, read) = get(&app, uri).await;
    let read: Value = serde_json::from_slice(&read).unwrap();
    let rv = read["metadata"]["resourceVersion"].clone();
    let noops = [
        ("PATCH", "application/merge-patch+json", b"{}".to_vec()),
        ("PATCH", smp, br#"{"data":{"a":"b"}}"#.to_vec()),
        (
            "PUT",
            "application/json",
            serde_json::to_vec(&read).unwrap(),
        ),
    ];
    for (method, content_type, body) in noops {
        let case = Case {
            method,
            uri: uri.into(),
            content_type,
            body,
        };
        let (code, answer) = send(&app, &case).await;
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(code, 200, "{method} {content_type}: {answer}");
        assert_eq!(
            answer["metadata"]["resourceVersion"], rv,
            "{method} {content_type}"
        );
    }
    let change = Case {
        method: "PATCH",
        uri: uri.into(),
        content_type: "application/merge-patch+json",
        body: br#"{"data":{"a":"c"}}"#.to_vec(),
    };
    let (code, answer) = send(&app, &change).await;
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(code, 200, "{answer}");
    assert_ne!(answer["metadata"]["resourceVersion"], rv);

    // managedFields that do not decode are never stored (a create keeps
    // none, an update the stored ones), so server-side apply keeps working.
    let bogus = json!([{"manager": "m", "operation": "Bogus", "apiVersion": "v1",
        "fieldsType": "FieldsV1", "fieldsV1": {}}]);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "mf", "managedFields": bogus.clone()}, "data": {"a": "b"}});
    let (code, answer) = send(&app, &post("/api/v1/namespaces/default/configmaps", cm)).await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
    let uri = "/api/v1/namespaces/default/configmaps/mf";
    for fields_v1 in [json!(5), json!("x"), json!({})] {
        let mut entry = bogus.clone();
        entry[0]["fieldsV1"] = fields_v1;
        let case = Case {
            method: "PATCH",
            uri: uri.into(),
            content_type: "application/merge-patch+json",
            body: serde_json::to_vec(&json!({"metadata": {"managedFields": entry}})).unwrap(),
        };
        let (code, answer) = send(&app, &case).await;
        assert!(
            code == 200 || code == 400,
            "{}",
            String::from_utf8_lossy(&answer)
        );
        let (_, now) = get(&app, uri).await;
        let now: Value = serde_json::from_slice(&now).unwrap();
        let kept = now["metadata"]["managedFields"].to_string();
        assert!(!kept.contains("Bogus"), "{now}");
    }
    let apply = Case {
        method: "PATCH",
        uri: format!("{uri}?fieldManager=z"),
        content_type: "application/apply-patch+yaml",
        body:
            br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"mf"},"data":{"q":"1"}}"#
                .to_vec(),
    };
    let (code, answer) = send(&app, &apply).await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&answer));

    // A cluster-scoped object does not move into a namespace: the
    // namespace a patch or update gives it is dropped.
    for (content_type, body) in [
        (
            "application/merge-patch+json",
            json!({"metadata": {"namespace": "default"}}),
        ),
        (
            "application/json-patch+json",
            json!([{"op": "add", "path": "/metadata/namespace", "value": "default"}]),
        ),
    ] {
        let case = Case {
            method: "PATCH",
            uri: "/api/v1/nodes/n1".into(),
            content_type,
            body: serde_json::to_vec(&body).unwrap(),
        };
        let (code, answer) = send(&app, &case).await;
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&answer));
        let (_, now) = get(&app, "/api/v1/nodes/n1").await;
        let now: Value = serde_json::from_slice(&now).unwrap();
        assert!(now["metadata"].get("namespace").is_none(), "{now}");
    }
    let (_, now) = get(&app, "/api/v1/nodes/n1").await;
    let mut node: Value = serde_json::from_slice(&now).unwrap();
    node["metadata"]["namespace"] = json!("kube-system");
    let put = Case {
        method: "PUT",
        uri: "/api/v1/nodes/n1".into(),
        content_type: "application/json",
        body: serde_json::to_vec(&node).unwrap(),
    };
    let (code, answer) = send(&app, &put).await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&answer));
    let (_, now) = get(&app, "/api/v1/nodes/n1").await;
    let now: Value = serde_json::from_slice(&now).unwrap();
    assert!(now["metadata"].get("namespace").is_none(), "{now}");
}
