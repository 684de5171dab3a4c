//! The cluster-level kinds with the real kubectl (1.27, 1.30, 1.33):
//! discovery (short names, scope), `apply -f` of one object per kind and
//! its re-apply, `get` with upstream's columns, `describe`, `create
//! ingress` with the DefaultIngressClass admission plugin filling in the
//! class, a CertificateSigningRequest approve and deny round trip with the
//! requester recorded, the mandatory and suggested flowcontrol objects
//! present after start, and validation refusals in upstream's words.

mod support;

use base64::Engine;
use serde_json::Value;
use support::{fails, ok, within, Kubectl, TestServer};

async fn json(k: &Kubectl, args: &[&str]) -> Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&ok(k, &all).await).expect("kubectl printed JSON")
}

/// `kubectl apply -f -` of `yaml`: (success, stdout, stderr).
async fn apply(k: &Kubectl, yaml: &str) -> (bool, String, String) {
    let out = within(
        "apply",
        k.run_stdin(&["--request-timeout=30s", "apply", "-f", "-"], yaml),
    )
    .await;
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stderr).trim().to_string(),
    )
}

/// The cells of `row` under the columns `names` of `header`, as kubectl's
/// tab writer lines them up (a column starts where its name does).
fn cells(header: &str, row: &str, names: &[&str]) -> Vec<String> {
    let starts: Vec<usize> = names
        .iter()
        .scan(0, |from, name| {
            let at = *from
                + header[*from..]
                    .find(name)
                    .unwrap_or_else(|| panic!("column {name} in {header}"));
            *from = at + name.len();
            Some(at)
        })
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(i, &start)| {
            let end = starts.get(i + 1).copied().unwrap_or(row.len());
            row.get(start..end.min(row.len()))
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .collect()
}

/// `kubectl get <what>` as (header, the row starting with `name`), and
/// the cells under `columns` (which must be the whole header).
async fn row(k: &Kubectl, what: &[&str], name: &str, columns: &[&str]) -> Vec<String> {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    let out = ok(k, &args).await;
    let mut lines = out.lines();
    let header = lines.next().unwrap_or_default();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        columns
            .iter()
            .flat_map(|c| c.split_whitespace())
            .collect::<Vec<_>>(),
        "kubectl get {what:?}:\n{out}"
    );
    let line = lines
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no {name} row in:\n{out}"));
    cells(header, line, columns)
}

const OBJECTS: &str = r#"apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: nginx
  annotations:
    ingressclass.kubernetes.io/is-default-class: "true"
spec:
  controller: k8s.io/ingress-nginx
  parameters:
    apiGroup: k8s.example.com
    kind: IngressParameters
    name: external-lb
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
spec:
  ingressClassName: nginx
  tls:
  - hosts: [web.example.com]
    secretName: web-tls
  rules:
  - host: web.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: web
            port:
              number: 80
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: db
spec:
  podSelector:
    matchLabels:
      app: db
  ingress:
  - from:
    - podSelector:
        matchLabels:
          app: web
    ports:
    - port: 5432
      protocol: TCP
  egress:
  - to:
    - ipBlock:
        cidr: 10.0.0.0/8
        except: [10.1.0.0/16]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abc
  labels:
    kubernetes.io/service-name: web
addressType: IPv4
ports:
- name: http
  port: 80
  protocol: TCP
endpoints:
- addresses: [10.1.2.3]
  conditions:
    ready: true
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata:
  name: csi.example.com
spec:
  attachRequired: false
  podInfoOnMount: true
  volumeLifecycleModes: [Persistent, Ephemeral]
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata:
  name: node-1
spec:
  drivers:
  - name: csi.example.com
    nodeID: node-1
    topologyKeys: [topology.example.com/zone]
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata:
  name: va-1
spec:
  attacher: csi.example.com
  nodeName: node-1
  source:
    persistentVolumeName: pv-1
---
apiVersion: storage.k8s.io/v1
kind: CSIStorageCapacity
metadata:
  name: cap-1
