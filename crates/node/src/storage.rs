//! This node's half of the local-path volumes: the provisioner (in the
//! controllers) makes PersistentVolumes whose directory lives under the
//! dir this node advertises ([`local_path_dir`], in the Node annotation
//! `skiff.dev/local-path-dir`); the pod worker makes the directory on first
//! mount. When such a volume is deleted (reclaim policy Delete), its
//! finalizer [`CLEANUP_FINALIZER`] holds it until [`LocalPathCleaner`]
//! removed the directory here and then the finalizer.
//!
//! It never removes anything outside [`local_path_dir`], and only for
//! volumes pinned to this node.

use std::path::{Path, PathBuf};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{watcher, WatchStreamExt as _};
use tokio_util::sync::CancellationToken;

/// The finalizer a local-path volume carries until its directory is gone.
pub const CLEANUP_FINALIZER: &str = "skiff.dev/local-path-cleanup";
/// The provisioner name on local-path volumes.
pub const PROVISIONER: &str = "skiff.dev/local-path";

/// Where this node's local-path volumes live.
pub fn local_path_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("storage")
}

/// The node a volume is pinned to by its required node affinity on
/// `kubernetes.io/hostname`.
fn pinned_node(pv: &PersistentVolume) -> Option<&str> {
    pv.spec
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required
        .as_ref()?
        .node_selector_terms
        .iter()
        .flat_map(|t| t.match_expressions.iter().flatten())
        .find(|e| e.key == "kubernetes.io/hostname" && e.operator == "In")
        .and_then(|e| e.values.as_ref()?.first())
        .map(String::as_str)
}

/// The directory to remove for `pv`, when it is a local-path volume of
/// `node` being deleted and still holding the cleanup finalizer.
pub fn to_clean(pv: &PersistentVolume, node: &str, dir: &Path) -> Option<PathBuf> {
    pv.metadata.deletion_timestamp.as_ref()?;
    let holds = pv
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == CLEANUP_FINALIZER);
    if !holds || pinned_node(pv) != Some(node) {
        return None;
    }
    let path = PathBuf::from(&pv.spec.as_ref()?.host_path.as_ref()?.path);
    // Only a direct child of the storage dir, never the dir itself or
    // something reached through `..`.
    (path.parent() == Some(dir) && path.file_name().is_some_and(|n| n != "..")).then_some(path)
}

/// Removes deleted local-path volumes' directories on this node.
#[derive(Clone)]
pub struct LocalPathCleaner {
    pub client: kube::Client,
    pub node: String,
    pub dir: PathBuf,
}

impl std::fmt::Debug for LocalPathCleaner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalPathCleaner")
            .field("node", &self.node)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl LocalPathCleaner {
    /// Watches PersistentVolumes until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        let mut stream = watcher(api.clone(), watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        loop {
            let next = tokio::select! {
                _ = shutdown.cancelled() => return,
                next = stream.next() => next,
            };
            let pv = match next {
                Some(Ok(pv)) => pv,
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "persistent volume watch");
                    continue;
                }
                None => return,
            };
            if let Some(path) = to_clean(&pv, &self.node, &self.dir) {
                self.clean(&api, &pv, &path).await;
            }
        }
    }

    async fn clean(&self, api: &Api<PersistentVolume>, pv: &PersistentVolume, path: &Path) {
        let name = pv.metadata.name.clone().unwrap_or_default();
        if path.exists() {
            if let Err(e) = std::fs::remove_dir_all(path) {
                tracing::warn!(volume = %name, dir = %path.display(), error = %e, "cannot remove a local-path volume");
                return;
            }
        }
        let rest: Vec<String> = pv
            .metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != CLEANUP_FINALIZER)
            .cloned()
            .collect();
        // The resourceVersion makes this a no-op if the list changed since.
        let patch = serde_json::json!({"metadata": {
            "finalizers": rest,
            "resourceVersion": pv.metadata.resource_version,
        }});
        if let Err(e) = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(volume = %name, error = %e, "cannot release a local-path volume");
        } else {
            tracing::info!(volume = %name, dir = %path.display(), "local-path volume removed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pv(node: &str, path: &str, deleting: bool, finalizer: bool) -> PersistentVolume {
        let mut v = serde_json::json!({
            "metadata": {"name": "pvc-1", "finalizers": if finalizer { vec![CLEANUP_FINALIZER] } else { vec![] }},
            "spec": {"hostPath": {"path": path},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}
        });
        if deleting {
            v["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn only_this_nodes_deleted_volumes_under_the_dir_are_cleaned() {
        let dir = Path::new("/var/lib/skiff/node/storage");
        let path = "/var/lib/skiff/node/storage/pvc-1_default_data";
        assert_eq!(
            to_clean(&pv("n1", path, true, true), "n1", dir),
            Some(PathBuf::from(path))
        );
        assert_eq!(to_clean(&pv("n1", path, false, true), "n1", dir), None);
        assert_eq!(to_clean(&pv("n1", path, true, false), "n1", dir), None);
        assert_eq!(to_clean(&pv("n2", path, true, true), "n1", dir), None);
        assert_eq!(to_clean(&pv("n1", "/etc", true, true), "n1", dir), None);
        assert_eq!(
            to_clean(
                &pv("n1", "/var/lib/skiff/node/storage", true, true),
                "n1",
                dir
            ),
            None
        );
    }
}
