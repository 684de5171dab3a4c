//! A certificate authority that signs certificate requests and re-signs
//! certificates, as upstream's `pkg/controller/certificates/authority`
//! (the csrsigning controller) and kubeadm's `certs renew` do.
//!
//! The certificate is written out field by field (DER) rather than
//! through rcgen's parameters: the subject and the public key are copied
//! byte for byte from the request (or the certificate being renewed), so
//! a subject keeps every attribute it had, in order (several `O`s are
//! several groups; rcgen's distinguished name keeps one value per type).
//! rcgen's key pair signs.
//!
//! This module owns the X.509 encoding, the validity arithmetic
//! ([`boundaries`]) and the mapping of CSR usages to key usages. It does
//! not decide who may have a certificate (the signer rules are the
//! controllers') and reads no file but the ones it is pointed at.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{KeyPair, SigningKey as _};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, CertificateSigningRequestDer};
use time::OffsetDateTime;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::cri_attributes::ParsedCriAttribute;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::oid_registry::{
    OID_X509_EXT_AUTHORITY_KEY_IDENTIFIER, OID_X509_EXT_SUBJECT_ALT_NAME,
    OID_X509_EXT_SUBJECT_KEY_IDENTIFIER,
};
use x509_parser::prelude::FromDer as _;

/// Why a request could not be signed or a certificate read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// Which.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No PEM block of the expected type.
    #[error("no PEM {0} block found")]
    NoPem(&'static str),
    /// The request is not a PKCS#10 request.
    #[error("x509: malformed certificate request")]
    MalformedRequest,
    /// The request's signature does not match its public key.
    #[error("unable to verify certificate request signature")]
    RequestSignature,
    /// The certificate is not X.509.
    #[error("x509: malformed certificate")]
    MalformedCertificate,
    /// The CA key could not be read.
    #[error("the CA key")]
    Key(#[source] rcgen::Error),
    /// The CA key is of a kind this module cannot name in a certificate.
    #[error("the CA key's signature algorithm is not supported")]
    Algorithm,
    /// A usage upstream does not know.
    #[error("unrecognized usage values: {0:?}")]
    Usages(Vec<String>),
    /// The CA is expired, or the validity cannot be met.
    #[error("{0}")]
    Validity(String),
    /// Signing failed.
    #[error("signing")]
    Sign(#[source] rcgen::Error),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A CA: its certificate and key.
pub struct Authority {
    cert_pem: String,
    key: KeyPair,
    subject: Vec<u8>,
    key_id: Option<Vec<u8>>,
    not_after: OffsetDateTime,
    algorithm: &'static [u8],
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority")
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

/// What a certificate request asks for, read and its signature checked.
#[derive(Debug, Clone)]
pub struct Request {
    /// The subject's CN (the last one, as Go reads it).
    pub common_name: String,
    /// The subject's Os, in order.
    pub organizations: Vec<String>,
    /// DNS subjectAltNames.
    pub dns_names: Vec<String>,
    /// IP subjectAltNames.
    pub ip_addresses: Vec<IpAddr>,
    /// Email subjectAltNames.
    pub emails: Vec<String>,
    /// URI subjectAltNames.
    pub uris: Vec<String>,
    subject: Vec<u8>,
    public_key: Vec<u8>,
    alt_names: Option<Vec<u8>>,
}

/// What a certificate says, for expiry checks and tests.
#[derive(Debug, Clone)]
pub struct Info {
    /// The subject's CN.
    pub common_name: String,
    /// The subject's Os.
    pub organizations: Vec<String>,
    /// The issuer's CN.
    pub issuer_common_name: String,
    /// Valid from.
    pub not_before: OffsetDateTime,
    /// Valid until.
    pub not_after: OffsetDateTime,
    /// The serial number, hex.
    pub serial: String,
    /// Whether it is a CA.
    pub is_ca: bool,
}

/// How a request is signed: upstream's `PermissiveSigningPolicy`.
#[derive(Debug, Clone)]
pub struct Policy<'a> {
    /// How long the certificate is valid.
    pub ttl: Duration,
    /// The CSR's `spec.usages`.
    pub usages: &'a [String],
    /// How far before `now` it becomes valid (clock skew).
    pub backdate: Duration,
    /// Certificates shorter than this do not lose the backdate at the end.
    pub short: Duration,
    /// The time of signing.
    pub now: OffsetDateTime,
}

/// Upstream's backdate (5 minutes) and short-lived horizon (8 hours).
pub const BACKDATE: Duration = Duration::from_secs(5 * 60);
/// See [`BACKDATE`].
pub const SHORT: Duration = Duration::from_secs(8 * 3600);

/// The validity of a certificate signed at `now` for `ttl` by a CA valid
/// until `signer_not_after`, as upstream's `PermissiveSigningPolicy`:
/// valid from `now - backdate`, until `now + ttl - backdate` (or
/// `now + ttl` when `ttl` is short), never past the CA.
pub fn boundaries(
    now: OffsetDateTime,
    ttl: Duration,
    backdate: Duration,
    short: Duration,
    signer_not_after: OffsetDateTime,
) -> Result<(OffsetDateTime, OffsetDateTime)> {
    let not_before = now - backdate;
    let lasts = if ttl < short {
        ttl
    } else {
        ttl.saturating_sub(backdate)
    };
    // Past the end of time (an absurd --cluster-signing-duration): the
    // CA's end, below, is the limit anyway.
    let mut not_after = now
        .checked_add(lasts.try_into().unwrap_or(time::Duration::MAX))
        .unwrap_or(signer_not_after);
    if not_after >= signer_not_after {
        not_after = signer_not_after;
    }
    if not_before >= signer_not_after {
        return Err(Error::Validity(format!(
            "the signer has expired: NotAfter={signer_not_after}"
        )));
    }
    if now >= signer_not_after {
        return Err(Error::Validity(format!(
            "refusing to sign a certificate that expired in the past: NotAfter={signer_not_after}"
        )));
    }
    Ok((not_before, not_after))
}

// DER, as much as a certificate needs.

fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
    out
}

fn sequence(parts: &[&[u8]]) -> Vec<u8> {
    tlv(0x30, &parts.concat())
}

fn oid(raw: &[u8]) -> Vec<u8> {
    tlv(0x06, raw)
}

fn der_time(t: OffsetDateTime) -> Vec<u8> {
    let t = t.to_offset(time::UtcOffset::UTC);
    let (y, mo, d) = (t.year(), u8::from(t.month()), t.day());
    let (h, mi, s) = (t.hour(), t.minute(), t.second());
    if (1950..2050).contains(&y) {
        let text = format!("{:02}{mo:02}{d:02}{h:02}{mi:02}{s:02}Z", y % 100);
        tlv(0x17, text.as_bytes())
    } else {
        let text = format!("{y:04}{mo:02}{d:02}{h:02}{mi:02}{s:02}Z");
        tlv(0x18, text.as_bytes())
    }
}

fn extension(oid_raw: &[u8], critical: bool, value: &[u8]) -> Vec<u8> {
    let id = oid(oid_raw);
    let value = tlv(0x04, value);
    if critical {
        sequence(&[&id, &[0x01, 0x01, 0xff], &value])
    } else {
        sequence(&[&id, &value])
    }
}

const OID_KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x0f];
const OID_EXT_KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x25];
const OID_BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x13];
const OID_AUTHORITY_KEY_ID: &[u8] = &[0x55, 0x1d, 0x23];

