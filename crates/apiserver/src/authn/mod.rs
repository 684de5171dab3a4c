//! Authentication: who is asking.
//!
//! A client is identified by its TLS client certificate (CN = user, each O
//! = a group, as upstream) or by a bearer token from the static token file
//! `<data-dir>/tokens.csv` (upstream's `token,user,uid,"group1,group2"`
//! format). No credentials → 401, except on the paths anyone may read
//! (`/version` and the health endpoints, as upstream's
//! `system:public-info-viewer` allows). What a user may do is `authz`'s.

pub mod bootstrap;
pub mod requester;
pub mod serviceaccount;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use axum::extract::Request;

use crate::status::ApiError;

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
}

/// The user a connection's client certificate names, if it sent one.
#[derive(Debug, Clone)]
pub struct PeerUser(pub Option<User>);

/// Why the token file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read or write token file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("token file {path}, line {line}: expected token,user,uid[,\"groups\"]")]
    Syntax { path: PathBuf, line: usize },
}

/// Bearer tokens: the static ones, then service-account JWTs when the
/// server signs them ([`serviceaccount`]).
#[derive(Debug, Default, Clone)]
pub struct Tokens {
    by_token: HashMap<String, User>,
    /// Service-account tokens, for bearer tokens not in the file.
    pub service_accounts: Option<std::sync::Arc<serviceaccount::ServiceAccounts>>,
    /// Bootstrap tokens (`bootstrap-token-<id>` Secrets), for joining nodes.
    pub bootstrap: Option<std::sync::Arc<bootstrap::BootstrapTokens>>,
}

impl Tokens {
    /// Loads a token file; a missing file means no tokens.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Tokens::default()),
            Err(source) => {
                return Err(Error::Io {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        let mut by_token = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (token, rest) = line.split_once(',').ok_or(Error::Syntax {
                path: path.to_path_buf(),
                line: i + 1,
            })?;
            let mut parts = rest.splitn(3, ',');
            let user = parts.next().unwrap_or_default().trim();
            let _uid = parts.next();
            let groups = parts
                .next()
                .unwrap_or_default()
                .trim()
                .trim_matches('"')
                .split(',')
                .map(str::trim)
                .filter(|g| !g.is_empty())
                .map(String::from)
                .collect();
            if token.is_empty() || user.is_empty() {
                return Err(Error::Syntax {
                    path: path.to_path_buf(),
                    line: i + 1,
                });
            }
            by_token.insert(
                token.trim().to_string(),
                User {
                    name: user.to_string(),
                    groups,
                },
            );
        }
        Ok(Tokens {
            by_token,
            service_accounts: None,
            bootstrap: None,
        })
    }

    /// These tokens, and service-account JWTs checked by `service_accounts`.
    pub fn with_service_accounts(
        mut self,
        service_accounts: std::sync::Arc<serviceaccount::ServiceAccounts>,
    ) -> Self {
        self.service_accounts = Some(service_accounts);
        self
    }

    /// These tokens, and bootstrap tokens checked by `bootstrap`.
    pub fn with_bootstrap(mut self, bootstrap: std::sync::Arc<bootstrap::BootstrapTokens>) -> Self {
        self.bootstrap = Some(bootstrap);
        self
    }

    pub fn user(&self, token: &str) -> Option<&User> {
        self.by_token.get(token)
    }
}

/// Creates the token file with one admin token if it does not exist.
pub fn ensure_token_file(path: &Path) -> Result<(), Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if path.exists() {
        return Ok(());
    }
    let token = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(io)?;
    writeln!(file, "{token},skiff-admin,skiff-admin,\"system:masters\"").map_err(io)
}

/// The user named by a DER client certificate: CN and O values.
pub fn user_from_cert(der: &[u8]) -> Option<User> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(String::from))
        .collect();
    Some(User { name, groups })
}

/// Paths anyone may read, signed in or not.
pub fn is_public(path: &str) -> bool {
    matches!(
        path,
        "/version" | "/version/" | "/healthz" | "/livez" | "/readyz" | CA_CERTS_PATH
    ) || path.starts_with("/healthz/")
        || path.starts_with("/livez/")
        || path.starts_with("/readyz/")
}

/// The cluster's CA certificate (PEM), readable by anyone (as k3s's
/// `/cacerts`): a joining node fetches it before it trusts the server, and
/// checks it against the hash in its join token.
pub const CA_CERTS_PATH: &str = "/cacerts";

/// The token of an `Authorization: Bearer TOKEN` header, the scheme in any
/// case (the Python client sends `bearer`), as upstream's `bearertoken`.
pub fn bearer_token(header: &str) -> Option<&str> {
    let mut parts = header.trim().splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next().filter(|t| !t.is_empty())?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

/// The group of every authenticated user.
pub const AUTHENTICATED: &str = "system:authenticated";

/// Request filter (see `crate::serve::filters`): authenticates and puts
/// the [`User`] in the request's extensions; no credentials is a 401
/// except on public paths. Authorization is a later filter's
/// (`crate::authz`).
pub fn authenticate(tokens: &Tokens, mut req: Request) -> Result<Request, ApiError> {
    let from_cert = req.extensions().get::<PeerUser>().and_then(|p| p.0.clone());
    let bearer = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    // A token not in the file may be a service account's JWT.
    let mut identity = None;
    let from_token = bearer.and_then(|t| {
        tokens
            .user(t)
            .cloned()
            .or_else(|| {
                let id = tokens.service_accounts.as_ref()?.authenticate(t)?;
                let user = id.user.clone();
                identity = Some(id);
                Some(user)
            })
            .or_else(|| tokens.bootstrap.as_ref()?.authenticate(t))
    });
    let path = req.uri().path().to_string();
    let mut user = match from_token.or(from_cert) {
        Some(user) => user,
        None if is_public(&path) => return Ok(req),
        None => return Err(ApiError::unauthorized()),
    };
    // Every authenticated user is in `system:authenticated`, as upstream's
    // authenticator adds it (the default bindings grant discovery and
    // self-reviews to that group).
    if !user.groups.iter().any(|g| g == AUTHENTICATED) {
        user.groups.push(AUTHENTICATED.into());
    }
    req.extensions_mut().insert(user);
    if let Some(identity) = identity {
        req.extensions_mut().insert(identity);
    }
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_parses_upstream_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.csv");
        std::fs::write(
            &path,
            "# comment\nabc,alice,u1,\"system:masters,devs\"\nxyz,bob,u2\n",
        )
        .unwrap();
        let tokens = Tokens::load(&path).unwrap();
        assert_eq!(
            tokens.user("abc"),
            Some(&User {
                name: "alice".into(),
                groups: vec!["system:masters".into(), "devs".into()]
            })
        );
        assert_eq!(tokens.user("xyz").unwrap().groups, Vec::<String>::new());
        assert!(tokens.user("nope").is_none());
    }

    #[test]
    fn bearer_scheme_in_any_case() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer abc"), Some("abc"));
        assert_eq!(bearer_token("  BEARER abc  "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer"), None);
        assert_eq!(bearer_token("Bearer  abc"), None);
    }

    #[test]
    fn bad_token_line_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.csv");
        std::fs::write(&path, "justatoken\n").unwrap();
        assert!(matches!(
            Tokens::load(&path),
            Err(Error::Syntax { line: 1, .. })
        ));
    }
}
