//! [`SledConfig`]: the settings of the sled backend and its URL form,
//! `sled:///abs/path/dir` (no options).

use std::path::PathBuf;

use lf_handoff_application::StoreResult;

use crate::config::text::{decode_absolute, encode_path, invalid, query_pairs, split_query};

/// Settings of the sled backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SledConfig {
    /// The store directory; created (mode 0700) when missing.
    pub path: PathBuf,
}

impl SledConfig {
    /// Reads the `sled://` URL `url`, whose part after the scheme is
    /// `rest`.
    pub(crate) fn from_url(url: &str, rest: &str) -> StoreResult<Self> {
        let (path, query) = split_query(rest);
        let mut config = Self {
            path: decode_absolute(url, path, "sled:///abs/path/dir")?,
        };
        for (key, value) in query_pairs(url, query)? {
            config.set(&key, &value)?;
        }
        Ok(config)
    }

    /// Refuses every option: sled stores take none.
    pub(crate) fn set(&mut self, key: &str, _value: &str) -> StoreResult<()> {
        Err(invalid(format!(
            "unknown sled store option {key:?}; sled stores take no options"
        )))
    }

    /// The canonical URL.
    pub(crate) fn url(&self) -> String {
        format!("sled://{}", encode_path(&self.path))
    }
}
