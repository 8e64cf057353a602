//! What every store command runs with: the opened store (naming the
//! actor in the history), its URL (for messages) and the output mode.

use std::ffi::OsStr;

use lf_handoff_adapters::{open_store, ConflictKind, StorageConfig, Store, StoreError};
use lf_handoff_domain::interactive_handoff::Actor;

use crate::error::{CliError, CliResult};

/// The environment variable naming the actor.
pub const ACTOR_ENV: &str = "LF_HANDOFF_ACTOR";

/// The actor a command names in the history (C15): `--actor`, else
/// `LF_HANDOFF_ACTOR` (an empty value counts as unset), else `None`, the
/// library's default (`user@host (pid N)`).
///
/// # Errors
/// Exit 2 (kind `usage`) when the variable is not valid UTF-8 or not a
/// valid actor (blank, over 200 bytes, a control character), naming it.
pub fn choose_actor(flag: Option<Actor>, variable: Option<&OsStr>) -> CliResult<Option<Actor>> {
    if flag.is_some() {
        return Ok(flag);
    }
    let Some(value) = variable.filter(|value| !value.is_empty()) else {
        return Ok(None);
    };
    let Some(text) = value.to_str() else {
        return Err(CliError::usage(format!(
            "{ACTOR_ENV} is not valid UTF-8; set it to a name such as alice@build-1"
        )));
    };
    Actor::parse(text)
        .map(Some)
        .map_err(|e| CliError::usage(format!("{ACTOR_ENV}: {e}")))
}

/// An opened store and how to print.
#[derive(Debug)]
pub struct Context {
    /// The store.
    pub store: Store,
    /// The store's URL, named in "not found" messages so a person can tell
    /// when they are looking in the wrong store.
    pub url: String,
    /// Print JSON instead of text.
    pub json: bool,
}

impl Context {
    /// Opens the store `config` names, naming `actor` (when given) in the
    /// history of the changes made through it. The store is opened shared
    /// with other processes (`StorageConfig::shared_with_other_processes`):
    /// a command that waits must not keep the person's commands out.
    ///
    /// # Errors
    /// Exit 5 (or 2) as `open_store` reports.
    pub async fn open(config: &StorageConfig, json: bool, actor: Option<Actor>) -> CliResult<Self> {
        let shared = config.clone().shared_with_other_processes();
        let mut store = open_store(&shared).await.map_err(CliError::from)?;
        if let Some(actor) = actor {
            store = store.with_actor(actor);
        }
        Ok(Self {
            store,
            url: config.url(),
            json,
        })
    }

    /// Maps a store error, adding what to check when something is missing
    /// and what is left to do with an expired handoff.
    pub fn fail(&self, error: StoreError) -> CliError {
        let not_found = error.is_not_found();
        let expired = error.conflict_kind() == Some(ConflictKind::Expired);
        let error = CliError::from(error);
        if not_found {
            error.hint(format!(
                "check the id and the store ({}); `lf-handoff list` shows its handoffs",
                self.url
            ))
        } else if expired {
            error.hint(
                "an expired handoff is finished for good: the parent's next body claims its \
                 wake, and a person still needed is asked again with a new handoff",
            )
        } else {
            error
        }
    }

    /// The "handoff does not exist" error for `id`.
    pub fn missing_handoff(&self, id: &impl std::fmt::Display) -> CliError {
        self.fail(StoreError::NotFound(format!("handoff {id} does not exist")))
    }
}
