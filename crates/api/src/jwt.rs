//! Service-account tokens as JSON Web Tokens: ES256 (ECDSA P-256 with
//! SHA-256) signing and verification of compact JWS
//! (`header.claims.signature`, base64url without padding), the claims of
//! upstream's bound tokens ([`Claims`], `kubernetes.io` private claims) and
//! of its legacy Secret-based tokens ([`LegacyClaims`]), the key files
//! (PKCS#8 `PRIVATE KEY` and SPKI `PUBLIC KEY` PEM) and the key's JWK.
//!
//! Hand-written over `ring` rather than the `jsonwebtoken` crate: ring is
//! built already (rustls), a compact ES256 JWS is three base64url segments
//! and one `ring` call each way, and jsonwebtoken would add its own
//! dependency tree (pem, simple_asn1, its own ring or aws-lc) for the one
//! algorithm used here. Only ES256 is accepted: a header naming any other
//! `alg` (`none` included) is refused before anything else is read.
//!
//! The key id (`kid`) is upstream's: base64url(SHA-256(DER SPKI public
//! key)).
//!
//! This module does no I/O and knows nothing of the cluster: whether a
//! token's ServiceAccount or Pod still exists, its audience and its time
//! window are checked by the caller (see [`Claims::check_time`]).

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, KeyPair as _, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED,
    ECDSA_P256_SHA256_FIXED_SIGNING,
};
use serde::{Deserialize, Serialize};

/// Why a key could not be made or read, or a token not signed or verified.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    #[error("cannot generate a key")]
    Generate,
    #[error("not a PEM block of type {0}")]
    Pem(&'static str),
    #[error("not a PKCS#8 ECDSA P-256 private key: {0}")]
    PrivateKey(String),
    #[error("not an ECDSA P-256 public key")]
    PublicKey,
    #[error("cannot sign the token")]
    Sign,
    #[error("malformed token")]
    Malformed,
    #[error("unexpected signing algorithm {0:?} (only ES256)")]
    Algorithm(String),
    #[error("token signed by an unknown key")]
    UnknownKey,
    #[error("invalid signature")]
    Signature,
    #[error("token has expired")]
    Expired,
    #[error("token is not valid yet")]
    NotYetValid,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The DER prefix of a P-256 SubjectPublicKeyInfo before its 65-byte
/// uncompressed point (SEQUENCE { SEQUENCE { id-ecPublicKey, prime256v1 },
/// BIT STRING }).
const SPKI_P256_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The JWS `alg` of every token here.
pub const ALGORITHM: &str = "ES256";

/// A PEM block of `label` around `der`, 64 characters a line.
pub fn pem(label: &str, der: &[u8]) -> String {
    let b64 = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The DER inside the first PEM block of type `label`.
fn pem_der(text: &str, label: &'static str) -> Result<Vec<u8>> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin).ok_or(Error::Pem(label))? + begin.len();
    let rest = text.get(start..).ok_or(Error::Pem(label))?;
    let stop = rest.find(&end).ok_or(Error::Pem(label))?;
    let body: String = rest
        .get(..stop)
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    STANDARD.decode(body).map_err(|_| Error::Pem(label))
}

/// A new P-256 private key, as PKCS#8 `PRIVATE KEY` PEM.
pub fn generate_private_key_pem() -> Result<String> {
    let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
        .map_err(|_| Error::Generate)?;
    Ok(pem("PRIVATE KEY", doc.as_ref()))
}

/// A public key that verifies tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    /// The uncompressed point (0x04 || x || y).
    point: Vec<u8>,
    kid: String,
}

impl PublicKey {
    fn from_point(point: &[u8]) -> Result<Self> {
        if point.len() != 65 || point.first() != Some(&4) {
            return Err(Error::PublicKey);
        }
        let mut der = SPKI_P256_PREFIX.to_vec();
        der.extend_from_slice(point);
        let kid = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, &der));
        Ok(PublicKey {
            point: point.to_vec(),
            kid,
        })
    }

    /// Reads an SPKI `PUBLIC KEY` PEM block.
    pub fn from_pem(text: &str) -> Result<Self> {
        let der = pem_der(text, "PUBLIC KEY")?;
        let point = der
            .strip_prefix(SPKI_P256_PREFIX.as_slice())
            .ok_or(Error::PublicKey)?;
        Self::from_point(point)
    }

    /// The SPKI `PUBLIC KEY` PEM block.
    pub fn to_pem(&self) -> String {
        let mut der = SPKI_P256_PREFIX.to_vec();
        der.extend_from_slice(&self.point);
        pem("PUBLIC KEY", &der)
    }

    /// The key id: base64url(SHA-256(DER SPKI)), as upstream's.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The key as a JWK (RFC 7517), as upstream's `/openid/v1/jwks` lists it.
    pub fn jwk(&self) -> serde_json::Value {
        let coord = |range: std::ops::Range<usize>| {
            URL_SAFE_NO_PAD.encode(self.point.get(range).unwrap_or_default())
        };
        serde_json::json!({
            "use": "sig",
            "kty": "EC",
            "kid": self.kid,
            "crv": "P-256",
            "alg": ALGORITHM,
            "x": coord(1..33),
            "y": coord(33..65),
        })
    }

    /// The claims of `token` if this key signed it (signature and header
    /// only: time, audience and issuer are the caller's).
    pub fn verify<C: serde::de::DeserializeOwned>(&self, token: &str) -> Result<C> {
        verify_with(std::slice::from_ref(self), token)
    }
}

