//! [`AppState`]: what every handler of one API server shares (the store,
//! the watch caches, the catalog of kinds, the custom resources, the
//! allocators, the node agents' TLS). Handlers, discovery and the write
//! path take it; the layers below it (catalog, admission, allocators,
//! watch cache, custom resources) each take the narrow part they use.

use std::sync::Arc;

use skiff_store::Store;

use crate::catalog::{Catalog, Resource};
use crate::{admission, agents, allocators, customresources, resources, watchcache};

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    /// host:port clients should use (shared: the state is cloned for
    /// every request).
    pub advertise: Arc<str>,
    /// How often a watch that allows bookmarks gets one.
    pub bookmark_every: std::time::Duration,
    /// One watch cache per storage resource name.
    pub caches: Arc<watchcache::Caches>,
    /// TLS with the client certificate presented to node agents
    /// (`pods/log`); none: logs are unavailable.
    pub kubelet_tls: Option<Arc<rustls::ClientConfig>>,
    /// Node agents running in this process, reached without TCP or TLS.
    pub local_agents: agents::LocalAgents,
    /// Service ClusterIPs and NodePorts taken (the catalog's Service
    /// hooks hold the same: change both with [`AppState::set_allocators`]).
    allocators: Arc<allocators::Allocators>,
    /// Every kind this server serves: the built-in ones and its custom
    /// resources, with the Services' storage hooks.
    pub catalog: Arc<Catalog>,
    /// The custom resources its CRD controller serves.
    pub crds: Arc<customresources::Registry>,
    /// What admission plugins decoded of the objects they read, per
    /// version.
    pub admission: Arc<admission::memo::Memos>,
    /// The RBAC policy, kept current from the watch caches
    /// ([`crate::authz::Rbac::follow`]).
    pub rbac: crate::authz::Rbac,
    /// The Node authorizer's graph, kept current from the watch caches
    /// ([`crate::authz::NodeAuthorizer::follow`]).
    pub node_authorizer: crate::authz::NodeAuthorizer,
    /// Admission plugins turned off by name.
    pub disabled_admission_plugins: Arc<[String]>,
    /// Service-account tokens: issued by TokenRequest, checked by the
    /// authenticator (none: the server signs none).
    pub service_accounts: Option<Arc<crate::authn::serviceaccount::ServiceAccounts>>,
    /// The cluster's CA certificate (PEM), served at `/cacerts` for nodes
    /// that join with a token (none: not served).
    pub ca_cert: Option<Arc<str>>,
    /// The authorizer chain: system:masters, then upstream's `Node,RBAC`.
    pub authorizers: Arc<Vec<Box<dyn crate::authz::Authorizer>>>,
    /// Requests, watch events and stored objects counted (`/metrics`);
    /// none when metrics are off (`--metrics=false`): nothing is
    /// recorded and `/metrics` is not served.
    pub metrics: Option<Arc<crate::metrics::ApiMetrics>>,
}

impl AppState {
    pub fn new(
        store: Arc<dyn Store>,
        advertise: String,
        bookmark_every: std::time::Duration,
    ) -> Self {
        let crds = Arc::new(customresources::Registry::default());
        let allocators: Arc<allocators::Allocators> = Arc::default();
        let catalog = catalog_of(&store, &crds, &allocators);
        let rbac = crate::authz::Rbac::default();
        let node_authorizer = crate::authz::NodeAuthorizer::new(crate::rbac_defaults::node_rules());
        let fields = catalog.clone();
        let caches = Arc::new(watchcache::Caches::new(
            catalog.builtin().iter().map(|r| r.storage),
            watchcache::FieldsOf(Arc::new(move |storage| {
                fields.selectable_for_storage(storage)
            })),
        ));
        let metrics = Some(Arc::new(crate::metrics::ApiMetrics::new(
            catalog.clone(),
            caches.clone(),
        )));
        AppState {
            metrics,
            store,
            advertise: advertise.into(),
            bookmark_every,
            caches,
            kubelet_tls: None,
            local_agents: agents::LocalAgents::default(),
            allocators,
            catalog,
            crds,
            admission: Arc::default(),
            service_accounts: None,
            ca_cert: None,
            disabled_admission_plugins: Arc::new([]),
            authorizers: Arc::new(vec![
                Box::new(crate::authz::MastersOnly),
                Box::new(node_authorizer.clone()),
                Box::new(rbac.clone()),
            ]),
            node_authorizer,
            rbac,
        }
    }

    /// Hands out Service addresses and ports from `allocators` (its
    /// configured ranges, rebuilt from the stored Services).
    pub fn set_allocators(&mut self, allocators: allocators::Allocators) {
        self.allocators = Arc::new(allocators);
        self.catalog = catalog_of(&self.store, &self.crds, &self.allocators);
    }

    /// What admission plugins read.
    pub fn admission_context(&self) -> admission::Context<'_> {
        admission::Context {
            store: self.store.as_ref(),
            caches: &self.caches,
            admission: &self.admission,
            authorizers: &self.authorizers,
            rbac: &self.rbac,
            disabled: &self.disabled_admission_plugins,
        }
    }

    /// The watch cache of a resource: built-in ones are made with the
    /// state; a custom resource's is made when first needed.
    pub fn cache(&self, resource: &Resource) -> Arc<watchcache::WatchCache> {
        self.caches.get_or_create(resource.storage)
    }
}

/// The catalog of a server: the built-in kinds, its custom resources and
/// the Services' storage hooks over its allocators.
fn catalog_of(
    store: &Arc<dyn Store>,
    crds: &Arc<customresources::Registry>,
    allocators: &Arc<allocators::Allocators>,
) -> Arc<Catalog> {
    let hooks = resources::services::ServiceHooks {
        store: store.clone(),
        allocators: allocators.clone(),
    };
    Arc::new(Catalog::new(resources::KINDS, crds.clone()).with_hooks(
        "",
        "Service",
        Arc::new(hooks),
    ))
}
