//! CertificateSigningRequests (upstream's `pkg/controller/certificates`):
//!
//! - [`signing`]: `csrsigning` signs approved requests for the
//!   `kubernetes.io/kube-apiserver-client`, `-client-kubelet` and
//!   `kubelet-serving` signers with the cluster CA, or marks them Failed
//!   when they break their signer's rules;
//! - [`approving`]: `csrapproving` approves kubelets' client requests
//!   after a SubjectAccessReview (`selfnodeclient`, `nodeclient`).
//!
//! This module owns the signers' names and rules ([`check`]) and the
//! condition helpers both controllers read; it writes nothing itself.
//! Who may approve or sign is the API server's RBAC; the X.509 work is
//! skiff-client's `certificate::authority`.

pub mod approving;
pub mod signing;

use std::collections::BTreeSet;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use skiff_client::certificate::authority::Request;

/// Client certificates for the API server, for anyone.
pub const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";
/// Kubelets' client certificates for the API server.
pub const KUBE_APISERVER_CLIENT_KUBELET: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// Kubelets' serving certificates.
pub const KUBELET_SERVING: &str = "kubernetes.io/kubelet-serving";

/// The signers [`check`] knows.
pub const SIGNERS: &[&str] = &[
    KUBE_APISERVER_CLIENT,
    KUBE_APISERVER_CLIENT_KUBELET,
    KUBELET_SERVING,
];

/// Whether `csr` has a condition of type `ty` with status True.
pub fn has_condition(csr: &CertificateSigningRequest, ty: &str) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == ty && c.status == "True"))
}

/// Whether `csr` already carries a certificate.
pub fn is_issued(csr: &CertificateSigningRequest) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .is_some_and(|c| !c.0.is_empty())
}

fn usage_set(usages: &[String]) -> BTreeSet<&str> {
    usages.iter().map(String::as_str).collect()
}

fn set_is(set: &BTreeSet<&str>, wanted: &[&str]) -> bool {
    set.len() == wanted.len() && wanted.iter().all(|w| set.contains(w))
}

/// Upstream's `ValidateKubeletClientCSR`: O exactly `[system:nodes]`, no
/// subjectAltNames, CN `system:node:...`, usages digital signature and
/// client auth (and key encipherment for RSA keys).
pub fn kubelet_client(req: &Request, usages: &[String]) -> Result<(), String> {
    if req.organizations != ["system:nodes"] {
        return Err("subject organization is not system:nodes".into());
    }
    if !req.dns_names.is_empty() {
        return Err("DNS subjectAltNames are not allowed".into());
    }
    if !req.emails.is_empty() {
        return Err("Email subjectAltNames are not allowed".into());
    }
    if !req.ip_addresses.is_empty() {
        return Err("IP subjectAltNames are not allowed".into());
    }
    if !req.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".into());
    }
    if !req.common_name.starts_with("system:node:") {
        return Err("subject common name does not begin with system:node:".into());
    }
    let set = usage_set(usages);
    if !set_is(
        &set,
        &["client auth", "digital signature", "key encipherment"],
    ) && !set_is(&set, &["client auth", "digital signature"])
    {
        return Err("usages did not match [client auth digital signature key encipherment]".into());
    }
    Ok(())
}

/// Upstream's `ValidateKubeletServingCSR`: O exactly `[system:nodes]`, a
/// DNS or IP subjectAltName and no other, usages digital signature and
/// server auth (and key encipherment), CN `system:node:...`.
pub fn kubelet_serving(req: &Request, usages: &[String]) -> Result<(), String> {
    if req.organizations != ["system:nodes"] {
        return Err("subject organization is not system:nodes".into());
    }
    if req.dns_names.is_empty() && req.ip_addresses.is_empty() {
        return Err("DNS or IP subjectAltName is required".into());
    }
    if !req.emails.is_empty() {
        return Err("Email subjectAltNames are not allowed".into());
    }
    if !req.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".into());
    }
    let set = usage_set(usages);
    if !set_is(
        &set,
        &["digital signature", "key encipherment", "server auth"],
    ) && !set_is(&set, &["digital signature", "server auth"])
    {
        return Err("usages did not match [digital signature key encipherment server auth]".into());
    }
    if !req.common_name.starts_with("system:node:") {
        return Err("subject common name does not begin with system:node:".into());
    }
    Ok(())
}