#[derive(Serialize, Deserialize)]
struct Header {
    alg: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kid: Option<String>,
}

/// Verifies `token` with whichever of `keys` its `kid` names (or each,
/// when it names none) and decodes its claims.
pub fn verify_with<C: serde::de::DeserializeOwned>(keys: &[PublicKey], token: &str) -> Result<C> {
    let mut parts = token.split('.');
    let (Some(h), Some(c), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Error::Malformed);
    };
    let header: Header = URL_SAFE_NO_PAD
        .decode(h)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or(Error::Malformed)?;
    if header.alg != ALGORITHM {
        return Err(Error::Algorithm(header.alg));
    }
    let signature = URL_SAFE_NO_PAD.decode(s).map_err(|_| Error::Malformed)?;
    // The signed input is the first two segments as sent.
    let signed = token
        .get(..h.len() + 1 + c.len())
        .ok_or(Error::Malformed)?
        .as_bytes();
    let mut candidates = keys
        .iter()
        .filter(|k| header.kid.as_deref().is_none_or(|kid| kid == k.kid))
        .peekable();
    if candidates.peek().is_none() {
        return Err(Error::UnknownKey);
    }
    let verified = candidates.any(|k| {
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &k.point)
            .verify(signed, &signature)
            .is_ok()
    });
    if !verified {
        return Err(Error::Signature);
    }
    let claims = URL_SAFE_NO_PAD.decode(c).map_err(|_| Error::Malformed)?;
    serde_json::from_slice(&claims).map_err(|_| Error::Malformed)
}

/// A private key that signs tokens.
#[derive(Debug)]
pub struct Signer {
    pair: EcdsaKeyPair,
    public: PublicKey,
    rng: SystemRandom,
}

impl Signer {
    /// Reads a PKCS#8 `PRIVATE KEY` PEM block (P-256, with its public key,
    /// as `openssl genpkey` and [`generate_private_key_pem`] write it).
    pub fn from_pem(text: &str) -> Result<Self> {
        let der = pem_der(text, "PRIVATE KEY")?;
        let rng = SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng)
            .map_err(|e| Error::PrivateKey(e.to_string()))?;
        let public = PublicKey::from_point(pair.public_key().as_ref())?;
        Ok(Signer { pair, public, rng })
    }

    /// The key that verifies what this signs.
    pub fn public(&self) -> &PublicKey {
        &self.public
    }

    /// `claims` signed, as a compact JWS.
    pub fn sign<C: Serialize>(&self, claims: &C) -> Result<String> {
        let header = Header {
            alg: ALGORITHM.into(),
            kid: Some(self.public.kid.clone()),
        };
        let enc = |v: &dyn erased::Json| v.json().map(|b| URL_SAFE_NO_PAD.encode(b));
        let mut token = enc(&header).ok_or(Error::Sign)?;
        token.push('.');
        token.push_str(&enc(claims).ok_or(Error::Sign)?);
        let sig = self
            .pair
            .sign(&self.rng, token.as_bytes())
            .map_err(|_| Error::Sign)?;
        token.push('.');
        token.push_str(&URL_SAFE_NO_PAD.encode(sig.as_ref()));
        Ok(token)
    }
}

