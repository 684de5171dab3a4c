//! Making sure a container's image is there before it is created, per its
//! imagePullPolicy (upstream's image manager `EnsureImageExists`): the
//! Pulling/Pulled/Failed/BackOff events in the kubelet's words, and the
//! waiting reasons ErrImagePull, ImagePullBackOff, ErrImageNeverPull and
//! InvalidImageName. Pull failures back off per pod and image.

use std::time::Instant;

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::backoff::Backoff;
use crate::events::{EventType, Events};
use crate::runtime::{api, Runtime};
use crate::status::Waiting;
use crate::timeline::ImageOutcome;

/// Pull back-off per pod and image, with the error that started it (the
/// back-off message repeats it, as upstream's since 1.32); and ImageStatus
/// answers read ahead, by image (while the pod's sandbox was being
/// created), each used once by the next [`ensure_image`] of that image.
#[derive(Debug, Default)]
pub struct Pulls {
    pub backoff: Backoff,
    pub errors: std::collections::HashMap<String, String>,
    pub inspected: std::collections::HashMap<String, Option<api::Image>>,
}

impl Pulls {
    /// When the back-off for `key` ends, if it is backing off.
    pub fn until(&self, key: &str) -> Option<Instant> {
        let last = self.backoff.last_update(key)?;
        self.backoff.until(key, last)
    }
}

/// Whether `image` is a reference containerd can parse (the docker
/// reference grammar, loosely: what the kubelet would call invalid).
pub fn valid_reference(image: &str) -> bool {
    if image.is_empty()
        || image.len() > 4096
        || image.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return false;
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        let Some((alg, hex)) = d.split_once(':') else {
            return false;
        };
        if alg.is_empty() || hex.len() < 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return false;
        }
    }
    // A tag follows the last ':' after the last '/'.
    let last_slash = name.rfind('/').map(|i| i + 1).unwrap_or(0);
    let (repo, tag) = match name.get(last_slash..).and_then(|tail| tail.rfind(':')) {
        Some(i) => (
            name.get(..last_slash + i).unwrap_or_default(),
            name.get(last_slash + i + 1..),
        ),
        None => (name, None),
    };
    if let Some(tag) = tag {
        let ok = !tag.is_empty()
            && tag.len() <= 128
            && tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
            && !tag.starts_with(['.', '-']);
        if !ok {
            return false;
        }
    }
    let mut parts = repo.split('/');
    let first = parts.next().unwrap_or_default();
    let first_is_host =
        repo.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let path_ok = |p: &str| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
            && p.starts_with(|c: char| c.is_ascii_alphanumeric())
            && p.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    (first_is_host || path_ok(first)) && parts.all(path_ok)
}

/// Go's time.Duration text for a pull's duration ("76ms", "1.234s").
fn go_millis(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        "0s".into()
    } else if ms < 1000 {
        format!("{ms}ms")
    } else {
        let text = format!("{:.3}", ms as f64 / 1000.0);
        format!("{}s", text.trim_end_matches('0').trim_end_matches('.'))
    }
}

/// The pull policy, defaulted as the API server does when absent.
pub fn pull_policy(c: &Container) -> &str {
    match c.image_pull_policy.as_deref() {
        Some(p) => p,
        None => skiff_api::defaults::image_pull_policy(c.image.as_deref().unwrap_or_default()),
    }
}

/// Ensures `c`'s image is present; returns the image reference to create
/// the container with, or why not.
pub async fn ensure_image(
    runtime: &dyn Runtime,
    events: &dyn Events,
    pulls: &mut Pulls,
    pod: &Pod,
    c: &Container,
    sandbox: Option<api::PodSandboxConfig>,
    now: Instant,
) -> Result<String, Waiting> {
    ensure_image_traced(runtime, events, pulls, pod, c, sandbox, now)
        .await
        .map(|e| e.image)
}

