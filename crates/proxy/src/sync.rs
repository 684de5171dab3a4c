//! The proxier's state: the Services and EndpointSlices it has heard of,
//! which Services changed since the last sync, and what each Service put
//! into the table. [`Proxier::plan`] turns the changes into one nft batch
//! that touches only the changed Services' chains and map elements (cost
//! in proportion to the change, as upstream's partial syncs), or rebuilds
//! the whole table (first sync, after a failed batch, or when the
//! skeleton changed). [`Proxier::commit`] records a batch the kernel took.
//!
//! Pure: it must not run nft; [`crate::run`] applies the plans.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::model::{self, ServiceKey};
use crate::rules::{self, Map, Rendered, Skeleton};

/// One batch to apply, and what the table holds once it is applied.
#[derive(Debug)]
pub struct Plan {
    pub script: String,
    /// The Services this batch wrote.
    pub services: usize,
    full: bool,
    rendered: Vec<(ServiceKey, Rendered)>,
    /// Chains and sets this batch flushes, to delete later.
    stale: Vec<(String, Stale)>,
    /// Stale ones this batch deletes.
    deleted: Vec<String>,
    /// Spread maps this batch makes.
    spreads: Vec<u16>,
}

/// See the module doc.
#[derive(Debug)]
pub struct Proxier {
    skeleton: Skeleton,
    node: String,
    services: HashMap<ServiceKey, Arc<Service>>,
    /// Service → slice name → slice.
    slices: HashMap<ServiceKey, BTreeMap<String, Arc<EndpointSlice>>>,
    /// (namespace, slice name) → the Service it was filed under.
    slice_owner: HashMap<(String, String), ServiceKey>,
    /// What each Service asks for, with its rank (older first) in
    /// settling which of two Services gets a map key both want.
    wanted: HashMap<ServiceKey, (Rank, Rendered)>,
    /// (map, key) → the Services that want it; the first one has it.
    claims: HashMap<(Map, String), BTreeSet<(Rank, ServiceKey)>>,
    /// What each Service has in the kernel (the keys it won).
    rendered: HashMap<ServiceKey, Rendered>,
    /// Chains and sets flushed of their rules but not yet deleted: the
    /// kernel (before 6.2) releases the references of removed map
    /// elements lazily, so they are deleted in a later batch, as
    /// upstream's proxier does.
    stale: BTreeMap<String, (Stale, Instant)>,
    /// The spread maps (by endpoint count) the table has, with their
    /// rules; kept once made.
    spreads: BTreeSet<u16>,
    dirty: BTreeSet<ServiceKey>,
    needs_full: bool,
}

/// A Service's age, for settling conflicts: its creation time, then name.
type Rank = String;

/// What a stale name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stale {
    Chain,
    Set,
}

/// How long a flushed chain or set waits to be deleted.
pub const STALE_AFTER: Duration = Duration::from_secs(1);

impl Proxier {
    pub fn new(skeleton: Skeleton, node: &str) -> Self {
        Self {
            skeleton,
            node: node.to_string(),
            services: HashMap::new(),
            slices: HashMap::new(),
            slice_owner: HashMap::new(),
            wanted: HashMap::new(),
            claims: HashMap::new(),
            rendered: HashMap::new(),
            stale: BTreeMap::new(),
            spreads: BTreeSet::new(),
            dirty: BTreeSet::new(),
            needs_full: true,
        }
    }

    pub fn table(&self) -> &str {
        &self.skeleton.table
    }

    /// New node addresses (or other skeleton settings): the next sync
    /// rebuilds the table.
    pub fn set_skeleton(&mut self, skeleton: Skeleton) {
        if skeleton != self.skeleton {
            self.skeleton = skeleton;
            self.needs_full = true;
        }
    }

    pub fn apply_service(&mut self, svc: Arc<Service>) {
        if let Some(key) = ServiceKey::of_service(&svc) {
            self.dirty.insert(key.clone());
            self.services.insert(key, svc);
        }
    }

    pub fn delete_service(&mut self, svc: &Service) {
        if let Some(key) = ServiceKey::of_service(svc) {
            self.services.remove(&key);
            self.dirty.insert(key);
        }
    }

    fn slice_id(slice: &EndpointSlice) -> Option<(String, String)> {
        Some((
            slice.metadata.namespace.clone()?,
            slice.metadata.name.clone()?,
        ))
    }

