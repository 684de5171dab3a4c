//! Bootstrap token authentication (upstream's
//! `plugin/pkg/auth/authenticator/token/bootstrap`): a bearer token of
//! the form `[a-z0-9]{6}.[a-z0-9]{16}` is looked up as the Secret
//! `kube-system/bootstrap-token-<id>` in the watch cache and, when that
//! Secret says so, authenticates as `system:bootstrap:<id>` in
//! `system:bootstrappers` (and its extra groups). A new node joining with
//! `skiff agent --token` is such a user until it has its certificate.
//!
//! Anything else is not this authenticator's: a token of another form is
//! never looked up, and a refused one is just not authenticated (the
//! request gets 401), its reason logged in upstream's words. The rules
//! are `skiff_api::bootstrap_token`'s; this module only finds the Secret.

use skiff_api::bootstrap_token::{self, Token};

use super::serviceaccount::Lookup;
use super::User;

/// The authenticator, reading Secrets through `lookup`.
pub struct BootstrapTokens {
    lookup: Lookup,
}

impl std::fmt::Debug for BootstrapTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BootstrapTokens").finish_non_exhaustive()
    }
}

impl BootstrapTokens {
    pub fn new(lookup: Lookup) -> Self {
        Self { lookup }
    }

    /// The user `text` authenticates as, if it is a valid bootstrap token.
    pub fn authenticate(&self, text: &str) -> Option<User> {
        let token = Token::parse(text).ok()?;
        let key = format!(
            "/registry/secrets/{}/{}",
            bootstrap_token::NAMESPACE,
            token.secret_name()
        );
        let Some((_, json)) = (self.lookup)(&key) else {
            tracing::debug!(id = %token.id, "no bootstrap token secret {key}");
            return None;
        };
        let secret: serde_json::Value = serde_json::from_slice(&json).ok()?;
        match bootstrap_token::authenticate(&token, &secret, chrono::Utc::now()) {
            Ok((name, groups)) => Some(User { name, groups }),
            Err(why) => {
                // Debug, as upstream's V(3): any client can cause it.
                tracing::debug!(
                    "bootstrap secret {}/{} {why}",
                    bootstrap_token::NAMESPACE,
                    token.secret_name()
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use bootstrap_token::{Options, USAGE_AUTHENTICATION};

    use super::*;

    fn with(secrets: Vec<serde_json::Value>) -> BootstrapTokens {
        let by_key: HashMap<String, bytes::Bytes> = secrets
            .into_iter()
            .map(|s| {
                (
                    format!(
                        "/registry/secrets/kube-system/{}",
                        s["metadata"]["name"].as_str().unwrap()
                    ),
                    bytes::Bytes::from(serde_json::to_vec(&s).unwrap()),
                )
            })
            .collect();
        BootstrapTokens::new(Arc::new(move |key: &str| {
            by_key.get(key).map(|b| (1, b.clone()))
        }))
    }

    #[test]
    fn a_stored_token_authenticates_and_others_do_not() {
        let token = Token::parse("abcdef.0123456789abcdef").unwrap();
        let secret = bootstrap_token::secret(
            &token,
            &Options {
                usages: vec![USAGE_AUTHENTICATION.into()],
                ..Options::default()
            },
        )
        .unwrap();
        let auth = with(vec![secret]);
        let user = auth.authenticate("abcdef.0123456789abcdef").unwrap();
        assert_eq!(user.name, "system:bootstrap:abcdef");
        assert_eq!(user.groups, vec!["system:bootstrappers"]);
        assert!(auth.authenticate("abcdef.0123456789abcdee").is_none());
        assert!(auth.authenticate("zzzzzz.0123456789abcdef").is_none());
        assert!(auth.authenticate("not-a-token").is_none());
    }
}
