//! The Docker-links-style Service variables the kubelet gives every
//! container (upstream `getServiceEnvVarMap` in kubelet_pods.go and
//! `envvars.FromServices`): `NAME_SERVICE_HOST`, `NAME_SERVICE_PORT`,
//! `NAME_SERVICE_PORT_<PORTNAME>` and the `NAME_PORT...` link variables,
//! for the Services of the pod's namespace (when
//! `spec.enableServiceLinks`, default true) and, always, for the
//! `kubernetes` Service of the `default` namespace.
//!
//! This module owns which Services a pod sees and the variables they
//! become. It is pure: the caller passes the Services it knows of (a
//! reflector store's contents, say); nothing here lists, watches or waits.
//!
//! What it must not do, and what the caller must do instead:
//! - Merge with the container's own environment. Upstream's order is:
//!   `envFrom`, then `env` (whose `$(VAR)` references also see these
//!   variables, after the container's own), then every Service variable
//!   whose name the container did not set. The container's explicit
//!   environment always wins over these.
//! - Decide whether the Service list is complete: upstream refuses to
//!   build the environment of a non-static pod until its Service informer
//!   has synced once (so `KUBERNETES_SERVICE_HOST` is not silently
//!   missing). That check belongs to the caller.
//! - Take part in a container's hash: a Service changing must not restart
//!   running containers; only containers started later see the change.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;

/// The namespace whose master Services every pod sees (upstream's
/// `metav1.NamespaceDefault`).
pub const MASTER_SERVICE_NAMESPACE: &str = "default";

/// The Services of [`MASTER_SERVICE_NAMESPACE`] every pod sees, even with
/// `enableServiceLinks: false` (upstream's `masterServices`).
pub const MASTER_SERVICES: &[&str] = &["kubernetes"];

/// The Service variables for a pod in `namespace`, sorted by name, each
/// name once.
///
/// Services are chosen as upstream's `getServiceEnvVarMap` does: those
/// without a cluster IP (headless, ExternalName) are skipped; a master
/// Service of [`MASTER_SERVICE_NAMESPACE`] is kept unless a Service of the
/// same name was already kept; a Service of the pod's namespace is kept,
/// replacing any of the same name, when `enable_service_links`. So a
/// pod's own `kubernetes` Service shadows the master one whenever service
/// links are on, whatever the order of `services`.
///
/// Where two Services would set the same variable (`foo`'s
/// `FOO_PORT_80_TCP_PORT` and `foo-port-80-tcp`'s, say) upstream's
/// winner depends on Go's map order; here the Service whose name sorts
/// last wins.
///
/// With a `Vec<Arc<Service>>` from a store: `service_env(ns, links,
/// store.iter().map(|s| &**s))`.
pub fn service_env<'a>(
    namespace: &str,
    enable_service_links: bool,
    services: impl IntoIterator<Item = &'a Service>,
) -> Vec<(String, String)> {
    let mut chosen: BTreeMap<&str, &Service> = BTreeMap::new();
    for service in services {
        if !cluster_ip_set(service) {
            continue;
        }
        let name = service.metadata.name.as_deref().unwrap_or_default();
        let ns = service.metadata.namespace.as_deref().unwrap_or_default();
        if ns == MASTER_SERVICE_NAMESPACE && MASTER_SERVICES.contains(&name) {
            chosen.entry(name).or_insert(service);
        } else if ns == namespace && enable_service_links {
            chosen.insert(name, service);
        }
    }
    let mut env = BTreeMap::new();
    for service in chosen.values() {
        env.extend(from_service(service));
    }
    env.into_iter().collect()
}

/// Whether a Service has a cluster IP (upstream's `IsServiceIPSet`: set
/// and not `None`). ExternalName Services are also refused outright;
/// validation keeps their cluster IP empty anyway.
fn cluster_ip_set(service: &Service) -> bool {
    let spec = service.spec.as_ref();
    let ip = spec
        .and_then(|s| s.cluster_ip.as_deref())
        .unwrap_or_default();
    let external = spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName");
    !ip.is_empty() && ip != "None" && !external
}

