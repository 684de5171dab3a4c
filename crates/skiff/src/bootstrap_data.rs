//! What servers of one cluster must share, kept in the shared store, as
//! k3s keeps its bootstrap data in its datastore: the cluster CA (its
//! certificate and key), the service-account signing key, and the static
//! token file. The first server on an etcd cluster seals them with its
//! join token and writes them under `/skiff/bootstrap/<token id>`; a server
//! started with `--token` and the same `--etcd-servers` reads them before
//! it makes any PKI, so it serves with the same CA and accepts the same
//! service-account tokens.
//!
//! Sealing: AES-256-GCM with a key derived from the token's secret by
//! PBKDF2-HMAC-SHA256 (a random salt and nonce in each blob), so the
//! store holds nothing a reader without the token can use. A wrong token
//! fails to open it, with a message saying so; a data dir that already has
//! another CA is refused rather than overwritten.
//!
//! This module owns only that blob and the files it writes; the PKI
//! itself is the API server's (`serve::pki`).

use std::num::NonZeroU32;
use std::path::Path;

use anyhow::Context as _;
use base64::Engine as _;
use bytes::Bytes;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use skiff_client::join::JoinToken;
use skiff_store::Store;

/// The store key of the blob sealed with the token whose id is `id`.
pub fn key(id: &str) -> String {
    format!("/skiff/bootstrap/{id}")
}

/// The files shared, relative to the data dir, with their modes.
pub const FILES: &[(&str, u32)] = &[
    ("pki/ca.crt", 0o644),
    ("pki/ca.key", 0o600),
    ("pki/sa.key", 0o600),
    ("pki/sa.pub", 0o644),
    ("tokens.csv", 0o600),
];

const ITERATIONS: u32 = 10_000;

#[derive(Serialize, Deserialize)]
struct Sealed {
    salt: String,
    nonce: String,
    data: String,
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

fn derive(secret: &str, salt: &[u8]) -> anyhow::Result<LessSafeKey> {
    let mut key = [0u8; 32];
    ring::pbkdf2::derive(
        ring::pbkdf2::PBKDF2_HMAC_SHA256,
        NonZeroU32::new(ITERATIONS).context("iterations")?,
        salt,
        secret.as_bytes(),
        &mut key,
    );
    let unbound =
        UnboundKey::new(&AES_256_GCM, &key).map_err(|_| anyhow::anyhow!("the sealing key"))?;
    Ok(LessSafeKey::new(unbound))
}

/// `plain` sealed with `secret`.
pub fn seal(secret: &str, plain: &[u8]) -> anyhow::Result<Vec<u8>> {
    let random = SystemRandom::new();
    let mut salt = [0u8; 16];
    let mut nonce = [0u8; NONCE_LEN];
    random
        .fill(&mut salt)
        .and_then(|_| random.fill(&mut nonce))
        .map_err(|_| anyhow::anyhow!("no randomness"))?;
    let key = derive(secret, &salt)?;
    let mut data = plain.to_vec();
    key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut data)
        .map_err(|_| anyhow::anyhow!("sealing the bootstrap data"))?;
    Ok(serde_json::to_vec(&Sealed {
        salt: b64().encode(salt),
        nonce: b64().encode(nonce),
        data: b64().encode(data),
    })?)
}

/// What [`seal`] sealed, opened with `secret`.
pub fn open(secret: &str, sealed: &[u8]) -> anyhow::Result<Vec<u8>> {
    let sealed: Sealed =
        serde_json::from_slice(sealed).context("the bootstrap data in the store is malformed")?;
    let salt = b64().decode(&sealed.salt)?;
    let nonce: [u8; NONCE_LEN] = b64()
        .decode(&sealed.nonce)?
        .try_into()
        .map_err(|_| anyhow::anyhow!("the bootstrap data's nonce is malformed"))?;
    let mut data = b64().decode(&sealed.data)?;
    let key = derive(secret, &salt)?;
    let plain = key
        .open_in_place(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut data)
        .map_err(|_| {
            anyhow::anyhow!("the token does not open the cluster's bootstrap data: it is not this cluster's server token")
        })?;
    Ok(plain.to_vec())
}

/// The first server's part: seals this data dir's shared files with
/// `token` into the store, unless a blob for that token is there.
pub async fn publish(store: &dyn Store, data_dir: &Path, token: &JoinToken) -> anyhow::Result<()> {
    let key = key(&token.token.id);
    if store.get(&key).await.is_ok() {
        return Ok(());
    }
    let mut files = std::collections::BTreeMap::new();
    for (name, _) in FILES {
        let path = data_dir.join(name);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        files.insert((*name).to_string(), text);
    }
    let sealed = seal(&token.token.secret, &serde_json::to_vec(&files)?)?;
    match store.create(&key, Bytes::from(sealed)).await {
        Ok(_) | Err(skiff_store::Error::AlreadyExists { .. }) => Ok(()),
        Err(e) => Err(e).context("cannot write the bootstrap data"),
    }
}

/// A joining server's part: the shared files from the store, opened with
/// `token`, written into `data_dir` (a data dir with the same CA is left
/// as it is; one with another CA is refused).
pub async fn fetch(store: &dyn Store, data_dir: &Path, token: &JoinToken) -> anyhow::Result<()> {
    let key = key(&token.token.id);
    let blob = store.get(&key).await.map_err(|e| match e {
        skiff_store::Error::NotFound { .. } => anyhow::anyhow!(
            "no server of this store made the token {:?}: start the first server without --token, then pass its <data-dir>/token",
            token.token.id
        ),
        other => anyhow::Error::new(other).context("cannot read the bootstrap data"),
    })?;
    let plain = open(&token.token.secret, &blob.value)?;
    let files: std::collections::BTreeMap<String, String> =
        serde_json::from_slice(&plain).context("the bootstrap data is malformed")?;
    let ca = files
        .get("pki/ca.crt")
        .context("the bootstrap data has no CA")?;
    skiff_client::join::verify_ca(ca.as_bytes(), token)
        .context("the cluster's CA does not match the token")?;
    let own = data_dir.join("pki/ca.crt");
    if let Ok(existing) = std::fs::read_to_string(&own) {
        anyhow::ensure!(
            &existing == ca,
            "{} holds another cluster's CA: refusing to join with it (use a new data dir)",
            own.display()
        );
        return Ok(());
    }
    for (name, mode) in FILES {
        let Some(text) = files.get(*name) else {
            continue;
        };
        let path = data_dir.join(name);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        skiff_client::certificate::kubeconfig::write_atomic(&path, text.as_bytes(), *mode == 0o600)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_data_opens_only_with_its_secret() {
        let sealed = seal("0123456789abcdef", b"the CA").unwrap();
        assert!(!String::from_utf8_lossy(&sealed).contains("the CA"));
        assert_eq!(open("0123456789abcdef", &sealed).unwrap(), b"the CA");
        let err = open("0123456789abcdee", &sealed).unwrap_err().to_string();
        assert!(err.contains("not this cluster's server token"), "{err}");
        assert!(open("0123456789abcdef", b"{}").is_err());
        // Each sealing is different (its own salt and nonce).
        assert_ne!(seal("s", b"x").unwrap(), seal("s", b"x").unwrap());
    }
}
