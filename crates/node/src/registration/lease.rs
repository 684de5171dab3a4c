//! The node's Lease `kube-node-lease/NAME`, the cheap heartbeat the node
//! lifecycle controller watches (upstream's nodelease controller).
//!
//! This module owns that one Lease: holderIdentity = the node's name,
//! leaseDurationSeconds (40 by default), renewTime moved every renew
//! interval, and an ownerReference to the Node so the Lease goes with it.
//! Like upstream it renews from the Lease it last wrote (no GET), and
//! falls back to GET-or-create when that fails. It must not touch the
//! Node or any other Lease.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::Api;
use tokio_util::sync::CancellationToken;

use super::heartbeat::error_chain;

/// Where node leases live.
pub const NAMESPACE: &str = "kube-node-lease";

/// The first retry after a failed renewal; it doubles up to the renew
/// interval.
const FIRST_RETRY: Duration = Duration::from_millis(200);

/// A Lease call that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// GET failed.
    #[error("getting lease {NAMESPACE}/{name}")]
    Get {
        /// The lease.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// POST failed.
    #[error("creating lease {NAMESPACE}/{name}")]
    Create {
        /// The lease.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// PUT failed.
    #[error("updating lease {NAMESPACE}/{name}")]
    Update {
        /// The lease.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The owner reference to the Node that upstream puts on the Lease.
pub fn node_owner(node_name: &str, node_uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: node_name.to_string(),
        uid: node_uid.to_string(),
        ..Default::default()
    }
}

/// The Lease to create (upstream's `newLease` without a base).
pub fn new_lease(
    node_name: &str,
    duration_seconds: i32,
    owner: Option<OwnerReference>,
    now: Timestamp,
) -> Lease {
    let fresh = Lease {
        metadata: ObjectMeta {
            name: Some(node_name.to_string()),
            namespace: Some(NAMESPACE.to_string()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(node_name.to_string()),
            lease_duration_seconds: Some(duration_seconds),
            ..Default::default()
        }),
    };
    renewed(fresh, owner, now)
}

/// `base` renewed at `now` (upstream's `newLease` with a base): only
/// renewTime moves, and the owner reference is added while missing.
pub fn renewed(mut base: Lease, owner: Option<OwnerReference>, now: Timestamp) -> Lease {
    base.spec.get_or_insert_with(Default::default).renew_time = Some(MicroTime(now));
    if let Some(owner) = owner {
        let refs = base.metadata.owner_references.get_or_insert_with(Vec::new);
        if refs.is_empty() {
            refs.push(owner);
        }
    }
    base
}

/// Renews one node's Lease.
#[derive(Debug)]
pub(super) struct Renewer {
    api: Api<Lease>,
    node_name: String,
    duration_seconds: i32,
    owner: Option<OwnerReference>,
    latest: Option<Lease>,
}

impl Renewer {
    pub(super) fn new(
        client: kube::Client,
        node_name: &str,
        duration_seconds: i32,
        node_uid: Option<&str>,
    ) -> Self {
        Self {
            api: Api::namespaced(client, NAMESPACE),
            node_name: node_name.to_string(),
            duration_seconds,
            owner: node_uid.map(|uid| node_owner(node_name, uid)),
            latest: None,
        }
    }

    /// Renews every `every` until `shutdown`, retrying sooner after a
    /// failure.
    pub(super) async fn run(mut self, every: Duration, shutdown: CancellationToken) {
        let mut retry = FIRST_RETRY;
        loop {
            let wait = tokio::select! {
                _ = shutdown.cancelled() => return,
                result = self.sync() => match result {
                    Ok(()) => {
                        retry = FIRST_RETRY;
                        every
                    }
                    Err(e) => {
                        tracing::warn!(error = %error_chain(&e), "failed to renew the node lease, will retry");
                        let wait = retry.min(every);
                        retry = (retry * 2).min(every);
                        wait
                    }
                },
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// upstream's `sync`: update from the last written Lease; when that
    /// fails (or there is none), get or create it, then update.
    pub(super) async fn sync(&mut self) -> Result<()> {
        if let Some(latest) = self.latest.take() {
            match self.update(latest).await {
                Ok(lease) => {
                    self.latest = Some(lease);
                    return Ok(());
                }
                Err(e) => tracing::debug!(
                    error = %error_chain(&e),
                    "failed to update lease using latest lease, fallback to ensure lease"
                ),
            }
        }
        let (lease, created) = self.ensure().await?;
        let lease = if created {
            lease
        } else {
            self.update(lease).await?
        };
        self.latest = Some(lease);
        Ok(())
    }

    async fn update(&self, base: Lease) -> Result<Lease> {
        let lease = renewed(base, self.owner.clone(), Timestamp::now());
        self.api
            .replace(&self.node_name, &PostParams::default(), &lease)
            .await
            .map_err(|source| Error::Update {
                name: self.node_name.clone(),
                source,
            })
    }

    /// The Lease as it is, or a new one; `true` when just created.
    async fn ensure(&self) -> Result<(Lease, bool)> {
        let name = &self.node_name;
        let existing = self.api.get_opt(name).await.map_err(|source| Error::Get {
            name: name.clone(),
            source,
        })?;
        if let Some(lease) = existing {
            return Ok((lease, false));
        }
        let lease = new_lease(
            name,
            self.duration_seconds,
            self.owner.clone(),
            Timestamp::now(),
        );
        let created = self
            .api
            .create(&PostParams::default(), &lease)
            .await
            .map_err(|source| Error::Create {
                name: name.clone(),
                source,
            })?;
        Ok((created, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_lease_is_held_by_the_node_and_owned_by_it() {
        let now = Timestamp::from_second(1_700_000_000).expect("timestamp");
        let lease = new_lease("n1", 40, Some(node_owner("n1", "uid-1")), now);
        assert_eq!(lease.metadata.namespace.as_deref(), Some(NAMESPACE));
        assert_eq!(lease.metadata.name.as_deref(), Some("n1"));
        let spec = lease.spec.clone().expect("spec");
        assert_eq!(spec.holder_identity.as_deref(), Some("n1"));
        assert_eq!(spec.lease_duration_seconds, Some(40));
        assert_eq!(spec.renew_time, Some(MicroTime(now)));
        let owners = lease.metadata.owner_references.clone().expect("owners");
        assert_eq!(owners.len(), 1);
        assert_eq!(
            (
                owners[0].api_version.as_str(),
                owners[0].kind.as_str(),
                owners[0].name.as_str(),
                owners[0].uid.as_str()
            ),
            ("v1", "Node", "n1", "uid-1")
        );

        // Renewal moves renewTime only and keeps an existing owner.
        let later = Timestamp::from_second(1_700_000_010).expect("timestamp");
        let renewed = renewed(lease.clone(), Some(node_owner("n1", "other")), later);
        assert_eq!(
            renewed.spec.as_ref().and_then(|s| s.renew_time.clone()),
            Some(MicroTime(later))
        );
        assert_eq!(
            renewed.metadata.owner_references,
            lease.metadata.owner_references
        );
        assert_eq!(
            renewed
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.clone()),
            Some("n1".into())
        );
    }
}
