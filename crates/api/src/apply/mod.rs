//! Server-side apply (`application/apply-patch+yaml`) and field ownership
//! (`metadata.managedFields`) on wire-form objects, after
//! sigs.k8s.io/structured-merge-diff (`merge/update.go`) and the field
//! manager of k8s.io/apimachinery (`util/managedfields`).
//!
//! - [`fields_of`]: the fields an object sets, as a [`FieldSet`] (written
//!   as upstream's `FieldsV1`).
//! - [`apply`]: merges an applied configuration into the live object. Fields
//!   the configuration would change that another manager owns are
//!   conflicts ([`ApplyError::Conflicts`], 409) unless forced, which takes
//!   them over. Fields the applier applied last time, left out now and
//!   owned by nobody else are removed. The applier's `Apply` entry becomes
//!   exactly the configuration's fields.
//! - [`record_update`]: ownership after a create, update or non-apply
//!   patch: the writer's `Update` entry takes every field it changed, which
//!   the other managers lose.
//!
//! Managers are told apart as upstream: by name, operation and
//! subresource, and for `Update` also by apiVersion. So a manager's own
//! `Update` entry can conflict with its apply.
//!
//! Fields nobody owns: `apiVersion`, `kind`, `metadata` itself and
//! `metadata.{name, namespace, uid, resourceVersion, generation,
//! creationTimestamp, managedFields, deletionTimestamp,
//! deletionGracePeriodSeconds, selfLink}`.
//!
//! Not modelled: the 10-`Update`-manager cap (`ancient-changes`), the
//! `last-applied-configuration` annotation of client-side apply, status
//! reset fields, and apiVersion conversion of other managers' sets.

mod compare;
mod error;
mod fieldset;
mod managed;
mod merge;
mod path;
mod schema;
pub use schema::{list_extensions, ListExtension};
#[cfg(test)]
mod tests;
mod walk;

use serde_json::{Map, Value};

pub use error::{ApplyError, Conflict};
pub use fieldset::FieldSet;
pub use path::{path_string, Path, PathElement};

use error::{check_config, invalid};
use managed::{Entry, Operation};
use schema::Shape;

/// The `Update` manager upstream gives the fields of an object that has no
/// managedFields when it is first applied to.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// The paths nobody owns (upstream `stripMetaManager`, plus the deletion
/// fields).
fn unowned() -> FieldSet {
    let mut set = FieldSet::new();
    for name in ["apiVersion", "kind", "metadata"] {
        set.insert(&[PathElement::Field(name.to_owned())]);
    }
    for name in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "managedFields",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
        "clusterName",
    ] {
        let path = [
            PathElement::Field("metadata".into()),
            PathElement::Field(name.into()),
        ];
        set.insert(&path);
    }
    set
}

/// The fields `obj` (an applied configuration, or a created object of
/// `kind`) sets, without the fields nobody owns. Elements of keyed lists
/// that lack every key are skipped.
pub fn fields_of(kind: &str, obj: &Value) -> FieldSet {
    walk::field_set(obj, schema::root(kind), true, &mut Vec::new()).difference(&unowned())
}

