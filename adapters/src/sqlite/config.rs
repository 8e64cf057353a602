//! [`SqliteConfig`]: the settings of the SQLite backend and its URL form,
//! `sqlite:///abs/path/registry.db[?synchronous=full|normal&busy_timeout=10s&max_connections=N]`.

use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use lf_handoff_application::StoreResult;

use crate::config::text::{
    at_least_one, decode_absolute, encode_path, invalid, parse_duration, query_pairs, split_query,
};

/// Settings of the SQLite backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteConfig {
    /// The database file; created (mode 0600) when missing.
    pub path: PathBuf,
    /// How hard each commit waits for the disk.
    pub synchronous: Synchronous,
    /// How long a writer waits for another process's write lock; at most
    /// [`MAX_BUSY_TIMEOUT`] (a longer value is treated as that).
    pub busy_timeout: Duration,
    /// The most connections one store handle's pool opens (0 is treated
    /// as 1). Beside them, a handoff's load on the caller's thread opens
    /// connections of its own, one per core and at most four, when first
    /// needed (`inline.rs`).
    pub max_connections: u32,
}

/// SQLite's `synchronous` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Every commit is on disk before it returns, even across power loss
    /// (the default).
    #[default]
    Full,
    /// Commits survive a process crash but the last few may be lost on power
    /// loss. An explicit opt-in.
    Normal,
}

impl Synchronous {
    fn parse(text: &str) -> StoreResult<Self> {
        match text.to_ascii_lowercase().as_str() {
            "full" => Ok(Self::Full),
            "normal" => Ok(Self::Normal),
            _ => Err(invalid(format!(
                "synchronous must be `full` or `normal`, got {text:?}"
            ))),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Normal => "normal",
        }
    }
}

/// The default time a SQLite writer waits for another process's lock.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest busy timeout a store URL or config file may ask for. SQLite
/// counts its busy timeout in milliseconds in a C `int`; a day is far
/// inside that and far beyond any sensible wait.
pub const MAX_BUSY_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The most connections a SQLite store handle opens when the URL says
/// nothing.
pub(crate) const DEFAULT_MAX_CONNECTIONS: u32 = 4;

impl SqliteConfig {
    /// A store at `path` with the default settings: `synchronous=FULL`, a
    /// 30 s busy timeout, at most 4 connections.
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            synchronous: Synchronous::Full,
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }

    /// Reads the `sqlite://` URL `url`, whose part after the scheme is
    /// `rest`.
    pub(crate) fn from_url(url: &str, rest: &str) -> StoreResult<Self> {
        let (path, query) = split_query(rest);
        let path = decode_absolute(url, path, "sqlite:///abs/path/registry.db")?;
        if path.as_os_str().as_bytes().ends_with(b"/") && path.as_os_str().len() > 1 {
            return Err(invalid(format!(
                "store URL {url:?} names a directory; name a file"
            )));
        }
        let mut config = Self::new(path);
        for (key, value) in query_pairs(url, query)? {
            config.set(&key, &value)?;
        }
        Ok(config)
    }

    /// Sets one option from its text form.
    pub(crate) fn set(&mut self, key: &str, value: &str) -> StoreResult<()> {
        match key {
            "synchronous" => self.synchronous = Synchronous::parse(value)?,
            "busy_timeout" => {
                let timeout = parse_duration(value)?;
                if timeout > MAX_BUSY_TIMEOUT {
                    return Err(invalid(format!(
                        "busy_timeout {value:?} is too long: the most is 24h"
                    )));
                }
                self.busy_timeout = timeout;
            }
            "max_connections" => self.max_connections = at_least_one(key, value)?,
            other => {
                return Err(invalid(format!(
                    "unknown sqlite store option {other:?}; accepted: synchronous, busy_timeout, \
                     max_connections"
                )))
            }
        }
        Ok(())
    }

    /// The canonical URL: a setting outside what a URL accepts is written
    /// as the value the store uses for it (a busy timeout beyond
    /// [`MAX_BUSY_TIMEOUT`] as that, 0 connections as 1); the busy timeout
    /// in whole milliseconds, SQLite's unit.
    pub(crate) fn url(&self) -> String {
        let mut url = format!("sqlite://{}", encode_path(&self.path));
        let mut options = Vec::new();
        if self.synchronous != Synchronous::Full {
            options.push(format!("synchronous={}", self.synchronous.as_str()));
        }
        let busy_timeout = self.busy_timeout.min(MAX_BUSY_TIMEOUT);
        if busy_timeout != DEFAULT_BUSY_TIMEOUT {
            options.push(format!("busy_timeout={}ms", busy_timeout.as_millis()));
        }
        let max_connections = self.max_connections.max(1);
        if max_connections != DEFAULT_MAX_CONNECTIONS {
            options.push(format!("max_connections={max_connections}"));
        }
        if !options.is_empty() {
            url.push('?');
            url.push_str(&options.join("&"));
        }
        url
    }
}