/// Upstream's `validAPIServerClientUsages`: client auth, optionally
/// digital signature and key encipherment, nothing else.
pub fn apiserver_client(usages: &[String]) -> Result<(), String> {
    let mut client_auth = false;
    for usage in usages {
        match usage.as_str() {
            "digital signature" | "key encipherment" => {}
            "client auth" => client_auth = true,
            other => return Err(format!("invalid usage for client certificate: {other}")),
        }
    }
    if !client_auth {
        return Err("missing required usage for client certificate: client auth".into());
    }
    Ok(())
}

/// The rules of `signer` for `req`: `None` when the signer is not one of
/// these, `Some(Err(why))` when the request breaks them.
pub fn check(signer: &str, req: &Request, usages: &[String]) -> Option<Result<(), String>> {
    match signer {
        KUBE_APISERVER_CLIENT => Some(apiserver_client(usages)),
        KUBE_APISERVER_CLIENT_KUBELET => Some(kubelet_client(req, usages)),
        KUBELET_SERVING => Some(kubelet_serving(req, usages)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(cn: &str, orgs: &[&str], dns: &[&str]) -> Request {
        let key = rcgen_key();
        let mut params = rcgen::CertificateParams::default();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        for o in orgs {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, *o);
        }
        params.subject_alt_names = dns
            .iter()
            .map(|d| rcgen::SanType::DnsName((*d).try_into().unwrap()))
            .collect();
        let csr = params.serialize_request(&key).unwrap();
        Request::from_pem(csr.pem().unwrap().as_bytes()).unwrap()
    }

    fn rcgen_key() -> rcgen::KeyPair {
        rcgen::KeyPair::generate().unwrap()
    }

    fn u(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn signer_rules_as_upstream() {
        let node = request("system:node:n1", &["system:nodes"], &[]);
        let client = u(&["digital signature", "client auth"]);
        let rsa_client = u(&["key encipherment", "digital signature", "client auth"]);
        type Case<'a> = (
            &'a str,
            &'a Request,
            Vec<String>,
            Option<Result<(), String>>,
        );
        let cases: Vec<Case> = vec![
            (
                KUBE_APISERVER_CLIENT_KUBELET,
                &node,
                client.clone(),
                Some(Ok(())),
            ),
            (
                KUBE_APISERVER_CLIENT_KUBELET,
                &node,
                rsa_client,
                Some(Ok(())),
            ),
            (
                KUBE_APISERVER_CLIENT_KUBELET,
                &node,
                u(&["client auth"]),
                Some(Err(
                    "usages did not match [client auth digital signature key encipherment]".into(),
                )),
            ),
            ("example.com/other", &node, client.clone(), None),
            (
                KUBE_APISERVER_CLIENT,
                &node,
                u(&["client auth"]),
                Some(Ok(())),
            ),
            (
                KUBE_APISERVER_CLIENT,
                &node,
                u(&["client auth", "server auth"]),
                Some(Err(
                    "invalid usage for client certificate: server auth".into()
                )),
            ),
            (
                KUBE_APISERVER_CLIENT,
                &node,
                u(&["digital signature"]),
                Some(Err(
                    "missing required usage for client certificate: client auth".into(),
                )),
            ),
        ];
        for (signer, req, usages, want) in cases {
            assert_eq!(check(signer, req, &usages), want, "{signer} {usages:?}");
        }
    }

    #[test]
    fn kubelet_subjects_are_checked() {
        let client = u(&["digital signature", "client auth"]);
        let jane = request("jane", &["system:nodes"], &[]);
        assert_eq!(
            kubelet_client(&jane, &client),
            Err("subject common name does not begin with system:node:".into())
        );
        let two = request("system:node:n1", &["system:nodes", "x"], &[]);
        // rcgen keeps one O per type; the last one pushed stays.
        assert_eq!(
            kubelet_client(&two, &client),
            Err("subject organization is not system:nodes".into())
        );
        let none = request("system:node:n1", &[], &[]);
        assert_eq!(
            kubelet_client(&none, &client),
            Err("subject organization is not system:nodes".into())
        );
        let named = request("system:node:n1", &["system:nodes"], &["n1.example"]);
        assert_eq!(
            kubelet_client(&named, &client),
            Err("DNS subjectAltNames are not allowed".into())
        );
        let serving = u(&["digital signature", "server auth"]);
        assert_eq!(kubelet_serving(&named, &serving), Ok(()));
        assert_eq!(
            kubelet_serving(&request("system:node:n1", &["system:nodes"], &[]), &serving),
            Err("DNS or IP subjectAltName is required".into())
        );
    }
}