/// Server-side apply of `applied` (wire form, decoded from YAML) by
/// `manager` to `live` (`None`: the object doesn't exist yet). Returns the
/// new object with its managedFields; `now` (RFC 3339) stamps the
/// applier's entry when the object changes. An apply that changes nothing
/// returns `live` as it was, ownership changes aside.
pub fn apply(
    kind: &str,
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    api_version: &str,
    force: bool,
    now: &str,
) -> Result<Value, ApplyError> {
    check_config(applied, api_version)?;
    let shape = schema::root(kind);
    let mut errors = Vec::new();
    let full_set = walk::field_set(applied, shape, false, &mut errors);
    if !errors.is_empty() {
        let what = format!("failed to create typed patch object ({api_version}, Kind={kind})");
        return Err(invalid(&what, errors));
    }
    let mut applier = Entry::new(manager, Operation::Apply, api_version);
    applier.fields = full_set.difference(&unowned());

    let Some(live) = live else {
        let object = merge_config(&Value::Object(Map::new()), applied, shape)?;
        applier.time = Some(now.to_owned());
        return Ok(managed::with(object, vec![applier]));
    };
    let mut entries = managed::decode(managed::raw(live))
        .map_err(|e| ApplyError::Invalid(format!("failed to decode managed fields: {e}")))?;
    let live = managed::without(live);
    if entries.is_empty() {
        let before = Entry::new(BEFORE_FIRST_APPLY, Operation::Update, api_version);
        entries = update_entries(
            Vec::new(),
            &create_base(&live, shape),
            &live,
            before,
            now,
            shape,
        );
    }
    let last = entries
        .iter()
        .position(|e| e.same_manager(&applier))
        .map(|i| entries.remove(i));

    let mut merged = merge_config(&live, applied, shape)?;
    if let Some(last) = &last {
        // Upstream `prune`: what the applier applied last time, applies no
        // more and no manager claims (named fields leading to claimed
        // fields count as claimed). `metadata` itself and the fields
        // nobody owns always stay.
        let claimed = entries
            .iter()
            .fold(full_set, |all, e| all.union(&e.fields))
            .with_named_fields_as_members();
        let gone = last
            .fields
            .with_named_fields_as_members()
            .difference(&claimed)
            .difference(&unowned());
        walk::remove_items(&mut merged, &gone, shape);
    }

    let cmp = compare::compare(&live, &merged, shape);
    let changed = cmp.changed();
    let mut conflicts = Vec::new();
    let mut owners: Vec<&Entry> = entries.iter().collect();
    owners.sort_by_key(|e| e.identifier());
    for entry in owners {
        for path in entry.fields.intersection(&changed).paths() {
            conflicts.push(Conflict {
                manager: entry.manager.clone(),
                operation: entry.operation.as_str().to_owned(),
                api_version: match entry.operation {
                    Operation::Update => entry.api_version.clone(),
                    Operation::Apply => String::new(),
                },
                subresource: entry.subresource.clone(),
                field_path: path_string(&path),
            });
        }
    }
    if !force && !conflicts.is_empty() {
        return Err(ApplyError::Conflicts(conflicts));
    }
    for entry in &mut entries {
        entry.fields = entry.fields.difference(&changed).difference(&cmp.removed);
    }
    let object = if merged == live {
        applier.time = last.and_then(|l| l.time);
        live
    } else {
        applier.time = Some(now.to_owned());
        merged
    };
    entries.push(applier);
    Ok(managed::with(object, entries))
}

/// The managedFields a write without a field manager stores, as
/// upstream's field manager decides them (`decodeLiveOrNew`): those sent
/// in `new` when they decode (`[]` or `[{}]` clears them), else the
/// stored ones of `old` (none for a create). Entries that do not decode
/// are never stored, so a later apply can always read them.
pub fn keep_decodable_managed_fields(old: Option<&Value>, new: Value) -> Value {
    let provided = managed::raw(&new);
    // Absent, or as stored (every write keeps the list it had): nothing
    // to decode on the hot path of status updates.
    if provided.is_none() || provided == old.and_then(managed::raw) {
        return new;
    }
    if !managed::is_reset(provided) && managed::decode(provided).is_ok() {
        return new;
    }
    let mut new = managed::without(&new);
    if managed::is_reset(provided) {
        return new;
    }
    let kept = old
        .and_then(managed::raw)
        .filter(|list| managed::decode(Some(list)).is_ok())
        .cloned();
    if let (Some(list), Some(meta)) = (kept, new.get_mut("metadata").and_then(Value::as_object_mut))
    {
        meta.insert("managedFields".into(), list);
    }
    new
}

