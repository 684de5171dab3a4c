//! A pod's names as the kubelet gives them: its hostname and domain
//! (hostname, subdomain, setHostnameAsFQDN), its /etc/resolv.conf (the
//! CRI DNSConfig for dnsPolicy Default, None, ClusterFirst and
//! ClusterFirstWithHostNet, with dnsConfig merged in) and its managed
//! /etc/hosts (the pod IP under its names, then hostAliases).
//!
//! Pure: the node's resolv.conf and hosts file are read by the caller.

use k8s_openapi::api::core::v1::Pod;

use crate::runtime::api;

/// The default cluster DNS domain (kubelet's --cluster-domain).
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// At most this many nameservers take effect (glibc's MAXNS).
const MAX_NAMESERVERS: usize = 3;
/// At most this many search domains (upstream's MaxDNSSearchPaths).
const MAX_SEARCHES: usize = 32;

/// The servers, search domains and options of a resolv.conf.
pub fn parse_resolv_conf(text: &str) -> api::DnsConfig {
    let mut cfg = api::DnsConfig::default();
    for line in text.lines() {
        let line = line.split(['#', ';']).next().unwrap_or_default();
        let mut words = line.split_whitespace();
        match words.next() {
            Some("nameserver") => cfg.servers.extend(words.next().map(str::to_string)),
            // The last search line wins, as in resolv.conf(5).
            Some("search") => cfg.searches = words.map(str::to_string).collect(),
            Some("options") => cfg.options.extend(words.map(str::to_string)),
            _ => {}
        }
    }
    cfg
}

