//! Who is making the request being served, for the strategies that record
//! it (a CertificateSigningRequest's `spec.username` and `spec.groups`),
//! as upstream reads `genericapirequest.UserFrom(ctx)`: the dispatcher
//! runs each request inside [`scope`], and [`current`] reads it back.

use std::future::Future;

use crate::authn::User;

tokio::task_local! {
    static REQUESTER: Option<User>;
}

/// Runs `f` as a request of `user`.
pub async fn scope<F: Future>(user: Option<User>, f: F) -> F::Output {
    REQUESTER.scope(user, f).await
}

/// The requesting user, when inside a request.
pub fn current() -> Option<User> {
    REQUESTER.try_with(Clone::clone).ok().flatten()
}
