//! Black-box tests of the `lf-handoff` binary against the command-line
//! contract in docs/CONTRACT.md: every command run as a process against a
//! temporary store, checking exit codes, the JSON shapes field by field,
//! the human output, the store selection, `attach` running a real command
//! and `wait`.
// Test code: panicking on a failed expectation is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod answers;
mod archive;
mod attach;
mod commands;
mod config;
mod deadlines;
mod handoffs;
mod history;
mod hooks;
mod logging;
mod mcp;
mod notify;
mod parents;
mod prune;
mod readme;
mod serve;
mod steps;
mod support;
mod tmux;
mod wait;