/// Key usage bits as Go numbers them (bit 0 digitalSignature ...).
fn key_usage_bit(usage: &str) -> Option<u16> {
    Some(match usage {
        "signing" | "digital signature" => 1 << 0,
        "content commitment" => 1 << 1,
        "key encipherment" => 1 << 2,
        "data encipherment" => 1 << 3,
        "key agreement" => 1 << 4,
        "cert sign" => 1 << 5,
        "crl sign" => 1 << 6,
        "encipher only" => 1 << 7,
        "decipher only" => 1 << 8,
        _ => return None,
    })
}

/// Extended key usages in Go's order, with their OIDs.
const EXT_KEY_USAGES: &[(&[&str], &[u8])] = &[
    (&["any"], &[0x55, 0x1d, 0x25, 0x00]),
    (&["server auth"], &[0x2b, 6, 1, 5, 5, 7, 3, 1]),
    (&["client auth"], &[0x2b, 6, 1, 5, 5, 7, 3, 2]),
    (&["code signing"], &[0x2b, 6, 1, 5, 5, 7, 3, 3]),
    (
        &["email protection", "s/mime"],
        &[0x2b, 6, 1, 5, 5, 7, 3, 4],
    ),
    (&["ipsec end system"], &[0x2b, 6, 1, 5, 5, 7, 3, 5]),
    (&["ipsec tunnel"], &[0x2b, 6, 1, 5, 5, 7, 3, 6]),
    (&["ipsec user"], &[0x2b, 6, 1, 5, 5, 7, 3, 7]),
    (&["timestamping"], &[0x2b, 6, 1, 5, 5, 7, 3, 8]),
    (&["ocsp signing"], &[0x2b, 6, 1, 5, 5, 7, 3, 9]),
    (
        &["microsoft sgc"],
        &[0x2b, 6, 1, 4, 1, 0x82, 0x37, 0x0a, 3, 3],
    ),
    (
        &["netscape sgc"],
        &[0x60, 0x86, 0x48, 0x01, 0x86, 0xf8, 0x42, 0x04, 0x01],
    ),
];

