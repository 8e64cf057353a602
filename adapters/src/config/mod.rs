//! Choosing a backend: [`StorageConfig`] and its URL form. The serde form
//! is in `table`, the text pieces both forms read (escapes, durations) in
//! `text`.
//!
//! A store is named by a URL:
//!
//! | URL | backend |
//! | --- | --- |
//! | `sqlite:///abs/path/registry.db[?synchronous=full\|normal&busy_timeout=10s]` | SQLite file |
//! | `postgres://user@host:port/db[?schema=name&pool_size=N&acquire_timeout=5s]` | PostgreSQL server (also `postgresql://`) |
//! | `sled:///abs/path/dir` | sled directory (one process only) |
//!
//! Paths must be absolute; `%XX` escapes are decoded (so a path may hold any
//! byte, including spaces and non-UTF-8). An orchestrator embeds the same
//! settings in its own config file, either as a URL string or as a table:
//!
//! ```toml
//! [store]
//! url = "sqlite:///var/lib/lf/registry.db"
//! synchronous = "normal"   # optional; overrides the URL's query
//! busy_timeout = "30s"     # optional
//! ```
//!
//! or, for PostgreSQL:
//!
//! ```toml
//! [store]
//! url = "postgres://lf@db.internal:5432/lf"
//! schema = "lf_handoff"    # optional; overrides the URL's query
//! pool_size = 4            # optional
//! acquire_timeout = "5s"   # optional
//! ```

mod table;
pub(crate) mod text;

use std::ffi::OsString;
use std::fmt;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::time::Duration;

use lf_handoff_application::{StoreError, StoreResult};

pub use crate::postgres::config::{
    PostgresConfig, DEFAULT_ACQUIRE_TIMEOUT, DEFAULT_POOL_SIZE, DEFAULT_POSTGRES_SCHEMA,
};
use text::{encode_path, percent_decode, split_query, TextError};

/// The URL schemes this build accepts, for error messages.
pub const ACCEPTED_SCHEMES: &str = "sqlite://, sled://, postgres://, postgresql://";

/// Which backend to open, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StorageConfig {
    /// An embedded SQLite file (the default backend).
    Sqlite(SqliteConfig),
    /// A PostgreSQL server, shared by several machines.
    Postgres(PostgresConfig),
    /// An embedded sled directory, usable by one process at a time.
    Sled(SledConfig),
}

/// Settings of the sled backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SledConfig {
    /// The store directory; created (mode 0700) when missing.
    pub path: PathBuf,
}

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
    /// The most connections one store handle opens.
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

impl StorageConfig {
    /// An embedded SQLite store at `path` with the default settings:
    /// `synchronous=FULL`, a 30 s busy timeout.
    pub fn sqlite(path: impl Into<PathBuf>) -> Self {
        Self::Sqlite(SqliteConfig {
            path: path.into(),
            synchronous: Synchronous::Full,
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            max_connections: 4,
        })
    }

    /// A PostgreSQL store named by a `postgres://` (or `postgresql://`) URL,
    /// as in `postgres://lf@db.internal:5432/lf?schema=team_a`. Options:
    /// `schema` (default `lf_handoff`), `pool_size` (default 4),
    /// `acquire_timeout` (default 5s), and the driver's libpq-style options
    /// such as `sslmode` or `application_name`.
    ///
    /// # Errors
    /// `InvalidInput` for a malformed URL or an unknown or bad option.
    pub fn postgres(url: &str) -> StoreResult<Self> {
        PostgresConfig::from_url(url).map(Self::Postgres)
    }

    /// An embedded sled store in the directory `path`. Only one process may
    /// open it at a time; every write is synced to disk before it returns.
    pub fn sled(path: impl Into<PathBuf>) -> Self {
        Self::Sled(SledConfig { path: path.into() })
    }