fn dedup(list: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for s in list {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// Options by name, later ones replacing earlier ones (`ndots:5` then
/// `ndots:2` leaves `ndots:2`), as upstream's mergeDNSOptions.
fn merge_options(existing: Vec<String>, extra: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for o in existing.into_iter().chain(extra) {
        let name = o.split(':').next().unwrap_or_default().to_string();
        match out
            .iter_mut()
            .find(|x| x.split(':').next() == Some(name.as_str()))
        {
            Some(slot) => *slot = o,
            None => out.push(o),
        }
    }
    out
}

/// What the pod's DNS settings come to: the sandbox's DNSConfig and, when
/// the policy could not be honoured, the Warning event (reason, message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dns {
    pub config: api::DnsConfig,
    pub warnings: Vec<(&'static str, String)>,
}

/// The DNS config for `pod`, from the node's resolv.conf and the cluster's
/// DNS servers (none until cluster DNS exists: ClusterFirst then falls
/// back to Default with upstream's MissingClusterDNS warning).
pub fn dns(pod: &Pod, node_resolv_conf: &str, cluster_dns: &[String], domain: &str) -> Dns {
    let spec = pod.spec.as_ref();
    let policy = spec
        .and_then(|s| s.dns_policy.as_deref())
        .unwrap_or("ClusterFirst");
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let mut warnings = vec![];
    // ClusterFirst on the host's network is Default (upstream's getPodDNSType).
    let cluster = match policy {
        "ClusterFirstWithHostNet" => true,
        "ClusterFirst" => !host_network,
        _ => false,
    };
    let mut config = match policy {
        "None" => api::DnsConfig::default(),
        _ if cluster && !cluster_dns.is_empty() => {
            let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
            let host = parse_resolv_conf(node_resolv_conf);
            let mut searches = vec![
                format!("{ns}.svc.{domain}"),
                format!("svc.{domain}"),
                domain.to_string(),
            ];
            searches.extend(host.searches);
            api::DnsConfig {
                servers: cluster_dns.to_vec(),
                searches,
                options: vec!["ndots:5".into()],
            }
        }
        _ => {
            if cluster {
                warnings.push((
                    "MissingClusterDNS",
                    format!(
                        "pod: {:?}. kubelet does not have ClusterDNS IP configured and cannot create Pod using {policy:?} policy. Falling back to \"Default\" policy.",
                        crate::podspec::pod_ref(pod)
                    ),
                ));
            }
            parse_resolv_conf(node_resolv_conf)
        }
    };
    if let Some(extra) = spec.and_then(|s| s.dns_config.as_ref()) {
        config.servers = dedup(
            config
                .servers
                .into_iter()
                .chain(extra.nameservers.clone().unwrap_or_default())
                .collect(),
        );
        config.searches = dedup(
            config
                .searches
                .into_iter()
                .chain(extra.searches.clone().unwrap_or_default())
                .collect(),
        );
        let options = extra
            .options
            .iter()
            .flatten()
            .filter_map(|o| {
                let name = o.name.as_deref()?;
                Some(match o.value.as_deref() {
                    Some(v) => format!("{name}:{v}"),
                    None => name.to_string(),
                })
            })
            .collect();
        config.options = merge_options(config.options, options);
    }
    if config.servers.len() > MAX_NAMESERVERS {
        config.servers.truncate(MAX_NAMESERVERS);
        let applied = config.servers.join(" ");
        warnings.push((
            "DNSConfigForming",
            format!(
                "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: {applied}"
            ),
        ));
    }
    if config.searches.len() > MAX_SEARCHES {
        config.searches.truncate(MAX_SEARCHES);
        warnings.push((
            "DNSConfigForming",
            format!(
                "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {}",
                config.searches.join(" ")
            ),
        ));
    }
    Dns { config, warnings }
}

/// The pod's hostname and domain (upstream's GeneratePodHostNameAndDomain):
/// `spec.hostname` or the pod's name, cut to 63 bytes; the domain is
/// `SUBDOMAIN.NAMESPACE.svc.cluster.local` when a subdomain is set.
pub fn hostname_and_domain(pod: &Pod, cluster_domain: &str) -> (String, Option<String>) {
    let spec = pod.spec.as_ref();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let hostname = spec
        .and_then(|s| s.hostname.clone())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| name.to_string());
    let hostname = truncate_hostname(&hostname);
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let domain = spec
        .and_then(|s| s.subdomain.clone())
        .filter(|d| !d.is_empty())
        .map(|d| format!("{d}.{ns}.svc.{cluster_domain}"));
    (hostname, domain)
}

/// The sandbox's hostname: the FQDN under setHostnameAsFQDN, else the short name.
pub fn sandbox_hostname(pod: &Pod, cluster_domain: &str) -> String {
    let (hostname, domain) = hostname_and_domain(pod, cluster_domain);
    let fqdn = pod
        .spec
        .as_ref()
        .and_then(|s| s.set_hostname_as_fqdn)
        .unwrap_or(false);
    match domain {
        Some(d) if fqdn => format!("{hostname}.{d}"),
        _ => hostname,
    }
}

/// At most 63 bytes, without a trailing `-` or `.` (upstream's
/// truncatePodHostnameIfNeeded): sethostname refuses longer names.
pub fn truncate_hostname(name: &str) -> String {
    if name.len() <= 63 {
        return name.to_string();
    }
    let cut: String = name.chars().take(63).collect();
    cut.trim_end_matches(['-', '.']).to_string()
}

fn host_aliases(pod: &Pod) -> String {
    let aliases = pod
        .spec
        .as_ref()
        .and_then(|s| s.host_aliases.as_deref())
        .unwrap_or(&[]);
    if aliases.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n# Entries added by HostAliases.\n");
    for a in aliases {
        out.push_str(&format!(
            "{}\t{}\n",
            a.ip,
            a.hostnames.clone().unwrap_or_default().join("\t")
        ));
    }
    out
}

/// The pod's /etc/hosts: for a pod on its own network, the kubelet's
/// managed file with the pod IP under the pod's names; on the host's
/// network, the node's file. hostAliases come last in both.
pub fn hosts_file(pod: &Pod, pod_ip: &str, node_hosts: &str, cluster_domain: &str) -> String {
    let host_network = pod
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    let mut out = if host_network {
        let mut s = node_hosts.to_string();
        if !s.is_empty() && !s.ends_with('\n') {
            s.push('\n');
        }
        s
    } else {
        let (hostname, domain) = hostname_and_domain(pod, cluster_domain);
        let mut s = String::from(
            "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n",
        );
        match domain {
            Some(d) => s.push_str(&format!("{pod_ip}\t{hostname}.{d}\t{hostname}\n")),
            None => s.push_str(&format!("{pod_ip}\t{hostname}\n")),
        }
        s
    };
    out.push_str(&host_aliases(pod));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        let mut spec = spec;
        spec["containers"] = serde_json::json!([{"name": "c"}]);
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-0", "namespace": "shop", "uid": "u1"},
            "spec": spec
        }))
        .unwrap()
    }

    const NODE: &str = "# generated\nnameserver 10.0.0.53\nnameserver 10.0.0.54\nsearch corp.example\noptions ndots:1 timeout:2\n";

    #[test]
    fn default_reads_the_nodes_resolv_conf() {
        let d = dns(
            &pod(serde_json::json!({"dnsPolicy": "Default"})),
            NODE,
            &[],
            CLUSTER_DOMAIN,
        );
        assert_eq!(d.config.servers, ["10.0.0.53", "10.0.0.54"]);
        assert_eq!(d.config.searches, ["corp.example"]);
        assert_eq!(d.config.options, ["ndots:1", "timeout:2"]);
        assert!(d.warnings.is_empty());
    }

    #[test]
    fn cluster_first_without_cluster_dns_falls_back_with_upstreams_warning() {
        let d = dns(&pod(serde_json::json!({})), NODE, &[], CLUSTER_DOMAIN);
        assert_eq!(d.config.servers, ["10.0.0.53", "10.0.0.54"]);
        assert_eq!(d.warnings.len(), 1);
        assert_eq!(d.warnings[0].0, "MissingClusterDNS");
        assert_eq!(
            d.warnings[0].1,
            "pod: \"web-0_shop(u1)\". kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy."
        );
        // On the host's network ClusterFirst is Default: no warning.
        let d = dns(
            &pod(serde_json::json!({"hostNetwork": true})),
            NODE,
            &[],
            CLUSTER_DOMAIN,
        );
        assert!(d.warnings.is_empty());
    }

    #[test]
    fn cluster_first_with_cluster_dns_searches_the_namespace() {
        let d = dns(
            &pod(serde_json::json!({})),
            NODE,
            &["10.43.0.10".into()],
            CLUSTER_DOMAIN,
        );
        assert_eq!(d.config.servers, ["10.43.0.10"]);
        assert_eq!(
            d.config.searches,
            [
                "shop.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "corp.example"
            ]
        );
        assert_eq!(d.config.options, ["ndots:5"]);
    }

    #[test]
    fn none_takes_only_dns_config_and_options_merge_by_name() {
        let d = dns(
            &pod(serde_json::json!({"dnsPolicy": "None", "dnsConfig": {
                "nameservers": ["1.1.1.1", "1.1.1.1"], "searches": ["a.example"],
                "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]
            }})),
            NODE,
            &[],
            CLUSTER_DOMAIN,
        );
        assert_eq!(d.config.servers, ["1.1.1.1"]);
        assert_eq!(d.config.searches, ["a.example"]);
        assert_eq!(d.config.options, ["ndots:2", "edns0"]);
        let d = dns(
            &pod(serde_json::json!({"dnsPolicy": "Default", "dnsConfig": {
                "nameservers": ["9.9.9.9", "8.8.8.8"], "options": [{"name": "ndots", "value": "3"}]
            }})),
            NODE,
            &[],
            CLUSTER_DOMAIN,
        );
        assert_eq!(d.config.servers, ["10.0.0.53", "10.0.0.54", "9.9.9.9"]);
        assert_eq!(d.config.options, ["ndots:3", "timeout:2"]);
        assert_eq!(d.warnings[0].0, "DNSConfigForming");
        assert!(d.warnings[0].1.ends_with("10.0.0.53 10.0.0.54 9.9.9.9"));
    }

    #[test]
    fn hosts_file_has_the_pod_under_its_names_then_aliases() {
        let p = pod(serde_json::json!({
            "hostname": "db", "subdomain": "backend",
            "hostAliases": [{"ip": "127.0.0.1", "hostnames": ["foo.local", "bar.local"]}]
        }));
        let text = hosts_file(&p, "10.42.0.7", "", CLUSTER_DOMAIN);
        assert!(text.starts_with("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"));
        assert!(text.contains("\n10.42.0.7\tdb.backend.shop.svc.cluster.local\tdb\n"));
        assert!(text
            .ends_with("\n\n# Entries added by HostAliases.\n127.0.0.1\tfoo.local\tbar.local\n"));
        let plain = hosts_file(&pod(serde_json::json!({})), "10.42.0.8", "", CLUSTER_DOMAIN);
        assert!(plain.ends_with("fe00::2\tip6-allrouters\n10.42.0.8\tweb-0\n"));
        let host = hosts_file(
            &pod(serde_json::json!({"hostNetwork": true})),
            "10.0.0.1",
            "127.0.0.1 localhost",
            CLUSTER_DOMAIN,
        );
        assert_eq!(host, "127.0.0.1 localhost\n");
    }

    #[test]
    fn hostnames_as_upstream() {
        let p = pod(serde_json::json!({"subdomain": "s", "setHostnameAsFQDN": true}));
        assert_eq!(
            sandbox_hostname(&p, CLUSTER_DOMAIN),
            "web-0.s.shop.svc.cluster.local"
        );
        assert_eq!(
            sandbox_hostname(&pod(serde_json::json!({})), CLUSTER_DOMAIN),
            "web-0"
        );
        let name = format!("{}-{}", "a".repeat(62), "b".repeat(10));
        assert_eq!(truncate_hostname(&name), "a".repeat(62));
    }
}
