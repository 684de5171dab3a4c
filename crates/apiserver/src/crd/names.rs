//! Name acceptance and the NamesAccepted / Established conditions, as
//! upstream's NamingConditionController and EstablishingController decide
//! them: a CRD's requested names are accepted unless another CRD of the
//! same group has accepted them already (`"x" is already in use`, with the
//! reasons PluralConflict, SingularConflict, ShortNamesConflict,
//! KindConflict, ListKindConflict), and a CRD whose names are accepted is
//! Established (`InitialNamesAccepted`). Both controllers' steps are taken
//! at once here.

use std::collections::HashSet;

use serde_json::{json, Value};

pub use crate::resources::customresourcedefinitions::{
    conditions, is_true, set_condition, Condition,
};

/// Accepted (or requested) names of a CRD, as in `status.acceptedNames`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrdNames {
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub kind: String,
    pub list_kind: String,
    pub categories: Vec<String>,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

impl CrdNames {
    pub fn from_json(v: Option<&Value>) -> CrdNames {
        let Some(v) = v else {
            return CrdNames::default();
        };
        CrdNames {
            plural: text(v, "plural"),
            singular: text(v, "singular"),
            short_names: strings(v.get("shortNames")),
            kind: text(v, "kind"),
            list_kind: text(v, "listKind"),
            categories: strings(v.get("categories")),
        }
    }

    /// As status.acceptedNames is written (empty lists and strings left
    /// out, plural and kind always present).
    pub fn to_json(&self) -> Value {
        let mut out = json!({"plural": self.plural, "kind": self.kind});
        if !self.singular.is_empty() {
            crate::object::set(&mut out, "singular", json!(self.singular));
        }
        if !self.short_names.is_empty() {
            crate::object::set(&mut out, "shortNames", json!(self.short_names));
        }
        if !self.list_kind.is_empty() {
            crate::object::set(&mut out, "listKind", json!(self.list_kind));
        }
        if !self.categories.is_empty() {
            crate::object::set(&mut out, "categories", json!(self.categories));
        }
        out
    }
}

/// The names claimed in a group: resource names and kind names.
#[derive(Debug, Default)]
pub struct Claimed {
    pub resources: HashSet<String>,
    pub kinds: HashSet<String>,
}

impl Claimed {
    pub fn add(&mut self, n: &CrdNames) {
        self.resources.insert(n.plural.clone());
        self.resources.insert(n.singular.clone());
        self.resources.extend(n.short_names.iter().cloned());
        self.kinds.insert(n.kind.clone());
        self.kinds.insert(n.list_kind.clone());
    }
}

fn equal_or_fresh(requested: &str, accepted: &str, used: &HashSet<String>) -> Result<(), String> {
    if requested == accepted || !used.contains(requested) {
        return Ok(());
    }
    Err(format!("{requested:?} is already in use"))
}

/// The new accepted names and the NamesAccepted condition for a CRD whose
/// spec asks for `requested` and whose status holds `accepted`, given the
/// names claimed in its group (its own accepted ones included).
pub fn accept(
    requested: &CrdNames,
    accepted: &CrdNames,
    claimed: &Claimed,
) -> (CrdNames, Condition) {
    let mut new = accepted.clone();
    let mut failure: Option<(&str, String)> = None;
    match equal_or_fresh(&requested.plural, &accepted.plural, &claimed.resources) {
        Ok(()) => new.plural = requested.plural.clone(),
        Err(e) => failure = Some(("PluralConflict", e)),
    }
    match equal_or_fresh(&requested.singular, &accepted.singular, &claimed.resources) {
        Ok(()) => new.singular = requested.singular.clone(),
        Err(e) => failure = Some(("SingularConflict", e)),
    }
    if requested.short_names != accepted.short_names {
        let errors: Vec<String> = requested
            .short_names
            .iter()
            .filter(|s| !accepted.short_names.contains(s))
            .filter_map(|s| equal_or_fresh(s, "", &claimed.resources).err())
            .collect();
        if errors.is_empty() {
            new.short_names = requested.short_names.clone();
        } else {
            // utilerrors.NewAggregate: one message, or `[a, b]`.
            let message = match errors.as_slice() {
                [one] => one.clone(),
                _ => format!("[{}]", errors.join(", ")),
            };
            failure = Some(("ShortNamesConflict", message));
        }
    }
    match equal_or_fresh(&requested.kind, &accepted.kind, &claimed.kinds) {
        Ok(()) => new.kind = requested.kind.clone(),
        Err(e) => failure = Some(("KindConflict", e)),
    }
    match equal_or_fresh(&requested.list_kind, &accepted.list_kind, &claimed.kinds) {
        Ok(()) => new.list_kind = requested.list_kind.clone(),
        Err(e) => failure = Some(("ListKindConflict", e)),
    }
    new.categories = requested.categories.clone();
    let condition = match failure {
        Some((reason, message)) => Condition::new("NamesAccepted", "False", reason, &message),
        None => Condition::new("NamesAccepted", "True", "NoConflicts", "no conflicts found"),
    };
    (new, condition)
}

