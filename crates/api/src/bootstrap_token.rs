//! Bootstrap tokens, upstream's `bootstrap.kubernetes.io/token` Secrets
//! in kube-system (`k8s.io/cluster-bootstrap`): the token's form
//! (`[a-z0-9]{6}.[a-z0-9]{16}`, an id and a secret), the Secret's name
//! (`bootstrap-token-<id>`) and keys, and what a stored Secret says: who
//! the token authenticates as (`system:bootstrap:<id>` in
//! `system:bootstrappers` and its `auth-extra-groups`), whether it is
//! expired, and what it may be used for.
//!
//! Pure: it reads and builds Secrets in their wire form
//! (`serde_json::Value`, `data` in base64), never stores or fetches them.
//! The authenticator (`skiff-apiserver`'s `authn::bootstrap`), the token
//! cleaner and `skiff token` share it.

use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

/// The namespace of every bootstrap token Secret.
pub const NAMESPACE: &str = "kube-system";
/// The prefix of a token Secret's name; the token's id follows.
pub const SECRET_PREFIX: &str = "bootstrap-token-";
/// The Secret type.
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// The prefix of the user a token authenticates as.
pub const USER_PREFIX: &str = "system:bootstrap:";
/// The group every bootstrap token is in.
pub const GROUP: &str = "system:bootstrappers";

/// The Secret's keys.
pub const KEY_ID: &str = "token-id";
pub const KEY_SECRET: &str = "token-secret";
pub const KEY_EXPIRATION: &str = "expiration";
pub const KEY_DESCRIPTION: &str = "description";
pub const KEY_EXTRA_GROUPS: &str = "auth-extra-groups";
pub const KEY_USAGE_PREFIX: &str = "usage-bootstrap-";
pub const USAGE_AUTHENTICATION: &str = "authentication";
pub const USAGE_SIGNING: &str = "signing";

/// Why a token or a Secret is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Not `[a-z0-9]{6}.[a-z0-9]{16}`.
    #[error("the bootstrap token {0:?} was not of the form \"[a-z0-9]{{6}}.[a-z0-9]{{16}}\"")]
    Form(String),
    /// An `auth-extra-groups` entry outside `system:bootstrappers:`.
    #[error("bootstrap group {0:?} is invalid (must match system:bootstrappers:[a-z0-9:-]{{0,255}}[a-z0-9])")]
    Group(String),
}

/// A token: its public id and its secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    pub id: String,
    pub secret: String,
}

impl std::fmt::Debug for Token {
    // The secret never goes into a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

impl Token {
    /// Parses `id.secret`.
    pub fn parse(text: &str) -> Result<Self, Error> {
        // Never a character of the secret in the message.
        let form = || {
            let id: String = text
                .split('.')
                .next()
                .unwrap_or("")
                .chars()
                .take(6)
                .collect();
            Error::Form(format!("{id}..."))
        };
        let (id, secret) = text.split_once('.').ok_or_else(form)?;
        if id.len() != 6
            || secret.len() != 16
            || !id.chars().all(is_token_char)
            || !secret.chars().all(is_token_char)
        {
            return Err(form());
        }
        Ok(Token {
            id: id.into(),
            secret: secret.into(),
        })
    }

    /// A new random token (`random` gives bytes: the caller's source).
    pub fn generate(mut random: impl FnMut() -> u8) -> Self {
        const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
        let mut pick = |n: usize| -> String {
            (0..n)
                .map(|_| {
                    // Rejection sampling keeps every character equally likely.
                    loop {
                        let b = random() as usize;
                        if b < 252 {
                            return ALPHABET.get(b % 36).copied().unwrap_or(b'0') as char;
                        }
                    }
                })
                .collect()
        };
        let id = pick(6);
        let secret = pick(16);
        Token { id, secret }
    }

    /// `id.secret`.
    pub fn text(&self) -> String {
        format!("{}.{}", self.id, self.secret)
    }

    /// The name of its Secret.
    pub fn secret_name(&self) -> String {
        format!("{SECRET_PREFIX}{}", self.id)
    }
}

/// What a new token's Secret says besides the token.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// When it stops authenticating (and the token cleaner deletes it).
    pub expiration: Option<DateTime<Utc>>,
    pub description: Option<String>,
    /// Usages (`authentication`, `signing`).
    pub usages: Vec<String>,
    /// More groups, each `system:bootstrappers:...`.
    pub extra_groups: Vec<String>,
}

