//! What each node may read (upstream's Node authorizer graph, reduced to
//! the edges Skiff's objects have): a pod bound to a node makes its
//! Secrets, ConfigMaps, PersistentVolumeClaims and ServiceAccount
//! reachable from that node, and a claim bound to a PersistentVolume makes
//! the volume reachable too. Kept as counts per (object, node), so a
//! decision is two map lookups and a pod's change undoes exactly what it
//! added.
//!
//! Pure: fed pods and claims as JSON by `super` (from the watch caches),
//! it never reads the store or the network.

use std::collections::HashMap;

use serde_json::Value;

/// The kinds a node's reach is judged for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Secret,
    ConfigMap,
    Claim,
    ServiceAccount,
}

/// One namespaced object a pod refers to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ref {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Default)]
struct PodEntry {
    node: String,
    refs: Vec<Ref>,
}

/// Objects of one kind in one namespace by name: node → how many of the
/// node's pods refer to the object.
type ByName = HashMap<String, HashMap<String, u32>>;

/// The graph; see the module doc.
#[derive(Debug, Default)]
pub struct Graph {
    /// Each bound pod (by store key): its node and what it refers to.
    pods: HashMap<String, PodEntry>,
    /// Each referred object (kind → namespace → name): node → how many
    /// of the node's pods refer to it. Nested so a decision looks up by
    /// `&str` without building a key.
    reach: HashMap<Kind, HashMap<String, ByName>>,
    /// Claim (namespace, name) → the PersistentVolume it is bound to.
    claim_volume: HashMap<(String, String), String>,
    /// PersistentVolume → the claims bound to it.
    volume_claims: HashMap<String, Vec<(String, String)>>,
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn items<'a>(v: &'a Value, pointer: &str) -> impl Iterator<Item = &'a Value> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// What a pod refers to (upstream's `VisitPodSecretNames`,
/// `VisitPodConfigmapNames`, its claims and its ServiceAccount).
pub fn pod_refs(pod: &Value) -> Vec<Ref> {
    let namespace = str_at(pod, "/metadata/namespace").unwrap_or("default");
    let pod_name = str_at(pod, "/metadata/name").unwrap_or("");
    let mut refs = Vec::new();
    let mut add = |kind: Kind, name: Option<&str>| {
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            let r = Ref {
                kind,
                namespace: namespace.to_string(),
                name: name.to_string(),
            };
            if !refs.contains(&r) {
                refs.push(r);
            }
        }
    };
    add(
        Kind::ServiceAccount,
        str_at(pod, "/spec/serviceAccountName").or(str_at(pod, "/spec/serviceAccount")),
    );
    for s in items(pod, "/spec/imagePullSecrets") {
        add(Kind::Secret, str_at(s, "/name"));
    }
    for list in [
        "/spec/initContainers",
        "/spec/containers",
        "/spec/ephemeralContainers",
    ] {
        for c in items(pod, list) {
            for from in items(c, "/envFrom") {
                add(Kind::Secret, str_at(from, "/secretRef/name"));
                add(Kind::ConfigMap, str_at(from, "/configMapRef/name"));
            }
            for env in items(c, "/env") {
                add(Kind::Secret, str_at(env, "/valueFrom/secretKeyRef/name"));
                add(
                    Kind::ConfigMap,
                    str_at(env, "/valueFrom/configMapKeyRef/name"),
                );
            }
        }
    }
    for v in items(pod, "/spec/volumes") {
        add(Kind::Secret, str_at(v, "/secret/secretName"));
        add(Kind::ConfigMap, str_at(v, "/configMap/name"));
        for source in items(v, "/projected/sources") {
            add(Kind::Secret, str_at(source, "/secret/name"));
            add(Kind::ConfigMap, str_at(source, "/configMap/name"));
        }
        for pointer in [
            "/csi/nodePublishSecretRef/name",
            "/cephfs/secretRef/name",
            "/cinder/secretRef/name",
            "/flexVolume/secretRef/name",
            "/iscsi/secretRef/name",
            "/rbd/secretRef/name",
            "/scaleIO/secretRef/name",
            "/storageos/secretRef/name",
            "/azureFile/secretName",
        ] {
            add(Kind::Secret, str_at(v, pointer));
        }
        add(Kind::Claim, str_at(v, "/persistentVolumeClaim/claimName"));
        // A generic ephemeral volume's claim is named `<pod>-<volume>`.
        if v.get("ephemeral").is_some() {
            if let Some(volume) = str_at(v, "/name") {
                add(Kind::Claim, Some(&format!("{pod_name}-{volume}")));
            }
        }
    }
    refs
}

