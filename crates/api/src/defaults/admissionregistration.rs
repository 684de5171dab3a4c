//! admissionregistration.k8s.io/v1 defaults, as upstream's `SetDefaults_*`
//! in pkg/apis/admissionregistration/v1 fill them: webhooks' failure and
//! match policies, selectors, timeout and (mutating) reinvocation policy;
//! rules' scope; service ports; policies' failure policy and match
//! resources; bindings' parameterNotFoundAction.

use serde_json::{json, Map, Value};

fn set(obj: &mut Map<String, Value>, field: &str, value: Value) {
    if obj.get(field).is_none_or(Value::is_null) {
        obj.insert(field.to_string(), value);
    }
}

fn rules(list: Option<&mut Value>) {
    for r in list
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        set(r, "scope", json!("*"));
    }
}

fn webhooks(obj: &mut Value, mutating: bool) {
    let Some(list) = obj.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for h in list.iter_mut() {
        let Some(m) = h.as_object_mut() else { continue };
        set(m, "failurePolicy", json!("Fail"));
        set(m, "matchPolicy", json!("Equivalent"));
        set(m, "namespaceSelector", json!({}));
        set(m, "objectSelector", json!({}));
        set(m, "timeoutSeconds", json!(10));
        if mutating {
            set(m, "reinvocationPolicy", json!("Never"));
        }
        rules(m.get_mut("rules"));
        if let Some(svc) = m
            .get_mut("clientConfig")
            .and_then(|c| c.get_mut("service"))
            .and_then(Value::as_object_mut)
        {
            set(svc, "port", json!(443));
        }
    }
}

/// A MutatingWebhookConfiguration.
pub fn mutating_webhook_configuration(obj: &mut Value) {
    webhooks(obj, true);
}

/// A ValidatingWebhookConfiguration.
pub fn validating_webhook_configuration(obj: &mut Value) {
    webhooks(obj, false);
}

fn match_resources(mc: Option<&mut Value>) {
    let Some(m) = mc.and_then(Value::as_object_mut) else {
        return;
    };
    set(m, "matchPolicy", json!("Equivalent"));
    set(m, "namespaceSelector", json!({}));
    set(m, "objectSelector", json!({}));
    rules(m.get_mut("resourceRules"));
    rules(m.get_mut("excludeResourceRules"));
}

/// A ValidatingAdmissionPolicy.
pub fn validating_admission_policy(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set(spec, "failurePolicy", json!("Fail"));
    match_resources(spec.get_mut("matchConstraints"));
}

/// A ValidatingAdmissionPolicyBinding.
pub fn validating_admission_policy_binding(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    match_resources(spec.get_mut("matchResources"));
    if let Some(pr) = spec.get_mut("paramRef").and_then(Value::as_object_mut) {
        set(pr, "parameterNotFoundAction", json!("Deny"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_defaults() {
        let mut w = json!({"webhooks": [{"name": "a.b.c", "rules": [{}],
            "clientConfig": {"service": {"name": "s", "namespace": "n"}}}]});
        mutating_webhook_configuration(&mut w);
        let h = &w["webhooks"][0];
        assert_eq!(h["failurePolicy"], "Fail");
        assert_eq!(h["reinvocationPolicy"], "Never");
        assert_eq!(h["timeoutSeconds"], 10);
        assert_eq!(h["rules"][0]["scope"], "*");
        assert_eq!(h["clientConfig"]["service"]["port"], 443);
    }
}
