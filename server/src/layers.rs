//! What runs around every handler: who may call the route (C20), one log
//! line and the metrics of every request, and a panic turned into a 500.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderMap, Method as HttpMethod};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use lf_handoff_api::routes::{find, Access, Method};
use lf_handoff_api::{Category, ErrorResponse};

use crate::error::{error_response, ApiError};
use crate::state::{AppState, Holder};

/// Refuses a request to a route its token may not call: 401 without a
/// token or with one the service does not know, 403 when the token's
/// scopes do not allow the route. The caller is handed to the handler.
/// Runs before the body is read, so a refused request reads and writes
/// nothing.
pub async fn authorize(
    State(state): State<AppState>,
    matched: Option<MatchedPath>,
    mut request: Request,
    next: Next,
) -> Response {
    let Some(route) = route_of(request.method(), matched.as_ref()) else {
        return next.run(request).await;
    };
    if route.access == Access::Public {
        return next.run(request).await;
    }
    // The inbox's script reads with the sign-in cookie: the table says on
    // which routes (`Route::cookie`), never one that changes anything (the
    // pages' forms carry an anti-forgery token instead).
    let mut sign_in = None;
    let entry = match bearer(request.headers()) {
        Some(token) => state.tokens().entry_of(token).cloned(),
        None => match crate::web::session_cookie(request.headers()) {
            Some(cookie) if route.cookie => match crate::web::session_entry(&state, cookie).await {
                Ok(entry) => {
                    sign_in = crate::links::SessionValue::parse(cookie, state.store().now())
                        .map(|value| value.revocation_key());
                    entry
                }
                Err(error) => return error.into_response(),
            },
            _ => {
                return ApiError::plain(
                    Category::Unauthorized,
                    "this route needs a token: send Authorization: Bearer lfh_...",
                )
                .into_response()
            }
        },
    };
    let Some(entry) = entry else {
        return ApiError::plain(
            Category::Unauthorized,
            "the token is not one this service accepts (revoked, or made for another tokens \
             file), or the sign-in has expired; use a token of the service's tokens file (made \
             with `lf-handoff token create NAME --scope SCOPE --tokens FILE`) or one `serve` \
             printed at its start",
        )
        .into_response();
    };
    let caller = entry.caller.clone();
    if !route.access.allows(Some(&caller.scopes)) {
        let held: Vec<&str> = caller.scopes.iter().map(|s| s.as_str()).collect();
        let needed: Vec<&str> = route.access.scopes().iter().map(|s| s.as_str()).collect();
        return ApiError::plain(
            Category::Forbidden,
            scope_refused(&held, &needed, caller.name.as_str(), route),
        )
        .into_response();
    }
    request.extensions_mut().insert(caller);
    request.extensions_mut().insert(Holder {
        hash: Arc::from(entry.hash()),
        caller: entry.caller.clone(),
        sign_in,
    });
    next.run(request).await
}

/// What a token whose scopes do not allow `route` is told: the scope that
/// would, first (a person at the command line never named the route),
/// then what the token holds and the route, then how to get such a token.
fn scope_refused(
    held: &[&str],
    needed: &[&str],
    name: &str,
    route: &lf_handoff_api::Route,
) -> String {
    let first = needed.first().copied().unwrap_or("operator");
    format!(
        "this needs a token of scope {}; the token {name:?} holds {} ({} {} was refused); use a \
         {first} token, or make one with `lf-handoff token create NAME --scope {first} --tokens \
         FILE`",
        needed.join(" or "),
        held.join(", "),
        route.method.as_str(),
        route.path,
    )
}

fn route_of(
    method: &HttpMethod,
    matched: Option<&MatchedPath>,
) -> Option<&'static lf_handoff_api::Route> {
    let method = match *method {
        // axum answers HEAD with the GET handler (the body dropped), so a
        // HEAD is checked as the GET it runs.
        HttpMethod::GET | HttpMethod::HEAD => Method::Get,
        HttpMethod::POST => Method::Post,
        // No route of the table takes another method: the router answers
        // 405 without running a handler.
        _ => return None,
    };
    find(method, matched?.as_str())
}

/// The token of `Authorization: Bearer TOKEN`, if any.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
}

/// Logs one INFO line per request (method, route template, status,
/// duration: never the path's values, the query or a header, so no token
/// is ever logged) and counts it in the metrics.
pub async fn observe(
    State(state): State<AppState>,
    matched: Option<MatchedPath>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = method_name(request.method());
    let route = matched.map_or_else(|| "unmatched".to_string(), |m| m.as_str().to_string());
    let response = next.run(request).await;
    let took = started.elapsed();
    let status = response.status().as_u16();
    state.metrics().request(method, &route, status, took);
    tracing::info!(
        method,
        route = %route,
        status,
        duration_ms = took.as_secs_f64() * 1000.0,
        "request"
    );
    response
}

fn method_name(method: &HttpMethod) -> &'static str {
    match *method {
        HttpMethod::GET => "GET",
        HttpMethod::POST => "POST",
        HttpMethod::PUT => "PUT",
        HttpMethod::DELETE => "DELETE",
        HttpMethod::HEAD => "HEAD",
        HttpMethod::OPTIONS => "OPTIONS",
        HttpMethod::PATCH => "PATCH",
        _ => "OTHER",
    }
}

/// The answer of a handler that panicked: a 500 with the error object;
/// the panic is logged, the server goes on.
pub fn panicked(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let what = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("a panic");
    tracing::error!("a handler panicked: {what}");
    error_response(&ErrorResponse::plain(
        Category::Internal,
        "the service failed on this request (a bug, logged); the request may not have been \
         carried out",
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use http_body_util::BodyExt as _;

    use super::*;

    #[tokio::test]
    async fn a_panic_is_a_500_with_the_error_object() {
        for payload in [
            Box::new("boom") as Box<dyn std::any::Any + Send>,
            Box::new(String::from("boom")),
            Box::new(7_u8),
        ] {
            let response = panicked(payload);
            assert_eq!(response.status().as_u16(), 500);
            let body = response.into_body().collect().await.unwrap().to_bytes();
            let object: ErrorResponse = serde_json::from_slice(&body).unwrap();
            assert_eq!(object.error.category, Category::Internal);
            assert_eq!(object.error.kind, "internal");
        }
    }
}
