//! Parts of CustomResourceDefinition validation (upstream
//! pkg/apis/apiextensions/validation): subresources, printer columns,
//! selectable fields, names, conversion and its webhook, stored versions,
//! API approval of protected groups and preserveUnknownFields.

use serde_json::Value;

use super::crd_validation::{arr, s, Opts};
use super::errors::{self as fe, child, index};
use crate::validation::{names, FieldError};

const PRINTER_TYPES: &str = "boolean,date,integer,number,string";
const PRINTER_FORMATS: &str = "byte,date,date-time,double,float,int32,int64,password";
const APPROVAL: &str = "api-approved.kubernetes.io";

/// ValidateCustomResourceDefinitionSubresources
pub(crate) fn subresources(sub: &Value, at: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(scale) = sub.get("scale").filter(|x| !x.is_null()) else {
        return errs;
    };
    for (k, prefix, word) in [
        (
            "specReplicasPath",
            ".spec.",
            "should be a json path under .spec",
        ),
        (
            "statusReplicasPath",
            ".status.",
            "should be a json path under .status",
        ),
    ] {
        let p = format!("{at}.scale.{k}");
        let v = s(scale.get(k));
        if v.is_empty() {
            errs.push(fe::required(&p, ""));
        } else {
            let e = simple_json_path(v, &p);
            if !e.is_empty() {
                errs.extend(e);
            } else if !v.starts_with(prefix) {
                errs.push(fe::invalid_str(&p, v, word));
            }
        }
    }
    let v = s(scale.get("labelSelectorPath"));
    if !v.is_empty() {
        let p = format!("{at}.scale.labelSelectorPath");
        let e = simple_json_path(v, &p);
        if !e.is_empty() {
            errs.extend(e);
        } else if !v.starts_with(".spec.") && !v.starts_with(".status.") {
            errs.push(fe::invalid_str(
                &p,
                v,
                "should be a json path under either .spec or .status",
            ));
        }
    }
    errs
}
fn simple_json_path(v: &str, at: &str) -> Vec<FieldError> {
    if v.is_empty() {
        return vec![fe::invalid_str(at, v, "must not be empty")];
    }
    if !v.starts_with('.') {
        return vec![fe::invalid_str(
            at,
            v,
            "must be a simple json path starting with .",
        )];
    }
    Vec::new()
}
/// ValidateCustomResourceColumnDefinition
pub(crate) fn column(c: &Value, at: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if s(c.get("name")).is_empty() {
        errs.push(fe::required(&child(at, "name"), ""));
    }
    let t = s(c.get("type"));
    let types_msg = format!("must be one of {PRINTER_TYPES}");
    if t.is_empty() {
        errs.push(fe::required(&child(at, "type"), &types_msg));
    } else if !PRINTER_TYPES.split(',').any(|x| x == t) {
        errs.push(fe::invalid_str(&child(at, "type"), t, &types_msg));
    }
    let f = s(c.get("format"));
    if !f.is_empty() && !PRINTER_FORMATS.split(',').any(|x| x == f) {
        errs.push(fe::invalid_str(
            &child(at, "format"),
            f,
            &format!("must be one of {PRINTER_FORMATS}"),
        ));
    }
    let p = s(c.get("jsonPath"));
    if p.is_empty() {
        errs.push(fe::required(&child(at, "JSONPath"), ""));
    } else {
        errs.extend(simple_json_path(p, &child(at, "JSONPath")));
    }
    errs
}
/// ValidateCustomResourceSelectableFields (paths are dot-separated fields
/// of the schema, not in metadata, of type string, boolean or integer).
pub(crate) fn selectable_fields(fields: &[Value], schema: &Value, at: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut unique: Vec<String> = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let p = format!("{at}[{i}].jsonPath");
        let path = s(f.get("jsonPath"));
        if path.is_empty() {
            errs.push(fe::required(&p, ""));
            continue;
        }
        let Some(rest) = path.strip_prefix('.') else {
            errs.push(fe::invalid_str(
                &p,
                path,
                "is an invalid path: expected path to start with '.'",
            ));
            continue;
        };
        let mut node = Some(schema);
        for part in rest.split('.') {
            node = node.and_then(|n| {
                n.get("properties")
                    .and_then(|props| props.get(part))
                    .or_else(|| n.get("additionalProperties").filter(|a| a.is_object()))
            });
        }
        let Some(node) = node else {
            errs.push(fe::invalid_str(
                &p,
                path,
                &format!("is an invalid path: does not refer to a valid field: {path}"),
            ));
            continue;
        };
        if rest.split('.').next() == Some("metadata") {
            errs.push(fe::invalid_str(
                &p,
                path,
                "must not point to fields in metadata",
            ));
        }
        if !matches!(s(node.get("type")), "string" | "boolean" | "integer") {
            errs.push(fe::invalid_str(
                &p,
                path,
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        if unique.iter().any(|u| u == rest) {
            errs.push(fe::duplicate(&p, &Value::from(path)));
        } else {
            unique.push(rest.to_string());
        }
    }
    if unique.len() > 8 {
        errs.push(fe::too_many(at, unique.len() as i64, 8));
    }
    errs
}
/// ValidateCustomResourceDefinitionNames at `at`.
pub(crate) fn names_errors(n: Option<&Value>, at: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let get = |k: &str| s(n.and_then(|n| n.get(k)));
    for k in ["plural", "singular"] {
        let v = get(k);
        let e = names::dns1035_label(v);
        if !v.is_empty() && !e.is_empty() {
            errs.push(fe::invalid_str(&child(at, k), v, &e.join(",")));
        }
    }
    for k in ["kind", "listKind"] {
        let v = get(k);
        let e = names::dns1035_label(&v.to_lowercase());
        if !v.is_empty() && !e.is_empty() {
            errs.push(fe::invalid_str(
                &child(at, k),
                v,
                &format!(
                    "may have mixed case, but should otherwise match: {}",
                    e.join(",")
                ),
            ));
        }
    }
    for (i, sn) in arr(n.and_then(|n| n.get("shortNames"))).iter().enumerate() {
        let v = sn.as_str().unwrap_or("");
        let e = names::dns1035_label(v);
        if !e.is_empty() {
            errs.push(fe::invalid_str(
                &index(&child(at, "shortNames"), i),
                v,
                &e.join(","),
            ));
        }
    }
    let kind = get("kind");
    if !kind.is_empty() && kind == get("listKind") {
        errs.push(fe::invalid_str(
            &child(at, "listKind"),
            kind,
            "kind and listKind may not be the same",
        ));
    }
    for (i, c) in arr(n.and_then(|n| n.get("categories"))).iter().enumerate() {
        let v = c.as_str().unwrap_or("");
        let e = names::dns1035_label(v);
        if !e.is_empty() {
            errs.push(fe::invalid_str(
                &index(&child(at, "categories"), i),
                v,
                &e.join(","),
            ));
        }
    }
    errs
}
pub(crate) fn conversion(c: Option<&Value>, preserve: bool, opts: Opts) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(c) = c.filter(|c| !c.is_null()) else {
        return errs;
    };
    let strategy = s(c.get("strategy"));
    if strategy != "None" && preserve {
        errs.push(fe::invalid_str(
            "spec.conversion.strategy",
            strategy,
            "must be None if spec.preserveUnknownFields is true",
        ));
    }
    let at = "spec.conversion";
    if strategy.is_empty() {
        errs.push(fe::required(&child(at, "strategy"), ""));
    } else if strategy != "None" && strategy != "Webhook" {
        errs.push(fe::not_supported(
            &child(at, "strategy"),
            &Value::from(strategy),
            &["None".into(), "Webhook".into()],
        ));
    }
    let webhook = c.get("webhook").filter(|w| !w.is_null());
    let cc = webhook
        .and_then(|w| w.get("clientConfig"))
        .filter(|x| !x.is_null());
    let review = webhook.and_then(|w| w.get("conversionReviewVersions"));
    let cc_at = child(at, "webhookClientConfig");
    if strategy == "Webhook" {
        match cc {
            None => errs.push(fe::required(
                &cc_at,
                "required when strategy is set to Webhook",
            )),
            Some(cc) => {
                let url = cc.get("url").filter(|x| !x.is_null());
                let svc = cc.get("service").filter(|x| !x.is_null());
                match (url, svc) {
                    (Some(_), Some(_)) | (None, None) => errs.push(fe::required(
                        &cc_at,
                        "exactly one of url or service is required",
                    )),
                    (Some(u), None) => errs.extend(webhook_url(&child(&cc_at, "url"), s(Some(u)))),
                    (None, Some(svc)) => {
                        errs.extend(webhook_service(&child(&cc_at, "service"), svc))
                    }
                }
            }
        }
        let at_r = child(at, "conversionReviewVersions");
        let list = arr(review);
        if list.is_empty() {
            errs.push(fe::required(&at_r, ""));
        } else {
            let mut seen: Vec<&str> = Vec::new();
            let mut accepted = false;
            for (i, v) in list.iter().enumerate() {
                let v = v.as_str().unwrap_or("");
                if seen.contains(&v) {
                    errs.push(fe::invalid_str(&index(&at_r, i), v, "duplicate version"));
                    continue;
                }
                seen.push(v);
                for e in names::dns1035_label(v) {
                    errs.push(fe::invalid_str(&index(&at_r, i), v, &e));
                }
                if v == "v1" || v == "v1beta1" {
                    accepted = true;
                }
            }
            if opts.require_recognized_conversion_review_version && !accepted {
                let all: Vec<String> = seen.iter().map(|x| x.to_string()).collect();
                errs.push(fe::invalid_shown(
                    &at_r,
                    &fe::go_strings(&all),
                    "must include at least one of v1, v1beta1",
                ));
            }
        }
    } else {
        if cc.is_some() {
            errs.push(fe::forbidden(
                &cc_at,
                "should not be set when strategy is not set to Webhook",
            ));
        }
        if !arr(review).is_empty() {
            errs.push(fe::forbidden(
                &child(at, "conversionReviewVersions"),
                "should not be set when strategy is not set to Webhook",
            ));
        }
    }
    errs
}
/// webhook.ValidateWebhookURL(…, forceHttps=true)
fn webhook_url(at: &str, url: &str) -> Vec<FieldError> {
    const FORM: &str = "; desired format: https://host[/path]";
    let mut errs = Vec::new();
    let (scheme, rest) = match url.split_once("://") {
        Some((sc, r)) => (sc, r),
        None => match url.split_once(':') {
            Some((sc, r)) if !sc.contains('/') => (sc, r),
            _ => ("", url),
        },
    };
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let authority = if url.contains("://") {
        rest.split('/').next().unwrap_or("")
    } else {
        ""
    };
    let (user, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if scheme != "https" {
        errs.push(fe::invalid_str(
            at,
            scheme,
            &format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if host.is_empty() {
        errs.push(fe::invalid_str(
            at,
            host,
            &format!("host must be specified{FORM}"),
        ));
    }
    if let Some(u) = user {
        errs.push(fe::invalid_str(
            at,
            u,
            "user information is not permitted in the URL",
        ));
    }
    if !fragment.is_empty() {
        errs.push(fe::invalid_str(
            at,
            fragment,
            "fragments are not permitted in the URL",
        ));
    }
    if !query.is_empty() {
        errs.push(fe::invalid_str(
            at,
            query,
            "query parameters are not permitted in the URL",
        ));
    }
    errs
}
/// webhook.ValidateWebhookService, called as upstream does with name and
/// namespace swapped (so a missing name reports the namespace).
fn webhook_service(at: &str, svc: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let (namespace, name) = (s(svc.get("name")), s(svc.get("namespace")));
    if name.is_empty() {
        errs.push(fe::required(&child(at, "name"), "service name is required"));
    }
    if namespace.is_empty() {
        errs.push(fe::required(
            &child(at, "namespace"),
            "service namespace is required",
        ));
    }
    let port = svc.get("port").and_then(Value::as_i64).unwrap_or(443);
    if !(1..=65535).contains(&port) {
        errs.push(fe::invalid(
            &child(at, "port"),
            &Value::from(port),
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let path = s(svc.get("path"));
    if path.is_empty() || path == "/" {
        return errs;
    }
    let p = child(at, "path");
    if path == "//" {
        errs.push(fe::invalid_str(&p, path, "segment[0] may not be empty"));
        return errs;
    }
    if !path.starts_with('/') {
        errs.push(fe::invalid_str(&p, path, "must start with a '/'"));
    }
    let mut check = path.get(1..).unwrap_or("");
    check = check.strip_suffix('/').unwrap_or(check);
    for (i, step) in check.split('/').enumerate() {
        if step.is_empty() {
            errs.push(fe::invalid_str(
                &p,
                path,
                &format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for e in names::dns1123_subdomain(step) {
            errs.push(fe::invalid_str(&p, path, &format!("segment[{i}]: {e}")));
        }
    }
    errs
}
pub(crate) fn status_errors(obj: &Value) -> Vec<FieldError> {
    let mut errs = names_errors(obj.pointer("/status/acceptedNames"), "status.acceptedNames");
    let stored: Vec<String> = arr(obj.pointer("/status/storedVersions"))
        .iter()
        .map(|v| v.as_str().unwrap_or("").to_string())
        .collect();
    let at = "status.storedVersions";
    if stored.is_empty() {
        let shown = if obj
            .pointer("/status/storedVersions")
            .is_some_and(Value::is_array)
        {
            "[]string{}"
        } else {
            "[]string(nil)"
        };
        errs.push(fe::invalid_shown(
            at,
            shown,
            "must have at least one stored version",
        ));
        return errs;
    }
    let versions = arr(obj.pointer("/spec/versions"));
    let mut remaining: Vec<(usize, &str)> = stored
        .iter()
        .enumerate()
        .map(|(i, v)| (i, v.as_str()))
        .collect();
    for v in versions {
        let name = s(v.get("name"));
        let found = remaining.iter().any(|(_, x)| *x == name);
        if v.get("storage").and_then(Value::as_bool) == Some(true) && !found {
            errs.push(fe::invalid_shown(
                at,
                &fe::go_strings(&stored),
                &format!("must have the storage version {name}"),
            ));
        }
        remaining.retain(|(_, x)| *x != name);
    }
    // upstream keys a map by version (the last index wins)
    let mut reported: Vec<&str> = Vec::new();
    for (i, v) in remaining.iter().rev() {
        if reported.contains(v) {
            continue;
        }
        reported.push(v);
        errs.push(fe::invalid_str(
            &index(at, *i),
            v,
            &format!("missing from spec.versions; {v} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {v} and removes {v} from status.storedVersions"),
        ));
    }
    errs
}
#[derive(Debug, Clone, PartialEq, Eq)]
enum Approval {
    Missing,
    Bypassed,
    Approved,
    Invalid,
}
fn approval_state(obj: &Value) -> (Approval, String) {
    let a = s(obj
        .pointer("/metadata/annotations")
        .and_then(|m| m.get(APPROVAL)));
    if a.is_empty() {
        return (
            Approval::Missing,
            format!("protected groups must have approval annotation \"{APPROVAL}\", see https://github.com/kubernetes/enhancements/pull/1111"),
        );
    }
    if a.starts_with("unapproved") {
        return (Approval::Bypassed, String::new());
    }
    if let Some((scheme, rest)) = a.split_once("://") {
        if !scheme.is_empty()
            && !rest.split('/').next().unwrap_or("").is_empty()
            && !a.contains(' ')
        {
            return (Approval::Approved, String::new());
        }
    }
    (
        Approval::Invalid,
        format!("protected groups must have approval annotation \"{APPROVAL}\" with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"),
    )
}
pub(crate) fn api_approval(new: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let group = s(new.pointer("/spec/group"));
    let protected = group == "k8s.io"
        || group.ends_with(".k8s.io")
        || group == "kubernetes.io"
        || group.ends_with(".kubernetes.io");
    if !protected {
        return Vec::new();
    }
    let (state, reason) = approval_state(new);
    if let Some(old) = old {
        if approval_state(old).0 == state {
            return Vec::new();
        }
    }
    let at = format!("metadata.annotations[{APPROVAL}]");
    match state {
        Approval::Missing => vec![fe::required(&at, &reason)],
        Approval::Invalid => {
            let v = s(new
                .pointer("/metadata/annotations")
                .and_then(|m| m.get(APPROVAL)));
            vec![fe::invalid_str(&at, v, &reason)]
        }
        Approval::Approved | Approval::Bypassed => Vec::new(),
    }
}
pub(crate) fn preserve_unknown_fields(new: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let t = |o: &Value| {
        o.pointer("/spec/preserveUnknownFields")
            .and_then(Value::as_bool)
            == Some(true)
    };
    if old.is_some_and(t) {
        return Vec::new();
    }
    if t(new) {
        return vec![fe::invalid(
            "spec.preserveUnknownFields",
            &Value::Bool(true),
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        )];
    }
    Vec::new()
}
