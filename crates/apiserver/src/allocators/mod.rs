//! What the API server hands out itself, as upstream's service REST
//! storage does: Service ClusterIPs from the service CIDR and NodePorts
//! from the node-port range ([`services`] applies them to Services on
//! create, update and delete), with the `networking.k8s.io/v1` objects
//! that show them (one IPAddress per ClusterIP, [`ipaddresses`]); the
//! Services' storage hooks (`crate::resources::services`) call
//! [`services`], and `crate::bootstrap` rebuilds the taken sets at start.
//!
//! The taken addresses and ports live in memory behind one lock; they are
//! rebuilt from the stored Services at every start (and the IPAddress
//! objects repaired to match), so stored Services are the truth and a
//! restart keeps every assignment. It does not validate Services beyond
//! what allocation needs (crates/api's validation does).

pub mod ipaddresses;
pub mod ipv4;
pub mod ports;
pub mod services;

use std::sync::Mutex;

pub use ipv4::{Cidr, IpRange};
pub use ports::{PortRange, Ports};

/// The service CIDR k3s uses (skiff's cluster DNS is 10.43.0.10).
pub const DEFAULT_SERVICE_CIDR: &str = "10.43.0.0/16";
/// Upstream's default `--service-node-port-range`.
pub const DEFAULT_NODE_PORT_RANGE: &str = "30000-32767";

/// The ranges and what is taken in them.
#[derive(Debug)]
pub struct Allocators {
    taken: Mutex<Taken>,
    cidr: Cidr,
    node_ports: PortRange,
}

#[derive(Debug)]
struct Taken {
    ips: IpRange,
    ports: Ports,
}

/// The defaults: 10.43.0.0/16 and 30000-32767.
#[expect(
    clippy::expect_used,
    reason = "the default constants parse (tested below)"
)]
fn defaults() -> (Cidr, PortRange) {
    (
        DEFAULT_SERVICE_CIDR.parse().expect("default CIDR"),
        DEFAULT_NODE_PORT_RANGE.parse().expect("default range"),
    )
}

impl Default for Allocators {
    fn default() -> Self {
        let (cidr, ports) = defaults();
        Allocators::new(cidr, ports)
    }
}

impl Allocators {
    pub fn new(cidr: Cidr, node_ports: PortRange) -> Self {
        Allocators {
            taken: Mutex::new(Taken {
                ips: IpRange::new(cidr),
                ports: Ports::new(node_ports),
            }),
            cidr,
            node_ports,
        }
    }

    pub fn cidr(&self) -> Cidr {
        self.cidr
    }

    pub fn node_ports(&self) -> PortRange {
        self.node_ports
    }

    /// The `kubernetes` Service's address: the range's first.
    pub fn first_ip(&self) -> Option<std::net::Ipv4Addr> {
        IpRange::new(self.cidr).first()
    }

    /// Runs `f` with the taken sets locked.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut IpRange, &mut Ports) -> T) -> T {
        let mut taken = match self.taken.lock() {
            Ok(t) => t,
            // A panic while holding the lock left sets that are still
            // consistent (every change is one insert or remove).
            Err(poisoned) => poisoned.into_inner(),
        };
        let Taken { ips, ports } = &mut *taken;
        f(ips, ports)
    }
}

/// A random number for picking where a search starts.
fn random() -> u64 {
    uuid::Uuid::new_v4().as_u64_pair().0
}

#[cfg(test)]
mod tests {
    #[test]
    fn defaults_parse() {
        let (cidr, ports) = super::defaults();
        assert_eq!(cidr.to_string(), "10.43.0.0/16");
        assert_eq!(ports.to_string(), "30000-32767");
    }
}
