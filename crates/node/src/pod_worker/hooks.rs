//! Container lifecycle hooks (upstream's pkg/kubelet/lifecycle): postStart
//! right after a container starts (it is not Running until the hook
//! returns) and preStop before it is sent SIGTERM, inside its grace
//! period. Handlers: exec (CRI ExecSync), httpGet (the probes' HTTP try)
//! and sleep. Failures are worded as upstream's FailedPostStartHook and
//! FailedPreStopHook events.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Pod, Probe};

use crate::runtime::Runtime;

/// Runs `handler` against container `container_id`; `Err` is the event's
/// message.
pub async fn run(
    handler: &LifecycleHandler,
    pod: &Pod,
    c: &Container,
    container_id: &str,
    pod_ip: Option<&str>,
    runtime: &dyn Runtime,
    timeout: Option<Duration>,
) -> Result<(), String> {
    let pod_ref = crate::podspec::pod_ref(pod);
    if let Some(exec) = &handler.exec {
        let cmd = exec.command.clone().unwrap_or_default();
        let shown = format!("[{}]", cmd.join(" "));
        let joined = cmd.join(" ");
        // CRI ExecSync: 0 is no timeout.
        let t = timeout.map(|t| t.as_secs().max(1) as i64).unwrap_or(0);
        let result = runtime.exec_sync(container_id, cmd, t).await;
        let (err, msg) = match result {
            Ok((0, _, _)) => return Ok(()),
            Ok((code, stdout, stderr)) => {
                let mut out = String::from_utf8_lossy(&stdout).into_owned();
                out.push_str(&String::from_utf8_lossy(&stderr));
                (format!("command '{joined}' exited with {code}: {out}"), out)
            }
            Err(e) => (e.go_text(), String::new()),
        };
        return Err(format!(
            "Exec lifecycle hook ({shown}) for Container \"{}\" in Pod \"{pod_ref}\" failed - error: {err}, message: {msg:?}",
            c.name
        ));
    }
    if let Some(http) = &handler.http_get {
        let probe = Probe {
            http_get: Some(http.clone()),
            ..Probe::default()
        };
        let target = crate::prober::Target {
            container_id: container_id.to_string(),
            pod_ip: pod_ip.map(str::to_string),
        };
        let t = timeout.unwrap_or(Duration::from_secs(30));
        return crate::prober::handlers::run(&probe, c, &target, runtime, t)
            .await
            .map_err(|e| {
                format!(
                    "HTTP lifecycle hook ({}) for Container \"{}\" in Pod \"{pod_ref}\" failed - error: {e}",
                    http.path.as_deref().unwrap_or("/"),
                    c.name
                )
            });
    }
    if let Some(sleep) = &handler.sleep {
        let d = Duration::from_secs(sleep.seconds.max(0) as u64);
        match timeout {
            Some(t) if t < d => tokio::time::sleep(t).await,
            _ => tokio::time::sleep(d).await,
        }
        return Ok(());
    }
    Err(format!(
        "no handler for a lifecycle hook of Container \"{}\" in Pod \"{pod_ref}\"",
        c.name
    ))
}
