//! The kubelet's exec, attach and portForward handlers
//! (`pkg/kubelet/server/server.go`: `getExec`, `getAttach`,
//! `getPortForward`, and the `GetExec`/`GetAttach`/`GetPortForward` they
//! call): the options from the query, the pod from the agent's index, the
//! running container or ready sandbox from the runtime, the CRI call for a
//! streaming URL, then [`super::proxy::upgrade`] to it. Every refusal is a
//! plain-text answer before any upgrade, in the kubelet's statuses and
//! words. An attach also waits until its container has run for the
//! kubelet's relist period ([`ATTACH_SETTLE`]) and refuses a container
//! whose process has exited though the runtime still lists it running.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;

use super::super::{text, PodLogInfo, Refusal, Shared};
use super::proxy;
use crate::observed::CONTAINER_NAME;
use crate::runtime::{self, api, Runtime};

/// Which streams a session has (the kubelet's `remotecommand.Options`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamOptions {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

fn first<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// A stream flag: `1` (what the API server sends) or `true`.
fn on(pairs: &[(String, String)], name: &str) -> bool {
    first(pairs, name).is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// The streams from the query as the kubelet's `NewOptions` reads them
/// (first value of each): with a TTY there is no separate stderr; at
/// least one stream or a 400.
pub fn stream_options(pairs: &[(String, String)]) -> Result<StreamOptions, Refusal> {
    let tty = on(pairs, "tty");
    let opts = StreamOptions {
        stdin: on(pairs, "stdin"),
        stdout: on(pairs, "stdout"),
        // The kubelet drops stderr under a TTY (the runtime would refuse
        // both together).
        stderr: on(pairs, "stderr") && !tty,
        tty,
    };
    if !opts.stdin && !opts.stdout && !opts.stderr {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "you must specify at least 1 of stdin, stdout, stderr",
        ));
    }
    Ok(opts)
}

/// The command, every `command` value in order.
pub fn exec_command(pairs: &[(String, String)]) -> Vec<String> {
    pairs
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect()
}

/// Go's `strconv.ParseUint(s, 10, 16)` error, as printed.
fn parse_port(s: &str) -> Result<u16, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.ParseUint: parsing {s:?}: invalid syntax"));
    }
    s.parse::<u16>()
        .map_err(|_| format!("strconv.ParseUint: parsing {s:?}: value out of range"))
}

