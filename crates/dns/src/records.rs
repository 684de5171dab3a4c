//! The in-memory index of the cluster's names (the Kubernetes DNS
//! specification, as CoreDNS's `kubernetes` plugin with `pods insecure`
//! serves it), built incrementally from Services and EndpointSlices.
//!
//! Every name a Service gives rise to is a node keyed by its lowercased
//! wire form, holding its records already encoded (owner = a pointer to
//! the question), so answering is one hash lookup and a copy. A node
//! counts the Services that need it (empty non-terminals included, so
//! `ns.svc.<zone>` is NODATA rather than NXDOMAIN), and a Service's
//! change touches only its own names. Pod names (`a-b-c-d.ns.pod.<zone>`)
//! are read from the name itself, not stored.
//!
//! This module is pure: no I/O, no locks, no clock. It must not decide
//! how answers are sent (answer.rs) nor forward anything.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::rdata::SOA;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use hickory_proto::ProtoError;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::answer::{self, Outcome, Transport};
use crate::wire;

mod encode;
mod names;
mod spec;

use encode::{compile, emit_record};
use names::{derive, Rec};
use spec::{obj_key, service_spec, slice_spec, ServiceSpec, SliceSpec};

/// The schema version `dns-version.<zone>` announces.
const SCHEMA_VERSION: &str = "1.1.0";
/// How many CNAMEs inside the zone one answer follows.
pub(crate) const MAX_CNAME_HOPS: usize = 8;

/// A lowercased name in wire form: the index's key.
type Key = Box<[u8]>;
/// (namespace, name) of an object.
type ObjKey = (String, String);

/// The index. Build with [`Records::new`] and the `apply_*`/`delete_*`
/// methods (or [`Records::from_objects`] for a whole list at once).
pub struct Records {
    zone: Name,
    zone_key: Key,
    /// `pod.<zone>`.
    pod_key: Key,
    ttl: u32,
    ready: bool,
    /// The zone's SOA record with its full owner, for authority sections.
    soa_authority: Box<[u8]>,
    soa: RData,
    services: HashMap<ObjKey, ServiceSpec>,
    /// Slices by their Service, then by slice name.
    slices: HashMap<ObjKey, BTreeMap<String, SliceSpec>>,
    /// The Service each slice belongs to, by (namespace, slice name).
    slice_owner: HashMap<ObjKey, String>,
    /// What each Service put into `nodes`.
    contributed: HashMap<ObjKey, Contribution>,
    next_id: u64,
    nodes: HashMap<Key, Node>,
}

impl fmt::Debug for Records {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Records")
            .field("zone", &self.zone.to_ascii())
            .field("ready", &self.ready)
            .field("services", &self.services.len())
            .field("names", &self.nodes.len())
            .finish_non_exhaustive()
    }
}

/// The answer to one question, as [`Records::lookup`] gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// NoError or NXDomain (ServFail before the first sync, FormErr for a
    /// name that cannot be asked).
    pub rcode: ResponseCode,
    /// The answer records, owned by the name as asked (case kept).
    pub answers: Vec<Record>,
    /// The zone's SOA on NXDOMAIN and NODATA.
    pub authorities: Vec<Record>,
    /// The addresses of SRV targets.
    pub additionals: Vec<Record>,
    /// True when the name is ours (in the cluster domain, or a reverse
    /// name we hold); false: the server forwards it upstream.
    pub local: bool,
}

/// One Service's part in the index.
#[derive(Debug)]
struct Contribution {
    id: u64,
    /// Names (sorted) and whether the Service gave them records (else
    /// they are empty non-terminals it needs).
    names: Vec<(Key, bool)>,
}

/// One name of the index.
#[derive(Debug, Default)]
struct Node {
    /// How many Services (or the zone itself) need this name.
    refs: u32,
    /// Records by the id of the Service that gave them.
    sources: Vec<(u64, Vec<Rec>)>,
    answers: Box<[Answer]>,
}

