//! Facts about this machine that the Node object reports: CPUs, memory,
//! hugepages, the root dir's filesystem size, kernel and OS, architecture,
//! hostname, machine and boot ids, and the node IP.
//!
//! This module owns reading them (cAdvisor's job for upstream's kubelet):
//! each fact is a pure function over the text of a `/proc`, `/sys` or
//! `/etc` file, unit-tested on samples, plus [`Machine::gather`] which
//! reads the files. It sends no network traffic (the node IP comes from a
//! route lookup, a UDP `connect` that sends nothing) and must not talk to
//! the API server or decide anything about the Node object.

use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::path::{Path, PathBuf};

/// Why a fact could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file every Linux machine has could not be read.
    #[error("reading {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `/proc/meminfo` has no usable `MemTotal` line.
    #[error("no MemTotal in {path}")]
    NoMemTotal {
        /// The file.
        path: PathBuf,
    },
    /// `statvfs` of the agent's root dir (or its nearest existing
    /// ancestor) failed.
    #[error("statvfs {path}")]
    Statvfs {
        /// The directory asked about.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Neither the default route nor any interface gave an IPv4 address.
    #[error("can't get ip address of node: no default route with a source address and no non-loopback IPv4 address")]
    NoNodeIp,
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What this machine is, as the Node reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// Online CPUs (cAdvisor's NumCores: the machine's, not the cgroup's).
    pub cpus: u32,
    /// `MemTotal`, in bytes.
    pub memory_bytes: u64,
    /// Bytes of 2 MiB hugepages configured.
    pub hugepages_2mi_bytes: u64,
    /// Bytes of 1 GiB hugepages configured.
    pub hugepages_1gi_bytes: u64,
    /// Size of the filesystem holding the agent's root dir, in bytes.
    pub ephemeral_storage_bytes: u64,
    /// `/proc/sys/kernel/osrelease`, e.g. `6.1.0-18-amd64`.
    pub kernel_version: String,
    /// `PRETTY_NAME` of `/etc/os-release`, `Linux` when there is none.
    pub os_image: String,
    /// Go's name for the architecture (`amd64`, `arm64`, ...).
    pub architecture: String,
    /// The kernel's hostname, lowercased as kubelet does.
    pub hostname: String,
    /// `/etc/machine-id` (empty when absent, as in some containers).
    pub machine_id: String,
    /// `/sys/class/dmi/id/product_uuid` (empty when unreadable).
    pub system_uuid: String,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
}

impl Machine {
    /// Reads the facts of this machine; `root_dir` is the agent's state
    /// dir, whose filesystem gives ephemeral-storage.
    pub fn gather(root_dir: &Path) -> Result<Machine> {
        let meminfo_path = Path::new("/proc/meminfo");
        let meminfo = read(meminfo_path)?;
        let memory_bytes = mem_total_bytes(&meminfo).ok_or_else(|| Error::NoMemTotal {
            path: meminfo_path.to_path_buf(),
        })?;
        let cpus = read_optional("/proc/cpuinfo")
            .map(|text| cpu_count(&text))
            .filter(|n| *n > 0)
            .or_else(|| {
                std::thread::available_parallelism()
                    .ok()
                    .and_then(|n| u32::try_from(n.get()).ok())
            })
            .unwrap_or(1);
        let hugepages = |kib: u64| {
            read_optional(&format!(
                "/sys/kernel/mm/hugepages/hugepages-{kib}kB/nr_hugepages"
            ))
            .and_then(|t| t.trim().parse::<u64>().ok())
            .map_or(0, |pages| pages.saturating_mul(kib * 1024))
        };
        let kernel_version = read_optional("/proc/sys/kernel/osrelease")
            .map(|t| t.trim().to_string())
            .unwrap_or_default();
        let os_image = read_optional("/etc/os-release")
            .or_else(|| read_optional("/usr/lib/os-release"))
            .map_or_else(|| "Linux".to_string(), |t| os_image(&t));
        Ok(Machine {
            cpus,
            memory_bytes,
            hugepages_2mi_bytes: hugepages(2048),
            hugepages_1gi_bytes: hugepages(1_048_576),
            ephemeral_storage_bytes: filesystem_size(root_dir)?,
            kernel_version,
            os_image,
            architecture: go_arch(std::env::consts::ARCH).to_string(),
            hostname: hostname().unwrap_or_default(),
            machine_id: read_optional("/etc/machine-id")
                .map(|t| t.trim().to_string())
                .unwrap_or_default(),
            system_uuid: read_optional("/sys/class/dmi/id/product_uuid")
                .map(|t| t.trim().to_string())
                .unwrap_or_default(),
            boot_id: read_optional("/proc/sys/kernel/random/boot_id")
                .map(|t| t.trim().to_string())
                .unwrap_or_default(),
        })
    }
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn read_optional(path: &str) -> Option<String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) => {
            tracing::debug!(path, error = %e, "machine fact not readable");
            None
        }
    }
}

