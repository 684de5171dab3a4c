//! The request filters every request passes before its handler, in the
//! order of kube-apiserver's handler chain: panic recovery (outermost),
//! authentication, auditing, impersonation, authorization. They run as one
//! middleware: a request pays one boxed future and one clone of the routes
//! for the whole chain, not one per filter (every API request goes through
//! here, so that was a measurable share of the server's time).
//!
//! Each filter is a plain function that passes the request on or answers
//! it; this module owns only their order. Adding a filter is one line in
//! [`run`]. A request that passes them all is counted in the metrics
//! (`apiserver_request_total`, as upstream counts requests its routes
//! serve) once answered.

use std::sync::Arc;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::audit;
use crate::authn::{self, Tokens};
use crate::authz::{self, Authorizer};
use crate::status::ApiError;

/// What the filters consult.
#[derive(Debug)]
pub struct Filters {
    pub tokens: Arc<Tokens>,
    pub authorizers: Arc<Vec<Box<dyn Authorizer>>>,
    /// What the review handlers (TokenReview, SubjectAccessReview) read,
    /// put in every request's extensions.
    pub reviews: crate::reviews::Context,
    /// The audit log, when on (`--audit-log-path`).
    pub audit: Option<Arc<audit::Auditor>>,
    /// Where served requests are counted.
    pub metrics: Option<Arc<crate::metrics::ApiMetrics>>,
}

/// Runs the filters over `req`, then the handler (`next`) if every filter
/// passed it on; a panic anywhere in them is a 500.
pub async fn run(filters: Arc<Filters>, mut req: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    // The labels are read before the request moves on (no allocation).
    let counted = filters
        .metrics
        .as_ref()
        .and_then(|m| Some((m, m.classify(&req)?)));
    let (method, path) = (req.method().clone(), req.uri().path().to_string());
    req.extensions_mut().insert(filters.reviews.clone());
    // This request's audit record when auditing is on (`crate::audit`);
    // otherwise none, and each audit step is one branch.
    let mut audit = filters.audit.as_ref().map(|log| log.receive(&req));
    let response = super::panic::caught(method, path, async {
        let response = match passes(&filters, req, &mut audit) {
            Ok(req) => {
                let response = next.run(audit::handling(&mut audit, req)).await;
                match counted {
                    Some((metrics, labels)) => metrics.observe(labels, started, response),
                    None => response,
                }
            }
            Err(refused) => refused.into_response(),
        };
        audit::respond(&mut audit, response).await
    })
    .await;
    // A record still open: the filters or the handler panicked.
    audit::panicked(audit, response).await
}

/// Authentication, impersonation and authorization, each passing the
/// request on or answering it, with the audit record's steps between.
fn passes(
    filters: &Filters,
    req: Request,
    audit: &mut Option<audit::Record>,
) -> Result<Request, ApiError> {
    let req = authn::authenticate(&filters.tokens, req)?;
    audit::authenticated(audit, &req);
    let req = authz::impersonate::impersonate(&filters.authorizers, req)?;
    audit::impersonated(audit, &req);
    let authorized = authz::authorize(&filters.authorizers, req);
    audit::authorized(audit, &authorized);
    authorized
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::StatusCode;
    use axum::routing::get;
    use axum::Router;
    use tower::ServiceExt as _;

    use super::*;
    use crate::authn::{PeerUser, User};

    /// A router whose handlers say they were reached (or panic), behind
    /// the filters, with `user` as the connection's certificate identity.
    fn app(user: Option<User>) -> Router {
        app_counted(user, None)
    }

    /// [`app`], counting served requests in `metrics`.
    fn app_counted(user: Option<User>, metrics: Option<Arc<crate::metrics::ApiMetrics>>) -> Router {
        let filters = Arc::new(Filters {
            tokens: Arc::new(Tokens::default()),
            authorizers: Arc::new(vec![Box::new(authz::MastersOnly)]),
            reviews: crate::reviews::Context {
                tokens: Arc::new(Tokens::default()),
                authorizers: Arc::new(Vec::new()),
            },
            audit: None,
            metrics,
        });
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/api/v1/pods", get(|| async { "reached" }))
            .route("/api/v1/panic", get(|| async { boom() }))
            .layer(axum::middleware::from_fn(move |req, next| {
                run(filters.clone(), req, next)
            }))
            .layer(axum::Extension(PeerUser(user)))
    }

    #[expect(clippy::panic, reason = "the panic under test")]
    fn boom() -> &'static str {
        panic!("boom")
    }

    async fn get_path(app: Router, path: &str) -> (StatusCode, String) {
        let req = Request::builder().uri(path).body(Body::empty()).unwrap();
        let resp = app.oneshot(req).await.unwrap();
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    fn admin() -> User {
        User {
            name: "admin".into(),
            groups: vec!["system:masters".into()],
        }
    }

    #[tokio::test]
    async fn each_filter_answers_or_passes_the_request_on_in_order() {
        // No credentials: authentication answers, the handler is not run.
        let (status, body) = get_path(app(None), "/api/v1/pods").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        // Public paths pass without credentials.
        assert_eq!(
            get_path(app(None), "/healthz").await,
            (StatusCode::OK, "ok".into())
        );
        // Authenticated but not allowed: authorization answers.
        let bob = User {
            name: "bob".into(),
            groups: vec![],
        };
        let (status, body) = get_path(app(Some(bob)), "/api/v1/pods").await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(body.contains(r#"User \"bob\" cannot"#), "{body}");
        // Allowed: the handler answers.
        assert_eq!(
            get_path(app(Some(admin())), "/api/v1/pods").await,
            (StatusCode::OK, "reached".into())
        );
    }

    #[tokio::test]
    async fn only_requests_that_pass_the_filters_are_counted() {
        let metrics = Arc::new(crate::metrics::ApiMetrics::new(
            Arc::new(crate::catalog::Catalog::new(
                crate::resources::KINDS,
                Arc::new(crate::catalog::NoCustomKinds),
            )),
            Arc::new(crate::watchcache::Caches::new(
                ["pods"],
                crate::watchcache::FieldsOf(Arc::new(|_: &str| -> &'static [&'static str] { &[] })),
            )),
        ));
        let bob = User {
            name: "bob".into(),
            groups: vec![],
        };
        for user in [None, Some(bob), Some(admin()), Some(admin())] {
            get_path(app_counted(user, Some(metrics.clone())), "/api/v1/pods").await;
        }
        let text = metrics.registry().encode();
        let served = r#"apiserver_request_total{verb="LIST",dry_run="",group="",version="v1",resource="pods",subresource="",scope="cluster",component="apiserver",code="200"} 2"#;
        assert!(text.contains(served), "{text}");
        // Refused by authentication or authorization: not served, not
        // counted (as upstream counts only what its routes serve).
        assert!(
            !text.contains(r#"code="401""#) && !text.contains(r#"code="403""#),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_panicking_handler_is_a_500_that_names_the_request() {
        let (status, body) = get_path(app(Some(admin())), "/api/v1/panic").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
        assert!(
            body.contains("the server panicked while handling GET /api/v1/panic"),
            "{body}"
        );
    }
}