/// What [`ensure_image_traced`] found.
#[derive(Debug, Clone)]
pub struct Ensured {
    /// The reference to create the container with.
    pub image: String,
    /// Present or pulled (and its size), for the pod's startup timeline.
    pub outcome: ImageOutcome,
    /// The runtime's ImageStatus answer it decided on (after the pull, if
    /// it pulled): the caller's runAsNonRoot check reads the image's user
    /// from it instead of asking the runtime again.
    pub info: Option<api::Image>,
}

/// As [`ensure_image`], also saying whether the image was present or
/// pulled (and its size), for the pod's startup timeline, and what the
/// runtime said of it.
pub async fn ensure_image_traced(
    runtime: &dyn Runtime,
    events: &dyn Events,
    pulls: &mut Pulls,
    pod: &Pod,
    c: &Container,
    sandbox: Option<api::PodSandboxConfig>,
    now: Instant,
) -> Result<Ensured, Waiting> {
    let image = c.image.clone().unwrap_or_default();
    if !valid_reference(&image) {
        let mut msg = format!(
            "Failed to apply default image tag \"{image}\": couldn't parse image name \"{image}\": invalid reference format"
        );
        // distribution/reference names the one mistake it can name.
        let repo = image.split(['@', ':']).next().unwrap_or_default();
        if repo.chars().any(|c| c.is_ascii_uppercase()) && !repo.contains(char::is_whitespace) {
            let normalized = if repo.contains('/') {
                repo.to_string()
            } else {
                format!("library/{repo}")
            };
            msg.push_str(&format!(
                ": repository name ({normalized}) must be lowercase"
            ));
        }
        events.container_event(pod, &c.name, EventType::Warning, "InspectFailed", &msg);
        events.container_event(
            pod,
            &c.name,
            EventType::Warning,
            "Failed",
            "Error: InvalidImageName",
        );
        return Err(Waiting::new("InvalidImageName", msg));
    }
    let policy = pull_policy(c);
    let ahead = pulls.inspected.remove(&image);
    let answer = match ahead {
        Some(i) => Ok(i),
        None => runtime.image_status(&image).await,
    };
    let inspected = match answer {
        Ok(i) => i,
        Err(e) => {
            let msg = format!("Failed to inspect image \"{image}\": {}", e.go_text());
            events.container_event(pod, &c.name, EventType::Warning, "InspectFailed", &msg);
            events.container_event(
                pod,
                &c.name,
                EventType::Warning,
                "Failed",
                "Error: ImageInspectError",
            );
            return Err(Waiting::new("ImageInspectError", msg));
        }
    };
    let present = inspected.is_some();
    if present && policy != "Always" {
        events.container_event(
            pod,
            &c.name,
            EventType::Normal,
            "Pulled",
            &format!("Container image \"{image}\" already present on machine"),
        );
        return Ok(Ensured {
            image,
            outcome: ImageOutcome::Present,
            info: inspected,
        });
    }
    if !present && policy == "Never" {
        let msg = format!("Container image \"{image}\" is not present with pull policy of Never");
        events.container_event(pod, &c.name, EventType::Warning, "ErrImageNeverPull", &msg);
        events.container_event(
            pod,
            &c.name,
            EventType::Warning,
            "Failed",
            "Error: ErrImageNeverPull",
        );
        return Err(Waiting::new("ErrImageNeverPull", msg));
    }
    let key = format!(
        "{}/{}",
        pod.metadata.uid.as_deref().unwrap_or_default(),
        image
    );
    let failed_at = pulls.backoff.last_update(&key).unwrap_or(now);
    if pulls.backoff.in_backoff_since(&key, failed_at, now) {
        let event = format!("Back-off pulling image \"{image}\"");
        events.container_event(pod, &c.name, EventType::Normal, "BackOff", &event);
        let msg = match pulls.errors.get(&key) {
            Some(err) => format!("{event}: ErrImagePull: {err}"),
            None => event,
        };
        events.container_event(
            pod,
            &c.name,
            EventType::Warning,
            "Failed",
            "Error: ImagePullBackOff",
        );
        return Err(Waiting::new("ImagePullBackOff", msg));
    }
    events.container_event(
        pod,
        &c.name,
        EventType::Normal,
        "Pulling",
        &format!("Pulling image \"{image}\""),
    );
    let started = Instant::now();
    match runtime.pull_image(&image, sandbox).await {
        Ok(_) => {
            let took = started.elapsed();
            let info = runtime.image_status(&image).await.ok().flatten();
            let size = info.as_ref().map(|i| i.size).unwrap_or(0);
            events.container_event(
                pod,
                &c.name,
                EventType::Normal,
                "Pulled",
                &format!(
                    "Successfully pulled image \"{image}\" in {t} ({t} including waiting). Image size: {size} bytes.",
                    t = go_millis(took)
                ),
            );
            pulls.backoff.forget(&key);
            pulls.errors.remove(&key);
            Ok(Ensured {
                image,
                outcome: ImageOutcome::Pulled { bytes: size },
                info,
            })
        }
        Err(e) if present && registry_unreachable(&e) => {
            // Offline first: with no registry to ask, an image the node
            // already has (imported, airgap) is used as IfNotPresent
            // would. Upstream would fail here; a node with no internet
            // could then never run `kubectl run --image=busybox`.
            events.container_event(
                pod,
                &c.name,
                EventType::Warning,
                "Failed",
                &format!(
                    "Failed to pull image \"{image}\": {}; using the image present on the machine",
                    e.go_text()
                ),
            );
            events.container_event(
                pod,
                &c.name,
                EventType::Normal,
                "Pulled",
                &format!("Container image \"{image}\" already present on machine"),
            );
            Ok(Ensured {
                image,
                outcome: ImageOutcome::Present,
                info: inspected,
            })
        }
        Err(e) => {
            pulls.backoff.next(&key, now);
            let err = e.go_text();
            pulls.errors.insert(key.clone(), err.clone());
            events.container_event(
                pod,
                &c.name,
                EventType::Warning,
                "Failed",
                &format!("Failed to pull image \"{image}\": {err}"),
            );
            events.container_event(
                pod,
                &c.name,
                EventType::Warning,
                "Failed",
                "Error: ErrImagePull",
            );
            Err(Waiting::new("ErrImagePull", err))
        }
    }
}