    fn forget_slice(&mut self, id: &(String, String)) {
        if let Some(owner) = self.slice_owner.remove(id) {
            if let Some(of) = self.slices.get_mut(&owner) {
                of.remove(&id.1);
                if of.is_empty() {
                    self.slices.remove(&owner);
                }
            }
            self.dirty.insert(owner);
        }
    }

    pub fn apply_slice(&mut self, slice: Arc<EndpointSlice>) {
        let Some(id) = Self::slice_id(&slice) else {
            return;
        };
        // Its Service label may have changed: file it anew.
        self.forget_slice(&id);
        if let Some(key) = ServiceKey::of_slice(&slice) {
            self.slices
                .entry(key.clone())
                .or_default()
                .insert(id.1.clone(), slice);
            self.slice_owner.insert(id, key.clone());
            self.dirty.insert(key);
        }
    }

    pub fn delete_slice(&mut self, slice: &EndpointSlice) {
        if let Some(id) = Self::slice_id(slice) {
            self.forget_slice(&id);
        }
    }

    /// Replaces everything known (after a relist): every Service old or
    /// new is looked at again at the next sync.
    pub fn replace_services(&mut self, all: impl IntoIterator<Item = Arc<Service>>) {
        self.dirty.extend(self.services.keys().cloned());
        self.services.clear();
        for svc in all {
            self.apply_service(svc);
        }
    }

    /// As [`Proxier::replace_services`], for EndpointSlices.
    pub fn replace_slices(&mut self, all: impl IntoIterator<Item = Arc<EndpointSlice>>) {
        self.dirty.extend(self.slices.keys().cloned());
        self.slices.clear();
        self.slice_owner.clear();
        for slice in all {
            self.apply_slice(slice);
        }
    }

    /// Whether a sync has anything to do.
    pub fn is_dirty(&self) -> bool {
        self.needs_full || !self.dirty.is_empty()
    }

    /// After a batch failed: rebuild everything next time.
    pub fn fail(&mut self) {
        self.needs_full = true;
    }

    fn render(&self, key: &ServiceKey) -> Rendered {
        let Some(svc) = self.services.get(key) else {
            return Rendered::default();
        };
        let slices: Vec<&EndpointSlice> = self
            .slices
            .get(key)
            .map(|m| m.values().map(|s| s.as_ref()).collect())
            .unwrap_or_default();
        rules::render(
            &model::service_ports(svc, &slices, &self.node),
            &self.skeleton,
        )
    }

    fn rank(&self, key: &ServiceKey) -> Rank {
        let created = self
            .services
            .get(key)
            .and_then(|s| s.metadata.creation_timestamp.as_ref())
            .map(|t| t.0.to_string())
            .unwrap_or_else(|| "~".into());
        format!("{created} {key}")
    }

    /// Records what `key` wants now; the Services whose share of a
    /// contested map key may have changed (`key` included).
    fn want(&mut self, key: &ServiceKey, recheck: &mut BTreeSet<ServiceKey>) {
        let raw = self.render(key);
        let rank = self.rank(key);
        let old = self.wanted.remove(key);
        if let Some((old_rank, old_raw)) = &old {
            for element in old_raw.elements.keys() {
                if let Some(claimants) = self.claims.get_mut(element) {
                    claimants.remove(&(old_rank.clone(), key.clone()));
                    recheck.extend(claimants.iter().map(|(_, k)| k.clone()));
                    if claimants.is_empty() {
                        self.claims.remove(element);
                    }
                }
            }
        }
        for element in raw.elements.keys() {
            let claimants = self.claims.entry(element.clone()).or_default();
            claimants.insert((rank.clone(), key.clone()));
            if claimants.len() > 1 {
                recheck.extend(claimants.iter().map(|(_, k)| k.clone()));
            }
        }
        recheck.insert(key.clone());
        if self.services.contains_key(key) {
            self.wanted.insert(key.clone(), (rank, raw));
        }
    }

    /// What `key` may have: what it wants, less the map keys an older
    /// Service holds.
    fn owned(&self, key: &ServiceKey) -> Rendered {
        let Some((_, raw)) = self.wanted.get(key) else {
            return Rendered::default();
        };
        let mut owned = raw.clone();
        owned.elements.retain(|element, _| {
            let first = self.claims.get(element).and_then(|c| c.first());
            let mine = first.is_none_or(|(_, k)| k == key);
            if !mine {
                tracing::warn!(
                    service = %key,
                    map = element.0.name(),
                    key = %element.1,
                    held_by = %first.map(|(_, k)| k.to_string()).unwrap_or_default(),
                    "another Service holds this address and port"
                );
            }
            mine
        });
        owned
    }

