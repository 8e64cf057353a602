//! # lf-handoff server
//!
//! `lf-handoff serve`: one `Store` as an HTTP/1.1 service (contracts C19
//! and C20). The wire (bodies, the error object and its statuses, the
//! route table, the OpenAPI document) is `lf-handoff-api`'s; this crate
//! serves it.
//!
//! - [`app`] is the router over an [`AppState`] (the store, the tokens,
//!   the limits): every route of the table with its handler, behind the
//!   layers that check the token's scopes, log one line per request and
//!   turn a panic into a 500. Tests serve it on `127.0.0.1:0`.
//! - [`bind`] and [`Server::run`] are the connection loop (connection
//!   limit, header timeout, TCP keepalive, TLS, graceful drain), and
//!   [`serve`] adds the signals: what the command line calls.
//! - [`tokens`] makes, reads and revokes tokens (`lf-handoff token`).
//!
//! ## Design decisions
//!
//! - **The store is the only state.** Handlers call the `Store`'s public
//!   methods with the token's name as the actor (`Store::with_actor`), so
//!   several servers on one PostgreSQL store are one service.
//! - **Refused before read.** A request without a token, with an unknown
//!   one or of the wrong scope is refused before its body is read; a body
//!   is checked for its content type, size and time, then parsed strictly,
//!   before the store is called. Bad input never reaches the store and
//!   never gives a 500.
//! - **Nothing polls.** The long poll and the event stream sleep on the
//!   store's change signal (`Waiting::wait`, `Waiting::watch`).
//! - **Tokens never reach the log**: the request line logs the route
//!   template, never the path's values, the query or a header.
//! - **axum, hyper, tower-http, tokio-rustls**: the tokio HTTP stack the
//!   workspace already runs on; hyper directly for the connection loop, so
//!   the service sets the connection limit, timeouts and TLS itself.

#![deny(missing_docs)]

mod error;
mod extract;
mod handlers;
mod hex;
mod layers;
pub mod links;
mod listen;
mod mcp;
mod metrics;
pub mod notify;
mod peers;
mod serve;
mod state;
mod streams;
pub mod tokens;
mod web;

pub use error::ApiError;
pub use handlers::app;
pub use listen::{
    bind, bind_to, listen, Reloader, RunToken, ServeConfig, Server, TlsFiles, DEFAULT_LISTEN, HSTS,
    NOTIFICATION_LINK_HOLDER,
};
pub use metrics::{Gauge, Metrics};
pub use notify::NotifyConfig;
pub use serve::{serve, serve_on};
pub use state::{AppState, Limits, PersonSide};