/// One Service's variables in upstream's order (`FromServices` for a
/// single Service); nothing for a Service without a cluster IP. A Service
/// with no ports (which validation refuses unless headless) gets only
/// `NAME_SERVICE_HOST`.
pub fn from_service(service: &Service) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if !cluster_ip_set(service) {
        return out;
    }
    let spec = service.spec.as_ref();
    let ip = spec
        .and_then(|s| s.cluster_ip.as_deref())
        .unwrap_or_default();
    let ports = spec.and_then(|s| s.ports.as_deref()).unwrap_or_default();
    let prefix = env_name(service.metadata.name.as_deref().unwrap_or_default());

    out.push((format!("{prefix}_SERVICE_HOST"), ip.to_string()));
    let Some(first) = ports.first() else {
        return out;
    };
    let port_var = format!("{prefix}_SERVICE_PORT");
    out.push((port_var.clone(), first.port.to_string()));
    // Only the first port may be unnamed (validation).
    for p in ports {
        if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty()) {
            out.push((format!("{port_var}_{}", env_name(name)), p.port.to_string()));
        }
    }

    // Docker-compatible link variables (upstream's makeLinkVariables).
    let host = if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.to_string()
    };
    for (i, p) in ports.iter().enumerate() {
        let protocol = p
            .protocol
            .as_deref()
            .filter(|s| !s.is_empty())
            .unwrap_or("TCP");
        let lower = protocol.to_lowercase();
        let url = format!("{lower}://{host}:{}", p.port);
        if i == 0 {
            // Docker special-cases the first port.
            out.push((format!("{prefix}_PORT"), url.clone()));
        }
        let port_prefix = format!("{prefix}_PORT_{}_{}", p.port, protocol.to_uppercase());
        out.push((port_prefix.clone(), url));
        out.push((format!("{port_prefix}_PROTO"), lower));
        out.push((format!("{port_prefix}_PORT"), p.port.to_string()));
        out.push((format!("{port_prefix}_ADDR"), ip.to_string()));
    }
    out
}

