//! certificates.k8s.io/v1 CertificateSigningRequests, as upstream's
//! pkg/apis/certificates/validation checks them (1.33): signerName,
//! usages, expirationSeconds, the conditions (Approved, Denied and Failed
//! only `True`, Approved and Denied exclusive, no duplicates) and which
//! write path may add approval conditions or a certificate. Parsing the
//! PEM request and certificate is the caller's (the API server has the
//! X.509 parser); it hands in what it found wrong.

use serde_json::Value;

use super::common::{duplicate, forbidden, invalid_shown, invalid_str, items, str_at};
use super::{names, not_supported, required, FieldError};

/// The signer name v1 refuses.
pub const LEGACY_UNKNOWN_SIGNER: &str = "kubernetes.io/legacy-unknown";
/// Every key usage, sorted as upstream's `sets.String.List` prints them.
const USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];
const TRUE_ONLY: &[&str] = &["Approved", "Denied", "Failed"];

/// What the caller found wrong with the PEM data (Go's error text), if
/// anything.
#[derive(Debug, Default, Clone)]
pub struct PemFindings {
    /// `spec.request` (base64 of a PEM CERTIFICATE REQUEST).
    pub request: Option<String>,
    /// `status.certificate` (base64 of PEM CERTIFICATE blocks), when set.
    pub certificate: Option<String>,
}

/// Which write is checked: what it may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CsrWrite {
    Create,
    Update,
    Status,
    Approval,
}

/// Go's `%#v` of a `[]byte`.
fn go_bytes(b: &[u8]) -> String {
    let parts: Vec<String> = b.iter().map(|x| format!("0x{x:x}")).collect();
    format!("[]byte{{{}}}", parts.join(", "))
}

/// `ValidateSignerName`.
fn signer_name(name: &str) -> Vec<FieldError> {
    let at = "spec.signerName";
    let mut errors = Vec::new();
    if name.is_empty() {
        errors.push(required(at.into()));
        return errors;
    }
    let segments: Vec<&str> = name.split('/').collect();
    let [domain, path] = segments.as_slice() else {
        errors.push(invalid_str(
            at,
            name,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
        return errors;
    };
    if domain.len() > 253 {
        errors.push(FieldError {
            reason: "FieldValueTooLong",
            field: at.into(),
            message: "Too long: may not be more than 253 bytes".into(),
        });
    }
    let labels: Vec<&str> = domain.split('.').collect();
    for label in &labels {
        let errs = names::dns1123_label(label);
        if !errs.is_empty() {
            for e in errs {
                errors.push(invalid_str(
                    at,
                    domain,
                    &format!("validating label \"{label}\": {e}"),
                ));
            }
            break;
        }
    }
    if labels.len() < 2 {
        errors.push(invalid_str(
            at,
            domain,
            "should be a domain with at least two segments separated by dots",
        ));
    }
    let max_path = 253usize.saturating_sub(domain.len() + 1);
    if path.len() > max_path {
        errors.push(FieldError {
            reason: "FieldValueTooLong",
            field: at.into(),
            message: format!("Too long: may not be more than {max_path} bytes"),
        });
    }
    for e in names::dns1123_subdomain(path) {
        errors.push(invalid_str(at, path, &e));
    }
    errors
}

/// Whether a stored CSR tolerates what a new one may not (upstream's
/// compatibility options, from the old object).
#[derive(Debug, Default, Clone, Copy)]
struct Tolerate {
    both_approved_and_denied: bool,
    legacy_signer: bool,
    duplicate_conditions: bool,
    empty_condition_type: bool,
    unknown_usages: bool,
    duplicate_usages: bool,
    any_certificate: bool,
}

fn condition_types(csr: &Value) -> Vec<&str> {
    csr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|c| {
            c.iter()
                .map(|c| str_at(c, "type").unwrap_or_default())
                .collect()
        })
        .unwrap_or_default()
}

fn tolerate(old: Option<&Value>, new: &Value, old_cert_bad: bool) -> Tolerate {
    let Some(old) = old else {
        return Tolerate::default();
    };
    let types = condition_types(old);
    let usages: Vec<&str> = items(old.get("spec").unwrap_or(&Value::Null), "usages")
        .iter()
        .map(|u| u.as_str().unwrap_or_default())
        .collect();
    let mut dup_types = false;
    for (i, t) in types.iter().enumerate() {
        dup_types |= types.iter().take(i).any(|x| x == t);
    }
    let mut dup_usages = false;
    for (i, u) in usages.iter().enumerate() {
        dup_usages |= usages.iter().take(i).any(|x| x == u);
    }
    Tolerate {
        both_approved_and_denied: types.contains(&"Approved") && types.contains(&"Denied"),
        legacy_signer: old.pointer("/spec/signerName").and_then(Value::as_str)
            == Some(LEGACY_UNKNOWN_SIGNER),
        duplicate_conditions: dup_types,
        empty_condition_type: types.contains(&""),
        unknown_usages: usages.iter().any(|u| !USAGES.contains(u)),
        duplicate_usages: dup_usages,
        any_certificate: old.pointer("/status/certificate") == new.pointer("/status/certificate")
            || old_cert_bad,
    }
}

fn validate(csr: &Value, pem: &PemFindings, t: Tolerate) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = csr.get("spec").unwrap_or(&Value::Null);
    if let Some(e) = &pem.request {
        let raw = str_at(spec, "request")
            .and_then(crate::validation::certificates::decode_base64)
            .unwrap_or_default();
        errors.push(invalid_shown("spec.request", &go_bytes(&raw), e));
    }
    let usages = items(spec, "usages");
    if usages.is_empty() {
        errors.push(required("spec.usages".into()));
    }
    if !t.unknown_usages {
        for (i, u) in usages.iter().enumerate() {
            let u = u.as_str().unwrap_or_default();
            if !USAGES.contains(&u) {
                errors.push(not_supported(format!("spec.usages[{i}]"), u, USAGES));
            }
        }
    }
    if !t.duplicate_usages {
        for (i, u) in usages.iter().enumerate() {
            if usages.iter().take(i).any(|x| x == u) {
                errors.push(duplicate(
                    format!("spec.usages[{i}]"),
                    u.as_str().unwrap_or_default(),
                ));
            }
        }
    }
    let signer = str_at(spec, "signerName").unwrap_or_default();
    if !t.legacy_signer && signer == LEGACY_UNKNOWN_SIGNER {
        errors.push(invalid_str(
            "spec.signerName",
            signer,
            "the legacy signerName is not allowed via this API version",
        ));
    } else {
        errors.extend(signer_name(signer));
    }
    if let Some(s) = spec.get("expirationSeconds").and_then(Value::as_i64) {
        if s < 600 {
            errors.push(super::invalid(
                "spec.expirationSeconds".into(),
                &Value::from(s),
                "may not specify a duration less than 600 seconds (10 minutes)",
            ));
        }
    }
    errors.extend(conditions(csr, t));
    if !t.any_certificate {
        if let Some(e) = &pem.certificate {
            errors.push(invalid_str("status.certificate", "<certificate data>", e));
        }
    }
    errors
}