/// Encoded records of one type at one name.
#[derive(Debug)]
pub(crate) struct Answer {
    /// The type asked for (CNAME answers every type; 255 is ANY).
    pub(crate) rtype: u16,
    pub(crate) count: u16,
    /// Records whose owner is a pointer to offset 12 (the question).
    pub(crate) records: Box<[u8]>,
    pub(crate) extra_count: u16,
    /// Additional records (SRV targets' addresses), full owner names.
    pub(crate) extra: Box<[u8]>,
    /// A CNAME's target when it is in the zone, to follow.
    pub(crate) cname_target: Option<Key>,
    /// A CNAME's target outside the zone (an ExternalName's), which the
    /// server resolves through the upstreams, as CoreDNS does.
    pub(crate) external_target: Option<hickory_proto::rr::Name>,
}

/// What the index says about a name and type.
#[derive(Debug)]
pub(crate) enum Resolved<'r> {
    Answer(&'r Answer),
    /// A pod name: the address in it.
    Pod(IpAddr),
    NoData,
    NxDomain,
    /// In the zone, but the informers have not listed yet.
    NotReady,
    /// Not ours: forward.
    NotOurs,
}

impl Node {
    fn resolve(&self, qtype: u16) -> Resolved<'_> {
        if let [only] = &*self.answers {
            if only.rtype == wire::TYPE_CNAME {
                return Resolved::Answer(only);
            }
        }
        self.answers
            .iter()
            .find(|a| a.rtype == qtype)
            .map_or(Resolved::NoData, Resolved::Answer)
    }
}

impl Records {
    /// An empty index for `cluster_domain` (e.g. "cluster.local") whose
    /// records have `ttl` seconds.
    ///
    /// # Panics
    /// If `cluster_domain` is not a DNS name ([`Records::try_new`] says
    /// so instead).
    pub fn new(cluster_domain: &str, ttl: u32) -> Self {
        match Self::try_new(cluster_domain, ttl) {
            Ok(records) => records,
            Err(e) => panic!("cluster domain {cluster_domain:?}: {e}"),
        }
    }

    /// An empty index, or why `cluster_domain` is not a DNS name.
    pub fn try_new(cluster_domain: &str, ttl: u32) -> Result<Self, ProtoError> {
        let mut zone = Name::from_ascii(cluster_domain.trim_end_matches('.'))?.to_lowercase();
        zone.set_fqdn(true);
        if zone.is_root() {
            return Err("the cluster domain cannot be the root".into());
        }
        let zone_key = key_of(&zone);
        let pod = zone.prepend_label("pod")?;
        let soa = RData::SOA(SOA::new(
            zone.prepend_label("dns")?.prepend_label("ns")?,
            zone.prepend_label("hostmaster")?,
            1,
            7200,
            1800,
            86400,
            ttl,
        ));
        let mut soa_authority = Vec::new();
        emit_record(&mut soa_authority, Some(&zone), ttl, &soa)?;
        let mut records = Self {
            pod_key: key_of(&pod),
            zone,
            zone_key,
            ttl,
            ready: true,
            soa_authority: soa_authority.into(),
            soa,
            services: HashMap::new(),
            slices: HashMap::new(),
            slice_owner: HashMap::new(),
            contributed: HashMap::new(),
            next_id: 0,
            nodes: HashMap::new(),
        };
        // The zone's own names, held by id 0 for good.
        let apex = records.zone.clone();
        records.set(key_of(&apex), 0, vec![Rec::Soa], false);
        records.set(key_of(&apex.prepend_label("svc")?), 0, Vec::new(), false);
        records.set(
            key_of(&apex.prepend_label("dns-version")?),
            0,
            vec![Rec::Txt(SCHEMA_VERSION.to_owned())],
            false,
        );
        Ok(records)
    }

