//! Services (DNS-1035 names): defaults, validation (the ClusterIP may
//! not change once set), and their storage hooks ([`ServiceHooks`]):
//! ClusterIPs and NodePorts taken before a write is stored and given back
//! when the store refused it or the Service is gone
//! (`crate::allocators::services` works them out).

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Service;
use serde_json::Value;
use skiff_api::validation::FieldError;
use skiff_store::Store;

use crate::allocators::services::{self as alloc, Reservation};
use crate::allocators::Allocators;
use crate::catalog::{Pending, StorageHooks};
use crate::status::ApiResult;

use crate::catalog::{resource, KindDef, Strategy, Typed, ALL};

pub static KIND: KindDef = KindDef {
    group: "",
    kind: "Service",
    resource: Some(resource(
        "",
        "v1",
        "services",
        "service",
        "Service",
        true,
        &["svc"],
        ALL,
        &["status"],
    )),
    selectable_fields: &[],
    strategy: &ServiceStrategy,
    typed: &Typed::<Service>::NEW,
};

#[derive(Debug)]
struct ServiceStrategy;

impl Strategy for ServiceStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::service(obj);
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        // Upstream clears status: `status: {loadBalancer: {}}`.
        crate::object::set(obj, "status", serde_json::json!({"loadBalancer": {}}));
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::service(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::service_update(old, new)
    }
    fn name_errors(&self, name: &str) -> Vec<String> {
        skiff_api::validation::names::dns1035_label(name)
    }
}

/// A server's storage hooks for Services: its allocators and the store
/// the IPAddress objects are written to.
#[derive(Debug)]
pub struct ServiceHooks {
    pub store: Arc<dyn Store>,
    pub allocators: Arc<Allocators>,
}

/// A Service write's reservation, finished once the store answered.
struct Held {
    reservation: Reservation,
    store: Arc<dyn Store>,
    allocators: Arc<Allocators>,
}

#[async_trait]
impl Pending for Held {
    async fn finish(self: Box<Self>, stored: bool) {
        let Held {
            reservation,
            store,
            allocators,
        } = *self;
        reservation
            .finish(store.as_ref(), &allocators, stored)
            .await;
    }
}

impl ServiceHooks {
    fn held(&self, reservation: Reservation) -> Box<dyn Pending> {
        Box::new(Held {
            reservation,
            store: self.store.clone(),
            allocators: self.allocators.clone(),
        })
    }
}

#[async_trait]
impl StorageHooks for ServiceHooks {
    async fn begin_create(&self, obj: &mut Value, dry_run: bool) -> ApiResult<Box<dyn Pending>> {
        let reservation = alloc::on_create(&self.allocators, obj, dry_run)?;
        Ok(self.held(reservation))
    }

    fn before_update_validation(&self, old: &Value, new: &mut Value) {
        alloc::patch_allocated(old, new);
    }

    async fn begin_update(
        &self,
        old: &Value,
        new: &mut Value,
        dry_run: bool,
    ) -> ApiResult<Box<dyn Pending>> {
        let reservation = alloc::on_update(&self.allocators, old, new, dry_run)?;
        Ok(self.held(reservation))
    }

    async fn after_delete(&self, obj: &Value) {
        alloc::on_deleted(self.store.as_ref(), &self.allocators, obj).await;
    }
}
