//! CertificateSigningRequests (certificates.k8s.io/v1): cluster-scoped,
//! with the status and approval subresources (upstream
//! `registry/certificates/certificates`). Create records the requesting
//! user in spec.username/uid/groups/extra (whatever the body said) and
//! starts with an empty status; updates of the object keep spec and
//! status; `/status` may set the certificate and non-approval conditions;
//! `/approval` (what `kubectl certificate approve|deny` writes) may set
//! only the conditions. The request must be a PEM CERTIFICATE REQUEST and
//! a certificate PEM CERTIFICATE blocks; signatures are not checked.

use base64::Engine;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use serde_json::{json, Value};
use skiff_api::validation::certificates::{
    certificate_signing_request, certificate_signing_request_update, CsrWrite, PemFindings,
};
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "certificates.k8s.io",
    kind: "CertificateSigningRequest",
    resource: Some(resource(
        "certificates.k8s.io",
        "v1",
        "certificatesigningrequests",
        "certificatesigningrequest",
        "CertificateSigningRequest",
        false,
        &["csr"],
        NONE,
        &["approval", "status"],
    )),
    selectable_fields: &["spec.signerName"],
    strategy: &CsrStrategy,
    typed: &Typed::<CertificateSigningRequest>::NEW,
};

#[derive(Debug)]
struct CsrStrategy;

/// One PEM block as Go's `pem.Decode` finds it: its type, whether it had
/// headers, and its base64-decoded body; the rest of the input after it.
struct Block<'a> {
    kind: &'a str,
    headers: bool,
    der: Vec<u8>,
    rest: &'a str,
}

fn pem_block(text: &str) -> Option<Block<'_>> {
    let start = text.find("-----BEGIN ")?;
    let after = &text[start + 11..];
    let (kind, after) = after.split_once("-----")?;
    let end_marker = format!("-----END {kind}-----");
    let end = after.find(&end_marker)?;
    let body = &after[..end];
    let rest = &after[end + end_marker.len()..];
    let mut headers = false;
    let mut b64 = String::new();
    for line in body.lines() {
        if line.contains(':') {
            headers = true;
        } else {
            b64.push_str(line.trim());
        }
    }
    let der = base64::engine::general_purpose::STANDARD
        .decode(b64.as_bytes())
        .ok()?;
    Some(Block {
        kind,
        headers,
        der,
        rest,
    })
}

/// The PEM text a base64 field carries.
fn field_text(obj: &Value, pointer: &str) -> Option<String> {
    let b64 = obj.pointer(pointer).and_then(Value::as_str)?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.as_bytes())
        .ok()?;
    Some(String::from_utf8_lossy(&raw).into_owned())
}

/// upstream `certificates.ParseCSR`, without the signature check.
fn request_error(obj: &Value) -> Option<String> {
    let text = field_text(obj, "/spec/request").unwrap_or_default();
    let Some(block) = pem_block(&text).filter(|b| b.kind == "CERTIFICATE REQUEST") else {
        return Some("PEM block type must be CERTIFICATE REQUEST".into());
    };
    use x509_parser::prelude::FromDer;
    match x509_parser::certification_request::X509CertificationRequest::from_der(&block.der) {
        Ok(_) => None,
        Err(_) => Some("x509: malformed certificate request".into()),
    }
}

/// upstream `validateCertificate`: an empty certificate is fine.
fn certificate_error(obj: &Value) -> Option<String> {
    let text = field_text(obj, "/status/certificate")?;
    if text.is_empty() {
        return None;
    }
    let mut rest = text.as_str();
    let mut blocks = 0;
    while let Some(block) = pem_block(rest) {
        if block.kind != "CERTIFICATE" {
            return Some(format!(
                "only CERTIFICATE PEM blocks are allowed, found \"{}\"",
                block.kind
            ));
        }
        if block.headers {
            return Some("no PEM block headers are permitted".into());
        }
        blocks += 1;
        if x509_parser::parse_x509_certificate(&block.der).is_err() {
            return Some("x509: malformed certificate".into());
        }
        rest = block.rest;
    }
    (blocks == 0).then(|| "must contain at least one CERTIFICATE PEM block".into())
}

fn findings(obj: &Value) -> PemFindings {
    PemFindings {
        request: request_error(obj),
        certificate: certificate_error(obj),
    }
}

/// Conditions of `ty` in `csr`, by index.
fn indices(csr: &Value, ty: &str) -> Vec<usize> {
    csr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|c| {
            c.iter()
                .enumerate()
                .filter(|(_, c)| c.get("type").and_then(Value::as_str) == Some(ty))
                .map(|(i, _)| i)
                .collect()
        })
        .unwrap_or_default()
}

