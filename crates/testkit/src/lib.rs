//! Test support: starts the real services tests need, each on free loopback
//! ports with a private temporary directory, and stops them on drop. Tests
//! run in parallel never share a port or a data dir.

pub mod apiserver;
pub mod etcd;
pub mod ports;
pub mod registry;

pub use apiserver::TestApiServer;
pub use etcd::{EtcdCluster, EtcdServer};
pub use ports::free_port;
pub use registry::Registry;
