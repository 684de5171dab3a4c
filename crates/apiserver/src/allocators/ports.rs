//! The NodePort range (upstream's `portallocator`, default 30000-32767):
//! which ports are taken, with upstream's errors; dynamic allocation picks
//! at random, above the range's static block first (KEP-3668), then in it.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// An inclusive port range such as 30000-32767.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub base: u16,
    pub size: u16,
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-{}",
            self.base,
            u32::from(self.base) + u32::from(self.size) - 1
        )
    }
}

impl FromStr for PortRange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("invalid port range: {s}");
        let (lo, hi) = s.split_once('-').ok_or_else(bad)?;
        let lo: u16 = lo.trim().parse().map_err(|_| bad())?;
        let hi: u16 = hi.trim().parse().map_err(|_| bad())?;
        if lo == 0 || hi < lo {
            return Err(bad());
        }
        Ok(PortRange {
            base: lo,
            size: hi - lo + 1,
        })
    }
}

impl PortRange {
    pub fn contains(&self, port: i64) -> bool {
        port >= i64::from(self.base) && port < i64::from(self.base) + i64::from(self.size)
    }
}

/// Why a port cannot be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortError {
    Allocated,
    NotInRange(PortRange),
    Full,
}

impl fmt::Display for PortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortError::Allocated => f.write_str("provided port is already allocated"),
            PortError::NotInRange(r) => write!(
                f,
                "provided port is not in the valid range. The range of valid ports is {r}"
            ),
            PortError::Full => f.write_str("range is full"),
        }
    }
}

/// The taken ports of the range.
#[derive(Debug, Clone)]
pub struct Ports {
    range: PortRange,
    taken: BTreeSet<u16>,
}

impl Ports {
    pub fn new(range: PortRange) -> Self {
        Ports {
            range,
            taken: BTreeSet::new(),
        }
    }

    pub fn check(&self, port: i64) -> Result<u16, PortError> {
        if !self.range.contains(port) {
            return Err(PortError::NotInRange(self.range));
        }
        let port = u16::try_from(port).map_err(|_| PortError::NotInRange(self.range))?;
        if self.taken.contains(&port) {
            return Err(PortError::Allocated);
        }
        Ok(port)
    }

    pub fn allocate(&mut self, port: i64) -> Result<u16, PortError> {
        let port = self.check(port)?;
        self.taken.insert(port);
        Ok(port)
    }

    /// Marks a stored Service's port taken; false when out of range.
    pub fn mark(&mut self, port: i64) -> bool {
        match u16::try_from(port) {
            Ok(p) if self.range.contains(port) => {
                self.taken.insert(p);
                true
            }
            _ => false,
        }
    }

    pub fn has(&self, port: u16) -> bool {
        self.taken.contains(&port)
    }

    pub fn release(&mut self, port: u16) {
        self.taken.remove(&port);
    }

    /// A free port, `random` choosing where the search starts.
    pub fn pick(&self, random: u64) -> Result<u16, PortError> {
        let size = u64::from(self.range.size);
        let offset = (size / 32).clamp(16, 128).min(size);
        for (lo, hi) in [(offset, size), (0, offset)] {
            let len = hi - lo;
            if len == 0 {
                continue;
            }
            let start = random % len;
            for i in 0..len {
                let n = lo + (start + i) % len;
                let Ok(port) = u16::try_from(u64::from(self.range.base) + n) else {
                    continue;
                };
                if !self.has(port) {
                    return Ok(port);
                }
            }
        }
        Err(PortError::Full)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_and_errors() {
        let range: PortRange = "30000-32767".parse().unwrap();
        assert_eq!(range.to_string(), "30000-32767");
        let mut p = Ports::new(range);
        p.allocate(30080).unwrap();
        assert_eq!(p.allocate(30080), Err(PortError::Allocated));
        assert_eq!(
            p.allocate(80).unwrap_err().to_string(),
            "provided port is not in the valid range. The range of valid ports is 30000-32767"
        );
        let picked = p.pick(99).unwrap();
        assert!(picked >= 30086 && picked != 30080);
        let mut small = Ports::new("30000-30001".parse().unwrap());
        small.allocate(i64::from(small.pick(1).unwrap())).unwrap();
        small.allocate(i64::from(small.pick(1).unwrap())).unwrap();
        assert_eq!(small.pick(0), Err(PortError::Full));
    }
}