    /// The spread maps `rendered` uses that the table lacks (all of them
    /// after a full sync), and the lines that make them.
    fn new_spreads(&self, rendered: &[(ServiceKey, Rendered)], full: bool) -> (Vec<u16>, String) {
        let mut wanted = BTreeSet::new();
        for (_, r) in rendered {
            for (map, _) in r.elements.keys() {
                if let Map::Spread(n) = map {
                    if full || !self.spreads.contains(n) {
                        wanted.insert(*n);
                    }
                }
            }
        }
        let mut lines = String::new();
        for n in &wanted {
            for line in rules::spread_decl(&self.skeleton.table, *n) {
                lines.push_str(&line);
                lines.push('\n');
            }
        }
        (wanted.into_iter().collect(), lines)
    }

    /// When the next clean-up of stale chains is due, if one is.
    pub fn next_cleanup(&self) -> Option<Instant> {
        self.stale.values().map(|(_, at)| *at + STALE_AFTER).min()
    }

    /// The next batch, if anything changed (or stale chains are due).
    pub fn plan(&mut self) -> Option<Plan> {
        self.plan_at(Instant::now())
    }

    /// [`Proxier::plan`] as of `now`.
    pub fn plan_at(&mut self, now: Instant) -> Option<Plan> {
        let t = self.skeleton.table.clone();
        if self.needs_full {
            self.wanted.clear();
            self.claims.clear();
            let mut keys: Vec<ServiceKey> = self.services.keys().cloned().collect();
            keys.sort();
            let mut ignored = BTreeSet::new();
            for key in &keys {
                self.want(key, &mut ignored);
            }
            let rendered: Vec<(ServiceKey, Rendered)> =
                keys.iter().map(|k| (k.clone(), self.owned(k))).collect();
            let mut script = Script::default();
            let empty = Rendered::default();
            for (_, r) in &rendered {
                script.diff(&t, &empty, r);
            }
            let (spreads, declared) = self.new_spreads(&rendered, true);
            let head = format!(
                "add table ip {t}\ndelete table ip {t}\n{}{declared}",
                rules::base(&self.skeleton)
            );
            self.dirty.clear();
            return Some(Plan {
                script: head + &script.finish(&t),
                services: rendered.len(),
                full: true,
                rendered,
                stale: vec![],
                deleted: vec![],
                spreads,
            });
        }
        let dirty = std::mem::take(&mut self.dirty);
        let mut recheck = BTreeSet::new();
        for key in &dirty {
            self.want(key, &mut recheck);
        }
        let empty = Rendered::default();
        let mut script = Script::default();
        let mut rendered = vec![];
        for key in recheck {
            let new = self.owned(&key);
            let old = self.rendered.get(&key).unwrap_or(&empty);
            if *old != new {
                script.diff(&t, old, &new);
                rendered.push((key, new));
            }
        }
        // Chains and sets flushed long enough ago go now, unless a
        // Service wants them again.
        let wanted_again = |name: &str| {
            rendered
                .iter()
                .any(|(_, r)| r.chains.contains_key(name) || r.sets.contains_key(name))
        };
        let mut deleted = vec![];
        for (name, (kind, at)) in &self.stale {
            if *at + STALE_AFTER <= now && !wanted_again(name) {
                script.delete_stale(&t, name, *kind);
                deleted.push(name.clone());
            }
        }
        if rendered.is_empty() && deleted.is_empty() {
            return None;
        }
        let stale = std::mem::take(&mut script.stale);
        let (spreads, declared) = self.new_spreads(&rendered, false);
        Some(Plan {
            script: declared + &script.finish(&t),
            services: rendered.len(),
            full: false,
            rendered,
            stale,
            deleted,
            spreads,
        })
    }

    /// Records that `plan` is in the kernel.
    pub fn commit(&mut self, plan: Plan) {
        let now = Instant::now();
        if plan.full {
            self.rendered.clear();
            self.stale.clear();
            self.spreads.clear();
            self.needs_full = false;
        }
        self.spreads.extend(plan.spreads);
        for name in plan.deleted {
            self.stale.remove(&name);
        }
        for (name, kind) in plan.stale {
            self.stale.insert(name, (kind, now));
        }
        for (key, r) in plan.rendered {
            for name in r.chains.keys().chain(r.sets.keys()) {
                self.stale.remove(name);
            }
            if r == Rendered::default() {
                self.rendered.remove(&key);
            } else {
                self.rendered.insert(key, r);
            }
        }
    }
}