fn conditions(csr: &Value, t: Tolerate) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let list = csr
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let (mut approved, mut denied) = (false, false);
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let at = format!("status.conditions[{i}]");
        let ty = str_at(c, "type").unwrap_or_default();
        if !t.empty_condition_type && ty.is_empty() {
            errors.push(required(format!("{at}.type")));
        }
        let allowed: &[&str] = if TRUE_ONLY.contains(&ty) {
            &["True"]
        } else {
            &["False", "True", "Unknown"]
        };
        let status = str_at(c, "status").unwrap_or_default();
        if status.is_empty() {
            errors.push(required(format!("{at}.status")));
        } else if !allowed.contains(&status) {
            errors.push(not_supported(format!("{at}.status"), status, allowed));
        }
        if !t.both_approved_and_denied {
            let clash = match ty {
                "Approved" => {
                    approved = true;
                    denied
                }
                "Denied" => {
                    denied = true;
                    approved
                }
                _ => false,
            };
            if clash {
                errors.push(invalid_str(
                    format!("{at}.type"),
                    ty,
                    "Approved and Denied conditions are mutually exclusive",
                ));
            }
        }
        if !t.duplicate_conditions {
            if seen.contains(&ty) {
                errors.push(duplicate(format!("{at}.type"), ty));
            }
            seen.push(ty);
        }
    }
    errors
}

/// A CSR on create.
pub fn certificate_signing_request(obj: &Value, pem: &PemFindings) -> Vec<FieldError> {
    validate(obj, pem, Tolerate::default())
}

fn conditions_of<'a>(csr: &'a Value, ty: &str) -> Vec<&'a Value> {
    csr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|c| c.iter().filter(|c| str_at(c, "type") == Some(ty)).collect())
        .unwrap_or_default()
}