/// The Established condition after the names step: kept once True,
/// True when the names are accepted, else False/NotAccepted.
pub fn established(old: Option<&Condition>, names_accepted: bool) -> Condition {
    match old {
        Some(c) if c.status == "True" => c.clone(),
        _ if names_accepted => Condition::new(
            "Established",
            "True",
            "InitialNamesAccepted",
            "the initial names have been accepted",
        ),
        Some(c) => c.clone(),
        None => Condition::new(
            "Established",
            "False",
            "NotAccepted",
            "not all names are accepted",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(plural: &str, kind: &str, short: &[&str]) -> CrdNames {
        CrdNames {
            plural: plural.into(),
            singular: plural.trim_end_matches('s').into(),
            short_names: short.iter().map(|s| s.to_string()).collect(),
            kind: kind.into(),
            list_kind: format!("{kind}List"),
            categories: Vec::new(),
        }
    }

    #[test]
    fn names_claimed_in_the_group_conflict_as_upstream_words_it() {
        let mut claimed = Claimed::default();
        claimed.add(&names("crontabs", "CronTab", &["ct"]));
        let fresh = CrdNames::default();
        let (accepted, c) = accept(&names("widgets", "Widget", &["w"]), &fresh, &claimed);
        assert_eq!((c.status, c.reason.as_str()), ("True", "NoConflicts"));
        assert_eq!(accepted.plural, "widgets");
        let (accepted, c) = accept(
            &names("gadgets", "Gadget", &["ct", "crontabs"]),
            &fresh,
            &claimed,
        );
        assert_eq!(
            (c.status, c.reason.as_str()),
            ("False", "ShortNamesConflict")
        );
        assert_eq!(
            c.message,
            "[\"ct\" is already in use, \"crontabs\" is already in use]"
        );
        assert!(accepted.short_names.is_empty());
        assert_eq!(accepted.plural, "gadgets");
        let mut plural_only = names("crontabs", "Other", &[]);
        plural_only.singular = "other".into();
        let (_, c) = accept(&plural_only, &fresh, &claimed);
        assert_eq!(
            (c.reason.as_str(), c.message.as_str()),
            ("PluralConflict", "\"crontabs\" is already in use")
        );
        // The last conflicting name checked is the one reported.
        let (_, c) = accept(&names("crontabs", "Other", &[]), &fresh, &claimed);
        assert_eq!(c.reason, "SingularConflict");
        // A CRD keeps the names it accepted before.
        let mine = names("crontabs", "CronTab", &["ct"]);
        let (_, c) = accept(&mine, &mine, &claimed);
        assert_eq!(c.status, "True");
        let est = established(None, false);
        assert_eq!((est.status, est.reason.as_str()), ("False", "NotAccepted"));
        let est = established(Some(&est), true);
        assert_eq!(
            (est.status, est.reason.as_str()),
            ("True", "InitialNamesAccepted")
        );
    }

    #[test]
    fn conditions_keep_their_transition_time_while_the_status_stays() {
        let mut crd = json!({});
        let c = Condition::new("Established", "True", "A", "a");
        assert!(set_condition(&mut crd, &c));
        assert!(!set_condition(&mut crd, &c));
        crd["status"]["conditions"][0]["lastTransitionTime"] = json!("then");
        assert!(set_condition(
            &mut crd,
            &Condition::new("Established", "True", "B", "b")
        ));
        assert_eq!(crd["status"]["conditions"][0]["lastTransitionTime"], "then");
        assert!(set_condition(
            &mut crd,
            &Condition::new("Established", "False", "B", "b")
        ));
        assert_ne!(crd["status"]["conditions"][0]["lastTransitionTime"], "then");
        assert!(is_true(
            &json!({"status": {"conditions": [{"type": "Established", "status": "True"}]}}),
            "Established"
        ));
    }
}