/// The keyUsage and extKeyUsage extensions for CSR usages (upstream's
/// `keyUsagesFromStrings`), or which usages are unknown.
fn usage_extensions(usages: &[String]) -> Result<Vec<Vec<u8>>> {
    let mut bits = 0u16;
    let mut ext = [false; EXT_KEY_USAGES.len()];
    let mut unknown = Vec::new();
    for usage in usages {
        if let Some(bit) = key_usage_bit(usage) {
            bits |= bit;
        } else if let Some(i) = EXT_KEY_USAGES
            .iter()
            .position(|(names, _)| names.contains(&usage.as_str()))
        {
            ext[i] = true;
        } else {
            unknown.push(usage.clone());
        }
    }
    if !unknown.is_empty() {
        return Err(Error::Usages(unknown));
    }
    let mut out = Vec::new();
    if bits != 0 {
        let bytes = [
            (bits as u8).reverse_bits(),
            ((bits >> 8) as u8).reverse_bits(),
        ];
        let used = if bytes[1] != 0 { 2 } else { 1 };
        let last = bytes[used - 1];
        let unused = last.trailing_zeros() as u8;
        let mut bit_string = vec![unused];
        bit_string.extend_from_slice(&bytes[..used]);
        out.push(extension(OID_KEY_USAGE, true, &tlv(0x03, &bit_string)));
    }
    let oids: Vec<Vec<u8>> = EXT_KEY_USAGES
        .iter()
        .zip(ext)
        .filter(|(_, on)| *on)
        .map(|((_, raw), _)| oid(raw))
        .collect();
    if !oids.is_empty() {
        out.push(extension(
            OID_EXT_KEY_USAGE,
            false,
            &tlv(0x30, &oids.concat()),
        ));
    }
    Ok(out)
}

fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The first certificate of a PEM bundle.
pub fn first_certificate(pem: &[u8]) -> Result<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem)
        .next()
        .and_then(|c| c.ok())
        .ok_or(Error::NoPem("CERTIFICATE"))
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn name_strings<'a>(
    attrs: impl Iterator<Item = &'a x509_parser::x509::AttributeTypeAndValue<'a>>,
) -> Vec<String> {
    attrs
        .filter_map(|a| a.as_str().ok().map(str::to_string))
        .collect()
}