storageClassName: fast
capacity: 10Gi
nodeTopology:
  matchLabels:
    topology.example.com/zone: a
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: gvisor
handler: runsc
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: batch
spec:
  type: Limited
  limited:
    limitResponse:
      type: Queue
      queuing: {}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: batch-jobs
spec:
  priorityLevelConfiguration:
    name: batch
  distinguisherMethod:
    type: ByUser
  rules:
  - subjects:
    - kind: ServiceAccount
      serviceAccount:
        name: runner
        namespace: ci
    resourceRules:
    - verbs: [create]
      apiGroups: [batch]
      resources: [jobs]
      namespaces: ["*"]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: check
webhooks:
- name: check.example.com
  sideEffects: None
  admissionReviewVersions: [v1]
  clientConfig:
    service:
      name: checker
      namespace: default
      path: /validate
  rules:
  - operations: [CREATE]
    apiGroups: [""]
    apiVersions: [v1]
    resources: [pods]
    scope: "*"
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: inject
webhooks:
- name: inject.example.com
  sideEffects: None
  admissionReviewVersions: [v1]
  clientConfig:
    url: https://inject.example.com/mutate
- name: inject2.example.com
  sideEffects: NoneOnDryRun
  admissionReviewVersions: [v1, v1beta1]
  clientConfig:
    url: https://inject.example.com/other
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replicas
spec:
  paramKind:
    apiVersion: v1
    kind: ConfigMap
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
      scope: "*"
  validations:
  - expression: "object.spec.replicas <= 5"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: replicas-binding
spec:
  policyName: replicas
  validationActions: [Deny]
  paramRef:
    name: limits
    namespace: default
"#;

const CREATED: &[&str] = &[
    "ingressclass.networking.k8s.io/nginx created",
    "ingress.networking.k8s.io/web created",
    "networkpolicy.networking.k8s.io/db created",
    "endpointslice.discovery.k8s.io/web-abc created",
    "csidriver.storage.k8s.io/csi.example.com created",
    "csinode.storage.k8s.io/node-1 created",
    "volumeattachment.storage.k8s.io/va-1 created",
    "csistoragecapacity.storage.k8s.io/cap-1 created",
    "runtimeclass.node.k8s.io/gvisor created",
    "prioritylevelconfiguration.flowcontrol.apiserver.k8s.io/batch created",
    "flowschema.flowcontrol.apiserver.k8s.io/batch-jobs created",
    "validatingwebhookconfiguration.admissionregistration.k8s.io/check created",
    "mutatingwebhookconfiguration.admissionregistration.k8s.io/inject created",
    "validatingadmissionpolicy.admissionregistration.k8s.io/replicas created",
    "validatingadmissionpolicybinding.admissionregistration.k8s.io/replicas-binding created",
];

async fn discovery(k: &Kubectl, minor: u32) {
    let resources = ok(k, &["api-resources", "--no-headers"]).await;
    for expected in [
        "ingresses ing networking.k8s.io/v1 true Ingress",
        "ingressclasses networking.k8s.io/v1 false IngressClass",
        "networkpolicies netpol networking.k8s.io/v1 true NetworkPolicy",
        "endpointslices discovery.k8s.io/v1 true EndpointSlice",
        "csidrivers storage.k8s.io/v1 false CSIDriver",
        "csinodes storage.k8s.io/v1 false CSINode",
        "csistoragecapacities storage.k8s.io/v1 true CSIStorageCapacity",
        "volumeattachments storage.k8s.io/v1 false VolumeAttachment",
        "runtimeclasses node.k8s.io/v1 false RuntimeClass",
        "certificatesigningrequests csr certificates.k8s.io/v1 false CertificateSigningRequest",
        "flowschemas flowcontrol.apiserver.k8s.io/v1 false FlowSchema",
        "prioritylevelconfigurations flowcontrol.apiserver.k8s.io/v1 false PriorityLevelConfiguration",
        "mutatingwebhookconfigurations admissionregistration.k8s.io/v1 false MutatingWebhookConfiguration",
        "validatingwebhookconfigurations admissionregistration.k8s.io/v1 false ValidatingWebhookConfiguration",
        "validatingadmissionpolicies admissionregistration.k8s.io/v1 false ValidatingAdmissionPolicy",
        "validatingadmissionpolicybindings admissionregistration.k8s.io/v1 false ValidatingAdmissionPolicyBinding",
    ] {
        let name = expected.split(' ').next().unwrap_or_default();
        let line = resources
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("kubectl 1.{minor}: no {name} in:\n{resources}"));
        assert_eq!(
            line.split_whitespace().collect::<Vec<_>>().join(" "),
            expected,
            "1.{minor}"
        );
    }
    let extensions = ok(
        k,
        &["api-resources", "--categories=api-extensions", "-o", "name"],
    )
    .await;
    assert!(
        extensions.contains("validatingwebhookconfigurations.admissionregistration.k8s.io"),
        "{extensions}"
    );
}

