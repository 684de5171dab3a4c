//! Join tokens: the one `skiff server` keeps in `<data-dir>/token` (as
//! k3s keeps `server/token`) and prints the join command for, and
//! `skiff token create|list|delete` (as `kubeadm token`). Each is a
//! bootstrap token Secret (`kube-system/bootstrap-token-<id>`, upstream's
//! form: `skiff_api::bootstrap_token`) and is handed out as
//! `K10<CA hash>::<id>.<secret>` (`skiff_client::join`), so a joining
//! agent can check the server's CA before it sends the secret.
//!
//! This module writes only those Secrets and the token file. The API
//! server authenticates the tokens (`authn::bootstrap`), the token
//! cleaner deletes expired ones, and `skiff agent --token` joins.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use chrono::Datelike as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use skiff_api::bootstrap_token::{self as bt, Options, Token};
use skiff_client::join::{self, JoinToken};

use crate::cli::{TokenArgs, TokenCommand, TokenCreateArgs};

/// The file `skiff server` keeps its token in.
pub const FILE: &str = "token";

fn new_token() -> Token {
    Token::generate(rand::random::<u8>)
}

fn api(client: &kube::Client) -> Api<Secret> {
    Api::namespaced(client.clone(), bt::NAMESPACE)
}

async fn create_secret(
    client: &kube::Client,
    token: &Token,
    options: &Options,
) -> anyhow::Result<()> {
    let secret: Secret = serde_json::from_value(bt::secret(token, options)?)?;
    api(client)
        .create(&PostParams::default(), &secret)
        .await
        .with_context(|| format!("cannot create secret {}", token.secret_name()))?;
    Ok(())
}

