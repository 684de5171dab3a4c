//! The overlay's boundary with the kernel: [`Links`] reads and changes
//! the VXLAN device, routes, ARP and forwarding entries; [`IpCommand`] does
//! it with iproute2's `ip` and `bridge` (JSON output), [`Fake`] in memory
//! for the sync's tests. It does not decide what the entries should be
//! (that is [`super::plan`]).

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::Mutex;

use super::plan::{Cidr, Observed, Route, Step, ROUTE_PROTO};
use super::Error;

/// The interface holding the node's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Underlay {
    pub device: String,
    pub mtu: u32,
    pub loopback: bool,
}

/// The VXLAN device as it should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vxlan {
    pub device: String,
    pub vni: u32,
    pub port: u16,
    pub local: Ipv4Addr,
    pub underlay: String,
    pub mtu: u32,
    /// Its own address (`GW/32`, GW the podCIDR's network address).
    pub address: Ipv4Addr,
}

/// Reads and changes the kernel's network tables.
pub trait Links: Send + Sync {
    /// The interface that has `ip`.
    fn underlay(&self, ip: Ipv4Addr) -> Result<Underlay, Error>;
    /// Makes the device as `spec` says (re-made when its VNI, port or
    /// local address differ), up, with its address; returns its MAC.
    fn ensure_vxlan(&self, spec: &Vxlan) -> Result<String, Error>;
    /// Our routes through `devices`, and `vxlan`'s ARP and forwarding
    /// entries (none when it does not exist).
    fn observe(&self, devices: &[&str], vxlan: &str) -> Result<Observed, Error>;
    /// Carries out one step on `vxlan` (the device of its entries).
    fn apply(&self, vxlan: &str, step: &Step) -> Result<(), Error>;
    /// Removes a device if it exists.
    fn delete_device(&self, device: &str);
}

/// [`Links`] through iproute2.
#[derive(Debug, Default)]
pub struct IpCommand;