/// A PEM certificate request, base64 as the API carries it.
fn csr_request() -> String {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "jane");
    let pem = params
        .serialize_request(&key)
        .expect("request")
        .pem()
        .expect("pem");
    base64::engine::general_purpose::STANDARD.encode(pem)
}

fn csr_yaml(name: &str, request: &str) -> String {
    format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: {name}\nspec:\n  request: {request}\n  signerName: kubernetes.io/kube-apiserver-client\n  expirationSeconds: 86400\n  usages: [client auth]\n  username: someone-else\n"
    )
}

async fn certificates(k: &Kubectl, minor: u32) {
    let request = csr_request();
    for name in ["jane", "joe"] {
        let (success, stdout, stderr) = apply(k, &csr_yaml(name, &request)).await;
        assert!(success, "kubectl 1.{minor}: {stderr}");
        assert_eq!(
            stdout,
            format!("certificatesigningrequest.certificates.k8s.io/{name} created")
        );
    }
    let csr = json(k, &["csr", "jane"]).await;
    assert_eq!(csr["spec"]["username"], "kubernetes-admin", "{csr}");
    assert_eq!(
        csr["spec"]["groups"],
        serde_json::json!(["system:masters", "system:authenticated"]),
        "{csr}"
    );
    let columns = [
        "NAME",
        "AGE",
        "SIGNERNAME",
        "REQUESTOR",
        "REQUESTEDDURATION",
        "CONDITION",
    ];
    let cells = row(k, &["csr"], "jane", &columns).await;
    assert_eq!(
        cells[2..],
        [
            "kubernetes.io/kube-apiserver-client",
            "kubernetes-admin",
            "24h",
            "Pending"
        ],
        "1.{minor}"
    );
    let selected = ok(
        k,
        &[
            "get",
            "csr",
            "-o",
            "name",
            "--field-selector=spec.signerName=kubernetes.io/kube-apiserver-client",
        ],
    )
    .await;
    assert_eq!(
        selected.lines().collect::<Vec<_>>(),
        [
            "certificatesigningrequest.certificates.k8s.io/jane",
            "certificatesigningrequest.certificates.k8s.io/joe"
        ]
    );
    let none = ok(
        k,
        &[
            "get",
            "csr",
            "-o",
            "name",
            "--field-selector=spec.signerName=example.com/x",
        ],
    )
    .await;
    assert!(none.trim().is_empty(), "{none}");
    let out = ok(k, &["certificate", "approve", "jane"]).await;
    assert_eq!(
        out.trim(),
        "certificatesigningrequest.certificates.k8s.io/jane approved"
    );
    let out = ok(k, &["certificate", "deny", "joe"]).await;
    assert_eq!(
        out.trim(),
        "certificatesigningrequest.certificates.k8s.io/joe denied"
    );
    let jane = json(k, &["csr", "jane"]).await;
    let condition = &jane["status"]["conditions"][0];
    assert_eq!(condition["type"], "Approved", "{jane}");
    assert_eq!(condition["status"], "True", "{jane}");
    assert_eq!(condition["reason"], "KubectlApprove", "{jane}");
    assert!(condition["lastTransitionTime"].is_string(), "{jane}");
    assert_eq!(jane["spec"]["username"], "kubernetes-admin");
    assert_eq!(row(k, &["csr"], "jane", &columns).await[5], "Approved");
    assert_eq!(row(k, &["csr"], "joe", &columns).await[5], "Denied");
    // Approved and Denied exclude each other: kubectl refuses by itself
    // (even with --force), the server refuses a PUT to /approval.
    let err = fails(k, &["certificate", "deny", "jane", "--force"]).await;
    assert!(err.contains("is already Approved"), "1.{minor}: {err}");
    let mut both = jane.clone();
    if let Some(list) = both["status"]["conditions"].as_array_mut() {
        list.push(serde_json::json!({"type": "Denied", "status": "True", "reason": "Later"}));
    }
    let out = within(
        "replace --raw",
        k.run_stdin(
            &[
                "replace",
                "--raw",
                "/apis/certificates.k8s.io/v1/certificatesigningrequests/jane/approval",
                "-f",
                "-",
            ],
            &both.to_string(),
        ),
    )
    .await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("Approved and Denied conditions are mutually exclusive"),
        "1.{minor}: {err}"
    );
    // The status subresource may not approve.
    let mut approved = json(k, &["csr", "joe"]).await;
    approved["status"]["conditions"] =
        serde_json::json!([{"type": "Approved", "status": "True", "reason": "Sneaky"}]);
    let out = within(
        "replace --raw",
        k.run_stdin(
            &[
                "replace",
                "--raw",
                "/apis/certificates.k8s.io/v1/certificatesigningrequests/joe/status",
                "-f",
                "-",
            ],
            &approved.to_string(),
        ),
    )
    .await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("updates may not add a condition of type"),
        "1.{minor}: {err}"
    );
    // An update of the object itself changes only metadata.
    ok(
        k,
        &[
            "patch",
            "csr",
            "jane",
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"team":"a"}},"spec":{"username":"mallory"}}"#,
        ],
    )
    .await;
    let patched = json(k, &["csr", "jane"]).await;
    assert_eq!(patched["spec"]["username"], "kubernetes-admin", "{patched}");
    assert_eq!(patched["metadata"]["labels"]["team"], "a", "{patched}");
    assert_eq!(patched["status"]["conditions"][0]["type"], "Approved");
    let described = ok(k, &["describe", "csr", "jane"]).await;
    assert!(described.contains("Requesting User:"), "{described}");
    assert!(described.contains("kubernetes-admin"), "{described}");
    assert!(described.contains("Approved"), "{described}");
    // The request must be a PEM certificate request.
    let bad = base64::engine::general_purpose::STANDARD.encode("not a request");
    let (success, _, stderr) = apply(k, &csr_yaml("bad", &bad)).await;
    assert!(!success);
    assert!(
        stderr.contains("spec.request: Invalid value: []byte{0x6e, 0x6f, 0x74,")
            && stderr.contains("PEM block type must be CERTIFICATE REQUEST"),
        "1.{minor}: {stderr}"
    );
}