/// Whether a pull failed because no registry could be reached (as
/// opposed to the registry answering that the image is not there).
fn registry_unreachable(e: &crate::runtime::Error) -> bool {
    let m = e.message();
    e.code() != tonic::Code::NotFound
        && [
            "no such host",
            "connection refused",
            "network is unreachable",
            "i/o timeout",
            "dial tcp",
        ]
        .iter()
        .any(|s| m.contains(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references() {
        for ok in [
            "busybox",
            "busybox:1.36",
            "docker.io/library/busybox:latest",
            "localhost:5000/a/b:v1",
            "127.0.0.1:5000/x",
            "repo@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert!(valid_reference(ok), "{ok}");
        }
        for bad in [
            "",
            "Busybox",
            "busy box",
            "busybox:",
            "busybox:-x",
            "a//b",
            "x@sha256:zz",
        ] {
            assert!(!valid_reference(bad), "{bad}");
        }
    }

    #[test]
    fn millis() {
        assert_eq!(go_millis(std::time::Duration::from_millis(76)), "76ms");
        assert_eq!(go_millis(std::time::Duration::from_millis(1234)), "1.234s");
        assert_eq!(go_millis(std::time::Duration::from_millis(1200)), "1.2s");
        assert_eq!(go_millis(std::time::Duration::from_millis(2000)), "2s");
        assert_eq!(go_millis(std::time::Duration::ZERO), "0s");
    }
}
