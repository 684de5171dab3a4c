//! `skiff certs renew [all|NAME] --data-dir D`, as kubeadm's: each
//! certificate the cluster CA signed is signed again by it with the same
//! subject, names, extensions and key (kubeadm keeps keys), valid for a
//! year from now (never past the CA); `pki/` files are replaced
//! atomically and kubeconfigs rewritten in place (with their `pki/`
//! copy). CAs are not renewed.
//!
//! This module owns only that rewrite. The running server picks up its
//! new serving certificate by itself; other clients read their
//! kubeconfig again at their next start (kubectl at every run).

use std::path::Path;
use std::time::Duration;

use skiff_client::certificate::authority::{self, Authority};
use skiff_client::certificate::kubeconfig;
use time::OffsetDateTime;

use super::{discover, pki_dir, Entry, Error, Result, Source};

/// How long a renewed certificate is valid (kubeadm: a year).
pub const VALIDITY: Duration = Duration::from_secs(365 * 86400);

/// kubeadm's words for what a certificate is for.
fn description(entry: &Entry) -> String {
    match (entry.name.as_str(), &entry.source) {
        ("apiserver", _) => "certificate for serving the Kubernetes API".into(),
        ("apiserver-kubelet-client", _) => {
            "certificate for the API server to connect to kubelet".into()
        }
        ("admin.kubeconfig", _) => {
            "certificate embedded in the kubeconfig file for the admin to use and for skiff itself"
                .into()
        }
        (name, Source::Kubeconfig { .. }) => {
            format!("certificate embedded in the kubeconfig file {name}")
        }
        (name, Source::File(_)) => format!("certificate {name}"),
    }
}

fn certificate_error(name: &str) -> impl FnOnce(authority::Error) -> Error + '_ {
    move |source| Error::Certificate {
        name: name.to_string(),
        source,
    }
}

fn kubeconfig_error(name: &str) -> impl FnOnce(kubeconfig::Error) -> Error + '_ {
    move |source| Error::Kubeconfig {
        name: name.to_string(),
        source,
    }
}

/// Renews `which` (`all` or a name `check-expiration` lists) in
/// `data_dir` at `now`; returns the lines to print.
pub fn renew(data_dir: &Path, which: &str, now: OffsetDateTime) -> Result<Vec<String>> {
    let dir = pki_dir(data_dir);
    let key = dir.join("ca.key");
    if !key.exists() {
        return Err(Error::External(key));
    }
    let ca = Authority::load(&dir.join("ca.crt"), &key).map_err(certificate_error("ca"))?;
    let ca_name = authority::inspect(ca.certificate_pem().as_bytes())
        .map_err(certificate_error("ca"))?
        .common_name;
    let inventory = discover(data_dir)?;
    let chosen: Vec<&Entry> = if which == "all" {
        inventory.certificates.iter().collect()
    } else {
        let entry = inventory
            .certificates
            .iter()
            .find(|e| e.name == which)
            .ok_or_else(|| Error::Unknown(which.to_string()))?;
        vec![entry]
    };
    let mut lines = Vec::new();
    for entry in chosen {
        if entry.info.issuer_common_name != ca_name {
            lines.push(format!(
                "{} is not signed by the cluster CA; skipped",
                description(entry)
            ));
            continue;
        }
        let name = entry.name.as_str();
        let renewed = ca
            .renew(
                entry.pem.as_bytes(),
                now - authority::BACKDATE,
                now + VALIDITY,
            )
            .map_err(certificate_error(name))?;
        match &entry.source {
            Source::File(path) => {
                kubeconfig::write_atomic(path, renewed.as_bytes(), false)
                    .map_err(kubeconfig_error(name))?;
            }
            Source::Kubeconfig {
                path,
                location,
                twin,
            } => {
                let current = kubeconfig::read(path)
                    .map_err(kubeconfig_error(name))?
                    .ok_or_else(|| Error::Unknown(name.to_string()))?;
                if let Some(twin) = twin {
                    kubeconfig::write_atomic(twin, renewed.as_bytes(), false)
                        .map_err(kubeconfig_error(name))?;
                }
                kubeconfig::write(location, &renewed, &current.key_pem)
                    .map_err(kubeconfig_error(name))?;
            }
        }
        lines.push(format!("{} renewed", description(entry)));
    }
    lines.push(String::new());
    lines.push(
        "Done renewing certificates. A running skiff server serves its new certificate within a few \
         seconds, without a restart; other components read their renewed kubeconfig at their next start."
            .into(),
    );
    Ok(lines)
}