/// The ports to forward, as the kubelet's `NewV4Options`: a WebSocket
/// client names them in the query (`port`, repeated or comma-separated;
/// `ports`, the Python client's name, when there is no `port`), and must
/// (a 400 otherwise, in the kubelet's words). A SPDY client names its
/// ports in its streams' headers; the query's, when they parse, are
/// passed on all the same, and never refused.
pub fn forward_ports(pairs: &[(String, String)], websocket: bool) -> Result<Vec<i32>, Refusal> {
    let mut values: Vec<&str> = pairs
        .iter()
        .filter(|(k, _)| k == "port")
        .map(|(_, v)| v.as_str())
        .collect();
    if values.is_empty() {
        values = pairs
            .iter()
            .filter(|(k, _)| k == "ports")
            .map(|(_, v)| v.as_str())
            .collect();
    }
    let bad = |m: String| Refusal::new(StatusCode::BAD_REQUEST, m);
    let parsed = (|| {
        if values.is_empty() {
            return Err(bad(r#"query parameter "port" is required"#.into()));
        }
        let mut ports = Vec::new();
        for value in &values {
            if value.is_empty() {
                return Err(bad(r#"query parameter "port" cannot be empty"#.into()));
            }
            for p in value.split(',') {
                let port = parse_port(p)
                    .map_err(|e| bad(format!("unable to parse {value:?} as a port: {e}")))?;
                if port < 1 {
                    return Err(bad(format!("port {value:?} must be > 0")));
                }
                ports.push(i32::from(port));
            }
        }
        Ok(ports)
    })();
    match parsed {
        Ok(ports) => Ok(ports),
        Err(refusal) if websocket => Err(refusal),
        Err(_) => Ok(Vec::new()),
    }
}

/// A CRI error as the kubelet's `streaming.WriteError` answers it:
/// NotFound a 404, ResourceExhausted a 429 (retry after the token
/// lifetime), anything else a 500; the body is the gRPC error's text.
pub fn cri_error(e: &runtime::Error) -> Response {
    let status = match e.code() {
        tonic::Code::NotFound => StatusCode::NOT_FOUND,
        tonic::Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let mut r = text(status, e.go_text());
    if status == StatusCode::TOO_MANY_REQUESTS {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("60"));
    }
    r
}

/// Why a route answers before any upgrade.
#[derive(Debug)]
enum Stop {
    /// The kubelet's own refusal.
    Refused(Refusal),
    /// The runtime's error, as `streaming.WriteError` answers it.
    Cri(runtime::Error),
}

impl Stop {
    fn server_error(message: String) -> Self {
        Stop::Refused(Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, message))
    }

    fn answer(self) -> Response {
        match self {
            Stop::Refused(r) => text(r.status, r.message),
            Stop::Cri(e) => cri_error(&e),
        }
    }
}

impl From<Refusal> for Stop {
    fn from(r: Refusal) -> Self {
        Stop::Refused(r)
    }
}

impl From<runtime::Error> for Stop {
    fn from(e: runtime::Error) -> Self {
        Stop::Cri(e)
    }
}

fn answered(r: Result<Response, Stop>) -> Response {
    r.unwrap_or_else(Stop::answer)
}

/// The path's parts (with or without the pod's UID).
struct Target {
    namespace: String,
    pod: String,
    uid: Option<String>,
    container: String,
}

impl Target {
    fn from(mut p: HashMap<String, String>) -> Self {
        Target {
            namespace: p.remove("namespace").unwrap_or_default(),
            pod: p.remove("pod").unwrap_or_default(),
            uid: p.remove("uid").filter(|u| !u.is_empty()),
            container: p.remove("container").unwrap_or_default(),
        }
    }

    /// The kubelet's `podFullName`: `name_namespace`.
    fn full_name(&self) -> String {
        format!("{}_{}", self.pod, self.namespace)
    }
}

/// The pod as the agent knows it (the kubelet's `GetPodByName`), or the
/// kubelet's 404.
fn find_pod(shared: &Shared, t: &Target) -> Result<PodLogInfo, Stop> {
    shared
        .config
        .lookup
        .as_ref()
        .and_then(|lookup| lookup(&t.namespace, &t.pod))
        .ok_or_else(|| Refusal::new(StatusCode::NOT_FOUND, "pod does not exist").into())
}

fn runtime_of(shared: &Shared) -> Result<Arc<dyn Runtime>, Stop> {
    shared
        .config
        .runtime
        .get()
        .cloned()
        .ok_or_else(|| Stop::server_error("container runtime is not ready".into()))
}

/// The newest running container named `container` of pod `uid` (the
/// kubelet's `findContainer` over the runtime's running pods).
async fn running_container(
    rt: &dyn Runtime,
    uid: &str,
    container: &str,
) -> Result<Option<String>, Stop> {
    Ok(running_instance(rt, uid, container).await?.map(|c| c.id))
}

async fn running_instance(
    rt: &dyn Runtime,
    uid: &str,
    container: &str,
) -> Result<Option<api::Container>, Stop> {
    Ok(rt
        .list_containers_of(uid)
        .await?
        .into_iter()
        .filter(|c| {
            c.state == api::ContainerState::ContainerRunning as i32
                && c.labels.get(CONTAINER_NAME).map(String::as_str) == Some(container)
        })
        .max_by_key(|c| c.created_at))
}

/// How long a container has run before an attach looks at it: the
/// kubelet reports a started container running only once its PLEG relist
/// (every second) has seen it, so no client attaches to it sooner; the
/// agent reports it at once. An attach that follows that report at once
/// (`kubectl run -i`) could otherwise reach the process before it has
/// printed (runc returns before the command runs) and lose what it prints
/// before the runtime hooks the stream up; after the wait a quick command
/// has exited, the attach is refused and kubectl shows the logs, as
/// upstream.
pub const ATTACH_SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// How long from `now` (Unix nanoseconds) until a container that started
/// at `started_at` has run for [`ATTACH_SETTLE`]; none once it has (or
/// when the start is unknown).
pub fn settle_left(started_at: i64, now: i64) -> Option<std::time::Duration> {
    if started_at <= 0 {
        return None;
    }
    let settle = i64::try_from(ATTACH_SETTLE.as_nanos()).unwrap_or(i64::MAX);
    let left = started_at.saturating_add(settle).saturating_sub(now);
    // A start in the future (clock skew) waits no longer than the period.
    (left > 0).then(|| std::time::Duration::from_nanos(left.min(settle) as u64))
}

async fn settle_wait(rt: &dyn Runtime, id: &str, now: i64) -> Option<std::time::Duration> {
    let status = rt.container_status(id).await.ok()?;
    settle_left(status.started_at, now)
}

/// The state letter of process `pid` in `/proc/PID/stat` (`R`, `S`, `Z`
/// …), none when there is no such process.
pub fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command (in parentheses) may hold spaces and parentheses; the
    // state follows the last ')'.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.trim_start().chars().next()
}

/// Whether process `pid` is there and not a zombie (or dead).
fn process_alive(pid: u32) -> bool {
    process_state(pid).is_some_and(|s| !matches!(s, 'Z' | 'X' | 'x'))
}

/// Whether the process of a container the runtime lists as running has
/// already exited. containerd reports a container RUNNING until it has
/// collected the exited task (its status changes only after the task's
/// IO is drained and the task deleted); an attach in that window gets
/// none of what the process printed and ends as if it had worked, where
/// the kubelet, whose view is a relist behind, finds no running container
/// and refuses (and `kubectl run -i` then shows the logs). The process is
/// looked up by the PID the runtime gives; it counts as exited only when
/// the sandbox's own process is visible (so the agent shares the
/// runtime's PID namespace) and the container's is gone or a zombie.
async fn exited_process(rt: &dyn Runtime, c: &api::Container) -> bool {
    let (Ok(Some(pid)), Ok(Some(sandbox))) = (
        rt.container_pid(&c.id).await,
        rt.sandbox_pid(&c.pod_sandbox_id).await,
    ) else {
        return false;
    };
    process_alive(sandbox) && !process_alive(pid)
}

/// The newest ready sandbox of pod `uid`.
async fn ready_sandbox(rt: &dyn Runtime, uid: &str) -> Result<Option<String>, Stop> {
    Ok(rt
        .list_pod_sandboxes_of(uid)
        .await?
        .into_iter()
        .filter(|s| s.state == api::PodSandboxState::SandboxReady as i32)
        .max_by_key(|s| s.created_at)
        .map(|s| s.id))
}

type Pairs = Query<Vec<(String, String)>>;

/// `GET|POST /exec/{namespace}/{pod}[/{uid}]/{container}?command=…`.
pub(super) async fn exec(
    State(shared): State<Arc<Shared>>,
    Path(params): Path<HashMap<String, String>>,
    Query(pairs): Pairs,
    req: Request,
) -> Response {
    answered(exec_inner(shared, Target::from(params), pairs, req).await)
}

async fn exec_inner(
    shared: Arc<Shared>,
    t: Target,
    pairs: Vec<(String, String)>,
    req: Request,
) -> Result<Response, Stop> {
    let opts = stream_options(&pairs)?;
    let info = find_pod(&shared, &t)?;
    let rt = runtime_of(&shared)?;
    // As the kubelet, the UID in the path plays no part: the pod is found
    // by its name.
    let id = running_container(rt.as_ref(), &info.uid, &t.container)
        .await?
        .ok_or_else(|| Stop::server_error(format!("container not found ({:?})", t.container)))?;
    let url = rt
        .exec(api::ExecRequest {
            container_id: id,
            cmd: exec_command(&pairs),
            tty: opts.tty,
            stdin: opts.stdin,
            stdout: opts.stdout,
            stderr: opts.stderr,
        })
        .await?;
    Ok(proxy::upgrade(req, &url, None, &shared.sessions, shared.shutdown.clone()).await)
}

/// `GET|POST /attach/{namespace}/{pod}[/{uid}]/{container}`; the TTY is
/// the container's own (a process's TTY cannot change).
pub(super) async fn attach(
    State(shared): State<Arc<Shared>>,
    Path(params): Path<HashMap<String, String>>,
    Query(pairs): Pairs,
    req: Request,
) -> Response {
    answered(attach_inner(shared, Target::from(params), pairs, req).await)
}

async fn attach_inner(
    shared: Arc<Shared>,
    t: Target,
    pairs: Vec<(String, String)>,
    req: Request,
) -> Result<Response, Stop> {
    let opts = stream_options(&pairs)?;
    let info = find_pod(&shared, &t)?;
    let rt = runtime_of(&shared)?;
    let not_in_pod = || {
        Stop::server_error(format!(
            "container {} not found in pod {}",
            t.container,
            t.full_name()
        ))
    };
    let mut instance = running_instance(rt.as_ref(), &info.uid, &t.container)
        .await?
        .ok_or_else(not_in_pod)?;
    if t.uid.as_ref().is_some_and(|uid| *uid != info.uid) {
        return Err(Stop::server_error(format!(
            "pod {} not found",
            t.full_name()
        )));
    }
    if !info.containers.contains(&t.container) {
        return Err(not_in_pod());
    }
    // A container started a moment ago: look again once it has run for
    // the kubelet's relist period.
    if let Some(wait) = settle_wait(rt.as_ref(), &instance.id, now_nanos()).await {
        tokio::time::sleep(wait).await;
        instance = running_instance(rt.as_ref(), &info.uid, &t.container)
            .await?
            .ok_or_else(not_in_pod)?;
    }
    if exited_process(rt.as_ref(), &instance).await {
        return Err(not_in_pod());
    }
    let id = instance.id;
    let tty = info.tty_containers.contains(&t.container);
    let url = rt
        .attach(api::AttachRequest {
            container_id: id,
            stdin: opts.stdin,
            tty,
            stdout: opts.stdout,
            // Under a TTY there is no separate stderr.
            stderr: opts.stderr && !tty,
        })
        .await?;
    Ok(proxy::upgrade(req, &url, None, &shared.sessions, shared.shutdown.clone()).await)
}

/// `GET|POST /portForward/{namespace}/{pod}[/{uid}]`.
pub(super) async fn port_forward(
    State(shared): State<Arc<Shared>>,
    Path(params): Path<HashMap<String, String>>,
    Query(pairs): Pairs,
    req: Request,
) -> Response {
    answered(port_forward_inner(shared, Target::from(params), pairs, req).await)
}

async fn port_forward_inner(
    shared: Arc<Shared>,
    t: Target,
    pairs: Vec<(String, String)>,
    req: Request,
) -> Result<Response, Stop> {
    let websocket = proxy::is_websocket_request(req.headers());
    let ports = forward_ports(&pairs, websocket)?;
    let info = find_pod(&shared, &t)?;
    if t.uid.as_ref().is_some_and(|uid| *uid != info.uid) {
        return Err(Refusal::new(StatusCode::NOT_FOUND, "pod not found").into());
    }
    let rt = runtime_of(&shared)?;
    let sandbox = ready_sandbox(rt.as_ref(), &info.uid)
        .await?
        .ok_or_else(|| Stop::server_error(format!("pod not found ({:?})", t.full_name())))?;
    let url = rt
        .port_forward(api::PortForwardRequest {
            pod_sandbox_id: sandbox,
            port: ports,
        })
        .await?;
    // A WebSocket client's query (its ports) goes along.
    let query = websocket
        .then(|| req.uri().query().map(str::to_string))
        .flatten();
    Ok(proxy::upgrade(
        req,
        &url,
        query.as_deref(),
        &shared.sessions,
        shared.shutdown.clone(),
    )
    .await)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn stream_options_as_the_kubelet_reads_them() {
        let o = stream_options(&q(&[("stdin", "1"), ("stdout", "true"), ("stderr", "1")])).unwrap();
        assert_eq!(
            o,
            StreamOptions {
                stdin: true,
                stdout: true,
                stderr: true,
                tty: false
            }
        );
        // A TTY has no separate stderr.
        let o = stream_options(&q(&[("stdout", "1"), ("stderr", "1"), ("tty", "TRUE")])).unwrap();
        assert_eq!((o.stdout, o.stderr, o.tty), (true, false, true));
        // The first value counts; anything but 1/true is off.
        let o = stream_options(&q(&[("stdout", "1"), ("stdin", "0"), ("stdin", "1")])).unwrap();
        assert!(!o.stdin);
        for none in [
            vec![],
            vec![("stdin", "yes"), ("stdout", "0"), ("stderr", "false")],
            vec![("tty", "1"), ("stderr", "1")],
        ] {
            let r = stream_options(&q(&none)).unwrap_err();
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{none:?}");
            assert_eq!(
                r.message,
                "you must specify at least 1 of stdin, stdout, stderr"
            );
        }
    }

    #[test]
    fn the_command_is_every_command_value_in_order() {
        assert_eq!(
            exec_command(&q(&[
                ("command", "sh"),
                ("stdout", "1"),
                ("command", "-c"),
                ("command", "echo a  b"),
                ("command", ""),
            ])),
            ["sh", "-c", "echo a  b", ""]
        );
        assert!(exec_command(&q(&[("cmd", "ls")])).is_empty());
    }

    #[test]
    fn ports_as_new_v4_options_reads_them() {
        let ok = |pairs: &[(&str, &str)]| forward_ports(&q(pairs), true).unwrap();
        assert_eq!(ok(&[("port", "8080")]), [8080]);
        assert_eq!(ok(&[("port", "80,443"), ("port", "8080")]), [80, 443, 8080]);
        assert_eq!(ok(&[("ports", "8080")]), [8080]);
        // `port` wins over the Python client's `ports`.
        assert_eq!(ok(&[("ports", "1"), ("port", "2")]), [2]);

        let refused = |pairs: &[(&str, &str)]| {
            let r = forward_ports(&q(pairs), true).unwrap_err();
            assert_eq!(r.status, StatusCode::BAD_REQUEST);
            r.message
        };
        assert_eq!(refused(&[]), r#"query parameter "port" is required"#);
        assert_eq!(
            refused(&[("port", "")]),
            r#"query parameter "port" cannot be empty"#
        );
        assert_eq!(
            refused(&[("port", "http")]),
            r#"unable to parse "http" as a port: strconv.ParseUint: parsing "http": invalid syntax"#
        );
        assert_eq!(
            refused(&[("port", "80,")]),
            r#"unable to parse "80," as a port: strconv.ParseUint: parsing "": invalid syntax"#
        );
        assert_eq!(
            refused(&[("port", "70000")]),
            r#"unable to parse "70000" as a port: strconv.ParseUint: parsing "70000": value out of range"#
        );
        assert_eq!(
            refused(&[("port", "+80")]),
            r#"unable to parse "+80" as a port: strconv.ParseUint: parsing "+80": invalid syntax"#
        );
        assert_eq!(refused(&[("port", "0")]), r#"port "0" must be > 0"#);

        // SPDY: the streams name the ports; the query's are a bonus.
        assert_eq!(forward_ports(&q(&[]), false).unwrap(), Vec::<i32>::new());
        assert_eq!(
            forward_ports(&q(&[("port", "x")]), false).unwrap(),
            Vec::<i32>::new()
        );
        assert_eq!(forward_ports(&q(&[("port", "80")]), false).unwrap(), [80]);
    }

    #[test]
    fn cri_errors_as_streaming_write_error() {
        let e = |code, message: &str| runtime::Error::Status {
            code,
            message: message.into(),
        };
        let r = cri_error(&e(
            tonic::Code::Unknown,
            "container is in CONTAINER_EXITED state",
        ));
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let r = cri_error(&e(tonic::Code::NotFound, "gone"));
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        let r = cri_error(&e(
            tonic::Code::ResourceExhausted,
            "maximum number of in-flight requests exceeded",
        ));
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "60");
    }

    #[test]
    fn an_attach_waits_until_the_container_has_run_a_relist_period() {
        let s = 1_000_000_000;
        let t0 = 1_700_000_000 * s;
        assert_eq!(settle_left(t0, t0), Some(ATTACH_SETTLE));
        assert_eq!(
            settle_left(t0, t0 + s / 4),
            Some(std::time::Duration::from_millis(750))
        );
        assert_eq!(settle_left(t0, t0 + s), None);
        assert_eq!(settle_left(t0, t0 + 60 * s), None);
        // Unknown start; a start ahead of the clock.
        assert_eq!(settle_left(0, t0), None);
        assert_eq!(settle_left(t0 + 60 * s, t0), Some(ATTACH_SETTLE));
    }

    #[test]
    fn a_process_is_alive_until_it_is_reaped() {
        let me = std::process::id();
        assert!(process_alive(me), "{:?}", process_state(me));
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        assert!(process_alive(child.id()));
        child.kill().expect("kill");
        // Dead, not yet waited for: a zombie (within a bound).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while process_state(child.id()) != Some('Z') && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(process_state(child.id()), Some('Z'));
        assert!(!process_alive(child.id()));
        child.wait().expect("wait");
        assert_eq!(process_state(child.id()), None);
        assert!(!process_alive(child.id()));
    }
}
