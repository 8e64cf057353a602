//! The streamable HTTP transport `lf-handoff serve` mounts at `/mcp`
//! (feature `http`): each request served on its own, as the SDK's
//! stateless mode serves it, with a JSON answer rather than an event
//! stream. The service in front checks the token, the body's size and
//! time and the connection limits before a request gets here.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::Full;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::McpServer;

/// Answers one request of the streamable HTTP transport (a `POST` of a
/// JSON-RPC message) with `server`, which names the caller.
///
/// No session is kept between requests: the store holds every question,
/// so servers on one store are one MCP server. The `Host` and `Origin`
/// checks the SDK makes against DNS rebinding are off: they protect a
/// server a browser reaches without credentials, and every request here
/// carries a bearer token, which a browser does not add by itself.
pub async fn handle(
    server: McpServer,
    request: http::Request<Bytes>,
) -> http::Response<BoxBody<Bytes, Infallible>> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .disable_allowed_hosts()
        .disable_allowed_origins();
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    service.handle(request.map(Full::new)).await
}