impl Request {
    /// Reads a PEM CERTIFICATE REQUEST and checks its signature.
    pub fn from_pem(pem: &[u8]) -> Result<Self> {
        let der = CertificateSigningRequestDer::from_pem_slice(pem)
            .map_err(|_| Error::NoPem("CERTIFICATE REQUEST"))?;
        Self::from_der(der.as_ref())
    }

    /// Reads a DER certificate request and checks its signature.
    pub fn from_der(der: &[u8]) -> Result<Self> {
        let (_, csr) =
            X509CertificationRequest::from_der(der).map_err(|_| Error::MalformedRequest)?;
        csr.verify_signature()
            .map_err(|_| Error::RequestSignature)?;
        let info = &csr.certification_request_info;
        let mut request = Request {
            common_name: name_strings(info.subject.iter_common_name())
                .pop()
                .unwrap_or_default(),
            organizations: name_strings(info.subject.iter_organization()),
            dns_names: Vec::new(),
            ip_addresses: Vec::new(),
            emails: Vec::new(),
            uris: Vec::new(),
            subject: info.subject.as_raw().to_vec(),
            public_key: info.subject_pki.raw.to_vec(),
            alt_names: None,
        };
        for attribute in info.iter_attributes() {
            let ParsedCriAttribute::ExtensionRequest(asked) = attribute.parsed_attribute() else {
                continue;
            };
            for ext in &asked.extensions {
                if ext.oid != OID_X509_EXT_SUBJECT_ALT_NAME {
                    continue;
                }
                request.alt_names = Some(ext.value.to_vec());
                if let ParsedExtension::SubjectAlternativeName(san) = ext.parsed_extension() {
                    for name in &san.general_names {
                        match name {
                            GeneralName::DNSName(n) => request.dns_names.push(n.to_string()),
                            GeneralName::RFC822Name(n) => request.emails.push(n.to_string()),
                            GeneralName::URI(n) => request.uris.push(n.to_string()),
                            GeneralName::IPAddress(ip) => {
                                if let Ok(v4) = <[u8; 4]>::try_from(*ip) {
                                    request.ip_addresses.push(IpAddr::from(v4));
                                } else if let Ok(v6) = <[u8; 16]>::try_from(*ip) {
                                    request.ip_addresses.push(IpAddr::from(v6));
                                }
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        Ok(request)
    }
}

/// Reads what a PEM certificate (the first of a bundle) says.
pub fn inspect(pem: &[u8]) -> Result<Info> {
    let der = first_certificate(pem)?;
    inspect_der(der.as_ref())
}

fn inspect_der(der: &[u8]) -> Result<Info> {
    let (_, cert) =
        x509_parser::parse_x509_certificate(der).map_err(|_| Error::MalformedCertificate)?;
    Ok(Info {
        common_name: name_strings(cert.subject().iter_common_name())
            .pop()
            .unwrap_or_default(),
        organizations: name_strings(cert.subject().iter_organization()),
        issuer_common_name: name_strings(cert.issuer().iter_common_name())
            .pop()
            .unwrap_or_default(),
        not_before: cert.validity().not_before.to_datetime(),
        not_after: cert.validity().not_after.to_datetime(),
        serial: cert.raw_serial_as_string(),
        is_ca: cert.is_ca(),
    })
}

impl Authority {
    /// A CA from its PEM certificate and PEM private key.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self> {
        let key = KeyPair::from_pem(key_pem).map_err(Error::Key)?;
        let der = first_certificate(cert_pem.as_bytes())?;
        let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref())
            .map_err(|_| Error::MalformedCertificate)?;
        let key_id = cert
            .get_extension_unique(&OID_X509_EXT_SUBJECT_KEY_IDENTIFIER)
            .ok()
            .flatten()
            .and_then(|e| match e.parsed_extension() {
                ParsedExtension::SubjectKeyIdentifier(id) => Some(id.0.to_vec()),
                _ => None,
            });
        let algorithm: &'static [u8] = match key.algorithm() {
            a if a == &rcgen::PKCS_ECDSA_P256_SHA256 => &[
                0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02,
            ],
            a if a == &rcgen::PKCS_ECDSA_P384_SHA384 => &[
                0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03,
            ],
            a if a == &rcgen::PKCS_ED25519 => &[0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70],
            a if a == &rcgen::PKCS_RSA_SHA256 => &[
                0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b, 0x05,
                0x00,
            ],
            _ => return Err(Error::Algorithm),
        };
        Ok(Self {
            cert_pem: cert_pem.to_string(),
            subject: cert.subject().as_raw().to_vec(),
            not_after: cert.validity().not_after.to_datetime(),
            key,
            key_id,
            algorithm,
        })
    }

    /// A CA from its certificate and key files.
    pub fn load(cert: &Path, key: &Path) -> Result<Self> {
        Self::from_pem(&read(cert)?, &read(key)?)
    }

    /// The CA's certificate, PEM.
    pub fn certificate_pem(&self) -> &str {
        &self.cert_pem
    }

    /// When the CA expires.
    pub fn not_after(&self) -> OffsetDateTime {
        self.not_after
    }

    /// Signs `request` under `policy` (upstream's `Sign`): the subject,
    /// key and subjectAltNames of the request; the usages, validity and
    /// `CA:FALSE` of the policy; any other requested extension dropped.
    /// Returns the certificate, PEM.
    pub fn sign(&self, request: &Request, policy: &Policy<'_>) -> Result<String> {
        let mut extensions = usage_extensions(policy.usages)?;
        let (not_before, not_after) = boundaries(
            policy.now,
            policy.ttl,
            policy.backdate,
            policy.short,
            self.not_after,
        )?;
        extensions.push(extension(OID_BASIC_CONSTRAINTS, true, &[0x30, 0x00]));
        if let Some(aki) = self.authority_key_id() {
            extensions.push(aki);
        }
        if let Some(san) = &request.alt_names {
            extensions.push(extension(
                OID_X509_EXT_SUBJECT_ALT_NAME.as_bytes(),
                false,
                san,
            ));
        }
        self.issue(
            &request.subject,
            &request.public_key,
            not_before,
            not_after,
            &extensions,
        )
    }

    /// Re-signs the certificate `cert_pem` (kubeadm's `certs renew`): the
    /// same subject, key and extensions (the authority key identifier
    /// made this CA's), a new serial, valid from `not_before` to
    /// `not_after`. Returns the certificate, PEM.
    pub fn renew(
        &self,
        cert_pem: &[u8],
        not_before: OffsetDateTime,
        not_after: OffsetDateTime,
    ) -> Result<String> {
        let der = first_certificate(cert_pem)?;
        let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref())
            .map_err(|_| Error::MalformedCertificate)?;
        let mut extensions: Vec<Vec<u8>> = cert
            .extensions()
            .iter()
            .filter(|e| e.oid != OID_X509_EXT_AUTHORITY_KEY_IDENTIFIER)
            .map(|e| extension(e.oid.as_bytes(), e.critical, e.value))
            .collect();
        if let Some(aki) = self.authority_key_id() {
            extensions.push(aki);
        }
        let not_after = not_after.min(self.not_after);
        self.issue(
            cert.subject().as_raw(),
            cert.public_key().raw,
            not_before,
            not_after,
            &extensions,
        )
    }

    /// A client certificate for `user` (the CN) in `groups` (one `O` each,
    /// in order, before the CN as Go writes names) for the public key
    /// `public_key` (SubjectPublicKeyInfo DER), for digital signature and
    /// client auth, valid from `not_before` to `not_after` (never past the
    /// CA), as upstream's x509 authenticator reads users: the PKI's admin
    /// certificates and `skiff kubeconfig --user`. Returns it, PEM.
    pub fn client_certificate(
        &self,
        user: &str,
        groups: &[&str],
        public_key: &[u8],
        not_before: OffsetDateTime,
        not_after: OffsetDateTime,
    ) -> Result<String> {
        const ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];
        const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
        let attribute = |ty: &[u8], value: &str| {
            tlv(0x31, &sequence(&[&oid(ty), &tlv(0x0c, value.as_bytes())]))
        };
        let mut rdns: Vec<Vec<u8>> = groups.iter().map(|g| attribute(ORGANIZATION, g)).collect();
        rdns.push(attribute(COMMON_NAME, user));
        let subject = tlv(0x30, &rdns.concat());
        let mut extensions =
            usage_extensions(&["digital signature".to_string(), "client auth".to_string()])?;
        extensions.push(extension(OID_BASIC_CONSTRAINTS, true, &[0x30, 0x00]));
        if let Some(aki) = self.authority_key_id() {
            extensions.push(aki);
        }
        self.issue(
            &subject,
            public_key,
            not_before,
            not_after.min(self.not_after),
            &extensions,
        )
    }

    fn authority_key_id(&self) -> Option<Vec<u8>> {
        let id = self.key_id.as_ref()?;
        Some(extension(
            OID_AUTHORITY_KEY_ID,
            false,
            &sequence(&[&tlv(0x80, id)]),
        ))
    }

    fn issue(
        &self,
        subject: &[u8],
        public_key: &[u8],
        not_before: OffsetDateTime,
        not_after: OffsetDateTime,
        extensions: &[Vec<u8>],
    ) -> Result<String> {
        // 128 random bits, positive and of full length, as upstream.
        let mut serial: [u8; 16] = rand::random();
        serial[0] = (serial[0] & 0x7f) | 0x40;
        let version = [0xa0, 0x03, 0x02, 0x01, 0x02];
        let validity = sequence(&[&der_time(not_before), &der_time(not_after)]);
        let extensions = tlv(0xa3, &tlv(0x30, &extensions.concat()));
        let tbs = sequence(&[
            &version,
            &tlv(0x02, &serial),
            self.algorithm,
            &self.subject,
            &validity,
            subject,
            public_key,
            &extensions,
        ]);
        let signature = self.key.sign(&tbs).map_err(Error::Sign)?;
        let mut bits = vec![0u8];
        bits.extend_from_slice(&signature);
        let cert = sequence(&[&tbs, self.algorithm, &tlv(0x03, &bits)]);
        Ok(pem("CERTIFICATE", &cert))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn ca() -> Authority {
        let key = KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::default();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test-ca");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.not_after = rcgen::date_time_ymd(2040, 1, 1);
        let cert = params.self_signed(&key).unwrap();
        Authority::from_pem(&cert.pem(), &key.serialize_pem()).unwrap()
    }

    /// A request made by openssl-style tools: two Os, which rcgen's own
    /// request builder would fold into one.
    fn request(cn: &str, orgs: &[&str]) -> (KeyPair, Request) {
        let key = KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::default();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        if let Some(org) = orgs.first() {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, *org);
        }
        params.subject_alt_names =
            vec![rcgen::SanType::DnsName("node.example".try_into().unwrap())];
        let csr = params.serialize_request(&key).unwrap();
        let request = Request::from_pem(csr.pem().unwrap().as_bytes()).unwrap();
        (key, request)
    }

    fn now() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    fn usages(u: &[&str]) -> Vec<String> {
        u.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_signed_request_keeps_its_subject_and_gets_the_policy() {
        let ca = ca();
        let (_, req) = request("system:node:n1", &["system:nodes"]);
        assert_eq!(req.common_name, "system:node:n1");
        assert_eq!(req.organizations, ["system:nodes"]);
        assert_eq!(req.dns_names, ["node.example"]);
        let u = usages(&["digital signature", "client auth"]);
        let pem = ca
            .sign(
                &req,
                &Policy {
                    ttl: Duration::from_secs(3600),
                    usages: &u,
                    backdate: BACKDATE,
                    short: SHORT,
                    now: now(),
                },
            )
            .unwrap();
        let info = inspect(pem.as_bytes()).unwrap();
        assert_eq!(info.common_name, "system:node:n1");
        assert_eq!(info.organizations, ["system:nodes"]);
        assert_eq!(info.issuer_common_name, "test-ca");
        assert!(!info.is_ca);
        assert_eq!(info.not_before, now() - BACKDATE);
        assert_eq!(info.not_after, now() + Duration::from_secs(3600));
        // It verifies against the CA (webpki, as the API server checks).
        let der = first_certificate(pem.as_bytes()).unwrap();
        let (_, parsed) = x509_parser::parse_x509_certificate(der.as_ref()).unwrap();
        let ca_der = first_certificate(ca.certificate_pem().as_bytes()).unwrap();
        let (_, ca_parsed) = x509_parser::parse_x509_certificate(ca_der.as_ref()).unwrap();
        parsed
            .verify_signature(Some(ca_parsed.public_key()))
            .unwrap();
        let eku = parsed.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.client_auth && !eku.server_auth);
        let ku = parsed.key_usage().unwrap().unwrap().value;
        assert!(ku.digital_signature() && !ku.key_encipherment());
        assert!(!parsed.basic_constraints().unwrap().unwrap().value.ca);
    }

    #[test]
    fn several_organizations_stay_several() {
        let out = std::process::Command::new("openssl")
            .args([
                "req",
                "-new",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                "/dev/null",
                "-subj",
                "/CN=jane/O=dev/O=ops",
            ])
            .output();
        let Some(out) = out.ok().filter(|o| o.status.success()) else {
            eprintln!("no openssl: skipped");
            return;
        };
        let req = Request::from_pem(&out.stdout).unwrap();
        assert_eq!(req.organizations, ["dev", "ops"]);
        let u = usages(&["client auth"]);
        let pem = ca()
            .sign(
                &req,
                &Policy {
                    ttl: Duration::from_secs(86400 * 365),
                    usages: &u,
                    backdate: BACKDATE,
                    short: SHORT,
                    now: now(),
                },
            )
            .unwrap();
        let info = inspect(pem.as_bytes()).unwrap();
        assert_eq!(info.common_name, "jane");
        assert_eq!(info.organizations, ["dev", "ops"]);
        // Long-lived: the backdate comes off the end.
        assert_eq!(
            info.not_after,
            now() + Duration::from_secs(86400 * 365) - BACKDATE
        );
    }

    #[test]
    fn a_client_certificate_names_every_group() {
        use rcgen::PublicKeyData as _;
        let ca = ca();
        let key = KeyPair::generate().unwrap();
        let pem = ca
            .client_certificate(
                "jane",
                &["devs", "ops", "system:masters"],
                &key.subject_public_key_info(),
                now(),
                now() + Duration::from_secs(3600),
            )
            .unwrap();
        let info = inspect(pem.as_bytes()).unwrap();
        assert_eq!(info.common_name, "jane");
        assert_eq!(info.organizations, ["devs", "ops", "system:masters"]);
        assert_eq!(info.not_after, now() + Duration::from_secs(3600));
        // webpki (what the API server's rustls runs) takes it as a client
        // certificate of this CA.
        let der = first_certificate(pem.as_bytes()).unwrap();
        let ca_der = first_certificate(ca.certificate_pem().as_bytes()).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca_der).unwrap();
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        let at = rustls::pki_types::UnixTime::since_unix_epoch(Duration::from_secs(
            (now().unix_timestamp() + 60) as u64,
        ));
        verifier.verify_client_cert(&der, &[], at).unwrap();
    }