async fn flowcontrol(k: &Kubectl, minor: u32) {
    let columns = [
        "NAME",
        "PRIORITYLEVEL",
        "MATCHINGPRECEDENCE",
        "DISTINGUISHERMETHOD",
        "AGE",
        "MISSINGPL",
    ];
    let exempt = row(k, &["flowschemas"], "exempt", &columns).await;
    assert_eq!(
        exempt[..4],
        ["exempt", "exempt", "1", "<none>"],
        "1.{minor}"
    );
    let catch_all = row(k, &["flowschemas"], "catch-all", &columns).await;
    assert_eq!(
        catch_all[..4],
        ["catch-all", "catch-all", "10000", "ByUser"],
        "1.{minor}"
    );
    assert_eq!(catch_all[5], "?");
    // The suggested configuration is there too.
    let probes = row(k, &["flowschemas"], "probes", &columns).await;
    assert_eq!(
        probes[..4],
        ["probes", "exempt", "2", "<none>"],
        "1.{minor}"
    );
    let global = row(k, &["flowschemas"], "global-default", &columns).await;
    assert_eq!(
        global[..4],
        ["global-default", "global-default", "9900", "ByUser"]
    );
    let columns = [
        "NAME",
        "TYPE",
        "NOMINALCONCURRENCYSHARES",
        "QUEUES",
        "HANDSIZE",
        "QUEUELENGTHLIMIT",
        "AGE",
    ];
    let exempt = row(k, &["prioritylevelconfigurations"], "exempt", &columns).await;
    assert_eq!(
        exempt[..6],
        ["exempt", "Exempt", "<none>", "<none>", "<none>", "<none>"]
    );
    let catch_all = row(k, &["prioritylevelconfigurations"], "catch-all", &columns).await;
    assert_eq!(
        catch_all[..6],
        ["catch-all", "Limited", "5", "<none>", "<none>", "<none>"]
    );
    let workload = row(
        k,
        &["prioritylevelconfigurations"],
        "workload-low",
        &columns,
    )
    .await;
    assert_eq!(
        workload[..6],
        ["workload-low", "Limited", "100", "128", "6", "50"]
    );
    let fs = json(k, &["flowschema", "catch-all"]).await;
    assert_eq!(
        fs["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"],
        "true"
    );
    // The mandatory objects keep their fixed specs.
    let err = fails(
        k,
        &[
            "patch",
            "flowschema",
            "exempt",
            "--type=merge",
            "-p",
            r#"{"spec":{"matchingPrecedence":2}}"#,
        ],
    )
    .await;
    assert!(
        err.contains("spec of 'exempt' must equal the fixed value"),
        "1.{minor}: {err}"
    );
}

