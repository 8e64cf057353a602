//! What every store command runs with: the opened store, its URL (for
//! messages) and the output mode.

use lf_handoff_adapters::{open_store, StorageConfig, Store, StoreError};

use crate::error::{CliError, CliResult};

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
    /// Opens the store `config` names.
    ///
    /// # Errors
    /// Exit 5 (or 2) as `open_store` reports.
    pub async fn open(config: &StorageConfig, json: bool) -> CliResult<Self> {
        let store = open_store(config).await.map_err(CliError::from)?;
        Ok(Self {
            store,
            url: config.url(),
            json,
        })
    }

    /// Maps a store error, adding what to check when something is missing.
    pub fn fail(&self, error: StoreError) -> CliError {
        let not_found = error.is_not_found();
        let error = CliError::from(error);
        if not_found {
            error.hint(format!(
                "check the id and the store ({}); `lf-handoff list` shows its handoffs",
                self.url
            ))
        } else {
            error
        }
    }

    /// The "handoff does not exist" error for `id`.
    pub fn missing_handoff(&self, id: &impl std::fmt::Display) -> CliError {
        self.fail(StoreError::NotFound(format!("handoff {id} does not exist")))
    }
}