    #[test]
    fn validity_is_upstreams() {
        let far = now() + Duration::from_secs(86400 * 3650);
        let (nb, na) = boundaries(now(), Duration::from_secs(600), BACKDATE, SHORT, far).unwrap();
        // No overflow for any duration.
        let (_, na_max) = boundaries(now(), Duration::MAX, BACKDATE, SHORT, far).unwrap();
        assert_eq!(na_max, far);
        assert_eq!(
            (nb, na),
            (now() - BACKDATE, now() + Duration::from_secs(600))
        );
        let (_, na) =
            boundaries(now(), Duration::from_secs(9 * 3600), BACKDATE, SHORT, far).unwrap();
        assert_eq!(na, now() + Duration::from_secs(9 * 3600) - BACKDATE);
        // Capped by the CA.
        let soon = now() + Duration::from_secs(100);
        let (_, na) = boundaries(now(), Duration::from_secs(3600), BACKDATE, SHORT, soon).unwrap();
        assert_eq!(na, soon);
        // An expired CA signs nothing.
        let past = now() - Duration::from_secs(1);
        let err = boundaries(now(), Duration::from_secs(3600), BACKDATE, SHORT, past).unwrap_err();
        assert!(err.to_string().starts_with("refusing to sign"), "{err}");
        let long_past = now() - Duration::from_secs(3600);
        let err =
            boundaries(now(), Duration::from_secs(3600), BACKDATE, SHORT, long_past).unwrap_err();
        assert!(
            err.to_string().starts_with("the signer has expired"),
            "{err}"
        );
    }