/// The kernel's hostname, trimmed and lowercased (kubelet's
/// `nodeutil.GetHostname`); `None` when unreadable or empty. The agent
/// may default its node name to this.
pub fn hostname() -> Option<String> {
    read_optional("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_lowercase())
        .filter(|h| !h.is_empty())
}

/// `MemTotal` of `/proc/meminfo` text, in bytes (the file says kB, which
/// are KiB).
pub fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|line| {
        let rest = line.strip_prefix("MemTotal:")?;
        let mut fields = rest.split_whitespace();
        let value: u64 = fields.next()?.parse().ok()?;
        let scale = match fields.next() {
            None => 1,
            Some(unit) if unit.eq_ignore_ascii_case("kb") => 1024,
            Some(_) => return None,
        };
        value.checked_mul(scale)
    })
}

/// How many `processor` entries `/proc/cpuinfo` text lists.
pub fn cpu_count(cpuinfo: &str) -> u32 {
    let n = cpuinfo
        .lines()
        .filter(|line| {
            line.split(':')
                .next()
                .is_some_and(|key| key.trim() == "processor")
        })
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// `PRETTY_NAME` of os-release text (unquoted), `Linux` without one, as
/// cAdvisor reports the container OS version.
pub fn os_image(os_release: &str) -> String {
    os_release
        .lines()
        .find_map(|line| line.trim().strip_prefix("PRETTY_NAME="))
        .map(unquote)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "Linux".to_string())
}

/// An os-release value: shell-style double or single quotes, with
/// backslash escapes inside double quotes.
fn unquote(value: &str) -> String {
    let value = value.trim();
    if let Some(inner) = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
        return inner.to_string();
    }
    let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) else {
        return value.to_string();
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

/// Go's `GOARCH` for a Rust `target_arch` (`std::env::consts::ARCH`).
pub fn go_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        "powerpc64" => "ppc64",
        "loongarch64" => "loong64",
        "mips64" if cfg!(target_endian = "little") => "mips64le",
        "mips" if cfg!(target_endian = "little") => "mipsle",
        other => other,
    }
}

/// Size of the filesystem holding `dir` (or its nearest existing
/// ancestor, when the agent has not created it yet), in bytes.
pub fn filesystem_size(dir: &Path) -> Result<u64> {
    let existing = dir
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or_else(|| Path::new("/"));
    let st = rustix::fs::statvfs(existing).map_err(|e| Error::Statvfs {
        path: existing.to_path_buf(),
        source: e.into(),
    })?;
    let block = if st.f_frsize > 0 {
        st.f_frsize
    } else {
        st.f_bsize
    };
    Ok(st.f_blocks.saturating_mul(block))
}