/// Serializing through a `dyn` (the header and claims have different types).
mod erased {
    pub trait Json {
        fn json(&self) -> Option<Vec<u8>>;
    }
    impl<T: serde::Serialize> Json for T {
        fn json(&self) -> Option<Vec<u8>> {
            serde_json::to_vec(self).ok()
        }
    }
}

/// A name and UID (the objects a bound token names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Ref {
    pub name: String,
    pub uid: String,
}

/// The `kubernetes.io` private claims of a bound token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Private {
    pub namespace: String,
    pub serviceaccount: Ref,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<Ref>,
}

/// `aud`: one string or a list (RFC 7519 allows both; ours write a list).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Default for Audience {
    fn default() -> Self {
        Audience::Many(Vec::new())
    }
}

impl Audience {
    pub fn as_slice(&self) -> &[String] {
        match self {
            Audience::One(a) => std::slice::from_ref(a),
            Audience::Many(a) => a,
        }
    }
}

/// The claims of upstream's bound service-account tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Claims {
    pub iss: String,
    pub sub: String,
    #[serde(default)]
    pub aud: Audience,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jti: Option<String>,
    #[serde(
        rename = "kubernetes.io",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub kubernetes: Option<Private>,
}

/// Leeway for clocks a little apart, as upstream's (`jwt.DefaultLeeway`).
pub const LEEWAY_SECONDS: i64 = 60;

impl Claims {
    /// Whether the token is valid at `now` (Unix seconds), with
    /// [`LEEWAY_SECONDS`] either side.
    pub fn check_time(&self, now: i64) -> Result<()> {
        if self.exp.is_some_and(|exp| now > exp + LEEWAY_SECONDS) {
            return Err(Error::Expired);
        }
        if self.nbf.is_some_and(|nbf| now < nbf - LEEWAY_SECONDS) {
            return Err(Error::NotYetValid);
        }
        Ok(())
    }
}

/// The issuer of legacy Secret-based tokens.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";

/// The claims of upstream's legacy tokens (a Secret of type
/// `kubernetes.io/service-account-token`): no expiry, no audience.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct LegacyClaims {
    pub iss: String,
    #[serde(rename = "kubernetes.io/serviceaccount/namespace")]
    pub namespace: String,
    #[serde(rename = "kubernetes.io/serviceaccount/secret.name")]
    pub secret_name: String,
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.name")]
    pub service_account_name: String,
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.uid")]
    pub service_account_uid: String,
    pub sub: String,
}

/// A legacy token for the Secret `secret` of ServiceAccount
/// `namespace/name` (UID `uid`), as upstream's tokens controller signs it.
pub fn legacy_token(
    signer: &Signer,
    namespace: &str,
    name: &str,
    uid: &str,
    secret: &str,
) -> Result<String> {
    signer.sign(&LegacyClaims {
        iss: LEGACY_ISSUER.into(),
        namespace: namespace.into(),
        secret_name: secret.into(),
        service_account_name: name.into(),
        service_account_uid: uid.into(),
        sub: subject(namespace, name),
    })
}

