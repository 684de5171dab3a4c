//! Service-account tokens on the server side: the signing key under
//! `<data-dir>/pki` (`sa.key`, PKCS#8 P-256, and `sa.pub`, created on first
//! start), issuing bound tokens (TokenRequest, `crate::handlers`), and
//! authenticating them: bound tokens (upstream's
//! `pkg/serviceaccount/claims.go` validator) and legacy Secret-based ones.
//!
//! A token is accepted when its ES256 signature verifies with one of the
//! keys, it is inside its time window (60 s leeway, as upstream), one of
//! its audiences is one asked for (the API audience for a request), and
//! the objects it names still exist with the same UIDs: its ServiceAccount,
//! the Pod or Secret it is bound to (and the Node, when bound to one), or
//! for a legacy token its Secret, still holding this token. The objects
//! are looked up in the watch caches, never in the store; a pod deleted
//! more than 60 s ago (deletionTimestamp) no longer authenticates, as
//! upstream.
//!
//! Verified signatures are cached by token (a verification costs ~70 µs,
//! a lookup well under 1 µs); the existence checks run on every request,
//! each parsing an object only when its cached revision changed.
//!
//! It owns no policy (what a ServiceAccount may do is RBAC's) and writes
//! nothing to the store.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use skiff_api::jwt::{self, Claims, LegacyClaims, PublicKey, Signer};

use super::User;

/// The default issuer, also the API server's audience (upstream's
/// `--service-account-issuer` as kubeadm sets it).
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The group of every service account, and the prefix of a namespace's.
pub const ALL_GROUP: &str = "system:serviceaccounts";

/// Reads an object as the watch caches hold it, by storage key: the
/// revision of its cached version and its JSON (the server wires it to
/// `crate::watchcache::Caches`; authentication sits below the caches).
pub type Lookup = Arc<dyn Fn(&str) -> Option<(i64, bytes::Bytes)> + Send + Sync>;

/// Key files under the PKI dir.
pub const PRIVATE_KEY: &str = "sa.key";
pub const PUBLIC_KEY: &str = "sa.pub";

/// How many verified tokens are remembered before the memo starts again.
const MEMO_LIMIT: usize = 10_000;

/// A pod deleted longer ago than this no longer authenticates its tokens.
const DELETED_POD_GRACE_SECONDS: i64 = 60;

/// Why the keys could not be read or created, or a token not issued.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read or write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("service-account key {path}: {source}")]
    Key {
        path: PathBuf,
        #[source]
        source: jwt::Error,
    },
    #[error("cannot sign a token: {0}")]
    Sign(#[source] jwt::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The signing key: `dir/sa.key`, created (with `dir/sa.pub`) when
/// missing; every public key that verifies (the signer's, and `sa.pub`
/// when it holds another one).
pub fn ensure_keys(dir: &Path) -> Result<(Signer, Vec<PublicKey>)> {
    let key_path = dir.join(PRIVATE_KEY);
    let pub_path = dir.join(PUBLIC_KEY);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    if !key_path.exists() {
        let pem = jwt::generate_private_key_pem().map_err(|source| Error::Key {
            path: key_path.clone(),
            source,
        })?;
        write_file(&key_path, &pem, 0o600)?;
    }
    let signer = load_signer(&key_path)?;
    if !pub_path.exists() {
        write_file(&pub_path, &signer.public().to_pem(), 0o644)?;
    }
    let text = std::fs::read_to_string(&pub_path).map_err(io(&pub_path))?;
    let listed = PublicKey::from_pem(&text).map_err(|source| Error::Key {
        path: pub_path.clone(),
        source,
    })?;
    let mut keys = vec![signer.public().clone()];
    if &listed != signer.public() {
        keys.push(listed);
    }
    Ok((signer, keys))
}

/// Reads a PKCS#8 P-256 private key file (`--service-account-private-key-file`).
pub fn load_signer(path: &Path) -> Result<Signer> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Signer::from_pem(&text).map_err(|source| Error::Key {
        path: path.to_path_buf(),
        source,
    })
}