/// upstream `populateConditionTimestamps`.
fn stamp_conditions(old: &Value, new: &mut Value) {
    let now = crate::object::now();
    let old_conditions = old
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let Some(list) = new
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in list.iter_mut().filter_map(Value::as_object_mut) {
        if c.get("lastUpdateTime").is_none_or(Value::is_null) {
            c.insert("lastUpdateTime".into(), json!(now));
        }
        if c.get("lastTransitionTime").is_none_or(Value::is_null) {
            let kept = old_conditions.iter().find(|o| {
                o.get("type") == c.get("type")
                    && o.get("status") == c.get("status")
                    && o.get("lastTransitionTime").is_some_and(|t| !t.is_null())
            });
            let t = kept
                .and_then(|o| o.get("lastTransitionTime").cloned())
                .unwrap_or_else(|| json!(now));
            c.insert("lastTransitionTime".into(), t);
        }
    }
}

impl Strategy for CsrStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        let user = crate::authn::requester::current();
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            for field in ["username", "uid", "groups", "extra"] {
                spec.remove(field);
            }
            if let Some(user) = user {
                // Upstream's authenticators add system:authenticated to
                // every user but the anonymous one.
                let mut groups = user.groups.clone();
                if user.name != "system:anonymous"
                    && !groups.iter().any(|g| g == "system:authenticated")
                {
                    groups.push("system:authenticated".into());
                }
                spec.insert("username".into(), json!(user.name));
                spec.insert("groups".into(), json!(groups));
            }
        }
        crate::object::set(obj, "status", json!({}));
    }
    fn prepare_for_update(&self, old: &Value, new: &mut Value) {
        // The object itself changes only in metadata.
        crate::object::set(new, "spec", old.get("spec").cloned().unwrap_or(Value::Null));
    }
    fn prepare_for_status_update(&self, old: &Value, new: &mut Value) {
        // Approved and Denied conditions stay as stored when their count
        // is unchanged; adding or removing them is refused by validation.
        for ty in ["Approved", "Denied"] {
            let (o, n) = (indices(old, ty), indices(new, ty));
            if o.len() != n.len() {
                continue;
            }
            for (oi, ni) in o.into_iter().zip(n) {
                let kept = old.pointer(&format!("/status/conditions/{oi}")).cloned();
                if let (Some(kept), Some(slot)) =
                    (kept, new.pointer_mut(&format!("/status/conditions/{ni}")))
                {
                    *slot = kept;
                }
            }
        }
        stamp_conditions(old, new);
    }
    fn prepare_for_approval_update(&self, old: &Value, new: &mut Value) {
        stamp_conditions(old, new);
        let conditions = new
            .pointer("/status/conditions")
            .cloned()
            .unwrap_or(Value::Null);
        let mut status = old.get("status").cloned().unwrap_or_else(|| json!({}));
        crate::object::set(&mut status, "conditions", conditions);
        *new = {
            let mut merged = old.clone();
            if let (Some(m), Some(n)) = (merged.as_object_mut(), new.get("metadata")) {
                m.insert("metadata".into(), n.clone());
            }
            crate::object::set(&mut merged, "status", status);
            merged
        };
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        certificate_signing_request(obj, &findings(obj))
    }
    /// Upstream does not care what requests are called (beyond being a
    /// path segment).
    fn name_errors(&self, name: &str) -> Vec<String> {
        skiff_api::validation::rbac::path_segment_name(name)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        self.validate_subresource_update(None, old, new)
    }
    fn validate_subresource_update(
        &self,
        subresource: Option<&str>,
        old: &Value,
        new: &Value,
    ) -> Vec<FieldError> {
        let write = match subresource {
            Some("status") => CsrWrite::Status,
            Some("approval") => CsrWrite::Approval,
            _ => CsrWrite::Update,
        };
        let old_bad = certificate_error(old).is_some();
        certificate_signing_request_update(old, new, write, &findings(new), old_bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_checks() {
        let pem = "-----BEGIN CERTIFICATE REQUEST-----\naGk=\n-----END CERTIFICATE REQUEST-----\n";
        let b64 = base64::engine::general_purpose::STANDARD.encode(pem);
        let csr = json!({"spec": {"request": b64}});
        assert_eq!(
            request_error(&csr).as_deref(),
            Some("x509: malformed certificate request")
        );
        let other = base64::engine::general_purpose::STANDARD.encode("hello");
        assert_eq!(
            request_error(&json!({"spec": {"request": other}})).as_deref(),
            Some("PEM block type must be CERTIFICATE REQUEST")
        );
        let key = "-----BEGIN PRIVATE KEY-----\naGk=\n-----END PRIVATE KEY-----\n";
        let cert = base64::engine::general_purpose::STANDARD.encode(key);
        assert_eq!(
            certificate_error(&json!({"status": {"certificate": cert}})).as_deref(),
            Some("only CERTIFICATE PEM blocks are allowed, found \"PRIVATE KEY\"")
        );
    }
}
