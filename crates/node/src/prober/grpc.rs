//! One gRPC try (upstream's pkg/probe/grpc): `grpc.health.v1.Health/Check`
//! for the probe's service on podIP:port, in plaintext, over a connection
//! of its own, all of it inside timeoutSeconds. SERVING succeeds; any
//! other answer or error fails with upstream's text. As grpc-go's
//! blocking dial, a connection that cannot be made is tried again until
//! the deadline, which then ends the try.

use std::time::Duration;

use tokio::time::Instant;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

use super::dial::{join_host_port, USER_AGENT};
use super::Outcome;
use crate::backoff::go_duration;
use crate::runtime::go_code;

/// grpc-go's first reconnect delay.
const REDIAL: Duration = Duration::from_secs(1);

/// Runs one check of `service` at `host:port`.
pub async fn probe(host: &str, port: u16, service: &str, timeout: Duration) -> Outcome {
    let deadline = Instant::now() + timeout;
    let addr = join_host_port(host, port);
    let within = go_duration(timeout);
    let connect_timeout = || {
        Outcome::Failure(format!(
            "timeout: failed to connect service {addr:?} within {within}: context deadline exceeded"
        ))
    };
    let endpoint = match tonic::transport::Endpoint::from_shared(format!("http://{addr}")) {
        Ok(e) => e,
        Err(e) => {
            return Outcome::Failure(format!("error: failed to connect service at {addr:?}: {e}"))
        }
    };
    let endpoint = match endpoint.user_agent(USER_AGENT) {
        Ok(e) => e,
        Err(e) => {
            return Outcome::Failure(format!("error: failed to connect service at {addr:?}: {e}"))
        }
    };
    let channel = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return connect_timeout();
        }
        let attempt = endpoint.clone().connect_timeout(left);
        match tokio::time::timeout_at(deadline, attempt.connect()).await {
            Ok(Ok(channel)) => break channel,
            Ok(Err(_)) => {
                let wake = (Instant::now() + REDIAL).min(deadline);
                tokio::time::sleep_until(wake).await;
            }
            Err(_) => return connect_timeout(),
        }
    };
    let mut client = HealthClient::new(channel);
    let mut request = tonic::Request::new(HealthCheckRequest {
        service: service.to_string(),
    });
    request.set_timeout(deadline.saturating_duration_since(Instant::now()));
    let answer = match tokio::time::timeout_at(deadline, client.check(request)).await {
        Err(_) => {
            return Outcome::Failure(format!(
                "timeout: health rpc did not complete within {within}"
            ))
        }
        Ok(answer) => answer,
    };
    match answer {
        Ok(response) => {
            let status = response.into_inner().status;
            match ServingStatus::try_from(status) {
                Ok(ServingStatus::Serving) => Outcome::Success,
                Ok(other) => Outcome::Failure(format!(
                    "service unhealthy (responded with {:?})",
                    other.as_str_name()
                )),
                // Go prints an unknown enum value as its number.
                Err(_) => Outcome::Failure(format!(
                    "service unhealthy (responded with \"{status}\")"
                )),
            }
        }
        Err(status) => match status.code() {
            tonic::Code::Unimplemented => Outcome::Failure(format!(
                "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
                status.message()
            )),
            // tonic's own timer ends the call as Cancelled ("Timeout
            // expired") at the deadline.
            tonic::Code::DeadlineExceeded => Outcome::Failure(format!(
                "timeout: health rpc did not complete within {within}"
            )),
            tonic::Code::Cancelled if Instant::now() + Duration::from_millis(50) >= deadline => {
                Outcome::Failure(format!(
                    "timeout: health rpc did not complete within {within}"
                ))
            }
            code => Outcome::Failure(format!(
                "error: health rpc probe failed: rpc error: code = {} desc = {}",
                go_code(code),
                status.message()
            )),
        },
    }
}