/// The gateway of the default IPv4 route with the lowest metric in
/// `/proc/net/route` text (`Some(0.0.0.0)` for a default route without
/// one, e.g. point-to-point); `None` without a default route.
pub fn default_gateway(proc_net_route: &str) -> Option<Ipv4Addr> {
    const RTF_UP: u32 = 0x1;
    proc_net_route
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let hex = |i: usize| f.get(i).and_then(|s| u32::from_str_radix(s, 16).ok());
            let (dest, gateway, flags, metric, mask) =
                (hex(1)?, hex(2)?, hex(3)?, hex(6)?, hex(7)?);
            (dest == 0 && mask == 0 && flags & RTF_UP != 0).then_some((metric, gateway))
        })
        .min_by_key(|(metric, _)| *metric)
        // The file prints addresses in host (little-endian) byte order.
        .map(|(_, gw)| Ipv4Addr::from(gw.swap_bytes()))
}

/// The local IPv4 addresses of `/proc/net/fib_trie` text (entries of
/// `/32 host LOCAL`), in order, without duplicates.
pub fn local_ipv4_addresses(fib_trie: &str) -> Vec<Ipv4Addr> {
    let mut found = Vec::new();
    let mut last: Option<Ipv4Addr> = None;
    for line in fib_trie.lines() {
        let line = line.trim();
        if let Some(addr) = line.strip_prefix("|-- ") {
            last = addr.trim().parse().ok();
        } else if line.starts_with("/32 host LOCAL") {
            if let Some(addr) = last.take() {
                if !found.contains(&addr) {
                    found.push(addr);
                }
            }
        }
    }
    found
}

/// The node IP from what the files say and what a route lookup answers:
/// the source address towards the default gateway (`source_towards`
/// answers that), else the first local IPv4 address that is not
/// loopback. Pure, for tests; [`node_ip`] is the real thing.
pub fn choose_node_ip(
    proc_net_route: Option<&str>,
    fib_trie: Option<&str>,
    source_towards: impl Fn(Ipv4Addr) -> Option<IpAddr>,
) -> Option<IpAddr> {
    let usable = |ip: &IpAddr| !ip.is_loopback() && !ip.is_unspecified();
    if let Some(gateway) = proc_net_route.and_then(default_gateway) {
        // A default route without a gateway: any destination it carries
        // will do (TEST-NET-3, unlikely to have a route of its own).
        let towards = if gateway.is_unspecified() {
            Ipv4Addr::new(203, 0, 113, 1)
        } else {
            gateway
        };
        if let Some(ip) = source_towards(towards).filter(usable) {
            return Some(ip);
        }
    }
    fib_trie
        .map(local_ipv4_addresses)
        .unwrap_or_default()
        .into_iter()
        .map(IpAddr::V4)
        .find(usable)
}

/// This machine's node IP (see [`choose_node_ip`]).
pub fn node_ip() -> Result<IpAddr> {
    let route = read_optional("/proc/net/route");
    let fib = read_optional("/proc/net/fib_trie");
    choose_node_ip(route.as_deref(), fib.as_deref(), route_source).ok_or(Error::NoNodeIp)
}

