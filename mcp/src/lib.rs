//! # lf-handoff MCP server
//!
//! The registry as a Model Context Protocol server (contract C28): an
//! agent's MCP client (Claude Code, Codex, any other) calls a tool to ask a
//! person, and the question becomes a handoff that outlives the call, the
//! client and this server. Four tools:
//!
//! - `ask_person`: opens a handoff with the question (and the choices or
//!   form of C26, a step key, a deadline) and waits for the answer at most
//!   a bound ([`DEFAULT_WAIT`] unless configured); it returns the answer,
//!   or that the question still waits, with the handoff's id and a link;
//! - `await_answer`: the same bounded wait on a handoff already open;
//! - `get_handoff`: where a handoff stands, without waiting;
//! - `list_waiting`: the questions of this client that nobody has answered.
//!
//! [`McpServer`] is the `ServerHandler` of the protocol's official Rust SDK
//! ([`rmcp`]); `lf-handoff mcp` serves it over standard input and output
//! ([`serve_stdio`]) and `lf-handoff serve` at `/mcp` over streamable HTTP
//! ([`http::handle`], feature `http`).
//!
//! ## Design decisions
//!
//! - **The wait is bounded, the question is not.** Clients give up on a
//!   tool call after a while (60 s in the TypeScript SDK, a few minutes in
//!   others), and a person may take hours. So a tool waits at most
//!   [`Settings::wait`] (45 s by default, below those timeouts) and then
//!   says the question still waits; `await_answer` waits again. The
//!   handoff is in the store, so an answer given after the call, the
//!   client or this server is gone is not lost.
//! - **Whose question: a parent chosen by whoever starts the server, not
//!   by the model.** [`ParentChoice::Named`] (`LF_HANDOFF_PARENT`) puts
//!   the questions under an orchestrator's parent; otherwise each client
//!   has a wave of its own, whose id is derived from what identifies the
//!   client ([`ParentChoice::SessionWave`]: the account, machine and
//!   directory it runs in over standard input and output, the token's
//!   name over HTTP), so the same client after a restart finds the same
//!   wave, and the same step key the same handoff (C12).
//! - **One question at a time per parent** (C3): asking while another
//!   question of the parent waits, under another step or none, is a
//!   `parent_busy` conflict naming the waiting one; the model waits for it
//!   with `await_answer` first.
//! - **Errors are tool errors with the error object's kind** (C18):
//!   missing or wrong arguments, unknown ids, conflicts and an unavailable
//!   store answer a result with `isError` and `{"error": {"kind", ...}}`,
//!   never a protocol error, so the model reads why and the server goes on
//!   serving.
//! - **No state of its own.** Over HTTP each request is served on its own
//!   (the SDK's stateless mode), as the rest of the service is: several
//!   servers on one store are one service.

#![deny(missing_docs)]

#[cfg(feature = "http")]
pub mod http;
mod reply;
mod session;
mod shape;
mod tools;

pub use session::{ParentChoice, Place, Settings, DEFAULT_WAIT};
pub use tools::{serve_stdio, McpServer, TOOLS};
