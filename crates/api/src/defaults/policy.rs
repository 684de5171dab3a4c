//! Defaults of the policy kinds (upstream `SetDefaults_PriorityClass`
//! and `SetDefaults_LimitRangeItem`): a PriorityClass preempts lower
//! priorities unless told otherwise; a LimitRange's Container item gets
//! its default limit from max and its default request from the default
//! limit, else from min.

use serde_json::{json, Map, Value};

/// PriorityClass defaults.
pub fn priority_class(obj: &mut Value) {
    if let Some(o) = obj.as_object_mut() {
        o.entry("preemptionPolicy")
            .or_insert_with(|| json!("PreemptLowerPriority"));
    }
}

fn fill_from(item: &mut Map<String, Value>, to: &str, from: &str) {
    let Some(source) = item.get(from).and_then(Value::as_object).cloned() else {
        return;
    };
    let target = item.entry(to).or_insert_with(|| json!({}));
    if let Some(t) = target.as_object_mut() {
        for (k, v) in source {
            t.entry(k).or_insert(v);
        }
    }
}

/// LimitRange defaults.
pub fn limit_range(obj: &mut Value) {
    let Some(limits) = obj
        .pointer_mut("/spec/limits")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for item in limits.iter_mut().filter_map(Value::as_object_mut) {
        if item.get("type").and_then(Value::as_str) != Some("Container") {
            continue;
        }
        fill_from(item, "default", "max");
        fill_from(item, "defaultRequest", "default");
        fill_from(item, "defaultRequest", "min");
        for field in ["default", "defaultRequest"] {
            if item
                .get(field)
                .and_then(Value::as_object)
                .is_some_and(Map::is_empty)
            {
                item.remove(field);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_limits_default_from_max_and_min() {
        let mut lr = json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}, "min": {"memory": "10Mi"}}]}});
        limit_range(&mut lr);
        let item = &lr["spec"]["limits"][0];
        assert_eq!(item["default"], json!({"cpu": "1"}));
        assert_eq!(
            item["defaultRequest"],
            json!({"cpu": "1", "memory": "10Mi"})
        );
    }
}