fn write_file(path: &Path, contents: &str, mode: u32) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(mode)
        .open(path)
        .map_err(io)?;
    file.write_all(contents.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)
}

/// What an accepted token says about its bearer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `system:serviceaccount:NS:NAME` in `system:serviceaccounts` and
    /// `system:serviceaccounts:NS`.
    pub user: User,
    /// The ServiceAccount's UID.
    pub uid: String,
    /// `authentication.kubernetes.io/pod-name`, `pod-uid`, `node-name`,
    /// `node-uid`, `credential-id`.
    pub extra: BTreeMap<String, Vec<String>>,
    /// The audiences asked for that the token is for.
    pub audiences: Vec<String>,
}

/// An object a token names, and the revision of its cached version last
/// found to match.
#[derive(Debug)]
struct Named {
    key: String,
    uid: String,
    /// 0: not checked yet.
    matched: AtomicI64,
    /// A pod: refused some time after its deletion started.
    pod: bool,
    /// A legacy token's Secret must still hold the token itself.
    holds_token: bool,
}

/// A token whose signature verified.
#[derive(Debug)]
struct Verified {
    identity: Identity,
    /// None: audience-agnostic (legacy), valid for the API audiences.
    audiences: Option<Vec<String>>,
    exp: Option<i64>,
    nbf: Option<i64>,
    named: Vec<Named>,
}

/// Issues and authenticates service-account tokens; one per server,
/// shared by the authentication filter, TokenReview and TokenRequest.
pub struct ServiceAccounts {
    signer: Signer,
    keys: Vec<PublicKey>,
    issuer: String,
    api_audiences: Vec<String>,
    lookup: Lookup,
    memo: Mutex<HashMap<String, Arc<Verified>>>,
}

impl std::fmt::Debug for ServiceAccounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccounts")
            .field("issuer", &self.issuer)
            .field(
                "kids",
                &self.keys.iter().map(|k| k.kid()).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// What a new bound token names besides its ServiceAccount.
#[derive(Debug, Clone, Default)]
pub struct Binding {
    pub pod: Option<jwt::Ref>,
    pub secret: Option<jwt::Ref>,
    pub node: Option<jwt::Ref>,
}

/// The current time, Unix seconds.
pub fn unix_now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn key(storage: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("/registry/{storage}/{ns}/{name}"),
        None => format!("/registry/{storage}/{name}"),
    }
}

/// The fields of a named object the checks read.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Checked {
    metadata: CheckedMeta,
    data: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct CheckedMeta {
    uid: String,
    deletion_timestamp: Option<String>,
}

/// A decoded token before its kind is known.
#[derive(Deserialize)]
struct Issuer {
    #[serde(default)]
    iss: String,
}