fn run(program: &str, args: &[String]) -> Result<String, Error> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| Error::Command {
            command: format!("{program} {}", args.join(" ")),
            message: e.to_string(),
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(Error::Command {
            command: format!("{program} {}", args.join(" ")),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn json(text: &str) -> Vec<serde_json::Value> {
    serde_json::from_str::<Vec<serde_json::Value>>(text).unwrap_or_default()
}

fn field<'a>(v: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    v.get(key)?.as_str()
}

/// Our routes from `ip -j -4 route show proto 165` through `devices`.
pub fn parse_routes(text: &str, devices: &[&str], vxlan: &str) -> Vec<Route> {
    json(text)
        .iter()
        .filter_map(|r| {
            let dev = field(r, "dev")?;
            if !devices.contains(&dev) {
                return None;
            }
            let dst = field(r, "dst")?;
            // A /32 shows without its length.
            let dst = if dst.contains('/') {
                Cidr::parse(dst)?
            } else {
                Cidr::parse(&format!("{dst}/32"))?
            };
            Some(Route {
                dst,
                via: field(r, "gateway")?.parse().ok()?,
                dev: (dev == vxlan).then(|| dev.to_string()),
            })
        })
        .collect()
}

/// Permanent entries from `ip -j -4 neigh show dev X`.
pub fn parse_neighbors(text: &str) -> Vec<(Ipv4Addr, String)> {
    json(text)
        .iter()
        .filter(|n| {
            n.get("state")
                .and_then(|s| s.as_array())
                .is_some_and(|s| s.iter().any(|s| s == "PERMANENT"))
        })
        .filter_map(|n| {
            Some((
                field(n, "dst")?.parse().ok()?,
                field(n, "lladdr")?.to_lowercase(),
            ))
        })
        .collect()
}

/// Unicast entries with a destination from `bridge -j fdb show dev X`.
pub fn parse_fdb(text: &str) -> Vec<(String, Ipv4Addr)> {
    json(text)
        .iter()
        .filter_map(|e| {
            let mac = field(e, "mac")?.to_lowercase();
            if mac == "00:00:00:00:00:00" {
                return None;
            }
            Some((mac, field(e, "dst")?.parse().ok()?))
        })
        .collect()
}

/// Whether a device from `ip -j -d link show` is the VXLAN device `spec`
/// describes: the kind, VNI, port, local address and underlay, and
/// learning off (a learnt entry would let any sender of VXLAN frames to
/// this host take over a MAC).
pub fn vxlan_matches(link: &serde_json::Value, spec: &Vxlan) -> bool {
    let data = link.pointer("/linkinfo/info_data");
    link.pointer("/linkinfo/info_kind").and_then(|k| k.as_str()) == Some("vxlan")
        && data.and_then(|d| field(d, "link")) == Some(&spec.underlay)
        && data.and_then(|d| d.get("id")?.as_u64()) == Some(u64::from(spec.vni))
        && data.and_then(|d| d.get("port")?.as_u64()) == Some(u64::from(spec.port))
        && data.and_then(|d| field(d, "local")) == Some(&spec.local.to_string())
        && data.and_then(|d| d.get("learning")?.as_bool()) != Some(true)
}

impl Links for IpCommand {
    fn underlay(&self, ip: Ipv4Addr) -> Result<Underlay, Error> {
        let text = run("ip", &args(&["-j", "-4", "addr", "show"]))?;
        let wanted = ip.to_string();
        json(&text)
            .iter()
            .find(|link| {
                link.get("addr_info")
                    .and_then(|a| a.as_array())
                    .is_some_and(|a| a.iter().any(|a| field(a, "local") == Some(&wanted)))
            })
            .and_then(|link| {
                Some(Underlay {
                    device: field(link, "ifname")?.to_string(),
                    mtu: link.get("mtu")?.as_u64()? as u32,
                    loopback: field(link, "link_type") == Some("loopback"),
                })
            })
            .ok_or(Error::NoUnderlay(ip))
    }

    fn ensure_vxlan(&self, spec: &Vxlan) -> Result<String, Error> {
        let show = |dev: &str| {
            run("ip", &args(&["-j", "-d", "link", "show", "dev", dev]))
                .ok()
                .and_then(|t| json(&t).into_iter().next())
        };
        // The device as it is, if its settings are ours.
        let kept = show(&spec.device).filter(|link| {
            let same = vxlan_matches(link, spec);
            if !same {
                tracing::info!(device = %spec.device, "re-making the VXLAN device with new settings");
                self.delete_device(&spec.device);
            }
            same
        });
        if kept.is_none() {
            run(
                "ip",
                &args(&[
                    "link",
                    "add",
                    &spec.device,
                    "type",
                    "vxlan",
                    "id",
                    &spec.vni.to_string(),
                    "local",
                    &spec.local.to_string(),
                    "dev",
                    &spec.underlay,
                    "dstport",
                    &spec.port.to_string(),
                    "nolearning",
                ]),
            )?;
        }
        run(
            "ip",
            &args(&[
                "link",
                "set",
                &spec.device,
                "mtu",
                &spec.mtu.to_string(),
                "up",
            ]),
        )?;
        let address = format!("{}/32", spec.address);
        let addresses = run(
            "ip",
            &args(&["-j", "-4", "addr", "show", "dev", &spec.device]),
        )?;
        let have: Vec<String> = json(&addresses)
            .iter()
            .flat_map(|l| {
                l.get("addr_info")
                    .and_then(|a| a.as_array())
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|a| Some(format!("{}/{}", field(&a, "local")?, a.get("prefixlen")?)))
            .collect();
        if have != [address.clone()] {
            run("ip", &args(&["-4", "addr", "flush", "dev", &spec.device]))?;
            run("ip", &args(&["addr", "add", &address, "dev", &spec.device]))?;
        }
        kept.or_else(|| show(&spec.device))
            .and_then(|l| field(&l, "address").map(str::to_lowercase))
            .ok_or_else(|| Error::Command {
                command: format!("ip link show dev {}", spec.device),
                message: "the device has no address".into(),
            })
    }

    fn observe(&self, devices: &[&str], vxlan: &str) -> Result<Observed, Error> {
        let routes = run(
            "ip",
            &args(&[
                "-j",
                "-4",
                "route",
                "show",
                "proto",
                &ROUTE_PROTO.to_string(),
            ]),
        )?;
        let exists = run("ip", &args(&["link", "show", "dev", vxlan])).is_ok();
        let (neighbors, fdb) = if exists {
            (
                parse_neighbors(&run(
                    "ip",
                    &args(&["-j", "-4", "neigh", "show", "dev", vxlan]),
                )?),
                parse_fdb(&run("bridge", &args(&["-j", "fdb", "show", "dev", vxlan]))?),
            )
        } else {
            (vec![], vec![])
        };
        Ok(Observed {
            routes: parse_routes(&routes, devices, vxlan),
            neighbors,
            fdb,
        })
    }

    fn apply(&self, vxlan: &str, step: &Step) -> Result<(), Error> {
        let proto = ROUTE_PROTO.to_string();
        let route_args = |verb: &str, r: &Route| {
            let mut a = args(&["route", verb, &r.dst.to_string(), "via", &r.via.to_string()]);
            if let Some(dev) = &r.dev {
                a.extend(args(&["dev", dev, "onlink"]));
            }
            a.extend(args(&["proto", &proto]));
            a
        };
        match step {
            Step::AddRoute(r) => run("ip", &route_args("replace", r)).map(drop),
            Step::DeleteRoute(r) => run("ip", &route_args("del", r)).map(drop),
            Step::AddNeighbor(ip, mac) => run(
                "ip",
                &args(&[
                    "neigh",
                    "replace",
                    &ip.to_string(),
                    "lladdr",
                    mac,
                    "dev",
                    vxlan,
                    "nud",
                    "permanent",
                ]),
            )
            .map(drop),
            Step::DeleteNeighbor(ip) => run(
                "ip",
                &args(&["neigh", "del", &ip.to_string(), "dev", vxlan]),
            )
            .map(drop),
            Step::AddFdb(mac, dst) => run(
                "bridge",
                &args(&[
                    "fdb",
                    "replace",
                    mac,
                    "dev",
                    vxlan,
                    "dst",
                    &dst.to_string(),
                    "self",
                    "permanent",
                ]),
            )
            .map(drop),
            Step::DeleteFdb(mac, dst) => run(
                "bridge",
                &args(&[
                    "fdb",
                    "del",
                    mac,
                    "dev",
                    vxlan,
                    "dst",
                    &dst.to_string(),
                    "self",
                ]),
            )
            .map(drop),
        }
    }

    fn delete_device(&self, device: &str) {
        let _ = run("ip", &args(&["link", "delete", device]));
    }
}

/// [`Links`] in memory: applies steps to its own tables.
#[derive(Debug, Default)]
pub struct Fake {
    pub state: Mutex<FakeState>,
}

/// What a [`Fake`] holds.
#[derive(Debug, Default, Clone)]
pub struct FakeState {
    pub observed: Observed,
    pub vxlan: Option<Vxlan>,
    pub applied: Vec<Step>,
    pub deleted_devices: Vec<String>,
    /// Making the VXLAN device fails (as `ip` may).
    pub fail_vxlan: bool,
}

impl Links for Fake {
    fn underlay(&self, _ip: Ipv4Addr) -> Result<Underlay, Error> {
        Ok(Underlay {
            device: "eth0".into(),
            mtu: 1500,
            loopback: false,
        })
    }

    fn ensure_vxlan(&self, spec: &Vxlan) -> Result<String, Error> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.fail_vxlan {
            return Err(Error::Command {
                command: format!("ip link add {}", spec.device),
                message: "RTNETLINK answers: Operation not permitted".into(),
            });
        }
        s.vxlan = Some(spec.clone());
        Ok("0a:00:00:00:00:01".into())
    }

    fn observe(&self, _devices: &[&str], _vxlan: &str) -> Result<Observed, Error> {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        Ok(s.observed.clone())
    }

    fn apply(&self, _vxlan: &str, step: &Step) -> Result<(), Error> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.applied.push(step.clone());
        let o = &mut s.observed;
        match step {
            Step::AddRoute(r) => {
                o.routes.retain(|x| x.dst != r.dst);
                o.routes.push(r.clone());
            }
            Step::DeleteRoute(r) => o.routes.retain(|x| x != r),
            Step::AddNeighbor(ip, mac) => {
                o.neighbors.retain(|(i, _)| i != ip);
                o.neighbors.push((*ip, mac.clone()));
            }
            Step::DeleteNeighbor(ip) => o.neighbors.retain(|(i, _)| i != ip),
            Step::AddFdb(mac, dst) => {
                o.fdb.retain(|(m, _)| m != mac);
                o.fdb.push((mac.clone(), *dst));
            }
            Step::DeleteFdb(mac, dst) => o.fdb.retain(|e| e != &(mac.clone(), *dst)),
        }
        Ok(())
    }

    fn delete_device(&self, device: &str) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.deleted_devices.push(device.to_string());
    }
}