/// The Secret (wire form, `data` base64) of `token`.
pub fn secret(token: &Token, options: &Options) -> Result<Value, Error> {
    for group in &options.extra_groups {
        validate_group(group)?;
    }
    let b64 = |s: &str| Value::String(base64::engine::general_purpose::STANDARD.encode(s));
    let mut data = Map::new();
    data.insert(KEY_ID.into(), b64(&token.id));
    data.insert(KEY_SECRET.into(), b64(&token.secret));
    if let Some(at) = options.expiration {
        data.insert(
            KEY_EXPIRATION.into(),
            b64(&at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        );
    }
    if let Some(d) = &options.description {
        data.insert(KEY_DESCRIPTION.into(), b64(d));
    }
    for usage in &options.usages {
        data.insert(format!("{KEY_USAGE_PREFIX}{usage}"), b64("true"));
    }
    if !options.extra_groups.is_empty() {
        data.insert(
            KEY_EXTRA_GROUPS.into(),
            b64(&options.extra_groups.join(",")),
        );
    }
    Ok(json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": token.secret_name(), "namespace": NAMESPACE},
        "type": SECRET_TYPE,
        "data": data,
    }))
}

/// One key of a Secret, decoded: its `stringData` wins over its `data`
/// (base64), as upstream merges a write's `stringData` over `data`.
pub fn data(secret: &Value, key: &str) -> Option<String> {
    if let Some(text) = secret
        .pointer(&format!("/stringData/{key}"))
        .and_then(Value::as_str)
    {
        return Some(text.to_string());
    }
    let encoded = secret
        .pointer(&format!("/data/{key}"))
        .and_then(Value::as_str)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// The expiration a Secret states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiration {
    /// No `expiration` key.
    Never,
    At(DateTime<Utc>),
    /// Not RFC 3339 (upstream treats that as expired).
    Unreadable,
}

/// The Secret's [`Expiration`].
pub fn expiration(secret: &Value) -> Expiration {
    match data(secret, KEY_EXPIRATION) {
        // Empty is no expiration, as upstream's GetExpiration.
        None => Expiration::Never,
        Some(text) if text.is_empty() => Expiration::Never,
        Some(text) => DateTime::parse_from_rfc3339(&text).map_or(Expiration::Unreadable, |t| {
            Expiration::At(t.with_timezone(&Utc))
        }),
    }
}

/// Whether the Secret's token has expired at `now` (an unreadable
/// expiration counts as expired, as upstream's `HasExpired`).
pub fn has_expired(secret: &Value, now: DateTime<Utc>) -> bool {
    match expiration(secret) {
        Expiration::At(at) => at <= now,
        Expiration::Never => false,
        Expiration::Unreadable => true,
    }
}

/// Whether the Secret marks `usage` (`usage-bootstrap-<usage>: "true"`).
pub fn has_usage(secret: &Value, usage: &str) -> bool {
    data(secret, &format!("{KEY_USAGE_PREFIX}{usage}")).as_deref() == Some("true")
}

/// The usages a Secret marks, in key order.
pub fn usages(secret: &Value) -> Vec<String> {
    let mut found: Vec<String> = secret
        .get("data")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|d| d.keys())
        .chain(
            secret
                .get("stringData")
                .and_then(Value::as_object)
                .into_iter()
                .flat_map(|d| d.keys()),
        )
        .filter_map(|k| k.strip_prefix(KEY_USAGE_PREFIX))
        .filter(|u| has_usage(secret, u))
        .map(String::from)
        .collect();
    found.sort();
    found.dedup();
    found
}

/// A group `auth-extra-groups` may name:
/// `system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]`.
pub fn validate_group(group: &str) -> Result<(), Error> {
    let bad = || Error::Group(group.to_string());
    let rest = group
        .strip_prefix("system:bootstrappers:")
        .ok_or_else(bad)?;
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let last_ok = rest.chars().last().is_some_and(ok_char);
    let middle_ok = rest.len() <= 256 && rest.chars().all(|c| ok_char(c) || c == ':' || c == '-');
    if last_ok && middle_ok {
        Ok(())
    } else {
        Err(bad())
    }
}

