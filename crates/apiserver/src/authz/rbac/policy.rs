//! The RBAC objects the authorizer reads, in memory: ClusterRoles and
//! Roles by name, and bindings indexed by subject (a User subject and a
//! ServiceAccount subject both as the user name they stand for, a Group by
//! its name), so a decision looks only at the bindings of the caller's
//! name and groups. [`super::follow`] keeps it current from the watch
//! cache; nothing here reads the store.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, PolicyRule, RoleBinding, Subject};

use super::rules::rule_allows;
use crate::authn::User;
use crate::authz::{Attributes, Rules};

/// Whom a binding names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Who {
    User(String),
    Group(String),
}

/// What a binding grants, to whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// A RoleBinding's namespace; `None` for a ClusterRoleBinding.
    pub namespace: Option<String>,
    /// The referenced role: a Role in `namespace` or a ClusterRole.
    pub cluster_role: bool,
    pub role: String,
    pub subjects: Vec<Who>,
}

impl Binding {
    pub fn of_cluster_role_binding(b: &ClusterRoleBinding) -> Self {
        Binding {
            namespace: None,
            cluster_role: true,
            role: b.role_ref.name.clone(),
            subjects: subjects(b.subjects.as_deref().unwrap_or(&[]), ""),
        }
    }

    pub fn of_role_binding(b: &RoleBinding) -> Self {
        let ns = b.metadata.namespace.clone().unwrap_or_default();
        Binding {
            cluster_role: b.role_ref.kind == "ClusterRole",
            role: b.role_ref.name.clone(),
            subjects: subjects(b.subjects.as_deref().unwrap_or(&[]), &ns),
            namespace: Some(ns),
        }
    }
}

/// Upstream's `appliesTo`: a ServiceAccount subject is the user
/// `system:serviceaccount:NS:NAME` (NS defaulting to the binding's); a
/// subject of another kind matches nobody.
fn subjects(list: &[Subject], binding_ns: &str) -> Vec<Who> {
    list.iter()
        .filter_map(|s| match s.kind.as_str() {
            "User" => Some(Who::User(s.name.clone())),
            "Group" => Some(Who::Group(s.name.clone())),
            "ServiceAccount" => {
                let ns = s
                    .namespace
                    .as_deref()
                    .filter(|n| !n.is_empty())
                    .unwrap_or(binding_ns);
                (!ns.is_empty())
                    .then(|| Who::User(format!("system:serviceaccount:{ns}:{}", s.name)))
            }
            _ => None,
        })
        .collect()
}

/// The whole RBAC state.
#[derive(Debug, Default)]
pub struct Policy {
    cluster_roles: HashMap<String, Arc<[PolicyRule]>>,
    /// By namespace, then name (looked up without allocating).
    roles: HashMap<String, HashMap<String, Arc<[PolicyRule]>>>,
    /// By a stable id (the store key).
    bindings: HashMap<String, Binding>,
    /// Binding ids by the user name and by the group name they bind
    /// (two maps, so a decision looks up `&str`s without allocating).
    by_user: HashMap<String, BTreeSet<String>>,
    by_group: HashMap<String, BTreeSet<String>>,
}

impl Policy {
    pub fn set_cluster_role(&mut self, name: &str, rules: Vec<PolicyRule>) {
        self.cluster_roles.insert(name.to_string(), rules.into());
    }

    pub fn remove_cluster_role(&mut self, name: &str) {
        self.cluster_roles.remove(name);
    }

    pub fn set_role(&mut self, namespace: &str, name: &str, rules: Vec<PolicyRule>) {
        self.roles
            .entry(namespace.to_string())
            .or_default()
            .insert(name.to_string(), rules.into());
    }

    pub fn remove_role(&mut self, namespace: &str, name: &str) {
        if let Some(in_ns) = self.roles.get_mut(namespace) {
            in_ns.remove(name);
            if in_ns.is_empty() {
                self.roles.remove(namespace);
            }
        }
    }

    fn index_of(&mut self, who: &Who) -> &mut HashMap<String, BTreeSet<String>> {
        match who {
            Who::User(_) => &mut self.by_user,
            Who::Group(_) => &mut self.by_group,
        }
    }

    pub fn set_binding(&mut self, id: &str, binding: Binding) {
        self.remove_binding(id);
        for who in &binding.subjects {
            let (Who::User(name) | Who::Group(name)) = who;
            self.index_of(who)
                .entry(name.clone())
                .or_default()
                .insert(id.to_string());
        }
        self.bindings.insert(id.to_string(), binding);
    }

    pub fn remove_binding(&mut self, id: &str) {
        let Some(old) = self.bindings.remove(id) else {
            return;
        };
        for who in &old.subjects {
            let (Who::User(name) | Who::Group(name)) = who;
            let index = self.index_of(who);
            if let Some(ids) = index.get_mut(name) {
                ids.remove(id);
                if ids.is_empty() {
                    index.remove(name);
                }
            }
        }
    }

