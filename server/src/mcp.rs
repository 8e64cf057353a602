//! `POST /mcp`: the Model Context Protocol over streamable HTTP (C28), for
//! an agent's MCP client with an agent token. The tools are
//! `lf-handoff-mcp`'s; this handler gives them the store as the caller
//! (the history names the token) and the caller's own wave, and holds the
//! request to the service's limits: the token checked before the body is
//! read, the body's size and time (C29), a long-poll place while a tool
//! waits, and the end of the request when the token is revoked or the
//! service shuts down.

use axum::body::Body;
use axum::extract::{Extension, Request, State};
use axum::response::Response;
use lf_handoff_api::Category;
use lf_handoff_mcp::{McpServer, ParentChoice, Place, Settings};

use crate::error::ApiError;
use crate::extract::{whole_body, Sender, Who};
use crate::metrics::Gauge;
use crate::state::{shutting_down, AppState, Holder};
use crate::streams::revoked;

/// Serves one JSON-RPC message of the caller's MCP client. The caller's
/// questions go under a wave of its own, the same for every request
/// with a token of the same name.
pub async fn mcp(
    State(state): State<AppState>,
    Who(caller): Who,
    Extension(holder): Extension<Holder>,
    request: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let bytes = whole_body(
        Request::from_parts(parts.clone(), body),
        &state,
        Sender::Known,
    )
    .await?;
    let _slot = state.stream_slot(Gauge::LongPolls)?;
    let name = caller.name.as_str();
    let settings = Settings {
        wait: state.limits().mcp_wait,
        parent: ParentChoice::session_wave(
            &format!("token:{name}"),
            &format!("mcp: token {name}"),
            "mcp",
        ),
        place: Place::remote(),
        inbox: state.public_url().map(str::to_string),
    };
    let server = McpServer::new(state.store_as(&caller.name), settings);
    let request = axum::http::Request::from_parts(parts, bytes);
    let mut shutdown = state.shutdown_signal();
    tokio::select! {
        response = lf_handoff_mcp::http::handle(server, request) => Ok(response.map(Body::new)),
        () = shutting_down(&mut shutdown) => Err(ApiError::plain(
            Category::Unavailable,
            "the service is shutting down; the question stays open: call await_answer again",
        )),
        () = state.gone(holder) => Err(revoked()),
    }
}