/// A CSR update by `write` (the object, the status or the approval
/// subresource). `old_certificate_bad` says the stored certificate does
/// not parse (such a CSR is tolerated).
pub fn certificate_signing_request_update(
    old: &Value,
    new: &Value,
    write: CsrWrite,
    pem: &PemFindings,
    old_certificate_bad: bool,
) -> Vec<FieldError> {
    let mut errors = validate(new, pem, tolerate(Some(old), new, old_certificate_bad));
    for t in ["Approved", "Denied", "Failed"] {
        if conditions_of(new, t).len() < conditions_of(old, t).len() {
            errors.push(forbidden(
                "status.conditions",
                &format!("updates may not remove a condition of type \"{t}\""),
            ));
        }
    }
    if write != CsrWrite::Approval {
        for t in ["Approved", "Denied"] {
            let (o, n) = (conditions_of(old, t), conditions_of(new, t));
            if n.len() > o.len() {
                errors.push(forbidden(
                    "status.conditions",
                    &format!("updates may not add a condition of type \"{t}\""),
                ));
            } else if n.len() == o.len() && o != n {
                errors.push(forbidden(
                    "status.conditions",
                    &format!("updates may not modify a condition of type \"{t}\""),
                ));
            }
        }
    }
    let (oc, nc) = (
        old.pointer("/status/certificate")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        new.pointer("/status/certificate")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    );
    if oc != nc {
        if write != CsrWrite::Status {
            errors.push(forbidden(
                "status.certificate",
                "updates may not set certificate content",
            ));
        } else if !oc.is_empty() {
            errors.push(forbidden(
                "status.certificate",
                "updates may not modify existing certificate content",
            ));
        }
    }
    errors
}

/// Standard base64 (with or without padding) to bytes; `None` when it is
/// not base64 (for showing a request as Go would).
pub fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes().filter(|c| !c.is_ascii_whitespace()) {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((acc >> bits) & 0xff) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn found(errors: &[FieldError]) -> Vec<(&str, &str)> {
        errors
            .iter()
            .map(|e| (e.field.as_str(), e.message.as_str()))
            .collect()
    }

    #[test]
    fn create_findings() {
        let csr = json!({"spec": {"request": "aGk=", "signerName": "example",
            "usages": ["client auth", "client auth", "flying"], "expirationSeconds": 60}});
        let pem = PemFindings {
            request: Some("PEM block type must be CERTIFICATE REQUEST".into()),
            certificate: None,
        };
        assert_eq!(
            found(&certificate_signing_request(&csr, &pem)),
            vec![
                ("spec.request", "Invalid value: []byte{0x68, 0x69}: PEM block type must be CERTIFICATE REQUEST"),
                ("spec.usages[2]", &*format!("Unsupported value: \"flying\": supported values: {}", USAGES.iter().map(|u| format!("\"{u}\"")).collect::<Vec<_>>().join(", "))),
                ("spec.usages[1]", "Duplicate value: \"client auth\""),
                ("spec.signerName", "Invalid value: \"example\": must be a fully qualified domain and path of the form 'example.com/signer-name'"),
                ("spec.expirationSeconds", "Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)"),
            ]
        );
    }

    #[test]
    fn approval_paths() {
        let old = json!({"spec": {"signerName": "example.com/s", "usages": ["client auth"]},
            "status": {"conditions": []}});
        let approved = json!({"spec": {"signerName": "example.com/s", "usages": ["client auth"]},
            "status": {"conditions": [{"type": "Approved", "status": "True"}]}});
        let pem = PemFindings::default();
        assert!(certificate_signing_request_update(
            &old,
            &approved,
            CsrWrite::Approval,
            &pem,
            false
        )
        .is_empty());
        assert_eq!(
            found(&certificate_signing_request_update(
                &old,
                &approved,
                CsrWrite::Status,
                &pem,
                false
            )),
            vec![(
                "status.conditions",
                "Forbidden: updates may not add a condition of type \"Approved\""
            )]
        );
        let both = json!({"spec": {"signerName": "example.com/s", "usages": ["client auth"]},
            "status": {"conditions": [{"type": "Approved", "status": "True"},
                                      {"type": "Denied", "status": "True"}]}});
        assert_eq!(
            found(&certificate_signing_request_update(
                &approved,
                &both,
                CsrWrite::Approval,
                &pem,
                false
            )),
            vec![(
                "status.conditions[1].type",
                "Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive"
            )]
        );
        assert_eq!(decode_base64("aGk="), Some(b"hi".to_vec()));
    }
}
