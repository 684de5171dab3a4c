//! Unit tests of the protobuf body decoder: bodies built the way Go's
//! generated marshallers write them (every non-pointer field present),
//! checked against the JSON kubectl would have sent. The end-to-end judge
//! is real kubectl in `tests/kubectl_protobuf.rs`.

use prost::Message;
use prost_reflect::{DynamicMessage, MapKey, Value as Field};
use serde_json::json;

use super::*;

fn msg(name: &str) -> DynamicMessage {
    DynamicMessage::new(
        pool()
            .get_message_by_name(name)
            .unwrap_or_else(|| panic!("{name} in the pool")),
    )
}

fn with(mut m: DynamicMessage, fields: Vec<(&str, Field)>) -> DynamicMessage {
    for (name, value) in fields {
        m.set_field_by_name(name, value);
    }
    m
}

fn s(v: &str) -> Field {
    Field::String(v.into())
}

/// The envelope around `object`, as client-go's protobuf serializer
/// writes it.
fn body(api_version: &str, kind: &str, object: &DynamicMessage) -> Vec<u8> {
    let type_meta = with(
        msg("k8s.io.apimachinery.pkg.runtime.TypeMeta"),
        vec![("apiVersion", s(api_version)), ("kind", s(kind))],
    );
    let unknown = with(
        msg(UNKNOWN),
        vec![
            ("typeMeta", Field::Message(type_meta)),
            ("raw", Field::Bytes(object.encode_to_vec().into())),
            ("contentEncoding", s("")),
            ("contentType", s("")),
        ],
    );
    let mut out = MAGIC.to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

/// ObjectMeta as Go writes a fresh one: strings empty, zero time as an
/// empty message, generation 0.
fn meta(name: &str, namespace: &str) -> DynamicMessage {
    with(
        msg("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
        vec![
            ("name", s(name)),
            ("generateName", s("")),
            ("namespace", s(namespace)),
            ("uid", s("")),
            ("resourceVersion", s("")),
            ("generation", Field::I64(0)),
            ("creationTimestamp", Field::Message(msg(TIME))),
        ],
    )
}

#[test]
fn a_namespace_reads_as_kubectl_would_send_it_in_json() {
    let ns = with(
        msg("k8s.io.api.core.v1.Namespace"),
        vec![
            ("metadata", Field::Message(meta("demo", ""))),
            (
                "spec",
                Field::Message(msg("k8s.io.api.core.v1.NamespaceSpec")),
            ),
            (
                "status",
                Field::Message(with(
                    msg("k8s.io.api.core.v1.NamespaceStatus"),
                    vec![("phase", s(""))],
                )),
            ),
        ],
    );
    assert_eq!(
        to_json(&body("v1", "Namespace", &ns)).unwrap(),
        json!({"kind": "Namespace", "apiVersion": "v1",
               "metadata": {"name": "demo"}, "spec": {}, "status": {}})
    );
}

#[test]
fn a_deployment_keeps_zero_replicas_quantities_ports_and_times() {
    let requests = Field::Map(
        [(
            MapKey::String("cpu".into()),
            Field::Message(with(msg(QUANTITY), vec![("string", s("100m"))])),
        )]
        .into(),
    );
    let resources = with(
        msg("k8s.io.api.core.v1.ResourceRequirements"),
        vec![("requests", requests)],
    );
    let probe_port = with(
        msg(INT_OR_STRING),
        vec![
            ("type", Field::I64(1)),
            ("strVal", s("http")),
            ("intVal", Field::I32(0)),
        ],
    );
    let http_get = with(
        msg("k8s.io.api.core.v1.HTTPGetAction"),
        vec![
            ("path", s("/healthz")),
            ("port", Field::Message(probe_port)),
        ],
    );
    let handler = with(
        msg("k8s.io.api.core.v1.ProbeHandler"),
        vec![("httpGet", Field::Message(http_get))],
    );
    let probe = with(
        msg("k8s.io.api.core.v1.Probe"),
        vec![
            ("handler", Field::Message(handler)),
            ("periodSeconds", Field::I32(5)),
        ],
    );
    let container = with(
        msg("k8s.io.api.core.v1.Container"),
        vec![
            ("name", s("web")),
            ("image", s("nginx")),
            ("imagePullPolicy", s("")),
            ("resources", Field::Message(resources)),
            ("readinessProbe", Field::Message(probe)),
            ("args", Field::List(vec![])),
        ],
    );
    let pod_spec = with(
        msg("k8s.io.api.core.v1.PodSpec"),
        vec![("containers", Field::List(vec![Field::Message(container)]))],
    );
    let template = with(
        msg("k8s.io.api.core.v1.PodTemplateSpec"),
        vec![("spec", Field::Message(pod_spec))],
    );
    let labels = Field::Map([(MapKey::String("app".into()), s("web"))].into());
    let selector = with(
        msg("k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector"),
        vec![("matchLabels", labels)],
    );
    let spec = with(
        msg("k8s.io.api.apps.v1.DeploymentSpec"),
        vec![
            ("replicas", Field::I32(0)),
            ("selector", Field::Message(selector)),
            ("template", Field::Message(template)),
        ],
    );
    let mut metadata = meta("web", "default");
    metadata.set_field_by_name(
        "creationTimestamp",
        Field::Message(with(
            msg(TIME),
            vec![
                ("seconds", Field::I64(1_700_000_000)),
                ("nanos", Field::I32(5)),
            ],
        )),
    );
    let deployment = with(
        msg("k8s.io.api.apps.v1.Deployment"),
        vec![
            ("metadata", Field::Message(metadata)),
            ("spec", Field::Message(spec)),
        ],
    );
    let got = to_json(&body("apps/v1", "Deployment", &deployment)).unwrap();
    assert_eq!(
        got,
        json!({"kind": "Deployment", "apiVersion": "apps/v1",
            "metadata": {"name": "web", "namespace": "default",
                         "creationTimestamp": "2023-11-14T22:13:20Z"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"name": "web", "image": "nginx",
                    "resources": {"requests": {"cpu": "100m"}},
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"},
                                       "periodSeconds": 5}}]}}}})
    );
}