    /// An index of these objects, built in one pass (each Service is
    /// derived once, however many slices it has).
    pub fn from_objects<'a>(
        cluster_domain: &str,
        ttl: u32,
        services: impl IntoIterator<Item = &'a Service>,
        slices: impl IntoIterator<Item = &'a EndpointSlice>,
    ) -> Self {
        let mut records = Self::new(cluster_domain, ttl);
        for slice in slices {
            records.store_slice(slice);
        }
        for svc in services {
            if let Some((key, spec)) = service_spec(svc) {
                records.services.insert(key, spec);
            }
        }
        let keys: Vec<ObjKey> = records.services.keys().cloned().collect();
        for key in keys {
            records.refresh(&key);
        }
        records
    }

    /// Whether the informers have listed (else names in the zone are
    /// answered SERVFAIL). New indexes are ready.
    pub fn is_ready(&self) -> bool {
        self.ready
    }

    /// Marks the index (not) ready.
    pub fn set_ready(&mut self, ready: bool) {
        self.ready = ready;
    }

    /// The cluster domain, lowercase, fully qualified.
    pub fn zone(&self) -> &Name {
        &self.zone
    }

    /// The TTL of cluster records.
    pub fn ttl(&self) -> u32 {
        self.ttl
    }

    /// Adds or updates a Service.
    pub fn apply_service(&mut self, svc: &Service) {
        let Some((key, spec)) = service_spec(svc) else {
            return;
        };
        if self.services.get(&key) == Some(&spec) {
            return;
        }
        self.services.insert(key.clone(), spec);
        self.refresh(&key);
    }

    /// Removes a Service (its slices stay until they are deleted too).
    pub fn delete_service(&mut self, svc: &Service) {
        let Some(key) = obj_key(&svc.metadata) else {
            return;
        };
        if self.services.remove(&key).is_some() {
            self.refresh(&key);
        }
    }

    /// Adds or updates an EndpointSlice.
    pub fn apply_slice(&mut self, slice: &EndpointSlice) {
        let Some(key) = obj_key(&slice.metadata) else {
            return;
        };
        let before = self.slice_owner.get(&key).cloned();
        let unchanged = before.as_ref().is_some_and(|svc| {
            let now = slice_spec(slice);
            self.slices
                .get(&(key.0.clone(), svc.clone()))
                .and_then(|s| s.get(&key.1))
                == now.as_ref()
        });
        if unchanged {
            return;
        }
        let after = self.store_slice(slice);
        let ns = key.0;
        if let Some(svc) = before.filter(|b| Some(b) != after.as_ref()) {
            self.refresh(&(ns.clone(), svc));
        }
        if let Some(svc) = after {
            self.refresh(&(ns, svc));
        }
    }

    /// Removes an EndpointSlice.
    pub fn delete_slice(&mut self, slice: &EndpointSlice) {
        let Some(key) = obj_key(&slice.metadata) else {
            return;
        };
        if let Some(svc) = self.unstore_slice(&key) {
            self.refresh(&(key.0, svc));
        }
    }

    /// Answers one question as the server would (case-insensitively,
    /// following CNAMEs inside the zone). Encodes and decodes a message,
    /// so it is for tests and tools, not the query path.
    pub fn lookup(&self, name: &Name, qtype: RecordType) -> Lookup {
        let failed = |rcode| Lookup {
            rcode,
            answers: Vec::new(),
            authorities: Vec::new(),
            additionals: Vec::new(),
            local: true,
        };
        let mut name = name.clone();
        name.set_fqdn(true);
        let mut query = Message::query();
        query.add_query(Query::query(name, qtype));
        query.metadata.recursion_desired = true;
        let Ok(packet) = query.to_vec() else {
            return failed(ResponseCode::FormErr);
        };
        let mut out = Vec::new();
        match answer::respond(self, &packet, Transport::Tcp, &mut out) {
            Outcome::Reply => match Message::from_vec(&out) {
                Ok(reply) => Lookup {
                    rcode: reply.metadata.response_code,
                    answers: reply.answers,
                    authorities: reply.authorities,
                    additionals: reply.additionals,
                    local: true,
                },
                Err(_) => failed(ResponseCode::ServFail),
            },
            Outcome::Forward(_) => Lookup {
                local: false,
                ..failed(ResponseCode::NoError)
            },
            Outcome::Drop => failed(ResponseCode::FormErr),
            // The CNAME alone: the target is for the upstreams.
            Outcome::Chase(..) => match Message::from_vec(&out) {
                Ok(reply) => Lookup {
                    rcode: reply.metadata.response_code,
                    answers: reply.answers,
                    authorities: reply.authorities,
                    additionals: reply.additionals,
                    local: true,
                },
                Err(_) => failed(ResponseCode::ServFail),
            },
        }
    }

    /// What the index holds for a lowercased wire name and type.
    pub(crate) fn resolve(&self, key: &[u8], qtype: u16) -> Resolved<'_> {
        if suffix_at_label(key, &self.zone_key).is_none() {
            return match self.nodes.get(key) {
                Some(node) => node.resolve(qtype),
                None => Resolved::NotOurs,
            };
        }
        if !self.ready {
            return Resolved::NotReady;
        }
        if let Some(at) = suffix_at_label(key, &self.pod_key) {
            return resolve_pod(&key[..at], qtype);
        }
        match self.nodes.get(key) {
            Some(node) => node.resolve(qtype),
            None => Resolved::NxDomain,
        }
    }

    /// Whether a lowercased wire name is in the cluster domain.
    pub(crate) fn in_zone(&self, key: &[u8]) -> bool {
        suffix_at_label(key, &self.zone_key).is_some()
    }

    /// The zone's SOA record (full owner name), for authority sections.
    pub(crate) fn soa_authority(&self) -> &[u8] {
        &self.soa_authority
    }

    /// Files a slice under its Service; returns the Service's name.
    fn store_slice(&mut self, slice: &EndpointSlice) -> Option<String> {
        let key = obj_key(&slice.metadata)?;
        self.unstore_slice(&key);
        let spec = slice_spec(slice)?;
        let svc = spec.service.clone();
        self.slices
            .entry((key.0.clone(), svc.clone()))
            .or_default()
            .insert(key.1.clone(), spec);
        self.slice_owner.insert(key, svc.clone());
        Some(svc)
    }

    /// Forgets a slice; returns the Service it was filed under.
    fn unstore_slice(&mut self, key: &ObjKey) -> Option<String> {
        let svc = self.slice_owner.remove(key)?;
        let svc_key = (key.0.clone(), svc);
        if let Some(slices) = self.slices.get_mut(&svc_key) {
            slices.remove(&key.1);
            if slices.is_empty() {
                self.slices.remove(&svc_key);
            }
        }
        Some(svc_key.1)
    }

    /// Recomputes one Service's names and swaps them into the index.
    fn refresh(&mut self, svc: &ObjKey) {
        let wanted = derive(
            &self.zone,
            &self.zone_key,
            svc,
            self.services.get(svc),
            self.slices.get(svc),
        );
        let old = self.contributed.remove(svc);
        let id = match &old {
            Some(c) => c.id,
            None => {
                self.next_id += 1;
                self.next_id
            }
        };
        let old = old.map(|c| c.names).unwrap_or_default();
        for (key, _) in &old {
            if !wanted.contains_key(key) {
                self.unref(key, id);
            }
        }
        let mut names = Vec::with_capacity(wanted.len());
        for (key, recs) in wanted {
            let existed = old.binary_search_by(|(k, _)| k.cmp(&key)).is_ok();
            let has_records = !recs.is_empty();
            self.set(key.clone(), id, recs, existed);
            names.push((key, has_records));
        }
        if !names.is_empty() {
            self.contributed
                .insert(svc.clone(), Contribution { id, names });
        }
    }

    /// Sets source `id`'s records at `key` (taking a reference unless it
    /// already held one) and re-encodes the node if they changed.
    fn set(&mut self, key: Key, id: u64, recs: Vec<Rec>, existed: bool) {
        let node = self.nodes.entry(key).or_default();
        if !existed {
            node.refs += 1;
        }
        let at = node.sources.iter().position(|(i, _)| *i == id);
        let changed = match (at, recs.is_empty()) {
            (Some(at), true) => {
                node.sources.swap_remove(at);
                true
            }
            (Some(at), false) if node.sources[at].1 != recs => {
                node.sources[at].1 = recs;
                true
            }
            (Some(_), false) | (None, true) => false,
            (None, false) => {
                node.sources.push((id, recs));
                true
            }
        };
        if changed {
            node.answers = compile(&node.sources, self.ttl, &self.soa, &self.zone_key);
        }
    }

    /// Drops source `id`'s reference to `key`.
    fn unref(&mut self, key: &[u8], id: u64) {
        let Some(node) = self.nodes.get_mut(key) else {
            return;
        };
        node.refs = node.refs.saturating_sub(1);
        if node.refs == 0 {
            self.nodes.remove(key);
            return;
        }
        if let Some(at) = node.sources.iter().position(|(i, _)| *i == id) {
            node.sources.swap_remove(at);
            node.answers = compile(&node.sources, self.ttl, &self.soa, &self.zone_key);
        }
    }
}