/// The groups the Secret's token is in, as upstream's `GetGroups`:
/// `system:bootstrappers` and each `auth-extra-groups` entry (split on
/// `,` as written; any invalid entry fails the whole), sorted, no
/// repeats.
pub fn groups(secret: &Value) -> Result<Vec<String>, Error> {
    let mut groups = std::collections::BTreeSet::from([GROUP.to_string()]);
    match data(secret, KEY_EXTRA_GROUPS) {
        None => {}
        Some(extra) if extra.is_empty() => {}
        Some(extra) => {
            for group in extra.split(',') {
                validate_group(group)?;
                groups.insert(group.to_string());
            }
        }
    }
    Ok(groups.into_iter().collect())
}

/// Why a presented token does not authenticate, in upstream's words (the
/// authenticator logs it; the client sees only 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("is deleted and awaiting removal")]
    Deleted,
    #[error("has invalid type, expected {SECRET_TYPE}.")]
    Type,
    #[error("has invalid value for key {KEY_SECRET}.")]
    Secret,
    #[error("has invalid value for key {KEY_ID}.")]
    Id,
    #[error("has expired.")]
    Expired,
    #[error("not marked {KEY_USAGE_PREFIX}{USAGE_AUTHENTICATION}=true.")]
    NotForAuthentication,
    #[error("has invalid value for key {KEY_EXTRA_GROUPS}: {0}.")]
    Groups(Error),
}

/// Who `token` authenticates as, given its stored Secret at `now`: the
/// user name and groups, or why not. The secret is compared in constant
/// time.
pub fn authenticate(
    token: &Token,
    secret: &Value,
    now: DateTime<Utc>,
) -> Result<(String, Vec<String>), Refusal> {
    if secret
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
    {
        return Err(Refusal::Deleted);
    }
    if secret.get("type").and_then(Value::as_str) != Some(SECRET_TYPE) {
        return Err(Refusal::Type);
    }
    let stored = data(secret, KEY_SECRET).unwrap_or_default();
    if !equal_in_constant_time(stored.as_bytes(), token.secret.as_bytes()) {
        return Err(Refusal::Secret);
    }
    if data(secret, KEY_ID).as_deref() != Some(token.id.as_str()) {
        return Err(Refusal::Id);
    }
    if has_expired(secret, now) {
        return Err(Refusal::Expired);
    }
    if !has_usage(secret, USAGE_AUTHENTICATION) {
        return Err(Refusal::NotForAuthentication);
    }
    let groups = groups(secret).map_err(Refusal::Groups)?;
    Ok((format!("{USER_PREFIX}{}", token.id), groups))
}

