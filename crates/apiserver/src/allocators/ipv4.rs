//! An IPv4 service range and the addresses taken in it (upstream's
//! `ipallocator` for one ServiceCIDR): the network and broadcast
//! addresses are never handed out; dynamic allocation picks at random,
//! first above the range's static block (KEP-3070: the lowest
//! `min(max(16, size/16), 256)` addresses are kept for clients that ask
//! for one), then in it.

use std::collections::BTreeSet;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// A CIDR such as 10.43.0.0/16 (host bits cleared).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    base: u32,
    prefix: u8,
}

impl Cidr {
    /// The first address (network).
    pub fn network(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.base)
    }

    fn size(&self) -> u64 {
        1u64 << (32 - u32::from(self.prefix))
    }

    /// Whether `ip` is inside the CIDR.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let ip = u64::from(u32::from(ip));
        ip >= u64::from(self.base) && ip < u64::from(self.base) + self.size()
    }

    /// The `n`th address (0 = network).
    pub fn nth(&self, n: u64) -> Option<Ipv4Addr> {
        (n < self.size())
            .then(|| u32::try_from(u64::from(self.base) + n).ok())
            .flatten()
            .map(Ipv4Addr::from)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network(), self.prefix)
    }
}

impl FromStr for Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (ip, prefix) = s
            .split_once('/')
            .ok_or_else(|| format!("invalid CIDR address: {s}"))?;
        let ip: Ipv4Addr = ip
            .parse()
            .map_err(|_| format!("invalid CIDR address: {s}"))?;
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| (1..=30).contains(p))
            .ok_or_else(|| format!("invalid CIDR address: {s}"))?;
        let mask = u32::MAX << (32 - u32::from(prefix));
        Ok(Cidr {
            base: u32::from(ip) & mask,
            prefix,
        })
    }
}

/// Why an address cannot be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpError {
    Allocated,
    NotInRange { ip: Ipv4Addr, range: Cidr },
    Full,
}

impl fmt::Display for IpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpError::Allocated => f.write_str("provided IP is already allocated"),
            IpError::NotInRange { ip, range } => write!(
                f,
                "the provided IP ({ip}) is not in the valid range. The range of valid IPs is {range}"
            ),
            IpError::Full => f.write_str("range is full"),
        }
    }
}

/// The taken addresses of one range.
#[derive(Debug, Clone)]
pub struct IpRange {
    cidr: Cidr,
    taken: BTreeSet<u32>,
}

impl IpRange {
    pub fn new(cidr: Cidr) -> Self {
        IpRange {
            cidr,
            taken: BTreeSet::new(),
        }
    }

    pub fn cidr(&self) -> Cidr {
        self.cidr
    }

    /// Addresses that may be handed out: all but network and broadcast.
    fn usable(&self) -> u64 {
        self.cidr.size().saturating_sub(2)
    }

    /// The first usable address (the `kubernetes` Service's).
    pub fn first(&self) -> Option<Ipv4Addr> {
        self.cidr.nth(1)
    }

    /// Whether `ip` may be handed out at all.
    pub fn check(&self, ip: Ipv4Addr) -> Result<(), IpError> {
        let n = u32::from(ip);
        let in_range = self.cidr.contains(ip)
            && n != self.cidr.base
            && u64::from(n) != u64::from(self.cidr.base) + self.cidr.size() - 1;
        if !in_range {
            return Err(IpError::NotInRange {
                ip,
                range: self.cidr,
            });
        }
        if self.taken.contains(&n) {
            return Err(IpError::Allocated);
        }
        Ok(())
    }

    /// Takes `ip`.
    pub fn allocate(&mut self, ip: Ipv4Addr) -> Result<(), IpError> {
        self.check(ip)?;
        self.taken.insert(u32::from(ip));
        Ok(())
    }

    /// Whether `ip` is taken.
    pub fn has(&self, ip: Ipv4Addr) -> bool {
        self.taken.contains(&u32::from(ip))
    }

    /// Marks `ip` taken whatever it is (rebuilding from stored Services);
    /// false when it is outside the range.
    pub fn mark(&mut self, ip: Ipv4Addr) -> bool {
        let ok = self.check(ip).is_ok() || self.has(ip);
        if ok {
            self.taken.insert(u32::from(ip));
        }
        ok
    }

    pub fn release(&mut self, ip: Ipv4Addr) {
        self.taken.remove(&u32::from(ip));
    }

    /// Picks a free address (not taken), `random` choosing the start.
    pub fn pick(&self, random: u64) -> Result<Ipv4Addr, IpError> {
        let usable = self.usable();
        if usable == 0 {
            return Err(IpError::Full);
        }
        let offset = (usable / 16).clamp(16, 256).min(usable);
        // Upper block first, then the static block; each scanned from a
        // random start.
        for (lo, hi) in [(offset, usable), (0, offset)] {
            let len = hi - lo;
            if len == 0 {
                continue;
            }
            let start = random % len;
            for i in 0..len {
                let n = lo + (start + i) % len + 1;
                if let Some(ip) = self.cidr.nth(n) {
                    if !self.has(ip) {
                        return Ok(ip);
                    }
                }
            }
        }
        Err(IpError::Full)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_errors() {
        let cidr: Cidr = "10.43.7.9/16".parse().unwrap();
        assert_eq!(cidr.to_string(), "10.43.0.0/16");
        let mut r = IpRange::new(cidr);
        assert_eq!(r.first(), Some(Ipv4Addr::new(10, 43, 0, 1)));
        let ip = Ipv4Addr::new(10, 43, 0, 5);
        r.allocate(ip).unwrap();
        assert_eq!(r.allocate(ip), Err(IpError::Allocated));
        assert!(matches!(
            r.allocate(Ipv4Addr::new(10, 44, 0, 1)),
            Err(IpError::NotInRange { .. })
        ));
        assert!(r.allocate(Ipv4Addr::new(10, 43, 255, 255)).is_err());
        assert!(r.allocate(Ipv4Addr::new(10, 43, 0, 0)).is_err());
        let picked = r.pick(12345).unwrap();
        assert!(u32::from(picked) > u32::from(Ipv4Addr::new(10, 43, 1, 0)));
        r.release(ip);
        r.allocate(ip).unwrap();
    }

    #[test]
    fn a_tiny_range_fills_up() {
        let mut r = IpRange::new("10.0.0.0/30".parse().unwrap());
        let a = r.pick(0).unwrap();
        r.allocate(a).unwrap();
        let b = r.pick(7).unwrap();
        r.allocate(b).unwrap();
        assert_ne!(a, b);
        assert_eq!(r.pick(3), Err(IpError::Full));
    }
}