/// The source address the kernel would use towards `dest`: a UDP
/// `connect` only looks the route up, it sends nothing.
fn route_source(dest: Ipv4Addr) -> Option<IpAddr> {
    let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    socket.connect((dest, 53)).ok()?;
    socket.local_addr().ok().map(|a| a.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMINFO: &str = "MemTotal:       16384000 kB\nMemFree:         1000000 kB\n";
    const ROUTE: &str =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
        eth0\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
        wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n\
        eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
    const FIB: &str =
        "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n\
        \x20    +-- 127.0.0.0/8 2 0 2\n        +-- 127.0.0.0/31 1 0 0\n           |-- 127.0.0.0\n\
        \x20             /8 host LOCAL\n           |-- 127.0.0.1\n              /32 host LOCAL\n\
        \x20       |-- 127.255.255.255\n           /32 link BROADCAST\n\
        \x20    +-- 192.0.2.0/24 2 0 2\n           |-- 192.0.2.0\n              /24 link UNICAST\n\
        \x20          |-- 192.0.2.2\n              /32 host LOCAL\n\
        Local:\n           |-- 127.0.0.1\n              /32 host LOCAL\n\
        \x20          |-- 192.0.2.2\n              /32 host LOCAL\n";

    #[test]
    fn mem_total_is_kib_times_1024() {
        assert_eq!(mem_total_bytes(MEMINFO), Some(16_384_000 * 1024));
        assert_eq!(mem_total_bytes("MemFree: 1 kB\n"), None);
        assert_eq!(mem_total_bytes("MemTotal: lots kB\n"), None);
        assert_eq!(mem_total_bytes("MemTotal: 5 MB\n"), None);
    }

    #[test]
    fn cpus_count_processor_entries() {
        let text = "processor\t: 0\nmodel name\t: X\n\nprocessor\t: 1\nmodel name\t: X\n";
        assert_eq!(cpu_count(text), 2);
        assert_eq!(cpu_count("Features: fp asimd\n"), 0);
    }

    #[test]
    fn os_image_is_pretty_name_unquoted() {
        let text = "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n";
        assert_eq!(os_image(text), "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(os_image("PRETTY_NAME='Alpine v3'\n"), "Alpine v3");
        assert_eq!(os_image("PRETTY_NAME=Plain\n"), "Plain");
        assert_eq!(os_image("PRETTY_NAME=\"say \\\"hi\\\"\"\n"), "say \"hi\"");
        assert_eq!(os_image("NAME=x\n"), "Linux");
    }

    #[test]
    fn architectures_take_go_names() {
        assert_eq!(go_arch("x86_64"), "amd64");
        assert_eq!(go_arch("aarch64"), "arm64");
        assert_eq!(go_arch("x86"), "386");
        assert_eq!(go_arch("riscv64"), "riscv64");
        assert_eq!(go_arch("s390x"), "s390x");
        assert_eq!(go_arch("loongarch64"), "loong64");
    }

    #[test]
    fn default_gateway_takes_the_lowest_metric() {
        assert_eq!(default_gateway(ROUTE), Some(Ipv4Addr::new(192, 0, 2, 1)));
        let no_default = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n\
            eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\n";
        assert_eq!(default_gateway(no_default), None);
        let down = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n\
            eth0\t00000000\t010200C0\t0002\t0\t0\t0\t00000000\n";
        assert_eq!(default_gateway(down), None);
        assert_eq!(default_gateway(""), None);
    }

    #[test]
    fn local_addresses_come_from_host_local_entries() {
        assert_eq!(
            local_ipv4_addresses(FIB),
            vec![Ipv4Addr::LOCALHOST, Ipv4Addr::new(192, 0, 2, 2)]
        );
    }

    #[test]
    fn node_ip_is_the_default_route_source_then_the_first_local_address() {
        let source = |dest: Ipv4Addr| {
            assert_eq!(dest, Ipv4Addr::new(192, 0, 2, 1));
            Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9)))
        };
        assert_eq!(
            choose_node_ip(Some(ROUTE), Some(FIB), source),
            Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9)))
        );
        // No default route: the first local address that is not loopback.
        assert_eq!(
            choose_node_ip(None, Some(FIB), |_| None),
            Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)))
        );
        // The lookup fails or answers loopback: the same fallback.
        let loopback = |_| Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(
            choose_node_ip(Some(ROUTE), Some(FIB), loopback),
            Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)))
        );
        assert_eq!(
            choose_node_ip(
                None,
                Some("Local:\n |-- 127.0.0.1\n /32 host LOCAL\n"),
                |_| None
            ),
            None
        );
    }

    #[test]
    fn gather_reads_this_machine() {
        let dir = tempfile::tempdir().expect("temp dir");
        let m = Machine::gather(&dir.path().join("not/yet")).expect("machine facts");
        assert!(m.cpus >= 1);
        assert!(m.memory_bytes > 0);
        assert!(m.ephemeral_storage_bytes > 0);
        assert!(!m.kernel_version.is_empty());
        assert_eq!(m.architecture, go_arch(std::env::consts::ARCH));
    }
}