/// A batch being built, in the order nft needs: objects are declared
/// before anything refers to them and removed after nothing does.
#[derive(Debug, Default)]
struct Script {
    add_sets: Vec<String>,
    add_chains: Vec<String>,
    /// `flush chain` of changed chains and `add rule` of new and changed.
    rules: Vec<String>,
    del_elements: BTreeMap<Map, Vec<String>>,
    add_elements: BTreeMap<Map, Vec<String>>,
    flush_chains: Vec<String>,
    del_chains: Vec<String>,
    del_sets: Vec<String>,
    /// What was flushed, to delete in a later batch.
    stale: Vec<(String, Stale)>,
}

impl Script {
    fn diff(&mut self, t: &str, old: &Rendered, new: &Rendered) {
        for (name, decl) in &new.sets {
            if old.sets.get(name) != Some(decl) {
                self.add_sets.push(format!("add set ip {t} {name} {decl}"));
            }
        }
        for name in old.sets.keys().filter(|n| !new.sets.contains_key(*n)) {
            // Rules that use it are flushed in this batch; the set goes
            // in a later one.
            self.stale.push((name.clone(), Stale::Set));
        }
        for (name, rules) in &new.chains {
            match old.chains.get(name) {
                Some(was) if was == rules => continue,
                Some(_) => self.rules.push(format!("flush chain ip {t} {name}")),
                None => self.add_chains.push(format!("add chain ip {t} {name}")),
            }
            for r in rules {
                self.rules.push(format!("add rule ip {t} {name} {r}"));
            }
        }
        for name in old.chains.keys().filter(|n| !new.chains.contains_key(*n)) {
            self.flush_chains.push(format!("flush chain ip {t} {name}"));
            self.stale.push((name.clone(), Stale::Chain));
        }
        for ((map, key), value) in &new.elements {
            let was = old.elements.get(&(*map, key.clone()));
            if was == Some(value) {
                continue;
            }
            if was.is_some() {
                self.del_elements.entry(*map).or_default().push(key.clone());
            }
            let element = if map.is_set() {
                key.clone()
            } else {
                format!("{key} : {value}")
            };
            self.add_elements.entry(*map).or_default().push(element);
        }
        for (map, key) in old.elements.keys() {
            if !new.elements.contains_key(&(*map, key.clone())) {
                self.del_elements.entry(*map).or_default().push(key.clone());
            }
        }
    }

    fn delete_stale(&mut self, t: &str, name: &str, kind: Stale) {
        match kind {
            Stale::Chain => self.del_chains.push(format!("delete chain ip {t} {name}")),
            Stale::Set => self.del_sets.push(format!("delete set ip {t} {name}")),
        }
    }

