//! The node CIDR allocator: which node-sized blocks of the cluster CIDR
//! are taken (upstream's `cidrset.CidrSet`, IPv4 only).
//!
//! This module owns the bitmap and the arithmetic: [`CidrSet::allocate_next`]
//! hands out the next free block after the last one handed out (round
//! robin, as upstream, so a just-released block is not reused at once
//! while others are free), [`CidrSet::occupy`] and [`CidrSet::release`]
//! mark any CIDR overlapping the cluster CIDR. It is pure: no I/O, no
//! knowledge of nodes.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// The most node blocks one set tracks (2^24 bits, 2 MiB of bitmap).
pub const MAX_BLOCKS_BITS: u8 = 24;

/// Why a CIDR or a set was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Not `a.b.c.d/n`.
    #[error("invalid CIDR {text:?}: {reason}")]
    Parse {
        /// The text.
        text: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// The node mask is shorter than the cluster CIDR's.
    #[error(
        "node CIDR mask size {node_mask} is smaller than the mask size of the cluster CIDR {cluster} \
         (the node mask size must be at least {})",
        cluster.prefix
    )]
    NodeMaskTooSmall {
        /// The cluster CIDR.
        cluster: Ipv4Cidr,
        /// The node mask size.
        node_mask: u8,
    },
    /// The node mask is longer than 32 bits.
    #[error("node CIDR mask size {node_mask} is invalid for IPv4 (at most 32)")]
    NodeMaskTooLarge {
        /// The node mask size.
        node_mask: u8,
    },
    /// More than 2^[`MAX_BLOCKS_BITS`] node blocks.
    #[error(
        "the cluster CIDR {cluster} holds too many /{node_mask} node CIDRs (at most 2^{MAX_BLOCKS_BITS}); \
         use a longer node mask size"
    )]
    TooManyBlocks {
        /// The cluster CIDR.
        cluster: Ipv4Cidr,
        /// The node mask size.
        node_mask: u8,
    },
    /// Every block is taken (upstream's wording).
    #[error("CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range")]
    Exhausted,
    /// The CIDR does not overlap the cluster CIDR.
    #[error("cidr {cidr} is out the range of cluster cidr {cluster}")]
    OutOfRange {
        /// The CIDR.
        cidr: Ipv4Cidr,
        /// The cluster CIDR.
        cluster: Ipv4Cidr,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An IPv4 network: its address with the host bits cleared, and its
/// prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv4Cidr {
    network: Ipv4Addr,
    prefix: u8,
}

impl Ipv4Cidr {
    /// The network of `addr/prefix` (host bits cleared); `None` for a
    /// prefix over 32.
    pub fn new(addr: Ipv4Addr, prefix: u8) -> Option<Self> {
        (prefix <= 32).then(|| Self {
            network: Ipv4Addr::from(u32::from(addr) & mask(prefix)),
            prefix,
        })
    }

    /// The network address.
    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    fn first(&self) -> u32 {
        u32::from(self.network)
    }

    fn last(&self) -> u32 {
        self.first() | !mask(self.prefix)
    }

    /// Whether the two networks share any address.
    pub fn overlaps(&self, other: &Ipv4Cidr) -> bool {
        self.first() <= other.last() && other.first() <= self.last()
    }
}

