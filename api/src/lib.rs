//! # lf-handoff API
//!
//! The wire of the lf-handoff service (contracts C18-C20), shared by the
//! server (`lf-handoff-server`), the remote client and the command line,
//! so none of them can disagree with the others:
//!
//! - [`json`]: the JSON shapes the command line prints with `--json` and
//!   the service answers with;
//! - [`requests`]: the bodies and query parameters the service takes, and
//!   [`strict`], which reads a body refusing any field it does not take;
//! - [`error`]: the error object and the one table giving each category
//!   its HTTP status and exit code, and the way back to a `StoreError`;
//! - [`routes`]: the route table, pages included (method, path, scopes,
//!   whether the sign-in cookie may be used, whom it answers, bodies,
//!   statuses);
//! - [`openapi`]: the OpenAPI 3.1 document generated from the table and
//!   the types;
//! - [`duration`]: the durations people type (`90s`, `2h`, `1d`).
//!
//! ## Design decisions
//!
//! - **No IO and no HTTP stack**: serde types and pure functions, so a
//!   client in any runtime can use them.
//! - **Every type reads back what it writes** (`Serialize` and
//!   `Deserialize`), so a client parses the answers with the types the
//!   server wrote them with.

#![deny(missing_docs)]

pub mod duration;
pub mod error;
pub mod json;
pub mod openapi;
pub mod requests;
pub mod routes;
pub mod strict;

pub use error::{Category, ErrorBody, ErrorResponse};
pub use json::{Claimed, Counts, HandoffJson, Health, LinkJson, Opened, Pruned, WaitJson};
pub use routes::{Access, Audience, Method, Route, RouteId, Scope, ROUTES};