    fn finish(self, t: &str) -> String {
        let mut out = String::new();
        let mut lines = |v: Vec<String>| {
            for l in v {
                out.push_str(&l);
                out.push('\n');
            }
        };
        lines(self.add_sets);
        lines(self.add_chains);
        lines(self.rules);
        let elements = |verb: &str, m: BTreeMap<Map, Vec<String>>| {
            let mut s = String::new();
            for (map, items) in m {
                // Bounded lines: nft reads a long batch faster in chunks.
                for chunk in items.chunks(1000) {
                    let _ = writeln!(
                        s,
                        "{verb} element ip {t} {} {{ {} }}",
                        map.name(),
                        chunk.join(", ")
                    );
                }
            }
            s
        };
        let del = elements("delete", self.del_elements);
        let add = elements("add", self.add_elements);
        out.push_str(&del);
        out.push_str(&add);
        let mut lines = |v: Vec<String>| {
            for l in v {
                out.push_str(&l);
                out.push('\n');
            }
        };
        lines(self.flush_chains);
        lines(self.del_chains);
        lines(self.del_sets);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn skeleton() -> Skeleton {
        Skeleton {
            table: "t".into(),
            node_ips: vec![],
            cluster_cidr: Some("10.42.0.0/16".into()),
            service_cidr: None,
        }
    }

    fn svc(name: &str, ip: &str) -> Arc<Service> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"clusterIP": ip, "ports": [{"port": 80}]},
            }))
            .unwrap(),
        )
    }

    fn slice(svc: &str, ips: &[&str]) -> Arc<EndpointSlice> {
        let eps: Vec<_> = ips.iter().map(|ip| json!({"addresses": [ip]})).collect();
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": format!("{svc}-abc"), "namespace": "ns",
                             "labels": {model::SERVICE_NAME_LABEL: svc}},
                "addressType": "IPv4",
                "ports": [{"port": 8080}],
                "endpoints": eps,
            }))
            .unwrap(),
        )
    }

    #[test]
    fn first_sync_is_full_then_only_the_change() {
        let mut p = Proxier::new(skeleton(), "n1");
        p.apply_service(svc("a", "10.43.0.1"));
        p.apply_service(svc("b", "10.43.0.2"));
        p.apply_slice(slice("a", &["10.42.0.5"]));
        let plan = p.plan().unwrap();
        assert!(plan
            .script
            .starts_with("add table ip t\ndelete table ip t\ntable ip t {"));
        assert!(plan.script.contains(
            "add element ip t no-endpoint-services { 10.43.0.2 . tcp . 80 : goto reject-chain }"
        ));
        assert!(
            plan.script.contains("add map ip t spread-1 "),
            "{}",
            plan.script
        );
        assert!(
            plan.script.contains(
                "add element ip t spread-1 { 10.43.0.1 . tcp . 80 . 0 : 10.42.0.5 . 8080 }"
            ),
            "{}",
            plan.script
        );
        assert_eq!(plan.services, 2);
        p.commit(plan);
        assert!(p.plan().is_none());

        // A second endpoint for a: its slots move to the 2-endpoint map
        // (made now), its hairpin pair is added; nothing of b, no chain.
        p.apply_slice(slice("a", &["10.42.0.5", "10.42.0.6"]));
        let plan = p.plan().unwrap();
        assert_eq!(plan.services, 1);
        let s = plan.script.clone();
        assert!(!s.contains("10.43.0.2"), "{s}");
        assert!(!s.contains("table ip t {"), "{s}");
        assert!(!s.contains("chain"), "{s}");
        assert!(s.starts_with("add map ip t spread-2 "), "{s}");
        let del = s
            .find("delete element ip t spread-1 { 10.43.0.1 . tcp . 80 . 0 }")
            .expect(&s);
        let add = s.find("add element ip t spread-2 { 10.43.0.1 . tcp . 80 . 0 : 10.42.0.5 . 8080, 10.43.0.1 . tcp . 80 . 1 : 10.42.0.6 . 8080 }").expect(&s);
        assert!(del < add, "{s}");
        assert!(
            s.contains("add element ip t hairpin { 10.42.0.6 . 10.42.0.6 }"),
            "{s}"
        );
        p.commit(plan);
        // A third Service with two endpoints uses the map made already.
        p.apply_service(svc("c", "10.43.0.3"));
        p.apply_slice(slice("c", &["10.42.0.7", "10.42.0.8"]));
        let plan = p.plan().unwrap();
        assert!(!plan.script.contains("add map"), "{}", plan.script);
        p.commit(plan);

        // The Service goes: its elements with it.
        p.delete_service(&svc("a", "10.43.0.1"));
        let plan = p.plan().unwrap();
        let s = plan.script.clone();
        assert!(s.contains("delete element ip t spread-2 { 10.43.0.1 . tcp . 80 . 0, 10.43.0.1 . tcp . 80 . 1 }"), "{s}");
        assert!(
            s.contains("delete element ip t cluster-ips { 10.43.0.1 }"),
            "{s}"
        );
        p.commit(plan);
        assert!(p.next_cleanup().is_none());
    }

    /// A Service with ClientIP affinity: chains of its own.
    fn sticky(name: &str, ip: &str) -> Arc<Service> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"clusterIP": ip, "sessionAffinity": "ClientIP", "ports": [{"port": 80}]},
            }))
            .unwrap(),
        )
    }

    #[test]
    fn chains_are_deleted_a_batch_after_they_are_emptied() {
        let mut p = Proxier::new(skeleton(), "n1");
        p.apply_service(sticky("a", "10.43.0.1"));
        p.apply_slice(slice("a", &["10.42.0.5", "10.42.0.6"]));
        let plan = p.plan().unwrap();
        p.commit(plan);
        // The Service goes: its elements and rules now, its chains and
        // sets in a later batch (the kernel lets go of them lazily
        // before 6.2).
        p.delete_service(&sticky("a", "10.43.0.1"));
        let plan = p.plan().unwrap();
        let s = plan.script.clone();
        let del_el = s
            .find("delete element ip t service-ips { 10.43.0.1 . tcp . 80 }")
            .expect(&s);
        let flush = s.find("flush chain ip t service-").expect(&s);
        assert!(del_el < flush, "{s}");
        assert!(
            !s.contains("delete chain") && !s.contains("delete set"),
            "{s}"
        );
        p.commit(plan);
        let due = p.next_cleanup().expect("a clean-up is due");
        assert!(p.plan_at(due - STALE_AFTER / 2).is_none());
        let plan = p.plan_at(due).unwrap();
        // The service chain and two endpoint chains; two affinity sets.
        assert_eq!(
            plan.script.matches("delete chain ip t ").count(),
            3,
            "{}",
            plan.script
        );
        assert_eq!(
            plan.script.matches("delete set ip t ").count(),
            2,
            "{}",
            plan.script
        );
        assert!(!plan.script.contains("element"), "{}", plan.script);
        p.commit(plan);
        assert!(p.next_cleanup().is_none());
    }

    fn external(name: &str, created: &str) -> Arc<Service> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
                "spec": {"clusterIP": format!("10.43.0.{}", name.len()),
                         "externalIPs": ["192.0.2.9"], "ports": [{"port": 80}]},
            }))
            .unwrap(),
        )
    }

    #[test]
    fn the_older_service_holds_a_contested_address() {
        let mut p = Proxier::new(skeleton(), "n1");
        p.apply_service(external("young", "2026-01-02T00:00:00Z"));
        p.apply_service(external("old", "2026-01-01T00:00:00Z"));
        let plan = p.plan().unwrap();
        let s = plan.script.clone();
        assert_eq!(s.matches("192.0.2.9 . tcp . 80").count(), 1, "{s}");
        p.commit(plan);
        let who = |p: &Proxier, name: &str| {
            p.rendered
                .get(&ServiceKey {
                    namespace: "ns".into(),
                    name: name.into(),
                })
                .is_some_and(|r| r.elements.keys().any(|(_, k)| k.starts_with("192.0.2.9")))
        };
        assert!(who(&p, "old") && !who(&p, "young"));

        // The older one goes: the younger one takes the address over, in
        // the same batch that removes the older one's element.
        p.delete_service(&external("old", "2026-01-01T00:00:00Z"));
        let plan = p.plan().unwrap();
        let s = plan.script.clone();
        let del = s.find("192.0.2.9 . tcp . 80 }\n").expect(&s);
        assert!(
            s[..del]
                .rfind('\n')
                .map_or(&s[..], |i| &s[i..])
                .contains("delete element"),
            "{s}"
        );
        let add = s.find("add element ip t no-endpoint-services { 192.0.2.9 . tcp . 80 : goto reject-chain }").unwrap();
        assert!(del < add, "{s}");
        p.commit(plan);
        assert!(who(&p, "young"));
    }

    #[test]
    fn a_failed_batch_leads_to_a_full_one() {
        let mut p = Proxier::new(skeleton(), "n1");
        p.apply_service(svc("a", "10.43.0.1"));
        let plan = p.plan().unwrap();
        p.commit(plan);
        p.apply_slice(slice("a", &["10.42.0.5"]));
        let _lost = p.plan().unwrap();
        p.fail();
        let plan = p.plan().unwrap();
        assert!(plan.script.contains("table ip t {"));
        assert!(plan
            .script
            .contains("10.43.0.1 . tcp . 80 . 0 : 10.42.0.5 . 8080"));
    }

    #[test]
    fn a_slice_moving_to_another_service_refreshes_both() {
        let mut p = Proxier::new(skeleton(), "n1");
        p.apply_service(svc("a", "10.43.0.1"));
        p.apply_service(svc("b", "10.43.0.2"));
        let mut s = (*slice("a", &["10.42.0.5"])).clone();
        p.apply_slice(Arc::new(s.clone()));
        let plan = p.plan().unwrap();
        p.commit(plan);
        s.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(model::SERVICE_NAME_LABEL.into(), "b".into());
        p.apply_slice(Arc::new(s));
        let plan = p.plan().unwrap();
        assert_eq!(plan.services, 2);
        assert!(plan.script.contains(
            "add element ip t no-endpoint-services { 10.43.0.1 . tcp . 80 : goto reject-chain }"
        ));
        assert!(plan
            .script
            .contains("add element ip t spread-1 { 10.43.0.2 . tcp . 80 . 0 : 10.42.0.5 . 8080 }"));
    }
}
