//! One try of a probe, dispatched by handler (upstream's pkg/probe):
//! exec (CRI ExecSync; the command's output as the failure text),
//! tcpSocket (a connect: `dial tcp IP:PORT: connect: connection
//! refused`), httpGet over HTTP or HTTPS (see [`super::http`]) and gRPC
//! health checks (see [`super::grpc`]). A try's [`Outcome`] is upstream's
//! probe.Result: success, success with a warning (a redirect the kubelet
//! does not follow), or failure with upstream's text.
//!
//! It keeps nothing between tries and records no events: the probe's
//! task counts the outcomes and words the events.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::dial::{connect, join_host_port};
use super::{Outcome, Target};
use crate::runtime::Runtime;

/// A port by number, or by the name of one of the container's ports.
fn port(p: &IntOrString, c: &Container) -> Result<u16, String> {
    match p {
        IntOrString::Int(n) => u16::try_from(*n).map_err(|_| format!("invalid port number: {n}")),
        IntOrString::String(name) => match name.parse::<u16>() {
            Ok(n) => Ok(n),
            Err(_) => c
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .and_then(|p| u16::try_from(p.container_port).ok())
                .ok_or_else(|| format!("couldn't find port: {name} in {}", c.name)),
        },
    }
}

/// Runs one try, a warning counting as success; `Err` carries the
/// failure's text (for lifecycle hooks).
pub async fn run(
    probe: &Probe,
    c: &Container,
    target: &Target,
    runtime: &dyn Runtime,
    timeout: Duration,
) -> Result<(), String> {
    match try_once(probe, c, target, runtime, timeout).await {
        Outcome::Success | Outcome::Warning(_) => Ok(()),
        Outcome::Failure(text) => Err(text),
    }
}

/// Runs one try of `probe` against `target`, bounded by `timeout`.
pub async fn try_once(
    probe: &Probe,
    c: &Container,
    target: &Target,
    runtime: &dyn Runtime,
    timeout: Duration,
) -> Outcome {
    match try_handler(probe, c, target, runtime, timeout).await {
        Ok(outcome) => outcome,
        Err(text) => Outcome::Failure(text),
    }
}

async fn try_handler(
    probe: &Probe,
    c: &Container,
    target: &Target,
    runtime: &dyn Runtime,
    timeout: Duration,
) -> Result<Outcome, String> {
    if let Some(exec) = &probe.exec {
        let cmd = exec.command.clone().unwrap_or_default();
        let shown = cmd.join(" ");
        return Ok(
            match runtime
                .exec_sync(&target.container_id, cmd, timeout.as_secs() as i64)
                .await
            {
                Ok((0, _, _)) => Outcome::Success,
                Ok((_, stdout, stderr)) => {
                    let mut out = String::from_utf8_lossy(&stdout).into_owned();
                    out.push_str(&String::from_utf8_lossy(&stderr));
                    Outcome::Failure(out)
                }
                Err(e) if e.code() == tonic::Code::DeadlineExceeded => {
                    Outcome::Failure(format!("command \"{shown}\" timed out"))
                }
                Err(e) => Outcome::Failure(e.go_text()),
            },
        );
    }
    let ip = target.pod_ip.clone().unwrap_or_default();
    if let Some(tcp) = &probe.tcp_socket {
        let host = tcp.host.clone().filter(|h| !h.is_empty()).unwrap_or(ip);
        let addr = join_host_port(&host, port(&tcp.port, c)?);
        return Ok(match connect(&addr, timeout).await {
            Ok(_) => Outcome::Success,
            Err(e) => Outcome::Failure(e),
        });
    }
    if let Some(http) = &probe.http_get {
        let host = http.host.clone().filter(|h| !h.is_empty()).unwrap_or(ip);
        return Ok(super::http::probe(
            http.scheme.as_deref().unwrap_or_default(),
            &host,
            port(&http.port, c)?,
            http.path.as_deref().unwrap_or_default(),
            http.http_headers.as_deref().unwrap_or_default(),
            timeout,
        )
        .await);
    }
    if let Some(grpc) = &probe.grpc {
        let port =
            u16::try_from(grpc.port).map_err(|_| format!("invalid port number: {}", grpc.port))?;
        let service = grpc.service.as_deref().unwrap_or_default();
        return Ok(super::grpc::probe(&ip, port, service, timeout).await);
    }
    Err("probe has no handler".into())
}
