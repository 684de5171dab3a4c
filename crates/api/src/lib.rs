//! skiff-api: the Kubernetes API's pure logic, shared by the API server and
//! the components. Objects are `serde_json::Value`s in their wire form. No
//! I/O lives here.

pub mod apply;
pub mod defaults;
mod kinds;
pub mod patch;
pub mod quantity;
pub mod selectors;
pub mod tables;
pub mod validation;
