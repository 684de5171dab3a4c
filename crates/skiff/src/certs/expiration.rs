//! `skiff certs check-expiration` (kubeadm's table: CERTIFICATE, EXPIRES,
//! RESIDUAL TIME, CERTIFICATE AUTHORITY, EXTERNALLY MANAGED, then the
//! CAs) and the server's log warning when a certificate of its data dir
//! expires within 30 days (at start, then daily).
//!
//! This module owns only reading expiry dates and saying them; it
//! renews nothing ([`super::renew`] does).

use std::path::Path;
use std::time::Duration;

use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use super::{discover, pki_dir, Entry, Inventory, Result};

/// How early the server warns.
pub const WARN_BEFORE: Duration = Duration::from_secs(30 * 86400);
/// How often it looks again.
pub const WARN_EVERY: Duration = Duration::from_secs(86400);

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A time as kubeadm prints it: `Jan 02, 2006 15:04 UTC`.
pub fn date(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{} {:02}, {} {:02}:{:02} UTC",
        MONTHS[usize::from(u8::from(t.month())) - 1],
        t.day(),
        t.year(),
        t.hour(),
        t.minute()
    )
}

/// The time left as Kubernetes' `ShortHumanDuration`: `45s`, `12m`,
/// `5h`, `364d`, `9y`; `<invalid>` once past.
pub fn residual(left: time::Duration) -> String {
    let seconds = left.whole_seconds();
    if seconds < -1 {
        "<invalid>".into()
    } else if seconds < 0 {
        "0s".into()
    } else if seconds < 60 {
        format!("{seconds}s")
    } else if seconds < 3600 {
        format!("{}m", seconds / 60)
    } else if seconds < 86400 {
        format!("{}h", seconds / 3600)
    } else if seconds < 86400 * 365 {
        format!("{}d", seconds / 86400)
    } else {
        format!("{}y", seconds / (86400 * 365))
    }
}

/// The CA that issued `entry`, by the CAs' common names (`ca`: the file
/// stem, as kubeadm names them).
fn issuer_name(entry: &Entry, inventory: &Inventory) -> String {
    inventory
        .authorities
        .iter()
        .find(|ca| ca.info.common_name == entry.info.issuer_common_name)
        .map(|ca| ca.name.clone())
        .unwrap_or_default()
}

fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}   ", width = widths[c]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// kubeadm's `certs check-expiration` report for `inventory` at `now`;
/// `external` says whether the CA key is missing.
pub fn report(inventory: &Inventory, now: OffsetDateTime, external: bool) -> String {
    let managed = if external { "yes" } else { "no" };
    let mut rows = vec![vec![
        "CERTIFICATE".to_string(),
        "EXPIRES".into(),
        "RESIDUAL TIME".into(),
        "CERTIFICATE AUTHORITY".into(),
        "EXTERNALLY MANAGED".into(),
    ]];
    for entry in &inventory.certificates {
        rows.push(vec![
            entry.name.clone(),
            date(entry.info.not_after),
            residual(entry.info.not_after - now),
            issuer_name(entry, inventory),
            managed.into(),
        ]);
    }
    let mut out = table(&rows);
    out.push('\n');
    let mut rows = vec![vec![
        "CERTIFICATE AUTHORITY".to_string(),
        "EXPIRES".into(),
        "RESIDUAL TIME".into(),
        "EXTERNALLY MANAGED".into(),
    ]];
    for ca in &inventory.authorities {
        rows.push(vec![
            ca.name.clone(),
            date(ca.info.not_after),
            residual(ca.info.not_after - now),
            managed.into(),
        ]);
    }
    out.push_str(&table(&rows));
    out
}

/// `skiff certs check-expiration --data-dir D`.
pub fn check(data_dir: &Path) -> Result<String> {
    let inventory = discover(data_dir)?;
    let external = !pki_dir(data_dir).join("ca.key").exists();
    Ok(format!(
        "[check-expiration] Reading certificates from {}\n\n{}",
        data_dir.display(),
        report(&inventory, OffsetDateTime::now_utc(), external)
    ))
}