fn mask(prefix: u8) -> u32 {
    match prefix {
        0 => 0,
        p => u32::MAX << (32 - u32::from(p.min(32))),
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl FromStr for Ipv4Cidr {
    type Err = Error;

    /// `a.b.c.d/n`; host bits are cleared as Go's `net.ParseCIDR` does.
    fn from_str(text: &str) -> Result<Self> {
        let err = |reason| Error::Parse {
            text: text.to_string(),
            reason,
        };
        let (addr, prefix) = text.trim().split_once('/').ok_or_else(|| {
            err("expected an IPv4 address and a prefix length, like 10.244.0.0/16")
        })?;
        if addr.contains(':') {
            return Err(err("IPv6 CIDRs are not supported yet"));
        }
        let addr: Ipv4Addr = addr
            .parse()
            .map_err(|_| err("the address is not an IPv4 address"))?;
        let prefix: u8 = prefix
            .parse()
            .map_err(|_| err("the prefix length is not a number from 0 to 32"))?;
        Ipv4Cidr::new(addr, prefix)
            .ok_or_else(|| err("the prefix length is not a number from 0 to 32"))
    }
}

/// Which node blocks of a cluster CIDR are taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CidrSet {
    cluster: Ipv4Cidr,
    node_mask: u8,
    blocks: usize,
    next_candidate: usize,
    used: Vec<u64>,
}

impl CidrSet {
    /// An empty set of `/node_mask` blocks in `cluster`.
    pub fn new(cluster: Ipv4Cidr, node_mask: u8) -> Result<Self> {
        if node_mask > 32 {
            return Err(Error::NodeMaskTooLarge { node_mask });
        }
        if node_mask < cluster.prefix {
            return Err(Error::NodeMaskTooSmall { cluster, node_mask });
        }
        let bits = node_mask - cluster.prefix;
        if bits > MAX_BLOCKS_BITS {
            return Err(Error::TooManyBlocks { cluster, node_mask });
        }
        let blocks = 1usize << bits;
        Ok(Self {
            cluster,
            node_mask,
            blocks,
            next_candidate: 0,
            used: vec![0; blocks.div_ceil(64)],
        })
    }

    /// The cluster CIDR.
    pub fn cluster(&self) -> Ipv4Cidr {
        self.cluster
    }

    /// The node mask size.
    pub fn node_mask(&self) -> u8 {
        self.node_mask
    }

    /// How many node blocks the cluster CIDR holds.
    pub fn capacity(&self) -> usize {
        self.blocks
    }

    /// How many are free.
    pub fn free(&self) -> usize {
        let used: usize = self.used.iter().map(|w| w.count_ones() as usize).sum();
        self.blocks.saturating_sub(used)
    }

    fn is_used(&self, i: usize) -> bool {
        self.used
            .get(i / 64)
            .is_some_and(|w| w & (1u64 << (i % 64)) != 0)
    }

    fn set(&mut self, i: usize, used: bool) {
        if let Some(w) = self.used.get_mut(i / 64) {
            if used {
                *w |= 1u64 << (i % 64);
            } else {
                *w &= !(1u64 << (i % 64));
            }
        }
    }

    fn block(&self, i: usize) -> Ipv4Cidr {
        let shift = 32 - u32::from(self.node_mask);
        // A /0 node mask has one block, at offset 0 (a shift by 32 is none).
        let offset = u32::try_from(i)
            .unwrap_or(u32::MAX)
            .checked_shl(shift)
            .unwrap_or(0);
        Ipv4Cidr {
            network: Ipv4Addr::from(self.cluster.first() | offset),
            prefix: self.node_mask,
        }
    }

    fn index_of(&self, addr: u32) -> usize {
        let shift = 32 - u32::from(self.node_mask);
        let i = (addr ^ self.cluster.first())
            .checked_shr(shift)
            .unwrap_or(0);
        usize::try_from(i).unwrap_or(usize::MAX)
    }

    /// The next free block after the last one allocated, now taken.
    pub fn allocate_next(&mut self) -> Result<Ipv4Cidr> {
        let found = (0..self.blocks)
            .map(|k| (k + self.next_candidate) % self.blocks)
            .find(|&i| !self.is_used(i))
            .ok_or(Error::Exhausted)?;
        self.next_candidate = (found + 1) % self.blocks;
        self.set(found, true);
        Ok(self.block(found))
    }

    /// The blocks `cidr` covers (every block when it covers the whole
    /// cluster CIDR, its containing block when smaller than one).
    fn range(&self, cidr: &Ipv4Cidr) -> Result<(usize, usize)> {
        if !self.cluster.overlaps(cidr) {
            return Err(Error::OutOfRange {
                cidr: *cidr,
                cluster: self.cluster,
            });
        }
        if cidr.prefix <= self.cluster.prefix {
            return Ok((0, self.blocks - 1));
        }
        Ok((self.index_of(cidr.first()), self.index_of(cidr.last())))
    }

    /// Marks `cidr` as taken (whether or not it was).
    pub fn occupy(&mut self, cidr: &Ipv4Cidr) -> Result<()> {
        let (begin, end) = self.range(cidr)?;
        for i in begin..=end {
            self.set(i, true);
        }
        Ok(())
    }

    /// Marks `cidr` as free.
    pub fn release(&mut self, cidr: &Ipv4Cidr) -> Result<()> {
        let (begin, end) = self.range(cidr)?;
        for i in begin..=end {
            self.set(i, false);
        }
        Ok(())
    }

    /// Whether every block of `cidr` is taken.
    pub fn is_occupied(&self, cidr: &Ipv4Cidr) -> bool {
        self.range(cidr)
            .is_ok_and(|(begin, end)| (begin..=end).all(|i| self.is_used(i)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Ipv4Cidr {
        s.parse().expect("cidr")
    }

    #[test]
    fn parsing_clears_host_bits_and_words_errors() {
        assert_eq!(cidr("10.244.3.7/16").to_string(), "10.244.0.0/16");
        assert_eq!(cidr("0.0.0.0/0").to_string(), "0.0.0.0/0");
        let err = |s: &str| s.parse::<Ipv4Cidr>().map_err(|e| e.to_string()).err();
        assert_eq!(
            err("10.244.0.0").as_deref(),
            Some("invalid CIDR \"10.244.0.0\": expected an IPv4 address and a prefix length, like 10.244.0.0/16")
        );
        assert_eq!(
            err("10.244.0.0/33").as_deref(),
            Some("invalid CIDR \"10.244.0.0/33\": the prefix length is not a number from 0 to 32")
        );
        assert_eq!(
            err("fd00::/48").as_deref(),
            Some("invalid CIDR \"fd00::/48\": IPv6 CIDRs are not supported yet")
        );
        assert_eq!(
            err("10.300.0.0/16").as_deref(),
            Some("invalid CIDR \"10.300.0.0/16\": the address is not an IPv4 address")
        );
    }

    #[test]
    fn allocates_in_order_until_exhausted() {
        let mut set = CidrSet::new(cidr("10.244.0.0/22"), 24).expect("set");
        assert_eq!(set.capacity(), 4);
        let got: Vec<String> = (0..4)
            .map(|_| set.allocate_next().expect("free").to_string())
            .collect();
        assert_eq!(
            got,
            [
                "10.244.0.0/24",
                "10.244.1.0/24",
                "10.244.2.0/24",
                "10.244.3.0/24"
            ]
        );
        assert_eq!(set.allocate_next(), Err(Error::Exhausted));
        assert_eq!(set.free(), 0);
    }

    #[test]
    fn release_frees_and_allocation_goes_round_robin() {
        let mut set = CidrSet::new(cidr("10.0.0.0/24"), 26).expect("set");
        let a = set.allocate_next().expect("a");
        let b = set.allocate_next().expect("b");
        set.release(&a).expect("release");
        // The next candidate comes after b, not the freed a.
        assert_eq!(set.allocate_next().expect("c").to_string(), "10.0.0.128/26");
        assert_eq!(set.allocate_next().expect("d").to_string(), "10.0.0.192/26");
        // Wrapped around: a is free again.
        assert_eq!(set.allocate_next().expect("e"), a);
        assert!(set.is_occupied(&b));
        assert_eq!(set.allocate_next(), Err(Error::Exhausted));
    }

    #[test]
    fn occupy_marks_what_exists_and_refuses_what_is_outside() {
        let mut set = CidrSet::new(cidr("10.244.0.0/16"), 24).expect("set");
        set.occupy(&cidr("10.244.0.0/24")).expect("occupy");
        set.occupy(&cidr("10.244.1.64/26"))
            .expect("a smaller one takes its block");
        assert!(set.is_occupied(&cidr("10.244.1.0/24")));
        assert_eq!(
            set.allocate_next().expect("next").to_string(),
            "10.244.2.0/24"
        );
        // A larger one takes every block it covers.
        set.occupy(&cidr("10.244.4.0/23")).expect("occupy /23");
        assert!(set.is_occupied(&cidr("10.244.5.0/24")));
        assert_eq!(set.free(), 256 - 5);
        assert_eq!(
            set.occupy(&cidr("10.245.0.0/24")),
            Err(Error::OutOfRange {
                cidr: cidr("10.245.0.0/24"),
                cluster: cidr("10.244.0.0/16")
            })
        );
        assert_eq!(
            set.occupy(&cidr("10.245.0.0/24"))
                .map_err(|e| e.to_string()),
            Err("cidr 10.245.0.0/24 is out the range of cluster cidr 10.244.0.0/16".into())
        );
        // Covering the whole cluster CIDR takes everything.
        set.occupy(&cidr("10.0.0.0/8")).expect("occupy all");
        assert_eq!(set.free(), 0);
        set.release(&cidr("10.244.0.0/16")).expect("release all");
        assert_eq!(set.free(), 256);
    }

    #[test]
    fn masks_are_checked() {
        assert!(matches!(
            CidrSet::new(cidr("10.244.0.0/16"), 8),
            Err(Error::NodeMaskTooSmall { .. })
        ));
        assert_eq!(
            CidrSet::new(cidr("10.244.0.0/16"), 8).map_err(|e| e.to_string()).err().as_deref(),
            Some(
                "node CIDR mask size 8 is smaller than the mask size of the cluster CIDR 10.244.0.0/16 \
                 (the node mask size must be at least 16)"
            )
        );
        assert!(matches!(
            CidrSet::new(cidr("10.0.0.0/8"), 33),
            Err(Error::NodeMaskTooLarge { .. })
        ));
        assert!(matches!(
            CidrSet::new(cidr("0.0.0.0/0"), 32),
            Err(Error::TooManyBlocks { .. })
        ));
        // A /32 node mask: single addresses.
        let mut set = CidrSet::new(cidr("10.0.0.0/30"), 32).expect("set");
        assert_eq!(set.allocate_next().expect("a").to_string(), "10.0.0.0/32");
        assert_eq!(set.allocate_next().expect("b").to_string(), "10.0.0.1/32");
        // Equal masks: one block, the cluster CIDR itself.
        let mut one = CidrSet::new(cidr("10.1.0.0/24"), 24).expect("set");
        assert_eq!(
            one.allocate_next().expect("only").to_string(),
            "10.1.0.0/24"
        );
        assert_eq!(one.allocate_next(), Err(Error::Exhausted));
    }
}
