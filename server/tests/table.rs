//! The route table is the router: every route of the table, the pages
//! included, is served on its method and path (the router matched its
//! template, and the router's own "no route" 404 or 405 never answered),
//! and refuses a caller without a credential exactly when the table says
//! it is not public.
//! That the server's source registers no route but by walking the table
//! is checked with the workspace's shape (`tests/tests/layout.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use lf_handoff_api::routes::{Access, ROUTES};
use support::Served;

/// An id of the right shape that names no handoff.
const ID: &str = "ih_0192f2a4-0000-7000-8000-000000000000";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_of_the_table_is_served_on_its_method_and_template() {
    let served = Served::start().await;
    for route in ROUTES {
        let what = format!("{} {}", route.method.as_str(), route.path);
        let path = route.path.replace("{id}", ID);
        // No token: each route answers as it answers anyone (a refusal, a
        // sign-in form, a stylesheet), but it is the route that answers.
        let reply = served
            .send(route.method.as_str(), &path, None, None, Vec::new())
            .await;
        assert_ne!(reply.status, 405, "{what}: {}", reply.text);
        assert!(
            !(reply.status == 404 && reply.text.contains("there is no route")),
            "{what} is not served: {}",
            reply.text
        );
        // Its access as the table gives it: a route that is not public
        // refuses a caller with no token and no sign-in (a page with its
        // sign-in page), and a public one does not.
        assert_eq!(
            reply.status == 401,
            route.access != Access::Public,
            "{what} answered {}: {}",
            reply.status,
            reply.text
        );
    }
    // The metrics count each request under the template the router
    // matched: each route's own, on its own method.
    let metrics = served.get("/metrics", &served.operator).await;
    assert_eq!(metrics.status, 200, "{}", metrics.text);
    for route in ROUTES {
        let label = format!(
            "lf_handoff_http_requests_total{{method=\"{}\",route=\"{}\",",
            route.method.as_str(),
            route.path
        );
        assert!(
            metrics.text.contains(&label),
            "{label} not in\n{}",
            metrics.text
        );
    }
    served.stop().await;
}
