//! What DNS needs out of Services and EndpointSlices, read once per
//! change into small comparable specs (so an update that changes nothing
//! DNS sees costs one comparison). Must not build names or records.

use std::collections::BTreeSet;
use std::net::IpAddr;

use hickory_proto::rr::Name;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::ObjKey;

/// The label that ties an EndpointSlice to its Service.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// What a Service says about DNS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ServiceSpec {
    pub(super) kind: Kind,
    pub(super) ports: Vec<PortSpec>,
    pub(super) publish_not_ready: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Kind {
    ClusterIp(Vec<IpAddr>),
    Headless,
    ExternalName(Name),
    /// No address yet (or none that parses): only the namespace exists.
    Nothing,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct PortSpec {
    pub(super) name: String,
    /// Lowercase: tcp, udp, sctp.
    pub(super) proto: String,
    pub(super) port: u16,
}

/// What an EndpointSlice says about DNS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SliceSpec {
    pub(super) service: String,
    pub(super) ports: Vec<PortSpec>,
    pub(super) endpoints: Vec<EndpointSpec>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct EndpointSpec {
    pub(super) addrs: Vec<IpAddr>,
    pub(super) hostname: Option<String>,
    pub(super) ready: bool,
}

pub(super) fn obj_key(meta: &ObjectMeta) -> Option<ObjKey> {
    Some((
        meta.namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned()),
        meta.name.clone()?,
    ))
}

pub(super) fn service_spec(svc: &Service) -> Option<(ObjKey, ServiceSpec)> {
    let key = obj_key(&svc.metadata)?;
    let spec = svc.spec.as_ref();
    let ports = spec
        .and_then(|s| s.ports.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|p| port_spec(p.name.as_deref(), p.protocol.as_deref(), Some(p.port)))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let external = spec.and_then(|s| s.external_name.as_deref());
    let is_external = spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName");
    let ips: Vec<&str> = match spec {
        Some(s) => match (&s.cluster_ips, &s.cluster_ip) {
            (Some(ips), _) if !ips.is_empty() => ips.iter().map(String::as_str).collect(),
            (_, Some(ip)) => vec![ip.as_str()],
            _ => Vec::new(),
        },
        None => Vec::new(),
    };
    let kind = if is_external {
        match external.map(|e| Name::from_ascii(e.trim_end_matches('.'))) {
            Some(Ok(mut target)) if !target.is_root() => {
                target.set_fqdn(true);
                Kind::ExternalName(target)
            }
            _ => Kind::Nothing,
        }
    } else if ips.iter().any(|ip| ip.eq_ignore_ascii_case("None")) {
        Kind::Headless
    } else {
        let parsed: Vec<IpAddr> = ips.iter().filter_map(|ip| ip.parse().ok()).collect();
        if parsed.is_empty() {
            Kind::Nothing
        } else {
            Kind::ClusterIp(parsed)
        }
    };
    let publish_not_ready = spec
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    Some((
        key,
        ServiceSpec {
            kind,
            ports,
            publish_not_ready,
        },
    ))
}

pub(super) fn port_spec(
    name: Option<&str>,
    protocol: Option<&str>,
    port: Option<i32>,
) -> Option<PortSpec> {
    let name = name.filter(|n| !n.is_empty())?;
    Some(PortSpec {
        name: name.to_ascii_lowercase(),
        proto: protocol.unwrap_or("TCP").to_ascii_lowercase(),
        port: u16::try_from(port?).ok().filter(|p| *p != 0)?,
    })
}

pub(super) fn slice_spec(slice: &EndpointSlice) -> Option<SliceSpec> {
    let service = slice
        .metadata
        .labels
        .as_ref()?
        .get(SERVICE_NAME_LABEL)?
        .clone();
    if !matches!(slice.address_type.as_str(), "IPv4" | "IPv6") {
        return None;
    }
    let ports = slice
        .ports
        .iter()
        .flatten()
        .filter_map(|p| port_spec(p.name.as_deref(), p.protocol.as_deref(), p.port))
        .collect();
    let endpoints = slice
        .endpoints
        .iter()
        .map(|e| EndpointSpec {
            addrs: e.addresses.iter().filter_map(|a| a.parse().ok()).collect(),
            hostname: e.hostname.clone().filter(|h| !h.is_empty()),
            // Unset means ready (discovery/v1 EndpointConditions).
            ready: e.conditions.as_ref().and_then(|c| c.ready) != Some(false),
        })
        .collect();
    Some(SliceSpec {
        service,
        ports,
        endpoints,
    })
}