/// Pod names: `pod.<zone>` and `<ns>.pod.<zone>` exist (NODATA), and
/// `<ip-with-dashes>.<ns>.pod.<zone>` is that address; `prefix` is the
/// part of the name before `pod.<zone>`.
fn resolve_pod(prefix: &[u8], qtype: u16) -> Resolved<'static> {
    let Some(&first) = prefix.first() else {
        return Resolved::NoData;
    };
    let label = &prefix[1..1 + usize::from(first)];
    let ns = &prefix[1 + usize::from(first)..];
    if ns.is_empty() {
        return Resolved::NoData;
    }
    if ns.len() != 1 + usize::from(ns[0]) {
        return Resolved::NxDomain;
    }
    match pod_ip(label) {
        None => Resolved::NxDomain,
        Some(ip) => match (ip, qtype) {
            (IpAddr::V4(_), wire::TYPE_A | wire::TYPE_ANY)
            | (IpAddr::V6(_), wire::TYPE_AAAA | wire::TYPE_ANY) => Resolved::Pod(ip),
            _ => Resolved::NoData,
        },
    }
}

/// The address in a pod label: `10-1-2-3`, or an IPv6 address with `-`
/// for `:` (CoreDNS's rule: three dashes and no `--` is IPv4).
fn pod_ip(label: &[u8]) -> Option<IpAddr> {
    let mut buf = [0u8; 63];
    let buf = buf.get_mut(..label.len())?;
    let dashes = label.iter().filter(|b| **b == b'-').count();
    let v4 = dashes == 3 && !label.windows(2).any(|w| w == b"--");
    let sep = if v4 { b'.' } else { b':' };
    for (d, s) in buf.iter_mut().zip(label) {
        *d = if *s == b'-' { sep } else { *s };
    }
    let text = std::str::from_utf8(buf).ok()?;
    if v4 {
        text.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
    } else {
        text.parse::<Ipv6Addr>().ok().map(IpAddr::V6)
    }
}

/// Where `suffix` starts in `key` if it is a whole-label suffix.
fn suffix_at_label(key: &[u8], suffix: &[u8]) -> Option<usize> {
    let target = key.len().checked_sub(suffix.len())?;
    let mut at = 0;
    while at < target {
        at += 1 + usize::from(*key.get(at)?);
    }
    (at == target && key[target..] == *suffix).then_some(target)
}

/// A name's key: lowercase wire form.
pub(crate) fn key_of(name: &Name) -> Key {
    let mut key = Vec::with_capacity(name.len() + 2);
    for label in name.iter() {
        key.push(label.len() as u8);
        key.extend(label.iter().map(u8::to_ascii_lowercase));
    }
    key.push(0);
    key.into()
}

#[cfg(test)]
mod tests;
