//! admissionregistration.k8s.io/v1 kinds: Mutating- and
//! ValidatingWebhookConfigurations, ValidatingAdmissionPolicies and their
//! bindings, as upstream's pkg/apis/admissionregistration/validation
//! checks them (1.33), with its field paths and wording. Skiff stores and
//! serves them but does not enforce them; CEL expressions are checked for
//! presence only (there is no CEL compiler here).

use serde_json::Value;

use super::common::{
    duplicate, forbidden, invalid_shown, invalid_str, items, label_selector, port_num,
    required_because, str_at, too_many,
};
use super::{names, not_supported, required, FieldError};

const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
const NO_SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun"];
const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
const REINVOCATION: &[&str] = &["IfNeeded", "Never"];
const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];
const REASONS: &[&str] = &["Forbidden", "Invalid", "RequestEntityTooLarge"];
const ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];
const REVIEW_VERSIONS: &str = "v1, v1beta1";
const URL_FORM: &str = "; desired format: https://host[/path]";
const MAX_AUDIT_ANNOTATIONS: usize = 20;

fn go_strings(v: &[Value], ty: &str) -> String {
    let parts: Vec<String> = v
        .iter()
        .map(|s| format!("\"{}\"", s.as_str().unwrap_or_default()))
        .collect();
    format!("[]{ty}{{{}}}", parts.join(", "))
}

fn has_wildcard(v: &[Value]) -> bool {
    v.iter().any(|s| s.as_str() == Some("*"))
}

/// `IsFullyQualifiedName`.
fn fully_qualified(errors: &mut Vec<FieldError>, at: &str, name: &str) {
    if name.is_empty() {
        errors.push(required(at.into()));
        return;
    }
    let errs = names::dns1123_subdomain(name);
    if !errs.is_empty() {
        errors.push(invalid_str(at, name, &errs.join(",")));
        return;
    }
    if name.split('.').count() < 3 {
        errors.push(invalid_str(
            at,
            name,
            "should be a domain with at least three segments separated by dots",
        ));
    }
}

