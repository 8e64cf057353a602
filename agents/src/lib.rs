//! # lf-handoff-agents
//!
//! The agents' own hooks (docs/CONTRACT.md, C27): `lf-handoff hook
//! claude-code` and `lf-handoff hook codex` are commands for the hook
//! settings of Claude Code and Codex. The agent runs one at each of its
//! stops (a permission request, an idle prompt, a prompt submitted, the
//! session's end) with its hook input as JSON on standard input; the hook
//! reaches the registry, so a person anywhere can answer, and prints the
//! person's decision in the agent's own output format.
//!
//! ## Design decisions
//!
//! - **Never block or break the agent.** Every failure (an input of
//!   another shape, an unknown event, a store that cannot be reached, a
//!   refused token) ends in no decision and one log line naming why
//!   ([`HookError`]); the agent then shows its own prompt. Only a
//!   person's answer (or the deadline's answer the person configured)
//!   decides.
//! - **Bounded waits.** A permission hook waits for a person at most
//!   [`HookConfig::wait`], below the timeout `hook install` gives the
//!   agent, and leaves the handoff open after it: the next hook event of
//!   the session ends what the person answered at the terminal instead,
//!   as the actor `terminal` ([`registry::TERMINAL_ACTOR`]).
//! - **One wave per agent session**, its id derived from the session
//!   ([`describe::session_wave_id`]), so concurrent hooks of a session
//!   find the same parent without coordination; the step key of each
//!   handoff starts with the session, so the session's handoffs are found
//!   under any parent (`LF_HANDOFF_PARENT`).
//! - **The settings file is the person's.** `hook install` merges our
//!   entries, keeps everything else in its order, writes a backup, and
//!   refuses a file the agent could not read either ([`install`]).
//!
//! The store calls are all in [`registry`]; the published input and output
//! formats, the timeouts and the bounds are in docs/HOOKS.md.

#![deny(missing_docs)]

mod config;
mod decision;
pub mod describe;
mod hook;
mod input;
pub mod install;
mod ordered;
pub mod registry;
mod tmux;

pub use config::{
    Behavior, HookConfig, HookFlags, DEFAULT_EXPIRES_IN, DEFAULT_WAIT, EXPIRES_IN_ENV, MAX_WAIT,
    ON_EXPIRY_ENV, PARENT_ENV, WAIT_ENV,
};
pub use decision::Decision;
pub use hook::{handle, Outcome, MARGIN};
pub use input::{
    parse, Agent, EventKind, HookError, HookEvent, PermissionRequest, MAX_INPUT_BYTES,
    MAX_SESSION_BYTES,
};
pub use tmux::attach_argv;