/// The server's own token: `<data-dir>/token` if it is there (its Secret
/// made again if it was deleted), else a new one, written there (mode
/// 0600) with its Secret. It does not expire, as k3s's server token.
pub async fn ensure_server_token(
    client: &kube::Client,
    data_dir: &Path,
    ca_pem: &str,
) -> anyhow::Result<JoinToken> {
    let path = data_dir.join(FILE);
    let ca_hash = join::ca_hash(ca_pem.as_bytes())?;
    let options = Options {
        description: Some(format!(
            "the join token of skiff server ({})",
            path.display()
        )),
        usages: vec![bt::USAGE_AUTHENTICATION.into(), bt::USAGE_SIGNING.into()],
        ..Options::default()
    };
    let join = match std::fs::read_to_string(&path) {
        Ok(text) => {
            let mut join = JoinToken::parse(&text)
                .with_context(|| format!("the token in {}", path.display()))?;
            // The CA is this data dir's: a token copied from elsewhere
            // keeps its secret but gets this cluster's hash.
            if join.ca_hash != ca_hash {
                join.ca_hash = ca_hash;
                write_private(&path, &join.text())?;
            }
            join
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let join = JoinToken {
                ca_hash,
                token: new_token(),
            };
            write_private(&path, &join.text())?;
            join
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    if api(client)
        .get_opt(&join.token.secret_name())
        .await?
        .is_none()
    {
        create_secret(client, &join.token, &options).await?;
    }
    Ok(join)
}

fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    skiff_client::certificate::kubeconfig::write_atomic(path, format!("{text}\n").as_bytes(), true)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The kubeconfig a `skiff token` command uses: `--kubeconfig`, else the
/// admin kubeconfig of `--data-dir`.
fn kubeconfig_of(args: &TokenArgs) -> PathBuf {
    args.kubeconfig
        .clone()
        .unwrap_or_else(|| args.data_dir.join("admin.kubeconfig"))
}

/// The CA (PEM) a kubeconfig trusts.
fn ca_of(kubeconfig: &Path) -> anyhow::Result<String> {
    crate::agent::kubeconfig_ca(kubeconfig)
}

/// `skiff token create|list|delete`.
pub async fn run(args: TokenArgs) -> anyhow::Result<()> {
    let kubeconfig = kubeconfig_of(&args);
    let client = skiff_client::http::client(&kubeconfig).await?;
    match &args.command {
        TokenCommand::Create(create) => {
            let ca = ca_of(&kubeconfig)?;
            let join = self::create(&client, &ca, create).await?;
            println!("{}", join.text());
        }
        TokenCommand::List => {
            let ca = ca_of(&kubeconfig)?;
            print!("{}", list(&client, &ca).await?);
        }
        TokenCommand::Delete { tokens } => {
            for text in tokens {
                let id = id_of(text)?;
                let name = format!("{}{id}", bt::SECRET_PREFIX);
                match api(&client).delete(&name, &DeleteParams::default()).await {
                    Ok(_) => println!("bootstrap token {id:?} deleted"),
                    Err(kube::Error::Api(s)) if s.code == 404 => {
                        anyhow::bail!("bootstrap token {id:?} not found")
                    }
                    Err(e) => return Err(e).context(format!("cannot delete {name}")),
                }
            }
        }
    }
    Ok(())
}

/// The token id in what `skiff token delete` was given: an id, an
/// `id.secret` token or a `K10...` join token.
fn id_of(text: &str) -> anyhow::Result<String> {
    if let Ok(join) = JoinToken::parse(text) {
        return Ok(join.token.id);
    }
    if let Ok(token) = Token::parse(text) {
        return Ok(token.id);
    }
    anyhow::ensure!(
        text.len() == 6
            && text
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
        "not a token id ([a-z0-9]{{6}}) nor a token"
    );
    Ok(text.to_string())
}

async fn create(
    client: &kube::Client,
    ca_pem: &str,
    args: &TokenCreateArgs,
) -> anyhow::Result<JoinToken> {
    let token = match &args.token {
        // The text is not echoed: it may be a secret typed wrong.
        Some(text) => Token::parse(text)
            .ok()
            .context("the token: expected [a-z0-9]{6}.[a-z0-9]{16}")?,
        None => new_token(),
    };
    for usage in &args.usages {
        anyhow::ensure!(
            [bt::USAGE_SIGNING, bt::USAGE_AUTHENTICATION].contains(&usage.as_str()),
            "--usages: {usage:?} is not one of signing, authentication"
        );
    }
    let expiration = match args.ttl.is_zero() {
        true => None,
        false => Some(
            chrono::Duration::from_std(args.ttl)
                .ok()
                .and_then(|ttl| chrono::Utc::now().checked_add_signed(ttl))
                .filter(|at| at.year() <= 9999)
                .context("--ttl: too long (0 means never)")?,
        ),
    };
    // The hash first: a token is never made that could not be printed.
    let ca_hash = join::ca_hash(ca_pem.as_bytes())?;
    let options = Options {
        expiration,
        description: args.description.clone(),
        usages: args.usages.clone(),
        extra_groups: args.groups.clone(),
    };
    create_secret(client, &token, &options).await?;
    Ok(JoinToken { ca_hash, token })
}

/// kubeadm's `token list` table.
async fn list(client: &kube::Client, ca_pem: &str) -> anyhow::Result<String> {
    let hash = join::ca_hash(ca_pem.as_bytes())?;
    let secrets = api(client)
        .list(&ListParams::default())
        .await
        .context("cannot list bootstrap token secrets")?;
    let now = chrono::Utc::now();
    let mut rows = vec![[
        "TOKEN".to_string(),
        "TTL".into(),
        "EXPIRES".into(),
        "USAGES".into(),
        "DESCRIPTION".into(),
        "EXTRA GROUPS".into(),
    ]];
    for secret in secrets.items {
        if secret.type_.as_deref() != Some(bt::SECRET_TYPE) {
            continue;
        }
        let value = serde_json::to_value(&secret)?;
        let (Some(id), Some(secret_part)) = (
            bt::data(&value, bt::KEY_ID),
            bt::data(&value, bt::KEY_SECRET),
        ) else {
            continue;
        };
        let Ok(token) = Token::parse(&format!("{id}.{secret_part}")) else {
            continue;
        };
        let (ttl, expires) = match bt::expiration(&value) {
            bt::Expiration::Never => ("<forever>".to_string(), "<never>".to_string()),
            bt::Expiration::At(at) => (
                human_duration((at - now).to_std().unwrap_or_default()),
                at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            ),
            bt::Expiration::Unreadable => ("<invalid>".into(), "<invalid>".into()),
        };
        let usages = match bt::usages(&value).join(",") {
            none if none.is_empty() => "<none>".to_string(),
            some => some,
        };
        let groups = bt::data(&value, bt::KEY_EXTRA_GROUPS).unwrap_or_default();
        rows.push([
            JoinToken {
                ca_hash: hash.clone(),
                token,
            }
            .text(),
            ttl,
            expires,
            usages,
            bt::data(&value, bt::KEY_DESCRIPTION)
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| "<none>".into()),
            if groups.is_empty() {
                "<none>".into()
            } else {
                groups
            },
        ]);
    }
    Ok(table(&rows))
}

fn table(rows: &[[String; 6]]) -> String {
    let mut widths = [0usize; 6];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}   "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A TTL as kubeadm prints it (`23h`, `59m`, `30s`).
fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_read_from_any_form() {
        assert_eq!(id_of("abcdef").unwrap(), "abcdef");
        assert_eq!(id_of("abcdef.0123456789abcdef").unwrap(), "abcdef");
        let join = format!("K10{}::abcdef.0123456789abcdef", "0".repeat(64));
        assert_eq!(id_of(&join).unwrap(), "abcdef");
        assert!(id_of("ABCDEF").is_err());
        assert!(id_of("abc").is_err());
    }

    #[test]
    fn ttls_read_as_kubeadm_prints_them() {
        assert_eq!(human_duration(Duration::from_secs(5)), "5s");
        assert_eq!(
            human_duration(Duration::from_secs(23 * 3600 + 59 * 60)),
            "23h"
        );
        assert_eq!(human_duration(Duration::from_secs(3 * 86400)), "3d");
    }

    #[test]
    fn the_table_is_aligned() {
        let rows = [
            [
                "A".into(),
                "B".into(),
                "C".into(),
                "D".into(),
                "E".into(),
                "F".into(),
            ],
            [
                "long".into(),
                "b".into(),
                "c".into(),
                "d".into(),
                "e".into(),
                "f".into(),
            ],
        ];
        assert_eq!(
            table(&rows),
            "A      B   C   D   E   F\nlong   b   c   d   e   f\n"
        );
    }
}