#[test]
fn embedded_structs_are_inlined_and_only_pointer_zeros_kept() {
    let reference = with(
        msg("k8s.io.api.core.v1.LocalObjectReference"),
        vec![("name", s("creds"))],
    );
    let selector = with(
        msg("k8s.io.api.core.v1.SecretKeySelector"),
        vec![
            ("localObjectReference", Field::Message(reference)),
            ("key", s("password")),
        ],
    );
    let source = with(
        msg("k8s.io.api.core.v1.EnvVarSource"),
        vec![("secretKeyRef", Field::Message(selector))],
    );
    let env = with(
        msg("k8s.io.api.core.v1.EnvVar"),
        vec![
            ("name", s("PW")),
            ("value", s("")),
            ("valueFrom", Field::Message(source)),
        ],
    );
    let empty_dir = msg("k8s.io.api.core.v1.EmptyDirVolumeSource");
    let volume_source = with(
        msg("k8s.io.api.core.v1.VolumeSource"),
        vec![("emptyDir", Field::Message(empty_dir))],
    );
    let volume = with(
        msg("k8s.io.api.core.v1.Volume"),
        vec![
            ("name", s("scratch")),
            ("volumeSource", Field::Message(volume_source)),
        ],
    );
    let container = with(
        msg("k8s.io.api.core.v1.Container"),
        vec![
            ("name", s("c")),
            ("env", Field::List(vec![Field::Message(env)])),
            ("args", Field::List(vec![s("")])),
            ("stdin", Field::Bool(false)),
            ("tty", Field::Bool(true)),
        ],
    );
    let spec = with(
        msg("k8s.io.api.core.v1.PodSpec"),
        vec![
            ("containers", Field::List(vec![Field::Message(container)])),
            ("volumes", Field::List(vec![Field::Message(volume)])),
            ("hostNetwork", Field::Bool(false)),
            ("automountServiceAccountToken", Field::Bool(false)),
            ("terminationGracePeriodSeconds", Field::I64(0)),
        ],
    );
    let pod = with(
        msg("k8s.io.api.core.v1.Pod"),
        vec![("spec", Field::Message(spec))],
    );
    let got = to_json(&body("v1", "Pod", &pod)).unwrap();
    assert_eq!(
        got["spec"],
        json!({"containers": [{"name": "c", "args": [""], "tty": true, "env": [{"name": "PW",
                  "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}}]}],
               "volumes": [{"name": "scratch", "emptyDir": {}}],
               "automountServiceAccountToken": false, "terminationGracePeriodSeconds": 0})
    );
}

#[test]
fn secret_bytes_are_base64_and_micro_times_keep_microseconds() {
    let secret = with(
        msg("k8s.io.api.core.v1.Secret"),
        vec![
            ("metadata", Field::Message(meta("s", "default"))),
            (
                "data",
                Field::Map(
                    [(
                        MapKey::String("a".into()),
                        Field::Bytes(b"hi!".to_vec().into()),
                    )]
                    .into(),
                ),
            ),
            ("type", s("Opaque")),
        ],
    );
    let got = to_json(&body("v1", "Secret", &secret)).unwrap();
    assert_eq!(got["data"], json!({"a": "aGkh"}));
    assert_eq!(got["type"], "Opaque");

    let renew = with(
        msg(MICRO_TIME),
        vec![
            ("seconds", Field::I64(1_700_000_000)),
            ("nanos", Field::I32(123_456_000)),
        ],
    );
    let lease_spec = with(
        msg("k8s.io.api.coordination.v1.LeaseSpec"),
        vec![
            ("holderIdentity", s("me")),
            ("renewTime", Field::Message(renew)),
        ],
    );
    let lease = with(
        msg("k8s.io.api.coordination.v1.Lease"),
        vec![("spec", Field::Message(lease_spec))],
    );
    let got = to_json(&body("coordination.k8s.io/v1", "Lease", &lease)).unwrap();
    assert_eq!(
        got["spec"],
        json!({"holderIdentity": "me", "renewTime": "2023-11-14T22:13:20.123456Z"})
    );
}

#[test]
fn zero_fields_without_omitempty_are_kept() {
    let terminated = with(
        msg("k8s.io.api.core.v1.ContainerStateTerminated"),
        vec![
            ("exitCode", Field::I32(0)),
            ("signal", Field::I32(0)),
            ("reason", s("")),
        ],
    );
    let state = with(
        msg("k8s.io.api.core.v1.ContainerState"),
        vec![("terminated", Field::Message(terminated))],
    );
    let status = with(
        msg("k8s.io.api.core.v1.ContainerStatus"),
        vec![
            ("name", s("c")),
            ("state", Field::Message(state)),
            ("ready", Field::Bool(false)),
            ("restartCount", Field::I32(0)),
            ("image", s("busybox")),
            ("imageID", s("")),
        ],
    );
    let pod_status = with(
        msg("k8s.io.api.core.v1.PodStatus"),
        vec![(
            "containerStatuses",
            Field::List(vec![Field::Message(status)]),
        )],
    );
    let pod = with(
        msg("k8s.io.api.core.v1.Pod"),
        vec![("status", Field::Message(pod_status))],
    );
    let got = to_json(&body("/v1", "Pod", &pod)).unwrap();
    assert_eq!(got["apiVersion"], "v1");
    assert_eq!(
        got["status"]["containerStatuses"][0],
        json!({"name": "c", "state": {"terminated": {"exitCode": 0}}, "ready": false,
               "restartCount": 0, "image": "busybox", "imageID": ""})
    );
}

#[test]
fn delete_options_come_from_the_meta_package() {
    let opts = with(
        msg("k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions"),
        vec![
            ("gracePeriodSeconds", Field::I64(0)),
            ("propagationPolicy", s("Foreground")),
        ],
    );
    let got = to_json(&body("v1", "DeleteOptions", &opts)).unwrap();
    assert_eq!(
        got,
        json!({"kind": "DeleteOptions", "apiVersion": "v1",
               "gracePeriodSeconds": 0, "propagationPolicy": "Foreground"})
    );
}

#[test]
fn storage_classes_and_claims_read_as_their_json() {
    // Go writes StorageClass's pointers when set and its provisioner always.
    let sc = with(
        msg("k8s.io.api.storage.v1.StorageClass"),
        vec![
            ("metadata", Field::Message(meta("fast", ""))),
            ("provisioner", s("example.com/fast")),
            (
                "parameters",
                Field::Map([(MapKey::String("type".into()), s("ssd"))].into()),
            ),
            ("reclaimPolicy", s("Retain")),
            ("allowVolumeExpansion", Field::Bool(false)),
            ("volumeBindingMode", s("WaitForFirstConsumer")),
        ],
    );
    let got = to_json(&body("storage.k8s.io/v1", "StorageClass", &sc)).unwrap();
    assert_eq!(
        got,
        json!({"kind": "StorageClass", "apiVersion": "storage.k8s.io/v1",
               "metadata": {"name": "fast"}, "provisioner": "example.com/fast",
               "parameters": {"type": "ssd"}, "reclaimPolicy": "Retain",
               "allowVolumeExpansion": false, "volumeBindingMode": "WaitForFirstConsumer"})
    );
    let requests = Field::Map(
        [(
            MapKey::String("storage".into()),
            Field::Message(with(msg(QUANTITY), vec![("string", s("1Gi"))])),
        )]
        .into(),
    );
    let resources = with(
        msg("k8s.io.api.core.v1.VolumeResourceRequirements"),
        vec![("requests", requests)],
    );
    let spec = with(
        msg("k8s.io.api.core.v1.PersistentVolumeClaimSpec"),
        vec![
            ("accessModes", Field::List(vec![s("ReadWriteOnce")])),
            ("resources", Field::Message(resources)),
            ("volumeName", s("")),
        ],
    );
    let pvc = with(
        msg("k8s.io.api.core.v1.PersistentVolumeClaim"),
        vec![
            ("metadata", Field::Message(meta("data", "default"))),
            ("spec", Field::Message(spec)),
            (
                "status",
                Field::Message(with(
                    msg("k8s.io.api.core.v1.PersistentVolumeClaimStatus"),
                    vec![("phase", s(""))],
                )),
            ),
        ],
    );
    let got = to_json(&body("v1", "PersistentVolumeClaim", &pvc)).unwrap();
    assert_eq!(
        got["spec"],
        json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}})
    );
}

#[test]
fn bad_bodies_are_errors() {
    assert_eq!(to_json(b"{\"kind\":\"Pod\"}"), Err(ProtobufError::NoMagic));
    assert!(matches!(
        to_json(b"k8s\0\x0a\xff\xff"),
        Err(ProtobufError::Malformed { .. })
    ));
    let err = to_json(&body(
        "v1",
        "Frobnicator",
        &msg("k8s.io.api.core.v1.Namespace"),
    ))
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no kind \"Frobnicator\" is registered for version \"v1\""
    );
}

#[test]
fn durations_print_like_go() {
    for (nanos, want) in [
        (0, "0s"),
        (1_500_000_000, "1.5s"),
        (90_000_000_000, "1m30s"),
        (3_600_000_000_000, "1h0m0s"),
        (2_000_000, "2ms"),
        (-5_000_000_000, "-5s"),
    ] {
        assert_eq!(go_duration(nanos), want, "{nanos}");
    }
}