async fn objects(k: &Kubectl, minor: u32) {
    let (success, stdout, stderr) = apply(k, OBJECTS).await;
    assert!(success, "kubectl 1.{minor} apply: {stderr}");
    assert_eq!(stdout.lines().collect::<Vec<_>>(), CREATED, "1.{minor}");
    // (Ports name their protocol and rules their scope: those lists are
    // atomic, so a value the server defaulted would make kubectl send
    // them again, upstream too.)
    let (success, again, stderr) = apply(k, OBJECTS).await;
    assert!(success, "kubectl 1.{minor} re-apply: {stderr}");
    assert!(
        again.lines().all(|l| l.ends_with(" unchanged")),
        "kubectl 1.{minor}: a re-apply changed something:\n{again}"
    );

    // The OpenAPI documents describe them.
    let explained = ok(k, &["explain", "ingress.spec.rules"]).await;
    assert!(explained.contains("host"), "1.{minor}: {explained}");
    // Defaults as upstream fills them.
    let np = json(k, &["networkpolicy", "db"]).await;
    assert_eq!(
        np["spec"]["policyTypes"],
        serde_json::json!(["Ingress", "Egress"])
    );
    assert_eq!(np["spec"]["ingress"][0]["ports"][0]["protocol"], "TCP");
    let driver = json(k, &["csidriver", "csi.example.com"]).await;
    assert_eq!(driver["spec"]["fsGroupPolicy"], "ReadWriteOnceWithFSType");
    assert_eq!(driver["spec"]["storageCapacity"], false);
    let pl = json(k, &["prioritylevelconfiguration", "batch"]).await;
    assert_eq!(
        pl["spec"]["limited"]["limitResponse"]["queuing"],
        serde_json::json!({"handSize": 8, "queueLengthLimit": 50, "queues": 64})
    );
    assert_eq!(pl["spec"]["limited"]["nominalConcurrencyShares"], 30);
    let hook = json(k, &["validatingwebhookconfiguration", "check"]).await;
    let h = &hook["webhooks"][0];
    assert_eq!(h["failurePolicy"], "Fail");
    assert_eq!(h["timeoutSeconds"], 10);
    assert_eq!(h["rules"][0]["scope"], "*");
    assert_eq!(h["clientConfig"]["service"]["port"], 443);
    let class = json(k, &["ingressclass", "nginx"]).await;
    assert_eq!(class["spec"]["parameters"]["scope"], "Cluster");

    // Tables with upstream's columns.
    let cells = row(
        k,
        &["ingress"],
        "web",
        &["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"],
    )
    .await;
    assert_eq!(
        cells[..5],
        ["web", "nginx", "web.example.com", "", "80, 443"],
        "1.{minor}"
    );
    let cells = row(
        k,
        &["ingressclass"],
        "nginx",
        &["NAME", "CONTROLLER", "PARAMETERS", "AGE"],
    )
    .await;
    assert_eq!(
        cells[..3],
        [
            "nginx",
            "k8s.io/ingress-nginx",
            "IngressParameters.k8s.example.com/external-lb"
        ]
    );
    let cells = row(k, &["netpol"], "db", &["NAME", "POD-SELECTOR", "AGE"]).await;
    assert_eq!(cells[..2], ["db", "app=db"]);
    let cells = row(
        k,
        &["endpointslices"],
        "web-abc",
        &["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"],
    )
    .await;
    assert_eq!(cells[..4], ["web-abc", "IPv4", "80", "10.1.2.3"]);
    let cells = row(
        k,
        &["csidrivers"],
        "csi.example.com",
        &[
            "NAME",
            "ATTACHREQUIRED",
            "PODINFOONMOUNT",
            "STORAGECAPACITY",
            "TOKENREQUESTS",
            "REQUIRESREPUBLISH",
            "MODES",
            "AGE",
        ],
    )
    .await;
    assert_eq!(
        cells[..7],
        [
            "csi.example.com",
            "false",
            "true",
            "false",
            "<unset>",
            "false",
            "Persistent,Ephemeral"
        ]
    );
    let cells = row(k, &["csinodes"], "node-1", &["NAME", "DRIVERS", "AGE"]).await;
    assert_eq!(cells[..2], ["node-1", "1"]);
    let cells = row(
        k,
        &["volumeattachments"],
        "va-1",
        &["NAME", "ATTACHER", "PV", "NODE", "ATTACHED", "AGE"],
    )
    .await;
    assert_eq!(
        cells[..5],
        ["va-1", "csi.example.com", "pv-1", "node-1", "false"]
    );
    let cells = row(
        k,
        &["csistoragecapacities"],
        "cap-1",
        &["NAME", "STORAGECLASSNAME", "CAPACITY"],
    )
    .await;
    assert_eq!(cells, ["cap-1", "fast", "10Gi"]);
    let cells = row(
        k,
        &["runtimeclasses"],
        "gvisor",
        &["NAME", "HANDLER", "AGE"],
    )
    .await;
    assert_eq!(cells[..2], ["gvisor", "runsc"]);
    let cells = row(
        k,
        &["mutatingwebhookconfigurations"],
        "inject",
        &["NAME", "WEBHOOKS", "AGE"],
    )
    .await;
    assert_eq!(cells[..2], ["inject", "2"]);
    let cells = row(
        k,
        &["validatingadmissionpolicies"],
        "replicas",
        &["NAME", "VALIDATIONS", "PARAMKIND", "AGE"],
    )
    .await;
    assert_eq!(cells[..3], ["replicas", "1", "v1/ConfigMap"]);
    let cells = row(
        k,
        &["validatingadmissionpolicybindings"],
        "replicas-binding",
        &["NAME", "POLICYNAME", "PARAMREF", "AGE"],
    )
    .await;
    assert_eq!(
        cells[..3],
        ["replicas-binding", "replicas", "default/limits"]
    );
    let cells = row(
        k,
        &["flowschemas"],
        "batch-jobs",
        &[
            "NAME",
            "PRIORITYLEVEL",
            "MATCHINGPRECEDENCE",
            "DISTINGUISHERMETHOD",
            "AGE",
            "MISSINGPL",
        ],
    )
    .await;
    assert_eq!(cells[..4], ["batch-jobs", "batch", "1000", "ByUser"]);

    // describe has a describer for most of these.
    for (kind, name, expect) in [
        ("ingress", "web", "web.example.com"),
        ("ingressclass", "nginx", "k8s.io/ingress-nginx"),
        ("networkpolicy", "db", "PodSelector:"),
        ("endpointslice", "web-abc", "AddressType:  IPv4"),
        ("csidriver", "csi.example.com", "Attach Required:"),
        ("csinode", "node-1", "csi.example.com"),
        ("runtimeclass", "gvisor", "Handler:"),
        ("flowschema", "batch-jobs", "batch"),
        ("prioritylevelconfiguration", "batch", "Limited"),
        (
            "validatingwebhookconfiguration",
            "check",
            "check.example.com",
        ),
    ] {
        let out = ok(k, &["describe", kind, name]).await;
        assert!(out.contains(expect), "1.{minor} describe {kind}:\n{out}");
    }

    // Server-side apply creates and re-applies through the same schemas.
    let ssa = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: ssa\nspec:\n  podSelector: {}\n  egress:\n  - ports:\n    - port: 53\n      protocol: UDP\n---\napiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata:\n  name: ssa.example.com\nspec:\n  attachRequired: true\n";
    for expected in ["serverside-applied", "serverside-applied"] {
        let out = within(
            "apply --server-side",
            k.run_stdin(&["apply", "--server-side", "-f", "-"], ssa),
        )
        .await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.lines().all(|l| l.ends_with(expected)),
            "1.{minor}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let np = json(k, &["networkpolicy", "ssa"]).await;
    assert_eq!(
        np["spec"]["policyTypes"],
        serde_json::json!(["Ingress", "Egress"])
    );

    // An Ingress's status is validated as upstream does.
    let err = fails(
        k,
        &[
            "patch",
            "ingress",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"loadBalancer":{"ingress":[{"ip":"not-an-ip"}]}}}"#,
        ],
    )
    .await;
    assert!(
        err.contains(r#"status.loadBalancer.ingress[0].ip: Invalid value: "not-an-ip": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"#),
        "1.{minor}: {err}"
    );
    ok(
        k,
        &[
            "patch",
            "ingress",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.10"}]}}}"#,
        ],
    )
    .await;
    let cells = row(
        k,
        &["ingress"],
        "web",
        &["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"],
    )
    .await;
    assert_eq!(cells[3], "192.0.2.10", "1.{minor}");

    // Status subresource: an attacher marks the attachment done.
    ok(
        k,
        &[
            "patch",
            "volumeattachment",
            "va-1",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"attached":true}}"#,
        ],
    )
    .await;
    let va = json(k, &["volumeattachment", "va-1"]).await;
    assert_eq!(va["status"]["attached"], true, "{va}");
}

