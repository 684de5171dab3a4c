//! What the catalog needs of the custom resources a server's
//! CustomResourceDefinitions serve: [`CustomKinds`], the per-server
//! source (`crate::customresources::Registry` implements it), and
//! [`CustomKind`], one served version. The catalog asks through these
//! traits only, so it depends on nothing that serves CRDs.

use std::sync::Arc;

use serde_json::Value;

use super::{Resource, Strategy};
use crate::status::ApiResult;

/// One served version of a custom resource.
pub trait CustomKind: Send + Sync + std::fmt::Debug {
    /// The resource it is served as (storage name `group/plural`).
    fn resource(&self) -> &'static Resource;
    /// Listed in discovery and OpenAPI (its CRD is Established).
    fn established(&self) -> bool;
    /// Its write rules (schema validation, status handling, conversion
    /// between the served and the storage version).
    fn strategy(&self) -> &dyn Strategy;
    /// Prunes and defaults a body in the served form (upstream's decoding
    /// of a request), checking metadata's types as ObjectMeta.
    fn normalize(&self, obj: Value, served: (&str, &str)) -> ApiResult<Value>;
    /// The fields pruning would drop from `obj` (`unknown field "spec.x"`).
    fn unknown_fields(&self, obj: &Value) -> Vec<String>;
    /// `selectableFields` as field selectors name them (`spec.color`).
    fn selectable_fields(&self) -> &'static [&'static str];
    /// The `Warning` a request to this version gets, if it is deprecated.
    fn deprecation(&self) -> Option<&str>;
    /// The served version itself, for its server's handlers (its Table
    /// columns and scale paths are theirs to read).
    fn as_any(&self) -> &dyn std::any::Any;
}

/// The custom resources one API server serves.
pub trait CustomKinds: Send + Sync + std::fmt::Debug {
    /// The served version at `group`/`version`/`plural`.
    fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<dyn CustomKind>>;
    /// The served version of custom kind `kind` in `group` at `version`
    /// (the storage version first when `version` is empty).
    fn by_kind(&self, group: &str, kind: &str, version: &str) -> Option<Arc<dyn CustomKind>>;
    /// Every served version, established or not, sorted by group,
    /// version order and plural.
    fn all(&self) -> Vec<Arc<dyn CustomKind>>;
    /// Bumped on every change of the served set (documents rebuild on it).
    fn generation(&self) -> u64;
    /// Whether any served version is deprecated (requests then look for a
    /// warning to send).
    fn any_deprecated(&self) -> bool;
    /// The selectable fields of every served version stored under
    /// `storage` (what the watch cache keeps of each object).
    fn selectable_for_storage(&self, storage: &str) -> &'static [&'static str];
}

/// A server without custom resources (the built-in catalog).
#[derive(Debug, Default)]
pub struct NoCustomKinds;

impl CustomKinds for NoCustomKinds {
    fn find(&self, _: &str, _: &str, _: &str) -> Option<Arc<dyn CustomKind>> {
        None
    }
    fn by_kind(&self, _: &str, _: &str, _: &str) -> Option<Arc<dyn CustomKind>> {
        None
    }
    fn all(&self) -> Vec<Arc<dyn CustomKind>> {
        Vec::new()
    }
    fn generation(&self) -> u64 {
        0
    }
    fn any_deprecated(&self) -> bool {
        false
    }
    fn selectable_for_storage(&self, _: &str) -> &'static [&'static str] {
        &[]
    }
}

/// Whether a storage name is a custom resource's (`group/plural`).
pub fn is_custom_storage(storage: &str) -> bool {
    storage.contains('/')
}
