//! skiff-api: the Kubernetes API's pure logic, shared by the API server and
//! the components. Objects are `serde_json::Value`s in their wire form. No
//! I/O lives here.
// Nothing a request sends may panic here: no unwrap, expect, panic or
// unchecked indexing outside tests (an invariant that really holds says
// so with `#[expect(..., reason = ...)]`).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]

pub mod apply;
pub mod bootstrap_token;
pub mod crd;
pub mod defaults;
pub mod jwt;
pub mod kinds;
pub mod patch;
pub mod quantity;
pub mod quota;
pub mod scheduling_wait;
pub mod selectors;
pub mod tables;
pub mod validation;