async fn default_ingress_class(k: &Kubectl, minor: u32) {
    let out = ok(
        k,
        &["create", "ingress", "x", "--rule=foo.com/bar=svc1:8080"],
    )
    .await;
    assert_eq!(out.trim(), "ingress.networking.k8s.io/x created");
    let ing = json(k, &["ingress", "x"]).await;
    assert_eq!(ing["spec"]["ingressClassName"], "nginx", "1.{minor}: {ing}");
    let path = &ing["spec"]["rules"][0]["http"]["paths"][0];
    assert_eq!(path["path"], "/bar");
    assert_eq!(path["pathType"], "Exact");
    assert_eq!(path["backend"]["service"]["name"], "svc1");
    assert_eq!(path["backend"]["service"]["port"]["number"], 8080);
    let cells = row(
        k,
        &["ing"],
        "x",
        &["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"],
    )
    .await;
    assert_eq!(cells[..5], ["x", "nginx", "foo.com", "", "80"], "1.{minor}");
    // A class named (even through the legacy annotation) is kept.
    let out = ok(
        k,
        &[
            "create",
            "ingress",
            "y",
            "--class=other",
            "--rule=foo.com/*=svc1:80",
        ],
    )
    .await;
    assert!(out.contains("ingress.networking.k8s.io/y created"), "{out}");
    let ing = json(k, &["ingress", "y"]).await;
    assert_eq!(ing["spec"]["ingressClassName"], "other");
    assert_eq!(
        ing["spec"]["rules"][0]["http"]["paths"][0]["pathType"],
        "Prefix"
    );
    let out = ok(k, &["describe", "ingress", "x"]).await;
    assert!(out.contains("foo.com") && out.contains("/bar"), "{out}");
}

