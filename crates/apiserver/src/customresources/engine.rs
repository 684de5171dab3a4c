//! The schema engine (skiff-api's `crd`: structural schemas, defaulting,
//! pruning, validation, JSONPath columns, CRD validation), in one place.

pub use skiff_api::crd::{default_crd, validate_crd, validate_crd_update, Structural};