/// Records a create (`old` is `None`), update or non-apply patch of an
/// object of `kind` by `manager` (operation `Update`) and returns `new`
/// with its managedFields. Valid managedFields sent in `new` replace the
/// stored ones (`[]` clears them), as upstream. An existing object with no
/// managedFields is left untracked.
pub fn record_update(
    kind: &str,
    old: Option<&Value>,
    new: &Value,
    manager: &str,
    api_version: &str,
    now: &str,
) -> Value {
    let provided = managed::raw(new);
    let stored = || {
        old.and_then(|o| managed::decode(managed::raw(o)).ok())
            .unwrap_or_default()
    };
    let entries = if managed::is_reset(provided) {
        Vec::new()
    } else {
        match managed::decode(provided) {
            Ok(entries) if !entries.is_empty() => entries,
            _ => stored(),
        }
    };
    let new = managed::without(new);
    let has_uid = |o: &Value| {
        o.pointer("/metadata/uid")
            .and_then(Value::as_str)
            .is_some_and(|uid| !uid.is_empty())
    };
    if entries.is_empty() && old.is_some_and(has_uid) {
        return new;
    }
    let shape = schema::root(kind);
    let base = old.map_or_else(|| create_base(&new, shape), managed::without);
    let updater = Entry::new(manager, Operation::Update, api_version);
    let entries = update_entries(entries, &base, &new, updater, now, shape);
    managed::with(new, entries)
}

/// Upstream `Updater.Update` and `managedFieldsUpdater.Update`: every
/// manager loses the fields that changed or went; `updater` gains the
/// changed ones (stamped `now`) if there are any.
fn update_entries(
    mut entries: Vec<Entry>,
    old: &Value,
    new: &Value,
    mut updater: Entry,
    now: &str,
    shape: Shape,
) -> Vec<Entry> {
    let cmp = compare::compare(old, new, shape);
    let changed = cmp.changed();
    for entry in &mut entries {
        entry.fields = entry.fields.difference(&changed).difference(&cmp.removed);
    }
    let taken = changed.difference(&unowned());
    if !taken.is_empty() {
        let previous = entries.iter().position(|e| e.same_manager(&updater));
        updater.fields = match previous.map(|i| entries.remove(i)) {
            Some(previous) => taken.union(&previous.fields),
            None => taken,
        };
        updater.time = Some(now.to_owned());
        entries.push(updater);
    }
    entries
}

/// What a create is compared with: upstream starts from the kind's zero Go
/// object, where struct fields (`spec`, `status`, a pod template and its
/// `metadata` and `spec`) exist and `containers` is null, so that they are
/// not "added" themselves, while maps, other lists and pointers are absent.
fn create_base(new: &Value, shape: Shape) -> Value {
    let mut base = Map::new();
    for name in ["spec", "status"] {
        if let Some(value) = new.get(name).filter(|v| v.is_object()) {
            let shape = match shape {
                Shape::Map(schema) => schema::lookup(schema, name),
                _ => Shape::Deduced,
            };
            base.insert(name.to_owned(), skeleton(value, shape));
        }
    }
    Value::Object(base)
}

/// The struct fields of `value` listed in its schema, empty.
fn skeleton(value: &Value, shape: Shape) -> Value {
    let mut out = Map::new();
    if let (Shape::Map(schema), Some(map)) = (shape, value.as_object()) {
        for (name, child) in map {
            match schema::lookup(schema, name) {
                Shape::Map(inner) if child.is_object() => {
                    out.insert(name.clone(), skeleton(child, Shape::Map(inner)));
                }
                Shape::Keyed(..) if name == "containers" => {
                    out.insert(name.clone(), Value::Null);
                }
                _ => {}
            }
        }
    }
    Value::Object(out)
}

fn merge_config(live: &Value, applied: &Value, shape: Shape) -> Result<Value, ApplyError> {
    merge::merge(live, applied, shape).map_err(|errors| invalid("failed to merge config", errors))
}