/// The certificates (and CAs) of `inventory` expiring within `within` of
/// `now`: file or kubeconfig name, and expiry.
pub fn expiring(
    inventory: &Inventory,
    now: OffsetDateTime,
    within: Duration,
) -> Vec<(String, OffsetDateTime)> {
    inventory
        .certificates
        .iter()
        .chain(&inventory.authorities)
        .filter(|e| e.info.not_after - now < within)
        .map(|e| {
            let file = match &e.source {
                super::Source::File(p) => p.display().to_string(),
                super::Source::Kubeconfig { path, .. } => path.display().to_string(),
            };
            (file, e.info.not_after)
        })
        .collect()
}

/// Logs a warning for each certificate of `data_dir` expiring within 30
/// days, now and then daily, until `shutdown`.
pub async fn warn_daily(data_dir: std::path::PathBuf, shutdown: CancellationToken) {
    loop {
        match discover(&data_dir) {
            Ok(inventory) => {
                for (file, not_after) in
                    expiring(&inventory, OffsetDateTime::now_utc(), WARN_BEFORE)
                {
                    tracing::warn!(
                        file,
                        expires = %date(not_after),
                        "certificate expires within 30 days; renew it with `skiff certs renew all --data-dir {}`",
                        data_dir.display()
                    );
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot check the certificates' expiry"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(WARN_EVERY) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn residual_time_reads_as_kubeadms() {
        let d = time::Duration::seconds;
        assert_eq!(residual(d(-10)), "<invalid>");
        assert_eq!(residual(d(30)), "30s");
        assert_eq!(residual(d(600)), "10m");
        assert_eq!(residual(d(7200)), "2h");
        assert_eq!(residual(d(364 * 86400 + 5)), "364d");
        assert_eq!(residual(d(9 * 365 * 86400 + 100)), "9y");
    }

    fn entry(name: &str, not_after: OffsetDateTime, is_ca: bool) -> Entry {
        Entry {
            name: name.into(),
            source: super::super::Source::File(format!("/pki/{name}.crt").into()),
            info: skiff_client::certificate::authority::Info {
                common_name: name.into(),
                organizations: Vec::new(),
                issuer_common_name: "ca".into(),
                not_before: not_after - time::Duration::days(365),
                not_after,
                serial: "01".into(),
                is_ca,
            },
            pem: String::new(),
        }
    }

    #[test]
    fn only_what_expires_within_30_days_is_warned_of() {
        let now = OffsetDateTime::from_unix_timestamp(1_764_941_400).unwrap();
        let inventory = Inventory {
            certificates: vec![
                entry("apiserver", now + time::Duration::days(29), false),
                entry("admin", now + time::Duration::days(31), false),
                entry("old", now - time::Duration::days(1), false),
            ],
            authorities: vec![entry("ca", now + time::Duration::days(20), true)],
        };
        let warned: Vec<String> = expiring(&inventory, now, WARN_BEFORE)
            .into_iter()
            .map(|(file, _)| file)
            .collect();
        assert_eq!(
            warned,
            ["/pki/apiserver.crt", "/pki/old.crt", "/pki/ca.crt"]
        );
        let table = report(&inventory, now, false);
        assert!(table.starts_with("CERTIFICATE   EXPIRES"), "{table}");
        assert!(
            table.contains(
                "\nold           Dec 04, 2025 13:30 UTC   <invalid>       ca                      no\n"
            ),
            "{table}"
        );
    }

    #[test]
    fn dates_read_as_kubeadms() {
        let t = OffsetDateTime::from_unix_timestamp(1_764_941_400).unwrap();
        assert_eq!(date(t), "Dec 05, 2025 13:30 UTC");
    }
}