/// Whether two byte strings are equal, in a time that depends only on
/// their lengths (a token's length is public: it is fixed).
fn equal_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> Token {
        Token::parse("abcdef.0123456789abcdef").unwrap()
    }

    fn stored(options: &Options) -> Value {
        secret(&token(), options).unwrap()
    }

    fn auth_only() -> Options {
        Options {
            usages: vec![USAGE_AUTHENTICATION.into(), USAGE_SIGNING.into()],
            ..Options::default()
        }
    }

    #[test]
    fn tokens_parse_only_in_upstream_form() {
        assert_eq!(token().id, "abcdef");
        assert_eq!(token().text(), "abcdef.0123456789abcdef");
        assert_eq!(token().secret_name(), "bootstrap-token-abcdef");
        for bad in [
            "",
            "abcdef",
            "abcdef.",
            "ABCDEF.0123456789abcdef",
            "abcde.0123456789abcdef",
            "abcdef.0123456789abcdeF",
            "abcdef.0123456789abcdef0",
            "abcdef:0123456789abcdef",
            "abcdef.0123456789abcde.",
        ] {
            assert!(Token::parse(bad).is_err(), "{bad}");
        }
        let err = Token::parse("ABCDEFsecretsecret").unwrap_err().to_string();
        assert!(!err.contains("secretsecret"), "{err}");
        assert!(!format!("{:?}", token()).contains("0123456789abcdef"));
    }

    #[test]
    fn generated_tokens_parse() {
        let mut n = 0u8;
        let t = Token::generate(|| {
            n = n.wrapping_add(37);
            n
        });
        assert_eq!(Token::parse(&t.text()).unwrap(), t);
    }

    #[test]
    fn the_secret_authenticates_as_upstream() {
        let now = Utc::now();
        let s = stored(&Options {
            extra_groups: vec!["system:bootstrappers:worker".into()],
            expiration: Some(now + chrono::Duration::hours(1)),
            ..auth_only()
        });
        assert_eq!(s["type"], SECRET_TYPE);
        assert_eq!(s["metadata"]["name"], "bootstrap-token-abcdef");
        assert_eq!(
            authenticate(&token(), &s, now).unwrap(),
            (
                "system:bootstrap:abcdef".to_string(),
                vec![
                    "system:bootstrappers".to_string(),
                    "system:bootstrappers:worker".to_string()
                ]
            )
        );
        assert_eq!(usages(&s), vec!["authentication", "signing"]);
    }

    #[test]
    fn refusals() {
        let now = Utc::now();
        let good = stored(&auth_only());
        let wrong = Token::parse("abcdef.0123456789abcdeg").unwrap();
        assert_eq!(authenticate(&wrong, &good, now), Err(Refusal::Secret));

        let expired = stored(&Options {
            expiration: Some(now - chrono::Duration::seconds(1)),
            ..auth_only()
        });
        assert_eq!(authenticate(&token(), &expired, now), Err(Refusal::Expired));

        let mut unreadable = good.clone();
        unreadable["data"][KEY_EXPIRATION] = json!("bm90IGEgZGF0ZQ==");
        assert_eq!(
            authenticate(&token(), &unreadable, now),
            Err(Refusal::Expired)
        );

        let signing_only = stored(&Options {
            usages: vec![USAGE_SIGNING.into()],
            ..Options::default()
        });
        assert_eq!(
            authenticate(&token(), &signing_only, now),
            Err(Refusal::NotForAuthentication)
        );

        let mut opaque = good.clone();
        opaque["type"] = json!("Opaque");
        assert_eq!(authenticate(&token(), &opaque, now), Err(Refusal::Type));

        let mut deleting = good.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(
            authenticate(&token(), &deleting, now),
            Err(Refusal::Deleted)
        );

        let mut other_id = good.clone();
        other_id["data"][KEY_ID] = json!("enl6enl6");
        assert_eq!(authenticate(&token(), &other_id, now), Err(Refusal::Id));

        let mut bad_group = good.clone();
        bad_group["data"][KEY_EXTRA_GROUPS] = json!("c3lzdGVtOm1hc3RlcnM="); // system:masters
        assert!(matches!(
            authenticate(&token(), &bad_group, now),
            Err(Refusal::Groups(_))
        ));

        // stringData (as a Secret written but not yet normalised) reads too.
        let plain = json!({
            "type": SECRET_TYPE,
            "stringData": {
                "token-id": "abcdef",
                "token-secret": "0123456789abcdef",
                "usage-bootstrap-authentication": "true",
            }
        });
        assert!(authenticate(&token(), &plain, now).is_ok());
    }

    #[test]
    fn upstream_details() {
        let now = Utc::now();
        // stringData, written later, wins over data.
        let mut revoked = stored(&auth_only());
        revoked["stringData"] = json!({ KEY_SECRET: "ffffffffffffffff" });
        assert_eq!(authenticate(&token(), &revoked, now), Err(Refusal::Secret));
        // An empty expiration never expires.
        let mut empty = stored(&auth_only());
        empty["data"][KEY_EXPIRATION] = json!("");
        assert_eq!(expiration(&empty), Expiration::Never);
        // Extra groups: sorted, no repeats, not trimmed.
        let mut extra = stored(&auth_only());
        extra["stringData"] = json!({
            KEY_EXTRA_GROUPS: "system:bootstrappers:b,system:bootstrappers:a,system:bootstrappers:b"
        });
        assert_eq!(
            groups(&extra).unwrap(),
            vec![
                "system:bootstrappers",
                "system:bootstrappers:a",
                "system:bootstrappers:b"
            ]
        );
        extra["stringData"] =
            json!({ KEY_EXTRA_GROUPS: "system:bootstrappers:a, system:bootstrappers:b" });
        assert!(groups(&extra).is_err());
    }

    #[test]
    fn groups_are_checked() {
        assert!(validate_group("system:bootstrappers:a").is_ok());
        assert!(validate_group("system:bootstrappers:kubeadm:default-node-token").is_ok());
        assert!(validate_group("system:bootstrappers:").is_err());
        assert!(validate_group("system:bootstrappers:a-").is_err());
        assert!(validate_group("system:bootstrappers:A").is_err());
        assert!(validate_group("system:masters").is_err());
        assert!(secret(
            &token(),
            &Options {
                extra_groups: vec!["system:masters".into()],
                ..Options::default()
            }
        )
        .is_err());
    }
}