    /// Parses a store URL (see the module docs).
    ///
    /// # Errors
    /// `InvalidInput` for a malformed URL, an unknown scheme (naming the
    /// accepted ones), a relative path or an unknown option.
    pub fn from_url(url: &str) -> StoreResult<Self> {
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(invalid(format!(
                "store URL {url:?} has no scheme; accepted schemes: {ACCEPTED_SCHEMES}"
            )));
        };
        match scheme {
            "sqlite" => {
                let (path, query) = split_query(rest);
                let mut config = Self::sqlite(absolute_path(url, path)?);
                for (key, value) in query_pairs(url, query)? {
                    config.set(&key, &value)?;
                }
                Ok(config)
            }
            "postgres" | "postgresql" => Self::postgres(url),
            "sled" => {
                let (path, query) = split_query(rest);
                let mut config = Self::sled(decode_absolute(url, path, "sled:///abs/path/dir")?);
                for (key, value) in query_pairs(url, query)? {
                    config.set(&key, &value)?;
                }
                Ok(config)
            }
            other => Err(invalid(format!(
                "store URL scheme {other:?} is unknown; accepted schemes: {ACCEPTED_SCHEMES}"
            ))),
        }
    }

    /// The backend's name: `sqlite`, `sled` or `postgres`.
    pub fn backend(&self) -> &'static str {
        match self {
            Self::Sqlite(_) => "sqlite",
            Self::Postgres(_) => "postgres",
            Self::Sled(_) => "sled",
        }
    }

    /// Sets one backend option from its text form.
    fn set(&mut self, key: &str, value: &str) -> StoreResult<()> {
        match self {
            Self::Sqlite(sqlite) => sqlite.set(key, value),
            Self::Postgres(postgres) => postgres.set(key, value),
            Self::Sled(_) => Err(invalid(format!(
                "unknown sled store option {key:?}; sled stores take no options"
            ))),
        }
    }

    /// The canonical URL of this configuration; `from_url(config.url())`
    /// gives back an equal configuration. A PostgreSQL URL keeps its
    /// password here (a second process needs it); `Display` hides it.
    pub fn url(&self) -> String {
        match self {
            Self::Postgres(postgres) => postgres.url(),
            Self::Sqlite(sqlite) => {
                let mut url = format!("sqlite://{}", encode_path(&sqlite.path));
                let mut options = Vec::new();
                if sqlite.synchronous != Synchronous::Full {
                    options.push(format!("synchronous={}", sqlite.synchronous.as_str()));
                }
                if sqlite.busy_timeout != DEFAULT_BUSY_TIMEOUT {
                    options.push(format!(
                        "busy_timeout={}ms",
                        sqlite.busy_timeout.as_millis()
                    ));
                }
                if !options.is_empty() {
                    url.push('?');
                    url.push_str(&options.join("&"));
                }
                url
            }
            Self::Sled(sled) => format!("sled://{}", encode_path(&sled.path)),
        }
    }
}

/// The URL, with any password replaced by `***`.
impl fmt::Display for StorageConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Postgres(postgres) => f.write_str(&postgres.redacted_url()),
            _ => f.write_str(&self.url()),
        }
    }
}

impl SqliteConfig {
    fn set(&mut self, key: &str, value: &str) -> StoreResult<()> {
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
            other => {
                return Err(invalid(format!(
                    "unknown sqlite store option {other:?}; accepted: synchronous, busy_timeout"
                )))
            }
        }
        Ok(())
    }
}

/// Parses a duration such as `30s`, `500ms`, `2m`, `1h` or `1m30s`. A bare
/// number is seconds. The whole duration must fit in a `u64` count of
/// milliseconds, so its canonical `<n>ms` form parses back to it.
///
/// # Errors
/// `InvalidInput` naming the accepted forms.
pub fn parse_duration(text: &str) -> StoreResult<Duration> {
    text::parse_duration(text).map_err(|e| invalid(e.to_string()))
}

fn invalid(message: String) -> StoreError {
    StoreError::InvalidInput(message)
}

/// Decodes one query key or value of the store URL `shown` (the URL as a
/// message may show it, without its password).
pub(crate) fn decode_option(shown: &str, raw: &str) -> StoreResult<String> {
    text::percent_decode_utf8(raw).map_err(|e| match e {
        TextError::NotUtf8 => invalid(format!("store URL {shown:?}: options must be UTF-8")),
        other => invalid(format!("store URL {shown:?}: {other}")),
    })
}

fn query_pairs(url: &str, query: &str) -> StoreResult<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(invalid(format!(
                "store URL {url:?}: option {pair:?} must be key=value"
            )));
        };
        let key = decode_option(url, key)?;
        let value = decode_option(url, value)?;
        if pairs.iter().any(|(seen, _)| seen == &key) {
            return Err(invalid(format!(
                "store URL {url:?}: option {key:?} is given twice"
            )));
        }
        pairs.push((key, value));
    }
    Ok(pairs)
}