    /// Drops every object of one kind (before a full reload of it).
    pub fn clear(&mut self, kind: super::Kind) {
        use super::Kind;
        match kind {
            Kind::ClusterRole => self.cluster_roles.clear(),
            Kind::Role => self.roles.clear(),
            Kind::ClusterRoleBinding | Kind::RoleBinding => {
                let cluster = kind == Kind::ClusterRoleBinding;
                let ids: Vec<String> = self
                    .bindings
                    .iter()
                    .filter(|(_, b)| b.namespace.is_none() == cluster)
                    .map(|(id, _)| id.clone())
                    .collect();
                for id in ids {
                    self.remove_binding(&id);
                }
            }
        }
    }

    /// The bindings naming `user` (by name or by one of its groups).
    fn bindings_of<'a>(&'a self, user: &'a User) -> impl Iterator<Item = &'a Binding> + 'a {
        self.by_user
            .get(user.name.as_str())
            .into_iter()
            .chain(
                user.groups
                    .iter()
                    .filter_map(|g| self.by_group.get(g.as_str())),
            )
            .flat_map(|ids| ids.iter())
            .filter_map(|id| self.bindings.get(id))
    }

    /// The rules of a binding's role; `None` when the role does not exist.
    fn rules_of(&self, b: &Binding) -> Option<&[PolicyRule]> {
        if b.cluster_role {
            self.cluster_roles.get(b.role.as_str()).map(|r| &r[..])
        } else {
            let ns = b.namespace.as_deref().unwrap_or("");
            self.roles.get(ns)?.get(b.role.as_str()).map(|r| &r[..])
        }
    }

    /// Whether a binding applies to a request in `namespace` (a
    /// RoleBinding only to requests in its own namespace).
    fn applies(b: &Binding, namespace: &str) -> bool {
        match &b.namespace {
            None => true,
            Some(ns) => !namespace.is_empty() && ns == namespace,
        }
    }

    /// Whether some rule bound to the caller allows `attrs`.
    pub fn allows(&self, attrs: &Attributes<'_>) -> bool {
        self.bindings_of(attrs.user)
            .filter(|b| Self::applies(b, &attrs.namespace))
            .filter_map(|b| self.rules_of(b))
            .any(|rules| rules.iter().any(|r| rule_allows(attrs, r)))
    }

    /// The rules bound to `user` that apply in `namespace` ("" for
    /// cluster-wide bindings only), and whether some binding named a role
    /// that does not exist.
    pub fn held(&self, user: &User, namespace: &str) -> (Vec<PolicyRule>, bool) {
        let mut out = Vec::new();
        let mut missing = false;
        for b in self.bindings_of(user) {
            if !Self::applies(b, namespace) {
                continue;
            }
            match self.rules_of(b) {
                Some(rules) => out.extend_from_slice(rules),
                None => missing = true,
            }
        }
        (out, missing)
    }

    /// The rules of a ClusterRole (`namespace` None) or a Role.
    pub fn role_rules(&self, namespace: Option<&str>, name: &str) -> Option<Vec<PolicyRule>> {
        match namespace {
            None => self.cluster_roles.get(name).map(|r| r.to_vec()),
            Some(ns) => self.roles.get(ns)?.get(name).map(|r| r.to_vec()),
        }
    }

    /// Every rule bound to `user` for `namespace` ("" for cluster-wide
    /// bindings only): what SelfSubjectRulesReview lists. Incomplete when
    /// a binding names a role that does not exist.
    pub fn rules_for(&self, user: &User, namespace: &str) -> Rules {
        let mut out = Rules::default();
        let mut seen = BTreeSet::new();
        for b in self.bindings_of(user) {
            if !Self::applies(b, namespace) {
                continue;
            }
            let key = (b.namespace.clone(), b.cluster_role, b.role.clone());
            if !seen.insert(key) {
                continue;
            }
            let Some(rules) = self.rules_of(b) else {
                out.incomplete = true;
                continue;
            };
            for r in rules {
                out = out.policy_rule(r);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::rbac::v1::RoleRef;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn rule(verbs: &[&str], resources: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            api_groups: Some(vec![String::new()]),
            resources: Some(resources.iter().map(|s| s.to_string()).collect()),
            ..PolicyRule::default()
        }
    }

    fn subject(kind: &str, name: &str, ns: Option<&str>) -> Subject {
        Subject {
            kind: kind.into(),
            name: name.into(),
            namespace: ns.map(String::from),
            api_group: (kind != "ServiceAccount").then(|| "rbac.authorization.k8s.io".into()),
        }
    }

    fn role_binding(
        ns: &str,
        name: &str,
        role_kind: &str,
        role: &str,
        subjects: Vec<Subject>,
    ) -> RoleBinding {
        RoleBinding {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..ObjectMeta::default()
            },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: role_kind.into(),
                name: role.into(),
            },
            subjects: Some(subjects),
        }
    }

    fn user(name: &str, groups: &[&str]) -> User {
        User {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    /// Who-can-do-what, after upstream's rbac authorizer tests.
    #[test]
    fn bindings_grant_their_roles_where_they_apply() {
        let mut p = Policy::default();
        p.set_cluster_role(
            "view-pods",
            vec![rule(&["get", "list", "watch"], &["pods"])],
        );
        p.set_cluster_role("nodes", vec![rule(&["get"], &["nodes"])]);
        p.set_role(
            "dev",
            "edit-pods",
            vec![rule(&["create", "delete"], &["pods"])],
        );
        // jane may view pods in dev through a RoleBinding to a ClusterRole
        p.set_binding(
            "/rb/dev/jane-view",
            Binding::of_role_binding(&role_binding(
                "dev",
                "jane-view",
                "ClusterRole",
                "view-pods",
                vec![subject("User", "jane", None)],
            )),
        );
        // group devs may edit pods in dev through a Role
        p.set_binding(
            "/rb/dev/devs-edit",
            Binding::of_role_binding(&role_binding(
                "dev",
                "devs-edit",
                "Role",
                "edit-pods",
                vec![subject("Group", "devs", None)],
            )),
        );
        // the ServiceAccount dev/ci (namespace from the binding) may view
        p.set_binding(
            "/rb/dev/ci",
            Binding::of_role_binding(&role_binding(
                "dev",
                "ci",
                "ClusterRole",
                "view-pods",
                vec![subject("ServiceAccount", "ci", None)],
            )),
        );
        // ops may get nodes cluster-wide
        p.set_binding(
            "/crb/ops",
            Binding::of_cluster_role_binding(&ClusterRoleBinding {
                metadata: ObjectMeta {
                    name: Some("ops".into()),
                    ..ObjectMeta::default()
                },
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "ClusterRole".into(),
                    name: "nodes".into(),
                },
                subjects: Some(vec![subject("User", "ops", None)]),
            }),
        );
        let jane = user("jane", &["system:authenticated"]);
        let dev = user("bob", &["devs"]);
        let ci = user("system:serviceaccount:dev:ci", &["system:serviceaccounts"]);
        let ops = user("ops", &[]);
        fn ask(p: &Policy, u: &User, verb: &str, resource: &str, ns: &str) -> bool {
            p.allows(&Attributes::resource(u, verb, "", resource).in_namespace(ns))
        }
        assert!(ask(&p, &jane, "list", "pods", "dev"));
        assert!(
            !ask(&p, &jane, "list", "pods", "prod"),
            "a RoleBinding is for its namespace"
        );
        assert!(
            !ask(&p, &jane, "list", "pods", ""),
            "nor for cluster-wide requests"
        );
        assert!(!ask(&p, &jane, "create", "pods", "dev"));
        assert!(ask(&p, &dev, "create", "pods", "dev"));
        assert!(!ask(&p, &dev, "get", "pods", "dev"));
        assert!(ask(&p, &ci, "watch", "pods", "dev"));
        assert!(!ask(
            &p,
            &user("system:serviceaccount:prod:ci", &[]),
            "watch",
            "pods",
            "dev"
        ));
        assert!(ask(&p, &ops, "get", "nodes", ""));
        assert!(
            ask(&p, &ops, "get", "nodes", "any"),
            "a ClusterRoleBinding applies everywhere"
        );
        assert!(!ask(
            &p,
            &user("nobody", &["system:authenticated"]),
            "get",
            "nodes",
            ""
        ));

        // a binding to a missing role grants nothing and makes the list incomplete
        p.set_binding(
            "/rb/dev/ghost",
            Binding::of_role_binding(&role_binding(
                "dev",
                "ghost",
                "Role",
                "missing",
                vec![subject("User", "jane", None)],
            )),
        );
        let listed = p.rules_for(&jane, "dev");
        assert!(listed.incomplete);
        assert_eq!(listed.resource_rules.len(), 1);

        // removing and replacing bindings and roles takes effect
        p.remove_binding("/rb/dev/jane-view");
        assert!(!ask(&p, &jane, "list", "pods", "dev"));
        p.remove_role("dev", "edit-pods");
        assert!(!ask(&p, &dev, "create", "pods", "dev"));
        p.set_binding(
            "/rb/dev/devs-edit",
            Binding::of_role_binding(&role_binding(
                "dev",
                "devs-edit",
                "ClusterRole",
                "view-pods",
                vec![subject("Group", "devs", None)],
            )),
        );
        assert!(ask(&p, &dev, "get", "pods", "dev"));
        p.clear(super::super::Kind::RoleBinding);
        assert!(!ask(&p, &dev, "get", "pods", "dev"));
        assert!(ask(&p, &ops, "get", "nodes", ""), "cluster bindings stay");
    }
}
