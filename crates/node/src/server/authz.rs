//! Who may use the agent's endpoint, as the kubelet's webhook
//! authorization decides: the caller's client certificate names a user
//! (CN) and groups (O), and the API server is asked with a
//! SubjectAccessReview whether that user may `<verb>` the subresource of
//! this node the path belongs to (`nodes/log` for `/logs`, `nodes/stats`,
//! `nodes/metrics`, `nodes/spec`, `nodes/pods`, `nodes/healthz`,
//! `nodes/configz`, and `nodes/proxy` for everything else: container
//! logs, exec, attach, port-forward). Answers are cached as the kubelet's
//! (allowed for 5 minutes, denied for 30 seconds).
//!
//! Connections from inside the process (the API server of `skiff
//! server`) carry no [`Caller`] and are not asked about. The question
//! crosses the network through the [`AccessReview`] trait: the real one
//! posts the review with the agent's client, a fake answers in tests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

/// Who a network connection's client certificate names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Caller {
    pub user: String,
    pub groups: Vec<String>,
}

impl Caller {
    /// The CN and O values of a DER certificate (an unreadable one names
    /// nobody, who is then refused).
    pub fn of_certificate(der: &[u8]) -> Caller {
        let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
            return Caller {
                user: String::new(),
                groups: Vec::new(),
            };
        };
        let subject = cert.subject();
        let user = subject
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .unwrap_or_default()
            .to_string();
        let groups = subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok().map(String::from))
            .collect();
        Caller { user, groups }
    }
}

/// One question for the API server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Question {
    pub caller: Caller,
    pub verb: &'static str,
    pub subresource: &'static str,
}

/// Why a question could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("SubjectAccessReview failed: {0}")]
    Review(String),
}

/// Asks whether a caller may do something to node `node`.
#[async_trait]
pub trait AccessReview: Send + Sync {
    async fn allowed(&self, node: &str, question: &Question) -> Result<bool, Error>;
}

/// The kubelet's verb for an HTTP method.
pub fn verb(method: &Method) -> &'static str {
    match *method {
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "get",
    }
}

/// The `nodes` subresource a path belongs to (the kubelet's
/// `GetRequestAttributes`).
pub fn subresource(path: &str) -> &'static str {
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    match first {
        "stats" => "stats",
        "metrics" => "metrics",
        "logs" => "log",
        "spec" => "spec",
        "pods" => "pods",
        "healthz" => "healthz",
        "configz" => "configz",
        _ => "proxy",
    }
}

/// The SubjectAccessReview posted with the agent's own client.
pub struct ApiReview(pub kube::Client);

impl std::fmt::Debug for ApiReview {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiReview")
    }
}

#[async_trait]
impl AccessReview for ApiReview {
    async fn allowed(&self, node: &str, q: &Question) -> Result<bool, Error> {
        let body = serde_json::json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": q.caller.user,
                "groups": q.caller.groups,
                "resourceAttributes": {
                    "verb": q.verb,
                    "resource": "nodes",
                    "subresource": q.subresource,
                    "name": node,
                },
            },
        });
        let request =
            axum::http::Request::post("/apis/authorization.k8s.io/v1/subjectaccessreviews")
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&body).unwrap_or_default())
                .map_err(|e| Error::Review(e.to_string()))?;
        let answer: serde_json::Value = self
            .0
            .request(request)
            .await
            .map_err(|e| Error::Review(e.to_string()))?;
        Ok(answer
            .pointer("/status/allowed")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false))
    }
}

/// How long answers are kept (the kubelet's defaults).
const ALLOWED_TTL: Duration = Duration::from_secs(300);
const DENIED_TTL: Duration = Duration::from_secs(30);

/// The endpoint's authorizer: an [`AccessReview`] behind a cache.
pub struct Authorizer {
    node: String,
    review: Arc<dyn AccessReview>,
    cache: Mutex<HashMap<Question, (bool, Instant)>>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl Authorizer {
    pub fn new(node: impl Into<String>, review: Arc<dyn AccessReview>) -> Self {
        Authorizer {
            node: node.into(),
            review,
            cache: Mutex::default(),
        }
    }

    /// Whether `q` is allowed; a review that fails denies (not cached).
    pub async fn allowed(&self, q: &Question) -> bool {
        let now = Instant::now();
        if let Some((allowed, at)) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(q)
            .copied()
        {
            let ttl = if allowed { ALLOWED_TTL } else { DENIED_TTL };
            if now.duration_since(at) < ttl {
                return allowed;
            }
        }
        match self.review.allowed(&self.node, q).await {
            Ok(allowed) => {
                let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
                // Bounded: a flood of distinct callers cannot grow it.
                if cache.len() >= 4096 {
                    cache.retain(|_, (_, at)| now.duration_since(*at) < DENIED_TTL);
                }
                cache.insert(q.clone(), (allowed, now));
                allowed
            }
            Err(e) => {
                tracing::warn!(error = %e, user = %q.caller.user, "cannot authorize a request to the node endpoint");
                false
            }
        }
    }
}

/// Middleware: requests from the network ([`Caller`] set) must be
/// allowed; the kubelet's 403 words otherwise.
pub async fn check(authorizer: Arc<Authorizer>, req: Request, next: Next) -> Response {
    let Some(caller) = req.extensions().get::<Caller>().cloned() else {
        return next.run(req).await;
    };
    let q = Question {
        caller,
        verb: verb(req.method()),
        subresource: subresource(req.uri().path()),
    };
    if authorizer.allowed(&q).await {
        return next.run(req).await;
    }
    let message = format!(
        "Forbidden (user={}, verb={}, resource=nodes, subresource(s)=[{}])\n",
        q.caller.user, q.verb, q.subresource
    );
    Response::builder()
        .status(StatusCode::FORBIDDEN)
        .header("content-type", "text/plain; charset=utf-8")
        .body(message.into())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Fake {
        asked: AtomicUsize,
    }

    #[async_trait]
    impl AccessReview for Fake {
        async fn allowed(&self, node: &str, q: &Question) -> Result<bool, Error> {
            self.asked.fetch_add(1, Ordering::SeqCst);
            Ok(node == "n1" && q.caller.groups.iter().any(|g| g == "system:masters"))
        }
    }

    fn caller(groups: &[&str]) -> Caller {
        Caller {
            user: "u".into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    #[test]
    fn paths_and_methods_map_as_the_kubelets() {
        assert_eq!(subresource("/containerLogs/ns/p/c"), "proxy");
        assert_eq!(subresource("/exec/ns/p/c"), "proxy");
        assert_eq!(subresource("/portForward/ns/p"), "proxy");
        assert_eq!(subresource("/logs/syslog"), "log");
        assert_eq!(subresource("/stats/summary"), "stats");
        assert_eq!(subresource("/metrics/resource"), "metrics");
        assert_eq!(verb(&Method::GET), "get");
        assert_eq!(verb(&Method::POST), "create");
    }

    #[tokio::test]
    async fn answers_are_asked_once_and_cached() {
        let fake = Arc::new(Fake {
            asked: AtomicUsize::new(0),
        });
        let a = Authorizer::new("n1", fake.clone());
        let admin = Question {
            caller: caller(&["system:masters"]),
            verb: "get",
            subresource: "proxy",
        };
        let other = Question {
            caller: caller(&["devs"]),
            ..admin.clone()
        };
        assert!(a.allowed(&admin).await);
        assert!(a.allowed(&admin).await);
        assert!(!a.allowed(&other).await);
        assert!(!a.allowed(&other).await);
        assert_eq!(fake.asked.load(Ordering::SeqCst), 2);
    }
}