/// `system:serviceaccount:NS:NAME`.
pub fn subject(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(exp: i64) -> Claims {
        Claims {
            iss: "https://kubernetes.default.svc.cluster.local".into(),
            sub: subject("ns", "sa"),
            aud: Audience::Many(vec!["api".into()]),
            exp: Some(exp),
            iat: Some(exp - 3600),
            nbf: Some(exp - 3600),
            jti: Some("j".into()),
            kubernetes: Some(Private {
                namespace: "ns".into(),
                serviceaccount: Ref {
                    name: "sa".into(),
                    uid: "u".into(),
                },
                ..Private::default()
            }),
        }
    }

    #[test]
    fn round_trip_and_key_files() {
        let pem = generate_private_key_pem().unwrap();
        let signer = Signer::from_pem(&pem).unwrap();
        let token = signer.sign(&claims(2000)).unwrap();
        let back: Claims = signer.public().verify(&token).unwrap();
        assert_eq!(back, claims(2000));
        // The public key survives its PEM file; the kid is the SPKI hash.
        let public = PublicKey::from_pem(&signer.public().to_pem()).unwrap();
        assert_eq!(&public, signer.public());
        assert_eq!(public.kid().len(), 43);
        assert_eq!(public.jwk()["kid"], public.kid());
        // The header names the key and the algorithm.
        let header = URL_SAFE_NO_PAD
            .decode(token.split('.').next().unwrap())
            .unwrap();
        let header: serde_json::Value = serde_json::from_slice(&header).unwrap();
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["kid"], public.kid());
    }

    #[test]
    fn bad_tokens_are_refused() {
        let signer = Signer::from_pem(&generate_private_key_pem().unwrap()).unwrap();
        let other = Signer::from_pem(&generate_private_key_pem().unwrap()).unwrap();
        let token = signer.sign(&claims(2000)).unwrap();
        let key = signer.public();
        // A changed claim breaks the signature.
        let mut parts: Vec<String> = token.split('.').map(String::from).collect();
        let mut c = claims(2000);
        c.sub = subject("ns", "admin");
        parts[1] = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&c).unwrap());
        let tampered = parts.join(".");
        assert_eq!(key.verify::<Claims>(&tampered), Err(Error::Signature));
        // Another key's token names a kid this key does not have.
        let theirs = other.sign(&claims(2000)).unwrap();
        assert_eq!(key.verify::<Claims>(&theirs), Err(Error::UnknownKey));
        // alg none, and garbage.
        let none = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
            parts[1]
        );
        assert_eq!(
            key.verify::<Claims>(&none),
            Err(Error::Algorithm("none".into()))
        );
        for junk in ["", "a.b", "a.b.c.d", "!!.!!.!!", "e30.e30.AAAA"] {
            assert!(key.verify::<Claims>(junk).is_err(), "{junk}");
        }
    }

    #[test]
    fn time_window_with_leeway() {
        let c = claims(10_000);
        assert_eq!(c.check_time(6000), Err(Error::NotYetValid));
        assert_eq!(c.check_time(6400 - LEEWAY_SECONDS), Ok(()));
        assert_eq!(c.check_time(10_000 + LEEWAY_SECONDS), Ok(()));
        assert_eq!(c.check_time(10_001 + LEEWAY_SECONDS), Err(Error::Expired));
    }

    #[test]
    fn legacy_claims_have_upstreams_names() {
        let signer = Signer::from_pem(&generate_private_key_pem().unwrap()).unwrap();
        let legacy = LegacyClaims {
            iss: LEGACY_ISSUER.into(),
            namespace: "ns".into(),
            secret_name: "s".into(),
            service_account_name: "sa".into(),
            service_account_uid: "u".into(),
            sub: subject("ns", "sa"),
        };
        let token = signer.sign(&legacy).unwrap();
        let raw: serde_json::Value = signer.public().verify(&token).unwrap();
        assert_eq!(raw["kubernetes.io/serviceaccount/secret.name"], "s");
        assert_eq!(raw["iss"], "kubernetes/serviceaccount");
    }

    /// Not a timing assertion: prints verifications per second
    /// (`cargo test -p skiff-api --release jwt -- --nocapture`).
    #[test]
    fn verifications_per_second() {
        let signer = Signer::from_pem(&generate_private_key_pem().unwrap()).unwrap();
        let token = signer.sign(&claims(2000)).unwrap();
        let n = 200;
        let start = std::time::Instant::now();
        for _ in 0..n {
            let _: Claims = signer.public().verify(&token).unwrap();
        }
        let per_sec = n as f64 / start.elapsed().as_secs_f64();
        println!(
            "ES256 JWT: {} bytes, {per_sec:.0} verifications/s",
            token.len()
        );
    }
}