impl ServiceAccounts {
    /// `issuer` is also the API audience.
    pub fn new(signer: Signer, keys: Vec<PublicKey>, issuer: &str, lookup: Lookup) -> Self {
        ServiceAccounts {
            signer,
            keys,
            issuer: issuer.to_string(),
            api_audiences: vec![issuer.to_string()],
            lookup,
            memo: Mutex::default(),
        }
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The audiences of tokens the API itself accepts.
    pub fn api_audiences(&self) -> &[String] {
        &self.api_audiences
    }

    /// The keys that verify tokens (`/openid/v1/jwks`).
    pub fn keys(&self) -> &[PublicKey] {
        &self.keys
    }

    /// A bound token for ServiceAccount `namespace/name` (UID `uid`), for
    /// `audiences`, valid `seconds` from `now`.
    #[allow(clippy::too_many_arguments)] // the claims' parts, named at the one caller
    pub fn issue(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        audiences: Vec<String>,
        seconds: i64,
        binding: Binding,
        now: i64,
    ) -> Result<(String, i64)> {
        let exp = now.saturating_add(seconds);
        let claims = Claims {
            iss: self.issuer.clone(),
            sub: jwt::subject(namespace, name),
            aud: jwt::Audience::Many(audiences),
            exp: Some(exp),
            iat: Some(now),
            nbf: Some(now),
            jti: Some(uuid::Uuid::new_v4().to_string()),
            kubernetes: Some(jwt::Private {
                namespace: namespace.to_string(),
                serviceaccount: jwt::Ref {
                    name: name.to_string(),
                    uid: uid.to_string(),
                },
                pod: binding.pod,
                secret: binding.secret,
                node: binding.node,
            }),
        };
        let token = self.signer.sign(&claims).map_err(Error::Sign)?;
        Ok((token, exp))
    }

    /// A legacy token for the Secret `secret` of ServiceAccount
    /// `namespace/name`.
    pub fn issue_legacy(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        secret: &str,
    ) -> Result<String> {
        legacy_token(&self.signer, namespace, name, uid, secret)
    }

    /// Authenticates a request's bearer token (for the API audiences).
    pub fn authenticate(&self, token: &str) -> Option<Identity> {
        self.authenticate_at(token, &self.api_audiences, unix_now())
    }

    /// Authenticates `token` for any of `audiences` (empty: the API's) at
    /// `now`: the identity, with the audiences it matched.
    pub fn authenticate_at(&self, token: &str, audiences: &[String], now: i64) -> Option<Identity> {
        let audiences = if audiences.is_empty() {
            &self.api_audiences
        } else {
            audiences
        };
        let verified = self.verified(token)?;
        if verified
            .exp
            .is_some_and(|exp| now > exp + jwt::LEEWAY_SECONDS)
            || verified
                .nbf
                .is_some_and(|nbf| now < nbf - jwt::LEEWAY_SECONDS)
        {
            return None;
        }
        let allowed = verified.audiences.as_ref().unwrap_or(&self.api_audiences);
        let matched: Vec<String> = audiences
            .iter()
            .filter(|a| allowed.contains(a))
            .cloned()
            .collect();
        if matched.is_empty() {
            return None;
        }
        for named in &verified.named {
            if !self.still_there(named, token, now) {
                return None;
            }
        }
        let mut identity = verified.identity.clone();
        identity.audiences = matched;
        Some(identity)
    }

    /// The verified token, from the memo or checked now; `None` for a
    /// token not ours or malformed.
    fn verified(&self, token: &str) -> Option<Arc<Verified>> {
        if let Some(v) = self.memo().get(token) {
            return Some(v.clone());
        }
        let verified = Arc::new(self.verify(token)?);
        let mut memo = self.memo();
        if memo.len() >= MEMO_LIMIT {
            memo.clear();
        }
        memo.insert(token.to_string(), verified.clone());
        Some(verified)
    }

    fn memo(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Verified>>> {
        self.memo.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn verify(&self, token: &str) -> Option<Verified> {
        // The signature first; then which kind of token it is.
        let raw: serde_json::Value = jwt::verify_with(&self.keys, token).ok()?;
        let Issuer { iss } = serde_json::from_value(raw.clone()).ok()?;
        if iss == jwt::LEGACY_ISSUER {
            let claims: LegacyClaims = serde_json::from_value(raw).ok()?;
            return legacy_verified(claims);
        }
        if iss != self.issuer {
            return None;
        }
        let claims: Claims = serde_json::from_value(raw).ok()?;
        bound_verified(claims)
    }

    /// Whether `named` is still in the cache with its UID (and, for a
    /// pod, not deleted long ago; for a legacy Secret, still holding
    /// `token`).
    fn still_there(&self, named: &Named, token: &str, now: i64) -> bool {
        let Some((revision, json)) = (self.lookup)(&named.key) else {
            return false;
        };
        if revision == named.matched.load(Ordering::Relaxed) {
            return true;
        }
        let Ok(checked) = serde_json::from_slice::<Checked>(&json) else {
            return false;
        };
        if !named.uid.is_empty() && checked.metadata.uid != named.uid {
            return false;
        }
        if named.pod {
            if let Some(ts) = &checked.metadata.deletion_timestamp {
                let deleted = chrono::DateTime::parse_from_rfc3339(ts)
                    .map(|t| t.timestamp())
                    .unwrap_or(i64::MIN);
                if deleted < now - DELETED_POD_GRACE_SECONDS {
                    return false;
                }
                // Judged again on each use: time, not a revision, decides.
                return true;
            }
        }
        if named.holds_token {
            use base64::Engine as _;
            let held = checked
                .data
                .as_ref()
                .and_then(|d| d.get("token"))
                .and_then(|t| base64::engine::general_purpose::STANDARD.decode(t).ok());
            if held.as_deref() != Some(token.as_bytes()) {
                return false;
            }
        }
        named.matched.store(revision, Ordering::Relaxed);
        true
    }
}

/// A legacy token signed by `signer` (see [`jwt::legacy_token`]).
pub fn legacy_token(
    signer: &Signer,
    namespace: &str,
    name: &str,
    uid: &str,
    secret: &str,
) -> Result<String> {
    jwt::legacy_token(signer, namespace, name, uid, secret).map_err(Error::Sign)
}

fn user_of(namespace: &str, name: &str) -> User {
    User {
        name: jwt::subject(namespace, name),
        groups: vec![ALL_GROUP.to_string(), format!("{ALL_GROUP}:{namespace}")],
    }
}

fn named(storage: &str, namespace: Option<&str>, r: &jwt::Ref) -> Named {
    Named {
        key: key(storage, namespace, &r.name),
        uid: r.uid.clone(),
        matched: AtomicI64::new(0),
        pod: storage == "pods",
        holds_token: false,
    }
}

fn bound_verified(claims: Claims) -> Option<Verified> {
    let private = claims.kubernetes?;
    let ns = private.namespace.as_str();
    let sa = &private.serviceaccount;
    if ns.is_empty() || sa.name.is_empty() || claims.sub != jwt::subject(ns, &sa.name) {
        return None;
    }
    let mut extra = BTreeMap::new();
    let mut add = |k: &str, v: &str| {
        extra.insert(
            format!("authentication.kubernetes.io/{k}"),
            vec![v.to_string()],
        );
    };
    let mut objects = vec![named("serviceaccounts", Some(ns), sa)];
    if let Some(pod) = &private.pod {
        add("pod-name", &pod.name);
        add("pod-uid", &pod.uid);
        objects.push(named("pods", Some(ns), pod));
    }
    if let Some(secret) = &private.secret {
        objects.push(named("secrets", Some(ns), secret));
    }
    if let Some(node) = &private.node {
        add("node-name", &node.name);
        add("node-uid", &node.uid);
        // A token bound to a pod names its node for information; one bound
        // to the node itself lives as long as the node.
        if private.pod.is_none() && private.secret.is_none() {
            objects.push(named("nodes", None, node));
        }
    }
    if let Some(jti) = &claims.jti {
        add("credential-id", &format!("JTI={jti}"));
    }
    Some(Verified {
        identity: Identity {
            user: user_of(ns, &sa.name),
            uid: sa.uid.clone(),
            extra,
            audiences: Vec::new(),
        },
        audiences: Some(claims.aud.as_slice().to_vec()),
        exp: claims.exp,
        nbf: claims.nbf,
        named: objects,
    })
}

fn legacy_verified(claims: LegacyClaims) -> Option<Verified> {
    let ns = claims.namespace.as_str();
    if ns.is_empty()
        || claims.service_account_name.is_empty()
        || claims.secret_name.is_empty()
        || claims.sub != jwt::subject(ns, &claims.service_account_name)
    {
        return None;
    }
    let sa = jwt::Ref {
        name: claims.service_account_name.clone(),
        uid: claims.service_account_uid.clone(),
    };
    let secret = Named {
        key: key("secrets", Some(ns), &claims.secret_name),
        uid: String::new(),
        matched: AtomicI64::new(0),
        pod: false,
        holds_token: true,
    };
    Some(Verified {
        identity: Identity {
            user: user_of(ns, &sa.name),
            uid: sa.uid.clone(),
            extra: BTreeMap::new(),
            audiences: Vec::new(),
        },
        audiences: None,
        exp: None,
        nbf: None,
        named: vec![named("serviceaccounts", Some(ns), &sa), secret],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watchcache::Caches;
    use serde_json::json;

    const NOW: i64 = 1_700_000_000;

    fn caches() -> Arc<Caches> {
        Arc::new(Caches::new(
            ["serviceaccounts", "pods", "secrets", "nodes"],
            crate::watchcache::FieldsOf(Arc::new(|_| &[])),
        ))
    }

    fn put(caches: &Caches, storage: &str, ns: &str, name: &str, obj: serde_json::Value, rev: i64) {
        let cache = caches.get(storage).unwrap();
        cache.apply_for_test(
            &key(storage, Some(ns), name),
            &serde_json::to_vec(&obj).unwrap(),
            rev,
        );
    }

    fn meta(name: &str, uid: &str) -> serde_json::Value {
        json!({"metadata": {"name": name, "namespace": "ns", "uid": uid}})
    }

    /// What the server wires: the watch caches by storage key.
    fn cache_lookup(caches: Arc<Caches>) -> Lookup {
        Arc::new(move |key: &str| {
            let storage = key.strip_prefix("/registry/")?.split('/').next()?;
            let cached = caches.get(storage)?.get(key)?;
            Some((cached.revision, cached.json()?.clone()))
        })
    }

    fn server(caches: Arc<Caches>) -> ServiceAccounts {
        let signer = Signer::from_pem(&jwt::generate_private_key_pem().unwrap()).unwrap();
        let keys = vec![signer.public().clone()];
        ServiceAccounts::new(signer, keys, DEFAULT_ISSUER, cache_lookup(caches))
    }

    fn pod_binding(uid: &str) -> Binding {
        Binding {
            pod: Some(jwt::Ref {
                name: "p".into(),
                uid: uid.into(),
            }),
            node: Some(jwt::Ref {
                name: "n1".into(),
                uid: "node-uid".into(),
            }),
            secret: None,
        }
    }

    #[test]
    fn keys_are_created_once_and_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let (signer, keys) = ensure_keys(dir.path()).unwrap();
        assert_eq!(keys, vec![signer.public().clone()]);
        let (again, _) = ensure_keys(dir.path()).unwrap();
        assert_eq!(again.public(), signer.public());
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join(PRIVATE_KEY))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_bound_token_names_its_service_account_and_pod() {
        let caches = caches();
        put(
            &caches,
            "serviceaccounts",
            "ns",
            "sa",
            meta("sa", "sa-uid"),
            1,
        );
        put(&caches, "pods", "ns", "p", meta("p", "pod-uid"), 2);
        let sa = server(caches);
        let aud = vec![DEFAULT_ISSUER.to_string()];
        let (token, exp) = sa
            .issue(
                "ns",
                "sa",
                "sa-uid",
                aud.clone(),
                3600,
                pod_binding("pod-uid"),
                NOW,
            )
            .unwrap();
        assert_eq!(exp, NOW + 3600);
        let id = sa.authenticate_at(&token, &[], NOW).unwrap();
        assert_eq!(id.user.name, "system:serviceaccount:ns:sa");
        assert_eq!(
            id.user.groups,
            vec!["system:serviceaccounts", "system:serviceaccounts:ns"]
        );
        assert_eq!(id.uid, "sa-uid");
        assert_eq!(id.audiences, aud);
        assert_eq!(id.extra["authentication.kubernetes.io/pod-name"], ["p"]);
        assert_eq!(
            id.extra["authentication.kubernetes.io/pod-uid"],
            ["pod-uid"]
        );
        assert_eq!(id.extra["authentication.kubernetes.io/node-name"], ["n1"]);
        assert!(id.extra["authentication.kubernetes.io/credential-id"][0].starts_with("JTI="));
        // Twice: the second answer comes from the memo, same identity.
        assert_eq!(sa.authenticate_at(&token, &[], NOW), Some(id));
    }

    #[test]
    fn refused_tokens() {
        let aud = || vec![DEFAULT_ISSUER.to_string()];
        // (case, audiences the token is for, what is cached, time of use,
        // audiences asked for)
        type Setup = fn(&Caches);
        type Case = (&'static str, Vec<String>, Setup, i64, Vec<String>);
        let sa_and_pod: Setup = |c| {
            put(c, "serviceaccounts", "ns", "sa", meta("sa", "sa-uid"), 1);
            put(c, "pods", "ns", "p", meta("p", "pod-uid"), 2);
        };
        let cases: Vec<Case> = vec![
            ("expired", aud(), sa_and_pod, NOW + 3600 + 61, vec![]),
            ("not yet valid", aud(), sa_and_pod, NOW - 61, vec![]),
            (
                "another audience",
                vec!["vault".into()],
                sa_and_pod,
                NOW,
                vec![],
            ),
            (
                "review for another audience",
                aud(),
                sa_and_pod,
                NOW,
                vec!["vault".into()],
            ),
            (
                "service account gone",
                aud(),
                |c| put(c, "pods", "ns", "p", meta("p", "pod-uid"), 2),
                NOW,
                vec![],
            ),
            (
                "service account recreated",
                aud(),
                |c| {
                    put(c, "serviceaccounts", "ns", "sa", meta("sa", "other"), 1);
                    put(c, "pods", "ns", "p", meta("p", "pod-uid"), 2);
                },
                NOW,
                vec![],
            ),
            (
                "pod gone",
                aud(),
                |c| put(c, "serviceaccounts", "ns", "sa", meta("sa", "sa-uid"), 1),
                NOW,
                vec![],
            ),
            (
                "pod recreated",
                aud(),
                |c| {
                    put(c, "serviceaccounts", "ns", "sa", meta("sa", "sa-uid"), 1);
                    put(c, "pods", "ns", "p", meta("p", "new"), 2);
                },
                NOW,
                vec![],
            ),
            (
                "pod deleted over a minute ago",
                aud(),
                |c| {
                    put(c, "serviceaccounts", "ns", "sa", meta("sa", "sa-uid"), 1);
                    let mut pod = meta("p", "pod-uid");
                    pod["metadata"]["deletionTimestamp"] = json!("2023-11-14T22:11:00Z");
                    put(c, "pods", "ns", "p", pod, 2);
                },
                NOW,
                vec![],
            ),
        ];
        for (case, token_aud, setup, at, asked) in cases {
            let caches = caches();
            setup(&caches);
            let sa = server(caches);
            let (token, _) = sa
                .issue(
                    "ns",
                    "sa",
                    "sa-uid",
                    token_aud,
                    3600,
                    pod_binding("pod-uid"),
                    NOW,
                )
                .unwrap();
            assert_eq!(sa.authenticate_at(&token, &asked, at), None, "{case}");
        }
    }

    #[test]
    fn a_pod_deletion_refuses_a_token_that_worked() {
        let caches = caches();
        put(
            &caches,
            "serviceaccounts",
            "ns",
            "sa",
            meta("sa", "sa-uid"),
            1,
        );
        put(&caches, "pods", "ns", "p", meta("p", "pod-uid"), 2);
        let sa = server(caches.clone());
        let (token, _) = sa
            .issue(
                "ns",
                "sa",
                "sa-uid",
                vec![DEFAULT_ISSUER.into()],
                3600,
                pod_binding("pod-uid"),
                NOW,
            )
            .unwrap();
        assert!(sa.authenticate_at(&token, &[], NOW).is_some());
        // Recreated under the same name: a new revision and UID.
        put(&caches, "pods", "ns", "p", meta("p", "pod-uid-2"), 3);
        assert!(sa.authenticate_at(&token, &[], NOW).is_none());
    }

    #[test]
    fn tampered_and_foreign_tokens_are_refused() {
        let caches = caches();
        put(
            &caches,
            "serviceaccounts",
            "ns",
            "sa",
            meta("sa", "sa-uid"),
            1,
        );
        let sa = server(caches.clone());
        let other = server(caches);
        let (token, _) = other
            .issue(
                "ns",
                "sa",
                "sa-uid",
                vec![DEFAULT_ISSUER.into()],
                3600,
                Binding::default(),
                NOW,
            )
            .unwrap();
        assert!(other.authenticate_at(&token, &[], NOW).is_some());
        assert!(sa.authenticate_at(&token, &[], NOW).is_none());
        let (mine, _) = sa
            .issue(
                "ns",
                "sa",
                "sa-uid",
                vec![DEFAULT_ISSUER.into()],
                3600,
                Binding::default(),
                NOW,
            )
            .unwrap();
        let mut bytes = mine.into_bytes();
        let last = bytes.len() - 2;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(bytes).unwrap();
        assert!(sa.authenticate_at(&tampered, &[], NOW).is_none());
        assert!(sa.authenticate_at("not-a-jwt", &[], NOW).is_none());
    }

    #[test]
    fn legacy_tokens_live_as_long_as_their_secret_holds_them() {
        use base64::Engine as _;
        let caches = caches();
        put(
            &caches,
            "serviceaccounts",
            "ns",
            "sa",
            meta("sa", "sa-uid"),
            1,
        );
        let sa = server(caches.clone());
        let token = sa.issue_legacy("ns", "sa", "sa-uid", "sa-token").unwrap();
        assert!(sa.authenticate_at(&token, &[], NOW).is_none(), "no secret");
        let mut secret = meta("sa-token", "s-uid");
        secret["data"] = json!({"token": base64::engine::general_purpose::STANDARD.encode(&token)});
        put(&caches, "secrets", "ns", "sa-token", secret, 2);
        let id = sa.authenticate_at(&token, &[], NOW).unwrap();
        assert_eq!(id.user.name, "system:serviceaccount:ns:sa");
        // Audience-agnostic: the API audience only.
        assert!(sa.authenticate_at(&token, &["vault".into()], NOW).is_none());
        // The Secret emptied: refused.
        put(
            &caches,
            "secrets",
            "ns",
            "sa-token",
            meta("sa-token", "s-uid"),
            3,
        );
        assert!(sa.authenticate_at(&token, &[], NOW).is_none());
    }

    /// Not a timing assertion: what a request pays for a token already
    /// verified once (`-- --nocapture` prints it).
    #[test]
    fn authentications_per_second() {
        let caches = caches();
        put(
            &caches,
            "serviceaccounts",
            "ns",
            "sa",
            meta("sa", "sa-uid"),
            1,
        );
        put(&caches, "pods", "ns", "p", meta("p", "pod-uid"), 2);
        let sa = server(caches);
        let (token, _) = sa
            .issue(
                "ns",
                "sa",
                "sa-uid",
                vec![DEFAULT_ISSUER.into()],
                3600,
                pod_binding("pod-uid"),
                NOW,
            )
            .unwrap();
        let n = 20_000;
        let start = std::time::Instant::now();
        for _ in 0..n {
            assert!(sa.authenticate_at(&token, &[], NOW).is_some());
        }
        let per_sec = n as f64 / start.elapsed().as_secs_f64();
        println!(
            "service-account token bound to a pod on a node: {} bytes; memoized: {per_sec:.0} authentications/s",
            token.len()
        );
    }
}