fn resources(errors: &mut Vec<FieldError>, list: &[Value], at: &str) {
    if list.is_empty() {
        errors.push(required(at.into()));
    }
    let (mut with_wild_sub, mut sub_with_wild_res): (Vec<&str>, Vec<&str>) = (vec![], vec![]);
    let (mut double, mut single, mut plain) = (false, false, false);
    for (i, r) in list.iter().enumerate() {
        let r = r.as_str().unwrap_or_default();
        let field = format!("{at}[{i}]");
        if r.is_empty() {
            errors.push(required(field));
            continue;
        }
        double |= r == "*/*";
        single |= r == "*";
        let Some((res, sub)) = r.split_once('/') else {
            plain = r != "*";
            continue;
        };
        if with_wild_sub.contains(&res) {
            errors.push(invalid_str(
                &field,
                r,
                &format!("if '{res}/*' is present, must not specify {r}"),
            ));
        }
        if sub_with_wild_res.contains(&sub) {
            errors.push(invalid_str(
                &field,
                r,
                &format!("if '*/{sub}' is present, must not specify {r}"),
            ));
        }
        if sub == "*" {
            with_wild_sub.push(res);
        }
        if res == "*" {
            sub_with_wild_res.push(sub);
        }
    }
    if list.len() > 1 && double {
        errors.push(invalid_shown(
            at,
            &go_strings(list, "string"),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single && plain {
        errors.push(invalid_shown(
            at,
            &go_strings(list, "string"),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
}

fn rule_with_operations(r: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let ops = items(r, "operations");
    if ops.is_empty() {
        errors.push(required(format!("{at}.operations")));
    }
    if ops.len() > 1 && has_wildcard(ops) {
        errors.push(invalid_shown(
            format!("{at}.operations"),
            &go_strings(ops, "admissionregistration.OperationType"),
            "if '*' is present, must not specify other operations",
        ));
    }
    for (i, op) in ops.iter().enumerate() {
        let op = op.as_str().unwrap_or_default();
        if !OPERATIONS.contains(&op) {
            errors.push(not_supported(
                format!("{at}.operations[{i}]"),
                op,
                OPERATIONS,
            ));
        }
    }
    let groups = items(r, "apiGroups");
    if groups.is_empty() {
        errors.push(required(format!("{at}.apiGroups")));
    }
    if groups.len() > 1 && has_wildcard(groups) {
        errors.push(invalid_shown(
            format!("{at}.apiGroups"),
            &go_strings(groups, "string"),
            "if '*' is present, must not specify other API groups",
        ));
    }
    let versions = items(r, "apiVersions");
    if versions.is_empty() {
        errors.push(required(format!("{at}.apiVersions")));
    }
    if versions.len() > 1 && has_wildcard(versions) {
        errors.push(invalid_shown(
            format!("{at}.apiVersions"),
            &go_strings(versions, "string"),
            "if '*' is present, must not specify other API versions",
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        if v.as_str().unwrap_or_default().is_empty() {
            errors.push(required(format!("{at}.apiVersions[{i}]")));
        }
    }
    resources(
        &mut errors,
        items(r, "resources"),
        &format!("{at}.resources"),
    );
    if let Some(scope) = str_at(r, "scope") {
        if !SCOPES.contains(&scope) {
            errors.push(not_supported(format!("{at}.scope"), scope, SCOPES));
        }
    }
    errors
}

/// `ValidateWebhookURL` with https forced: a small URL reading of
/// Go's `url.Parse` for the fields it checks.
fn webhook_url(errors: &mut Vec<FieldError>, at: &str, url: &str) {
    let (scheme, rest) = match url.split_once(':') {
        Some((s, r))
            if !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)) =>
        {
            (s.to_ascii_lowercase(), r)
        }
        _ => (String::new(), url),
    };
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, _path) = match rest.strip_prefix("//") {
        Some(a) => a.split_once('/').unwrap_or((a, "")),
        None => ("", rest),
    };
    let (user, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if scheme != "https" {
        errors.push(invalid_str(
            at,
            &scheme,
            &format!("'https' is the only allowed URL scheme{URL_FORM}"),
        ));
    }
    if host.is_empty() {
        errors.push(invalid_str(
            at,
            "",
            &format!("host must be specified{URL_FORM}"),
        ));
    }
    if let Some(u) = user {
        errors.push(invalid_str(
            at,
            u,
            "user information is not permitted in the URL",
        ));
    }
    if !fragment.is_empty() {
        errors.push(invalid_str(
            at,
            fragment,
            "fragments are not permitted in the URL",
        ));
    }
    if !query.is_empty() {
        errors.push(invalid_str(
            at,
            query,
            "query parameters are not permitted in the URL",
        ));
    }
}

/// `ValidateWebhookService`.
fn webhook_service(errors: &mut Vec<FieldError>, at: &str, svc: &Value) {
    if str_at(svc, "name").unwrap_or_default().is_empty() {
        errors.push(required_because(
            format!("{at}.name"),
            "service name is required",
        ));
    }
    if str_at(svc, "namespace").unwrap_or_default().is_empty() {
        errors.push(required_because(
            format!("{at}.namespace"),
            "service namespace is required",
        ));
    }
    let port = svc.get("port").and_then(Value::as_i64).unwrap_or(443);
    if let Some(m) = port_num(port) {
        errors.push(super::invalid(
            format!("{at}.port"),
            &Value::from(port),
            &format!("port is not valid: {m}"),
        ));
    }
    let Some(path) = str_at(svc, "path") else {
        return;
    };
    if path == "/" || path.is_empty() {
        return;
    }
    let field = format!("{at}.path");
    if path == "//" {
        errors.push(invalid_str(&field, path, "segment[0] may not be empty"));
        return;
    }
    if !path.starts_with('/') {
        errors.push(invalid_str(&field, path, "must start with a '/'"));
    }
    let check = path.get(1..).unwrap_or_default();
    let check = check.strip_suffix('/').unwrap_or(check);
    for (i, step) in check.split('/').enumerate() {
        if step.is_empty() {
            errors.push(invalid_str(
                &field,
                path,
                &format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for m in names::dns1123_subdomain(step) {
            errors.push(invalid_str(&field, path, &format!("segment[{i}]: {m}")));
        }
    }
}

fn match_conditions(errors: &mut Vec<FieldError>, list: &[Value], at: &str) {
    if list.len() > 64 {
        errors.push(too_many(at, list.len(), 64));
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let ca = format!("{at}[{i}]");
        if str_at(c, "expression")
            .unwrap_or_default()
            .trim()
            .is_empty()
        {
            errors.push(required(format!("{ca}.expression")));
        }
        let name = str_at(c, "name").unwrap_or_default();
        if name.is_empty() {
            errors.push(required(format!("{ca}.name")));
        } else {
            for m in names::qualified_name(name) {
                errors.push(invalid_str(format!("{ca}.name"), name, &m));
            }
            if seen.contains(&name) {
                errors.push(duplicate(format!("{ca}.name"), name));
            }
            seen.push(name);
        }
    }
}

fn webhook(h: &Value, at: &str, mutating: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    fully_qualified(
        &mut errors,
        &format!("{at}.name"),
        str_at(h, "name").unwrap_or_default(),
    );
    for (i, r) in items(h, "rules").iter().enumerate() {
        errors.extend(rule_with_operations(r, &format!("{at}.rules[{i}]")));
    }
    for (field, allowed) in [
        ("failurePolicy", FAILURE_POLICIES),
        ("matchPolicy", MATCH_POLICIES),
    ] {
        if let Some(v) = str_at(h, field) {
            if !allowed.contains(&v) {
                errors.push(not_supported(format!("{at}.{field}"), v, allowed));
            }
        }
    }
    // The typed decoder writes an absent (required) sideEffects as "".
    match str_at(h, "sideEffects").filter(|s| !s.is_empty()) {
        None => errors.push(required_because(
            format!("{at}.sideEffects"),
            "must specify one of None, NoneOnDryRun",
        )),
        Some(s) if !NO_SIDE_EFFECTS.contains(&s) => {
            errors.push(not_supported(
                format!("{at}.sideEffects"),
                s,
                NO_SIDE_EFFECTS,
            ));
        }
        Some(_) => {}
    }
    if let Some(t) = h.get("timeoutSeconds").and_then(Value::as_i64) {
        if !(1..=30).contains(&t) {
            errors.push(super::invalid(
                format!("{at}.timeoutSeconds"),
                &Value::from(t),
                "the timeout value must be between 1 and 30 seconds",
            ));
        }
    }
    for sel in ["namespaceSelector", "objectSelector"] {
        errors.extend(label_selector(h.get(sel), &format!("{at}.{sel}")));
    }
    if mutating {
        if let Some(p) = str_at(h, "reinvocationPolicy") {
            if !REINVOCATION.contains(&p) {
                errors.push(not_supported(
                    format!("{at}.reinvocationPolicy"),
                    p,
                    REINVOCATION,
                ));
            }
        }
    }
    let cc = h.get("clientConfig").unwrap_or(&Value::Null);
    let url = cc.get("url").and_then(Value::as_str);
    let service = cc.get("service").filter(|s| !s.is_null());
    match (url, service) {
        (Some(u), None) => webhook_url(&mut errors, &format!("{at}.clientConfig.url"), u),
        (None, Some(s)) => webhook_service(&mut errors, &format!("{at}.clientConfig.service"), s),
        _ => errors.push(required_because(
            format!("{at}.clientConfig"),
            "exactly one of url or service is required",
        )),
    }
    match_conditions(
        &mut errors,
        items(h, "matchConditions"),
        &format!("{at}.matchConditions"),
    );
    errors
}

fn review_versions(errors: &mut Vec<FieldError>, list: &[Value], at: &str) {
    if list.is_empty() {
        errors.push(required_because(
            at,
            &format!("must specify one of {REVIEW_VERSIONS}"),
        ));
        return;
    }
    let mut seen: Vec<&str> = Vec::new();
    let mut accepted = false;
    for (i, v) in list.iter().enumerate() {
        let v = v.as_str().unwrap_or_default();
        let field = format!("{at}[{i}]");
        if seen.contains(&v) {
            errors.push(invalid_str(&field, v, "duplicate version"));
            continue;
        }
        seen.push(v);
        for m in names::dns1035_label(v) {
            errors.push(invalid_str(&field, v, &m));
        }
        accepted |= v == "v1" || v == "v1beta1";
    }
    if !accepted {
        errors.push(invalid_shown(
            at,
            &go_strings(list, "string"),
            &format!("must include at least one of {REVIEW_VERSIONS}"),
        ));
    }
}

fn webhook_configuration(obj: &Value, mutating: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut names_seen: Vec<&str> = Vec::new();
    for (i, h) in items(obj, "webhooks").iter().enumerate() {
        let at = format!("webhooks[{i}]");
        errors.extend(webhook(h, &at, mutating));
        review_versions(
            &mut errors,
            items(h, "admissionReviewVersions"),
            &format!("{at}.admissionReviewVersions"),
        );
        let name = str_at(h, "name").unwrap_or_default();
        if !name.is_empty() {
            if names_seen.contains(&name) {
                errors.push(duplicate(format!("{at}.name"), name));
            } else {
                names_seen.push(name);
            }
        }
    }
    errors
}

/// A MutatingWebhookConfiguration.
pub fn mutating_webhook_configuration(obj: &Value) -> Vec<FieldError> {
    webhook_configuration(obj, true)
}

/// A ValidatingWebhookConfiguration.
pub fn validating_webhook_configuration(obj: &Value) -> Vec<FieldError> {
    webhook_configuration(obj, false)
}

fn param_kind(errors: &mut Vec<FieldError>, pk: &Value, at: &str) {
    let av = str_at(pk, "apiVersion").unwrap_or_default();
    let field = format!("{at}.apiVersion");
    if av.is_empty() {
        errors.push(required(field.clone()));
    } else if av.matches('/').count() > 1 {
        errors.push(invalid_str(
            &field,
            av,
            &format!("unexpected GroupVersion string: {av}"),
        ));
    } else {
        let (group, version) = av.split_once('/').unwrap_or(("", av));
        if !group.is_empty() {
            let errs = names::dns1123_subdomain(group);
            if !errs.is_empty() {
                errors.push(invalid_str(&field, group, &errs.join(",")));
            }
        }
        if version.is_empty() {
            errors.push(invalid_str(&field, av, "version must be specified"));
        } else {
            let errs = names::dns1035_label(version);
            if !errs.is_empty() {
                errors.push(invalid_str(&field, version, &errs.join(",")));
            }
        }
    }
    let kind = str_at(pk, "kind").unwrap_or_default();
    if kind.is_empty() {
        errors.push(required(format!("{at}.kind")));
    } else {
        let errs = names::dns1035_label(&kind.to_ascii_lowercase());
        if !errs.is_empty() {
            errors.push(invalid_str(
                format!("{at}.kind"),
                kind,
                &format!(
                    "may have mixed case, but should otherwise match: {}",
                    errs.join(",")
                ),
            ));
        }
    }
}

/// `path.ValidatePathSegmentName`.
fn path_segment(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value == "." || value == ".." {
        errs.push(format!("may not be '{value}'"));
    }
    for bad in ["/", "%"] {
        if value.contains(bad) {
            errs.push(format!("may not contain '{bad}'"));
        }
    }
    errs
}

fn match_resources(errors: &mut Vec<FieldError>, mc: Option<&Value>, at: &str) {
    let Some(mc) = mc.filter(|m| !m.is_null()) else {
        return;
    };
    match str_at(mc, "matchPolicy") {
        None => errors.push(required(format!("{at}.matchPolicy"))),
        Some(p) if !MATCH_POLICIES.contains(&p) => {
            errors.push(not_supported(
                format!("{at}.matchPolicy"),
                p,
                MATCH_POLICIES,
            ));
        }
        Some(_) => {}
    }
    for sel in ["namespaceSelector", "objectSelector"] {
        match mc.get(sel).filter(|s| !s.is_null()) {
            None => errors.push(required(format!("{at}.{sel}"))),
            Some(s) => errors.extend(label_selector(Some(s), &format!("{at}.{sel}"))),
        }
    }
    for list in ["resourceRules", "excludeResourceRules"] {
        for (i, r) in items(mc, list).iter().enumerate() {
            let ra = format!("{at}.{list}[{i}]");
            let mut seen: Vec<&str> = Vec::new();
            for (j, n) in items(r, "resourceNames").iter().enumerate() {
                let n = n.as_str().unwrap_or_default();
                for m in path_segment(n) {
                    errors.push(invalid_str(format!("{ra}.resourceNames[{j}]"), n, &m));
                }
                if seen.contains(&n) {
                    errors.push(duplicate(format!("{ra}.resourceNames[{j}]"), n));
                } else {
                    seen.push(n);
                }
            }
            errors.extend(rule_with_operations(r, &ra));
        }
    }
}

/// A ValidatingAdmissionPolicy.
pub fn validating_admission_policy(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    match str_at(spec, "failurePolicy") {
        None => errors.push(required("spec.failurePolicy".into())),
        Some(p) if !FAILURE_POLICIES.contains(&p) => {
            errors.push(not_supported(
                "spec.failurePolicy".into(),
                p,
                FAILURE_POLICIES,
            ));
        }
        Some(_) => {}
    }
    if let Some(pk) = spec.get("paramKind").filter(|p| !p.is_null()) {
        param_kind(&mut errors, pk, "spec.paramKind");
    }
    match spec.get("matchConstraints").filter(|m| !m.is_null()) {
        None => errors.push(required("spec.matchConstraints".into())),
        Some(mc) => {
            match_resources(&mut errors, Some(mc), "spec.matchConstraints");
            if items(mc, "resourceRules").is_empty() {
                errors.push(required("spec.matchConstraints.resourceRules".into()));
            }
        }
    }
    match_conditions(
        &mut errors,
        items(spec, "matchConditions"),
        "spec.matchConditions",
    );
    for (i, v) in items(spec, "variables").iter().enumerate() {
        let at = format!("spec.variables[{i}]");
        let name = str_at(v, "name").unwrap_or_default();
        if name.trim().is_empty() {
            errors.push(required_because(
                format!("{at}.name"),
                "name is not specified",
            ));
        } else if !cel_identifier(name) {
            errors.push(invalid_str(
                format!("{at}.name"),
                name,
                "name is not a valid CEL identifier",
            ));
        }
        if str_at(v, "expression")
            .unwrap_or_default()
            .trim()
            .is_empty()
        {
            errors.push(required_because(
                format!("{at}.expression"),
                "expression is not specified",
            ));
        }
    }
    let validations = items(spec, "validations");
    let audits = items(spec, "auditAnnotations");
    if validations.is_empty() && audits.is_empty() {
        for field in ["validations", "auditAnnotations"] {
            errors.push(required_because(
                format!("spec.{field}"),
                "validations or auditAnnotations must contain at least one item",
            ));
        }
        return errors;
    }
    for (i, v) in validations.iter().enumerate() {
        errors.extend(validation(v, &format!("spec.validations[{i}]")));
    }
    if audits.len() > MAX_AUDIT_ANNOTATIONS {
        errors.push(invalid_shown(
            "spec.auditAnnotations",
            "[]admissionregistration.AuditAnnotation{...}",
            &format!("must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"),
        ));
    }
    let policy = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut keys: Vec<&str> = Vec::new();
    for (i, a) in audits.iter().enumerate() {
        let at = format!("spec.auditAnnotations[{i}]");
        let key = str_at(a, "key").unwrap_or_default();
        if policy.is_empty() {
            errors.push(invalid_str(
                format!("{at}.key"),
                key,
                "requires metadata.name be non-empty",
            ));
        } else {
            let full = format!("{policy}/{key}");
            for m in names::qualified_name(&full) {
                errors.push(invalid_str(format!("{at}.key"), &full, &m));
            }
        }
        let value = str_at(a, "valueExpression").unwrap_or_default().trim();
        if value.is_empty() {
            errors.push(required_because(
                format!("{at}.valueExpression"),
                "valueExpression is not specified",
            ));
        } else if value.len() > 5 * 1024 {
            errors.push(required_because(
                format!("{at}.valueExpression"),
                "must not exceed 5120 bytes in length",
            ));
        }
        if keys.contains(&key) {
            errors.push(duplicate(format!("{at}.key"), key));
        }
        keys.push(key);
    }
    errors
}

fn cel_identifier(name: &str) -> bool {
    const RESERVED: &[&str] = &[
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ];
    let b = name.as_bytes();
    b.first()
        .is_some_and(|f| f.is_ascii_alphabetic() || *f == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
        && !RESERVED.contains(&name)
}

fn validation(v: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if str_at(v, "expression")
        .unwrap_or_default()
        .trim()
        .is_empty()
    {
        errors.push(required_because(
            format!("{at}.expression"),
            "expression is not specified",
        ));
    }
    let me = str_at(v, "messageExpression").unwrap_or_default();
    if !me.is_empty() && me.trim().is_empty() {
        errors.push(invalid_str(
            format!("{at}.messageExpression"),
            me,
            "must be non-empty if specified",
        ));
    }
    let msg = str_at(v, "message").unwrap_or_default();
    if !msg.is_empty() && msg.trim().is_empty() {
        errors.push(invalid_str(
            format!("{at}.message"),
            msg,
            "message must be non-empty if specified",
        ));
    } else if msg.trim().contains(['\n', '\r']) {
        errors.push(invalid_str(
            format!("{at}.message"),
            msg,
            "message must not contain line breaks",
        ));
    }
    if let Some(r) = str_at(v, "reason") {
        if !REASONS.contains(&r) {
            errors.push(not_supported(format!("{at}.reason"), r, REASONS));
        }
    }
    errors
}

/// A ValidatingAdmissionPolicy's status (the status subresource).
pub fn validating_admission_policy_status(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let warnings = obj
        .pointer("/status/typeChecking/expressionWarnings")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, w) in warnings.iter().enumerate() {
        let at = format!("status.typeChecking.expressionWarnings[{i}]");
        if str_at(w, "warning").unwrap_or_default().is_empty() {
            errors.push(required(format!("{at}.warning")));
        }
        if str_at(w, "fieldRef").unwrap_or_default().trim().is_empty() {
            errors.push(required(format!("{at}.fieldRef")));
        }
    }
    errors
}

/// A ValidatingAdmissionPolicyBinding.
pub fn validating_admission_policy_binding(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let policy = str_at(spec, "policyName").unwrap_or_default();
    if policy.is_empty() {
        errors.push(required("spec.policyName".into()));
    } else {
        for m in names::dns1123_subdomain(policy) {
            errors.push(invalid_str("spec.policyName", policy, &m));
        }
    }
    if let Some(pr) = spec.get("paramRef").filter(|p| !p.is_null()) {
        let at = "spec.paramRef";
        let name = str_at(pr, "name").unwrap_or_default();
        let selector = pr.get("selector").filter(|s| !s.is_null());
        if !name.is_empty() {
            for m in path_segment(name) {
                errors.push(invalid_str(format!("{at}.name"), name, &m));
            }
            if selector.is_some() {
                errors.push(forbidden(
                    format!("{at}.name"),
                    "name and selector are mutually exclusive",
                ));
            }
        }
        if let Some(s) = selector {
            errors.extend(label_selector(Some(s), &format!("{at}.selector")));
            if !name.is_empty() {
                errors.push(forbidden(
                    format!("{at}.selector"),
                    "name and selector are mutually exclusive",
                ));
            }
        }
        if name.is_empty() && selector.is_none() {
            errors.push(required_because(
                at,
                "one of name or selector must be specified",
            ));
        }
        match str_at(pr, "parameterNotFoundAction").filter(|a| !a.is_empty()) {
            None => errors.push(required(format!("{at}.parameterNotFoundAction"))),
            Some(a) if a != "Deny" && a != "Allow" => errors.push(not_supported(
                format!("{at}.parameterNotFoundAction"),
                a,
                &["Deny", "Allow"],
            )),
            Some(_) => {}
        }
    }
    match_resources(
        &mut errors,
        spec.get("matchResources"),
        "spec.matchResources",
    );
    let actions = items(spec, "validationActions");
    let mut seen: Vec<&str> = Vec::new();
    for (i, a) in actions.iter().enumerate() {
        let a = a.as_str().unwrap_or_default();
        let at = format!("spec.validationActions[{i}]");
        if !ACTIONS.contains(&a) {
            errors.push(not_supported(at.clone(), a, ACTIONS));
        }
        if seen.contains(&a) {
            errors.push(duplicate(&at, a));
        }
        seen.push(a);
    }
    if seen.contains(&"Deny") && seen.contains(&"Warn") {
        errors.push(invalid_shown(
            "spec.validationActions",
            &go_strings(actions, "admissionregistration.ValidationAction"),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if seen.is_empty() {
        errors.push(required_because(
            "spec.validationActions",
            "at least one validation action is required",
        ));
    }
    errors
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
    fn webhook_findings() {
        let ok = json!({"webhooks": [{"name": "check.example.com", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "clientConfig": {"url": "https://hook.example.com/x"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods"], "scope": "*"}]}]});
        assert!(validating_webhook_configuration(&ok).is_empty());
        let bad = json!({"webhooks": [{"name": "check", "admissionReviewVersions": ["v2"],
            "clientConfig": {"url": "http://hook.example.com/x?a=b"}, "timeoutSeconds": 31}]});
        assert_eq!(
            found(&validating_webhook_configuration(&bad)),
            vec![
                ("webhooks[0].name", "Invalid value: \"check\": should be a domain with at least three segments separated by dots"),
                ("webhooks[0].sideEffects", "Required value: must specify one of None, NoneOnDryRun"),
                ("webhooks[0].timeoutSeconds", "Invalid value: 31: the timeout value must be between 1 and 30 seconds"),
                ("webhooks[0].clientConfig.url", "Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]"),
                ("webhooks[0].clientConfig.url", "Invalid value: \"a=b\": query parameters are not permitted in the URL"),
                ("webhooks[0].admissionReviewVersions", "Invalid value: []string{\"v2\"}: must include at least one of v1, v1beta1"),
            ]
        );
    }

    #[test]
    fn policy_and_binding_findings() {
        let p = json!({"metadata": {"name": "p"}, "spec": {"failurePolicy": "Fail"}});
        assert_eq!(
            found(&validating_admission_policy(&p)),
            vec![
                ("spec.matchConstraints", "Required value"),
                ("spec.validations", "Required value: validations or auditAnnotations must contain at least one item"),
                ("spec.auditAnnotations", "Required value: validations or auditAnnotations must contain at least one item"),
            ]
        );
        let b = json!({"spec": {"policyName": "p", "validationActions": ["Deny", "Warn"]}});
        assert_eq!(
            found(&validating_admission_policy_binding(&b))[0].1,
            "Invalid value: []admissionregistration.ValidationAction{\"Deny\", \"Warn\"}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"
        );
    }
}