/// Upstream's `makeEnvVariableName`: upper case, `-` as `_`.
fn env_name(name: &str) -> String {
    name.replace('-', "_").to_uppercase()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn svc(ns: &str, name: &str, spec: serde_json::Value) -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": ns, "name": name},
            "spec": spec,
        }))
        .unwrap()
    }

    fn cluster_ip(ns: &str, name: &str, ip: &str, ports: serde_json::Value) -> Service {
        svc(
            ns,
            name,
            serde_json::json!({"clusterIP": ip, "ports": ports}),
        )
    }

    fn master() -> Service {
        cluster_ip(
            "default",
            "kubernetes",
            "10.96.0.1",
            serde_json::json!([{"name": "https", "port": 443, "protocol": "TCP"}]),
        )
    }

    fn pairs(want: &[(&str, &str)]) -> Vec<(String, String)> {
        want.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn master_vars() -> Vec<(String, String)> {
        pairs(&[
            ("KUBERNETES_PORT", "tcp://10.96.0.1:443"),
            ("KUBERNETES_PORT_443_TCP", "tcp://10.96.0.1:443"),
            ("KUBERNETES_PORT_443_TCP_ADDR", "10.96.0.1"),
            ("KUBERNETES_PORT_443_TCP_PORT", "443"),
            ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
            ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
            ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
        ])
    }

    /// The variables without the master Service's.
    fn without_master(env: Vec<(String, String)>) -> Vec<(String, String)> {
        env.into_iter()
            .filter(|(k, _)| !k.starts_with("KUBERNETES_"))
            .collect()
    }

    #[test]
    fn kubernetes_service_always_present() {
        let services = [master()];
        for ns in ["default", "team"] {
            for links in [true, false] {
                assert_eq!(service_env(ns, links, &services), master_vars());
            }
        }
        assert!(service_env("team", true, &[]).is_empty());
    }

    #[test]
    fn links_disabled_gives_only_kubernetes_vars() {
        let services = [
            cluster_ip("team", "web", "10.0.0.5", serde_json::json!([{"port": 80}])),
            cluster_ip(
                "default",
                "db",
                "10.0.0.6",
                serde_json::json!([{"port": 5432}]),
            ),
            master(),
        ];
        assert_eq!(service_env("team", false, &services), master_vars());
        assert_eq!(service_env("default", false, &services), master_vars());
    }

    #[test]
    fn multi_port_service_exact_vars() {
        let services = [cluster_ip(
            "team",
            "web-app",
            "10.0.0.10",
            serde_json::json!([
                {"name": "http", "port": 80},
                {"name": "https", "port": 443, "protocol": "TCP"},
                {"name": "dns-udp", "port": 53, "protocol": "UDP"},
            ]),
        )];
        // Upstream's order for the one Service...
        assert_eq!(
            from_service(&services[0]),
            pairs(&[
                ("WEB_APP_SERVICE_HOST", "10.0.0.10"),
                ("WEB_APP_SERVICE_PORT", "80"),
                ("WEB_APP_SERVICE_PORT_HTTP", "80"),
                ("WEB_APP_SERVICE_PORT_HTTPS", "443"),
                ("WEB_APP_SERVICE_PORT_DNS_UDP", "53"),
                ("WEB_APP_PORT", "tcp://10.0.0.10:80"),
                ("WEB_APP_PORT_80_TCP", "tcp://10.0.0.10:80"),
                ("WEB_APP_PORT_80_TCP_PROTO", "tcp"),
                ("WEB_APP_PORT_80_TCP_PORT", "80"),
                ("WEB_APP_PORT_80_TCP_ADDR", "10.0.0.10"),
                ("WEB_APP_PORT_443_TCP", "tcp://10.0.0.10:443"),
                ("WEB_APP_PORT_443_TCP_PROTO", "tcp"),
                ("WEB_APP_PORT_443_TCP_PORT", "443"),
                ("WEB_APP_PORT_443_TCP_ADDR", "10.0.0.10"),
                ("WEB_APP_PORT_53_UDP", "udp://10.0.0.10:53"),
                ("WEB_APP_PORT_53_UDP_PROTO", "udp"),
                ("WEB_APP_PORT_53_UDP_PORT", "53"),
                ("WEB_APP_PORT_53_UDP_ADDR", "10.0.0.10"),
            ])
        );
        // ...and sorted by name in the pod's environment.
        assert_eq!(
            service_env("team", true, &services),
            pairs(&[
                ("WEB_APP_PORT", "tcp://10.0.0.10:80"),
                ("WEB_APP_PORT_443_TCP", "tcp://10.0.0.10:443"),
                ("WEB_APP_PORT_443_TCP_ADDR", "10.0.0.10"),
                ("WEB_APP_PORT_443_TCP_PORT", "443"),
                ("WEB_APP_PORT_443_TCP_PROTO", "tcp"),
                ("WEB_APP_PORT_53_UDP", "udp://10.0.0.10:53"),
                ("WEB_APP_PORT_53_UDP_ADDR", "10.0.0.10"),
                ("WEB_APP_PORT_53_UDP_PORT", "53"),
                ("WEB_APP_PORT_53_UDP_PROTO", "udp"),
                ("WEB_APP_PORT_80_TCP", "tcp://10.0.0.10:80"),
                ("WEB_APP_PORT_80_TCP_ADDR", "10.0.0.10"),
                ("WEB_APP_PORT_80_TCP_PORT", "80"),
                ("WEB_APP_PORT_80_TCP_PROTO", "tcp"),
                ("WEB_APP_SERVICE_HOST", "10.0.0.10"),
                ("WEB_APP_SERVICE_PORT", "80"),
                ("WEB_APP_SERVICE_PORT_DNS_UDP", "53"),
                ("WEB_APP_SERVICE_PORT_HTTP", "80"),
                ("WEB_APP_SERVICE_PORT_HTTPS", "443"),
            ])
        );
    }

    #[test]
    fn single_unnamed_port_exact_vars() {
        let services = [cluster_ip(
            "team",
            "db",
            "10.0.0.6",
            serde_json::json!([{"port": 5432, "targetPort": 5432}]),
        )];
        assert_eq!(
            service_env("team", true, &services),
            pairs(&[
                ("DB_PORT", "tcp://10.0.0.6:5432"),
                ("DB_PORT_5432_TCP", "tcp://10.0.0.6:5432"),
                ("DB_PORT_5432_TCP_ADDR", "10.0.0.6"),
                ("DB_PORT_5432_TCP_PORT", "5432"),
                ("DB_PORT_5432_TCP_PROTO", "tcp"),
                ("DB_SERVICE_HOST", "10.0.0.6"),
                ("DB_SERVICE_PORT", "5432"),
            ])
        );
    }

    #[test]
    fn service_without_ports_gets_only_its_host() {
        let services = [cluster_ip(
            "team",
            "bare",
            "10.0.0.7",
            serde_json::json!([]),
        )];
        assert_eq!(
            service_env("team", true, &services),
            pairs(&[("BARE_SERVICE_HOST", "10.0.0.7")])
        );
    }

    #[test]
    fn headless_and_external_name_skipped() {
        let services = [
            master(),
            cluster_ip(
                "team",
                "headless",
                "None",
                serde_json::json!([{"port": 80}]),
            ),
            cluster_ip("team", "empty", "", serde_json::json!([{"port": 80}])),
            svc(
                "team",
                "unset",
                serde_json::json!({"ports": [{"port": 80}]}),
            ),
            svc(
                "team",
                "ext",
                serde_json::json!({"type": "ExternalName", "externalName": "example.com"}),
            ),
            svc(
                "team",
                "ext-ip",
                serde_json::json!({"type": "ExternalName", "externalName": "example.com",
                    "clusterIP": "10.0.0.9", "ports": [{"port": 80}]}),
            ),
            // Headless master Service: no variables at all.
            cluster_ip(
                "default",
                "kubernetes",
                "None",
                serde_json::json!([{"port": 443}]),
            ),
        ];
        assert_eq!(service_env("team", true, &services), master_vars());
        assert!(service_env("team", true, services.get(1..).unwrap()).is_empty());
    }

    #[test]
    fn other_namespaces_skipped() {
        let services = [
            master(),
            cluster_ip(
                "other",
                "web",
                "10.0.1.1",
                serde_json::json!([{"port": 80}]),
            ),
            cluster_ip(
                "default",
                "db",
                "10.0.1.2",
                serde_json::json!([{"port": 5432}]),
            ),
            cluster_ip(
                "team",
                "api",
                "10.0.1.3",
                serde_json::json!([{"port": 8080}]),
            ),
        ];
        let env = service_env("team", true, &services);
        assert!(env.iter().all(|(k, _)| !k.starts_with("WEB_")));
        assert!(env.iter().all(|(k, _)| !k.starts_with("DB_")));
        let api: Vec<_> = env.iter().filter(|(k, _)| k.starts_with("API_")).collect();
        assert_eq!(api.len(), 7);
        assert_eq!(
            without_master(env.clone()),
            from_service(&services[3])
                .into_iter()
                .collect::<BTreeMap<_, _>>()
                .into_iter()
                .collect::<Vec<_>>()
        );
        assert_eq!(
            env.into_iter()
                .filter(|(k, _)| k.starts_with("KUBERNETES_"))
                .collect::<Vec<_>>(),
            master_vars()
        );
    }

    #[test]
    fn pod_in_default_sees_default_services_and_kubernetes_once() {
        let services = [
            master(),
            cluster_ip(
                "default",
                "db",
                "10.0.1.2",
                serde_json::json!([{"port": 5432}]),
            ),
            cluster_ip(
                "team",
                "api",
                "10.0.1.3",
                serde_json::json!([{"port": 8080}]),
            ),
        ];
        let env = service_env("default", true, &services);
        let mut names: Vec<_> = env.iter().map(|(k, _)| k.clone()).collect();
        names.dedup();
        assert_eq!(names.len(), env.len());
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("KUBERNETES_SERVICE_HOST"), Some("10.96.0.1"));
        assert_eq!(get("DB_SERVICE_HOST"), Some("10.0.1.2"));
        assert_eq!(get("API_SERVICE_HOST"), None);
        assert_eq!(env.len(), 8 + 7);
    }

    #[test]
    fn pod_namespace_kubernetes_shadows_master() {
        let own = cluster_ip(
            "team",
            "kubernetes",
            "10.0.2.2",
            serde_json::json!([{"port": 8443}]),
        );
        let own_vars = pairs(&[
            ("KUBERNETES_PORT", "tcp://10.0.2.2:8443"),
            ("KUBERNETES_PORT_8443_TCP", "tcp://10.0.2.2:8443"),
            ("KUBERNETES_PORT_8443_TCP_ADDR", "10.0.2.2"),
            ("KUBERNETES_PORT_8443_TCP_PORT", "8443"),
            ("KUBERNETES_PORT_8443_TCP_PROTO", "tcp"),
            ("KUBERNETES_SERVICE_HOST", "10.0.2.2"),
            ("KUBERNETES_SERVICE_PORT", "8443"),
        ]);
        // Whatever the order, the pod's own wins, and nothing of the
        // master's (KUBERNETES_SERVICE_PORT_HTTPS, the 443 vars) leaks.
        assert_eq!(service_env("team", true, [&own, &master()]), own_vars);
        assert_eq!(service_env("team", true, [&master(), &own]), own_vars);
        // Without service links the pod's own is not seen at all.
        assert_eq!(service_env("team", false, [&own, &master()]), master_vars());
        assert_eq!(service_env("team", false, [&master(), &own]), master_vars());
        // A pod in another namespace is unaffected by team's.
        assert_eq!(service_env("other", true, [&own, &master()]), master_vars());
    }

    #[test]
    fn ipv6_cluster_ip_bracketed_in_urls() {
        let services = [cluster_ip(
            "default",
            "kubernetes",
            "fd00:10:96::1",
            serde_json::json!([{"name": "https", "port": 443}]),
        )];
        assert_eq!(
            service_env("team", true, &services),
            pairs(&[
                ("KUBERNETES_PORT", "tcp://[fd00:10:96::1]:443"),
                ("KUBERNETES_PORT_443_TCP", "tcp://[fd00:10:96::1]:443"),
                ("KUBERNETES_PORT_443_TCP_ADDR", "fd00:10:96::1"),
                ("KUBERNETES_PORT_443_TCP_PORT", "443"),
                ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
                ("KUBERNETES_SERVICE_HOST", "fd00:10:96::1"),
                ("KUBERNETES_SERVICE_PORT", "443"),
                ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
            ])
        );
    }

    #[test]
    fn colliding_variables_are_deterministic() {
        let foo = cluster_ip("team", "foo", "10.0.3.1", serde_json::json!([{"port": 80}]));
        let clash = cluster_ip(
            "team",
            "foo-port-80-tcp",
            "10.0.3.2",
            serde_json::json!([{"port": 81}]),
        );
        let a = service_env("team", true, [&foo, &clash]);
        let b = service_env("team", true, [&clash, &foo]);
        assert_eq!(a, b);
        let get = |k: &str| a.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        // foo's is "80", foo-port-80-tcp's (its first-port link) wins.
        assert_eq!(get("FOO_PORT_80_TCP_PORT"), Some("tcp://10.0.3.2:81"));
    }

    #[test]
    fn accepts_a_stores_arcs() {
        let store: Vec<Arc<Service>> = vec![Arc::new(master())];
        assert_eq!(
            service_env("team", true, store.iter().map(|s| &**s)),
            master_vars()
        );
    }
}