impl Graph {
    /// Forgets every pod (a fresh list of them follows).
    pub fn clear_pods(&mut self) {
        self.pods.clear();
        self.reach.clear();
    }

    /// Forgets every claim (a fresh list of them follows).
    pub fn clear_claims(&mut self) {
        self.claim_volume.clear();
        self.volume_claims.clear();
    }

    /// Records the pod stored at `key` (`None`: deleted). A pod not bound
    /// to a node reaches nothing; a finished one keeps its reach until it
    /// is deleted, as upstream's graph keeps it.
    pub fn set_pod(&mut self, key: &str, pod: Option<&Value>) {
        if let Some(old) = self.pods.remove(key) {
            for r in old.refs {
                self.unreach(&r, &old.node);
            }
        }
        let Some(pod) = pod else { return };
        let Some(node) = str_at(pod, "/spec/nodeName") else {
            return;
        };
        let refs = pod_refs(pod);
        for r in &refs {
            *self
                .reach
                .entry(r.kind)
                .or_default()
                .entry(r.namespace.clone())
                .or_default()
                .entry(r.name.clone())
                .or_default()
                .entry(node.to_string())
                .or_default() += 1;
        }
        self.pods.insert(
            key.to_string(),
            PodEntry {
                node: node.to_string(),
                refs,
            },
        );
    }

    /// Takes one of `node`'s references to `r` away, dropping emptied
    /// maps.
    fn unreach(&mut self, r: &Ref, node: &str) {
        let Some(namespaces) = self.reach.get_mut(&r.kind) else {
            return;
        };
        let Some(names) = namespaces.get_mut(&r.namespace) else {
            return;
        };
        let Some(nodes) = names.get_mut(&r.name) else {
            return;
        };
        if let Some(n) = nodes.get_mut(node) {
            *n -= 1;
            if *n == 0 {
                nodes.remove(node);
            }
        }
        if nodes.is_empty() {
            names.remove(&r.name);
        }
        if names.is_empty() {
            namespaces.remove(&r.namespace);
        }
    }

    /// Records the claim `namespace/name` (`None`: deleted) and the
    /// volume it is bound to.
    pub fn set_claim(&mut self, namespace: &str, name: &str, claim: Option<&Value>) {
        let key = (namespace.to_string(), name.to_string());
        if let Some(volume) = self.claim_volume.remove(&key) {
            if let Some(claims) = self.volume_claims.get_mut(&volume) {
                claims.retain(|c| *c != key);
                if claims.is_empty() {
                    self.volume_claims.remove(&volume);
                }
            }
        }
        if let Some(volume) = claim.and_then(|c| str_at(c, "/spec/volumeName")) {
            self.claim_volume.insert(key.clone(), volume.to_string());
            self.volume_claims
                .entry(volume.to_string())
                .or_default()
                .push(key);
        }
    }

    /// Whether a pod bound to `node` refers to `kind` `namespace/name`.
    pub fn reaches(&self, node: &str, kind: Kind, namespace: &str, name: &str) -> bool {
        self.reach
            .get(&kind)
            .and_then(|namespaces| namespaces.get(namespace))
            .and_then(|names| names.get(name))
            .is_some_and(|nodes| nodes.contains_key(node))
    }

    /// Whether `node` reaches the PersistentVolume `name` through a claim.
    pub fn reaches_volume(&self, node: &str, name: &str) -> bool {
        self.volume_claims.get(name).is_some_and(|claims| {
            claims
                .iter()
                .any(|(ns, claim)| self.reaches(node, Kind::Claim, ns, claim))
        })
    }

    /// How many pods the graph holds.
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }
}