async fn refusals(k: &Kubectl, minor: u32) {
    for (yaml, wanted) in [
        (
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: bad\nspec:\n  rules:\n  - host: 1.2.3.4\n    http:\n      paths:\n      - path: bar\n        pathType: Prefix\n        backend:\n          service:\n            name: svc\n            port:\n              number: 80\n",
            &[
                r#"The Ingress "bad" is invalid"#,
                r#"* spec.rules[0].host: Invalid value: "1.2.3.4": must be a DNS name, not an IP address"#,
                r#"* spec.rules[0].http.paths[0].path: Invalid value: "bar": must be an absolute path"#,
            ][..],
        ),
        (
            "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: bad\nspec:\n  controller: nginx\n",
            &[r#"spec.controller: Invalid value: "nginx": must be a domain-prefixed path (such as "acme.io/foo")"#][..],
        ),
        (
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: bad\naddressType: IPv5\nendpoints:\n- addresses: []\n",
            &[
                r#"addressType: Unsupported value: "IPv5": supported values: "FQDN", "IPv4", "IPv6""#,
                "endpoints[0].addresses: Required value: must contain at least 1 address",
            ][..],
        ),
        (
            "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: bad\nhandler: Run_C\n",
            &[r#"handler: Invalid value: "Run_C": a lowercase RFC 1123 label must consist of"#][..],
        ),
        (
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: bad\nspec:\n  podSelector: {}\n  policyTypes: [Sideways]\n",
            &[r#"spec.policyTypes[0]: Unsupported value: "Sideways": supported values: "Ingress", "Egress""#][..],
        ),
        (
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata:\n  name: bad\nwebhooks:\n- name: short\n  admissionReviewVersions: [v1]\n  clientConfig:\n    url: http://x.example.com\n",
            &[
                r#"webhooks[0].name: Invalid value: "short": should be a domain with at least three segments separated by dots"#,
                "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
                r#"webhooks[0].clientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]"#,
            ][..],
        ),
        (
            "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: PriorityLevelConfiguration\nmetadata:\n  name: bad\nspec:\n  type: Exempt\n",
            &[r#"spec.type: Invalid value: "Exempt": type must be 'Exempt' if and only if name is 'exempt'"#][..],
        ),
    ] {
        let (success, _, stderr) = apply(k, yaml).await;
        assert!(!success, "1.{minor}: accepted:\n{yaml}");
        for w in wanted {
            assert!(stderr.contains(w), "1.{minor}: wanted {w:?} in:\n{stderr}");
        }
    }
    // The IngressClass controller is fixed at creation.
    let err = fails(
        k,
        &[
            "patch",
            "ingressclass",
            "nginx",
            "--type=merge",
            "-p",
            r#"{"spec":{"controller":"example.com/other"}}"#,
        ],
    )
    .await;
    assert!(
        err.contains(r#"spec.controller: Invalid value: "example.com/other": field is immutable"#),
        "1.{minor}: {err}"
    );
}

async fn scenario(minor: u32) {
    let server = TestServer::start().await;
    let k = server.kubectl(minor);
    discovery(&k, minor).await;
    flowcontrol(&k, minor).await;
    objects(&k, minor).await;
    default_ingress_class(&k, minor).await;
    certificates(&k, minor).await;
    refusals(&k, minor).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_kinds_with_kubectl_1_27() {
    scenario(27).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_kinds_with_kubectl_1_30() {
    scenario(30).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_kinds_with_kubectl_1_33() {
    scenario(33).await;
}