    #[test]
    fn unknown_usages_are_refused_by_name() {
        let err = usage_extensions(&usages(&["client auth", "flying", "x"])).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"unrecognized usage values: ["flying", "x"]"#
        );
    }

    #[test]
    fn a_tampered_request_is_refused() {
        let key = KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::default();
        let csr = params.serialize_request(&key).unwrap();
        let mut der = csr.der().to_vec();
        let last = der.len() - 1;
        der[last] ^= 0xff;
        assert!(matches!(
            Request::from_der(&der),
            Err(Error::RequestSignature | Error::MalformedRequest)
        ));
        assert!(matches!(
            Request::from_der(b"junk"),
            Err(Error::MalformedRequest)
        ));
    }

    #[test]
    fn renewal_keeps_subject_key_and_names() {
        let ca = ca();
        let (_, req) = request("kube-apiserver", &[]);
        let u = usages(&["digital signature", "key encipherment", "server auth"]);
        let old = ca
            .sign(
                &req,
                &Policy {
                    ttl: Duration::from_secs(86400),
                    usages: &u,
                    backdate: BACKDATE,
                    short: SHORT,
                    now: now(),
                },
            )
            .unwrap();
        let later = now() + Duration::from_secs(3600);
        let new = ca
            .renew(
                old.as_bytes(),
                later,
                later + Duration::from_secs(86400 * 365),
            )
            .unwrap();
        let (a, b) = (
            inspect(old.as_bytes()).unwrap(),
            inspect(new.as_bytes()).unwrap(),
        );
        assert_eq!(a.common_name, b.common_name);
        assert_ne!(a.serial, b.serial);
        assert_eq!(b.not_after, later + Duration::from_secs(86400 * 365));
        let old_der = first_certificate(old.as_bytes()).unwrap();
        let new_der = first_certificate(new.as_bytes()).unwrap();
        let (_, o) = x509_parser::parse_x509_certificate(old_der.as_ref()).unwrap();
        let (_, n) = x509_parser::parse_x509_certificate(new_der.as_ref()).unwrap();
        assert_eq!(o.public_key().raw, n.public_key().raw);
        assert_eq!(
            o.subject_alternative_name().unwrap().unwrap().value,
            n.subject_alternative_name().unwrap().unwrap().value
        );
    }
}
