//! One try of a probe: exec, httpGet or tcpSocket, with upstream's
//! failure texts (the command's output; `HTTP probe failed with
//! statuscode: 500`; `dial tcp IP:PORT: connect: connection refused`).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::Target;
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

fn dial_error(addr: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => {
            format!("dial tcp {addr}: connect: connection refused")
        }
        std::io::ErrorKind::TimedOut => format!("dial tcp {addr}: i/o timeout"),
        _ => format!("dial tcp {addr}: {e}"),
    }
}

async fn connect(addr: &str, timeout: Duration) -> Result<tokio::net::TcpStream, String> {
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(dial_error(addr, &e)),
        Err(_) => Err(format!("dial tcp {addr}: i/o timeout")),
    }
}

/// Runs one try; `Err` carries the failure's text.
pub async fn run(
    probe: &Probe,
    c: &Container,
    target: &Target,
    runtime: &dyn Runtime,
    timeout: Duration,
) -> Result<(), String> {
    if let Some(exec) = &probe.exec {
        let cmd = exec.command.clone().unwrap_or_default();
        let shown = cmd.join(" ");
        return match runtime
            .exec_sync(&target.container_id, cmd, timeout.as_secs() as i64)
            .await
        {
            Ok((0, _, _)) => Ok(()),
            Ok((_, stdout, stderr)) => {
                let mut out = String::from_utf8_lossy(&stdout).into_owned();
                out.push_str(&String::from_utf8_lossy(&stderr));
                Err(out)
            }
            Err(e) if e.code() == tonic::Code::DeadlineExceeded => {
                Err(format!("command \"{shown}\" timed out"))
            }
            Err(e) => Err(e.go_text()),
        };
    }
    let ip = target.pod_ip.clone().unwrap_or_default();
    if let Some(tcp) = &probe.tcp_socket {
        let host = tcp.host.clone().filter(|h| !h.is_empty()).unwrap_or(ip);
        let addr = format!("{host}:{}", port(&tcp.port, c)?);
        return connect(&addr, timeout).await.map(|_| ());
    }
    if let Some(http) = &probe.http_get {
        let host = http.host.clone().filter(|h| !h.is_empty()).unwrap_or(ip);
        let addr = format!("{host}:{}", port(&http.port, c)?);
        let path = http
            .path
            .clone()
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "/".into());
        let scheme = http.scheme.as_deref().unwrap_or("HTTP").to_lowercase();
        let url = format!("{scheme}://{addr}{path}");
        if scheme != "http" {
            return Err(format!(
                "Get \"{url}\": HTTPS probes are not supported on this node yet"
            ));
        }
        let attempt = async {
            let mut s = connect(&addr, timeout)
                .await
                .map_err(|e| format!("Get \"{url}\": {e}"))?;
            let mut req = format!(
                "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: kube-probe/1.33\r\nAccept: */*\r\nConnection: close\r\n"
            );
            for h in http.http_headers.iter().flatten() {
                req.push_str(&format!("{}: {}\r\n", h.name, h.value));
            }
            req.push_str("\r\n");
            s.write_all(req.as_bytes())
                .await
                .map_err(|e| format!("Get \"{url}\": {e}"))?;
            let mut head = vec![0u8; 64];
            let n = s
                .read(&mut head)
                .await
                .map_err(|e| format!("Get \"{url}\": {e}"))?;
            let line = String::from_utf8_lossy(head.get(..n).unwrap_or_default()).into_owned();
            let code: u16 = line
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .ok_or_else(|| format!("Get \"{url}\": malformed HTTP response"))?;
            if (200..400).contains(&code) {
                Ok(())
            } else {
                Err(format!("HTTP probe failed with statuscode: {code}"))
            }
        };
        return match tokio::time::timeout(timeout, attempt).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
            )),
        };
    }
    if probe.grpc.is_some() {
        return Err("gRPC probes are not supported on this node yet".into());
    }
    Err("probe has no handler".into())
}