fn absolute_path(url: &str, encoded: &str) -> StoreResult<PathBuf> {
    let path = decode_absolute(url, encoded, "sqlite:///abs/path/registry.db")?;
    if path.as_os_str().as_bytes().ends_with(b"/") && path.as_os_str().len() > 1 {
        return Err(invalid(format!(
            "store URL {url:?} names a directory; name a file"
        )));
    }
    Ok(path)
}

/// Decodes the path of a URL, which must be absolute and free of NUL bytes.
fn decode_absolute(url: &str, encoded: &str, example: &str) -> StoreResult<PathBuf> {
    let bytes = percent_decode(encoded).map_err(|e| invalid(format!("store URL {url:?}: {e}")))?;
    if bytes.contains(&0) {
        return Err(invalid(format!(
            "store URL {url:?}: the path holds a NUL byte"
        )));
    }
    let path = PathBuf::from(OsString::from_vec(bytes));
    if !path.is_absolute() {
        return Err(invalid(format!(
            "store URL {url:?} must name an absolute path, as in {example}"
        )));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls_parse_and_round_trip() {
        let config = StorageConfig::from_url("sqlite:///var/lib/lf/registry.db").unwrap();
        assert_eq!(config, StorageConfig::sqlite("/var/lib/lf/registry.db"));
        assert_eq!(config.url(), "sqlite:///var/lib/lf/registry.db");
        let tuned = StorageConfig::from_url(
            "sqlite:///tmp/my%20dir/r.db?synchronous=normal&busy_timeout=2s",
        )
        .unwrap();
        let StorageConfig::Sqlite(sqlite) = &tuned else {
            panic!("not sqlite: {tuned:?}")
        };
        assert_eq!(sqlite.path, PathBuf::from("/tmp/my dir/r.db"));
        assert_eq!(sqlite.synchronous, Synchronous::Normal);
        assert_eq!(sqlite.busy_timeout, Duration::from_secs(2));
        assert_eq!(StorageConfig::from_url(&tuned.url()).unwrap(), tuned);
    }

    #[test]
    fn non_utf8_paths_survive_the_url_form() {
        let path = PathBuf::from(OsString::from_vec(b"/tmp/\xff\xfe/r.db".to_vec()));
        let config = StorageConfig::sqlite(path.clone());
        let parsed = StorageConfig::from_url(&config.url()).unwrap();
        let StorageConfig::Sqlite(sqlite) = parsed else {
            panic!("not sqlite: {parsed:?}")
        };
        assert_eq!(sqlite.path, path);
    }

    #[test]
    fn bad_urls_are_invalid_input_naming_the_problem() {
        for (url, needle) in [
            ("registry.db", "accepted schemes"),
            ("mysql://x/y", "accepted schemes"),
            ("sqlite://relative.db", "absolute"),
            ("sqlite:///tmp/", "directory"),
            ("sqlite:///tmp/r.db?synchronous=off", "synchronous"),
            (
                "sqlite:///tmp/r.db?color=red",
                "unknown sqlite store option",
            ),
            ("sqlite:///tmp/r.db?busy_timeout", "key=value"),
            ("sqlite:///tmp/r%zz.db", "escape"),
            ("sqlite:///tmp/r%00.db", "NUL"),
            (
                "sqlite:///tmp/r.db?synchronous=full&synchronous=normal",
                "twice",
            ),
        ] {
            let err = StorageConfig::from_url(url).unwrap_err();
            assert!(err.is_invalid_input(), "{url}: {err}");
            assert!(err.to_string().contains(needle), "{url}: {err}");
        }
    }

    /// The messages a person reads, word for word: the text helpers' errors
    /// reach them with the URL in front.
    #[test]
    fn text_errors_are_reported_with_the_url() {
        for (url, message) in [
            (
                "sqlite:///tmp/r%zz.db",
                "store URL \"sqlite:///tmp/r%zz.db\": `%` must start an escape like %20",
            ),
            (
                "sqlite:///tmp/r.db?synchronous=%ff",
                "store URL \"sqlite:///tmp/r.db?synchronous=%ff\": options must be UTF-8",
            ),
            (
                "sqlite:///tmp/r.db?%zz=1",
                "store URL \"sqlite:///tmp/r.db?%zz=1\": `%` must start an escape like %20",
            ),
            (
                "sqlite:///tmp/r.db?busy_timeout=soon",
                "duration \"soon\" is malformed: use forms like 500ms, 30s, 2m, 1h or 1m30s",
            ),
            (
                "postgres://lf:pw@h/db?schema=%ff",
                "store URL \"postgres://lf:***@h/db?schema=%ff\": options must be UTF-8",
            ),
            (
                "postgres://h/db?acquire_timeout=18446744073709552s",
                "duration \"18446744073709552s\" is too long",
            ),
        ] {
            match StorageConfig::from_url(url) {
                Err(StoreError::InvalidInput(got)) => assert_eq!(got, message, "{url}"),
                other => panic!("{url}: {other:?}"),
            }
        }
    }

    #[test]
    fn sled_urls_parse_round_trip_and_take_no_options() {
        let config = StorageConfig::from_url("sled:///var/lib/lf/registry").unwrap();
        assert_eq!(config, StorageConfig::sled("/var/lib/lf/registry"));
        assert_eq!(config.backend(), "sled");
        assert_eq!(config.url(), "sled:///var/lib/lf/registry");
        let odd = StorageConfig::sled(PathBuf::from(OsString::from_vec(
            b"/tmp/my dir/\xff?#%/store".to_vec(),
        )));
        assert_eq!(StorageConfig::from_url(&odd.url()).unwrap(), odd);
        assert_eq!(
            StorageConfig::from_url("sled:///tmp/store/").unwrap(),
            StorageConfig::sled("/tmp/store")
        );
        for (url, needle) in [
            ("sled://relative/store", "sled:///abs/path/dir"),
            ("sled:///tmp/store?cache=1", "sled stores take no options"),
            ("sled:///tmp/st%00re", "NUL"),
        ] {
            let err = StorageConfig::from_url(url).unwrap_err();
            assert!(err.is_invalid_input(), "{url}: {err}");
            assert!(err.to_string().contains(needle), "{url}: {err}");
        }
        let err = StorageConfig::from_url("ftp://x").unwrap_err();
        assert!(err.to_string().contains("sled://"), "{err}");
    }

    #[test]
    fn durations_parse_in_common_forms() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        for bad in ["", "10x", "18446744073709552s"] {
            assert!(
                parse_duration(bad).unwrap_err().is_invalid_input(),
                "{bad:?} parsed"
            );
        }
    }

    #[test]
    fn busy_timeouts_longer_than_a_day_are_refused() {
        let day = StorageConfig::from_url("sqlite:///tmp/r.db?busy_timeout=24h").unwrap();
        let StorageConfig::Sqlite(sqlite) = &day else {
            panic!("not sqlite: {day:?}")
        };
        assert_eq!(sqlite.busy_timeout, MAX_BUSY_TIMEOUT);
        for url in [
            "sqlite:///tmp/r.db?busy_timeout=600h",
            "sqlite:///tmp/r.db?busy_timeout=18446744073709551615s",
        ] {
            let err = StorageConfig::from_url(url).unwrap_err();
            assert!(err.is_invalid_input(), "{url}: {err}");
            assert!(err.to_string().contains("too long"), "{url}: {err}");
        }
    }

    #[test]
    fn postgres_urls_dispatch_round_trip_and_hide_the_password() {
        for url in [
            "postgres://postgres@127.0.0.1:5432/test",
            "postgresql://lf:pw@db:5432/lf?sslmode=disable&schema=team_a&pool_size=2",
            "postgres://lf@db/lf?acquire_timeout=250ms",
        ] {
            let config = StorageConfig::from_url(url).unwrap();
            assert_eq!(config.backend(), "postgres");
            assert_eq!(StorageConfig::postgres(url).unwrap(), config);
            assert_eq!(
                StorageConfig::from_url(&config.url()).unwrap(),
                config,
                "{url}"
            );
        }
        let config = StorageConfig::from_url("postgres://lf:pw@db:5432/lf").unwrap();
        assert_eq!(config.to_string(), "postgres://lf:***@db:5432/lf");
        assert!(StorageConfig::postgres("sqlite:///tmp/a.db")
            .unwrap_err()
            .is_invalid_input());
        let err = StorageConfig::from_url("ftp://x").unwrap_err().to_string();
        assert!(err.contains("postgres://"), "{err}");
    }
}
