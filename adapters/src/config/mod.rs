//! Choosing a backend: [`StorageConfig`] and its URL form. The serde form
//! is in `table`, the text pieces both forms read (escapes, durations) in
//! `text`.
//!
//! A store is named by a URL:
//!
//! | URL | backend |
//! | --- | --- |
//! | `sqlite:///abs/path/registry.db[?synchronous=full\|normal&busy_timeout=10s&max_connections=N]` | SQLite file |
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
//! max_connections = 4      # optional
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
    /// The most connections one store handle opens (0 is treated as 1).
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
const DEFAULT_MAX_CONNECTIONS: u32 = 4;

impl StorageConfig {
    /// An embedded SQLite store at `path` with the default settings:
    /// `synchronous=FULL`, a 30 s busy timeout, at most 4 connections.
    pub fn sqlite(path: impl Into<PathBuf>) -> Self {
        Self::Sqlite(SqliteConfig {
            path: path.into(),
            synchronous: Synchronous::Full,
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
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
    ///
    /// A SQLite setting outside what a URL accepts is written as the value
    /// the store uses for it: a busy timeout beyond [`MAX_BUSY_TIMEOUT`] as
    /// that, 0 connections as 1. The busy timeout is written in whole
    /// milliseconds, SQLite's unit.
    pub fn url(&self) -> String {
        match self {
            Self::Postgres(postgres) => postgres.url(),
            Self::Sqlite(sqlite) => {
                let mut url = format!("sqlite://{}", encode_path(&sqlite.path));
                let mut options = Vec::new();
                if sqlite.synchronous != Synchronous::Full {
                    options.push(format!("synchronous={}", sqlite.synchronous.as_str()));
                }
                let busy_timeout = sqlite.busy_timeout.min(MAX_BUSY_TIMEOUT);
                if busy_timeout != DEFAULT_BUSY_TIMEOUT {
                    options.push(format!("busy_timeout={}ms", busy_timeout.as_millis()));
                }
                let max_connections = sqlite.max_connections.max(1);
                if max_connections != DEFAULT_MAX_CONNECTIONS {
                    options.push(format!("max_connections={max_connections}"));
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
            "max_connections" => {
                self.max_connections = value
                    .parse::<u32>()
                    .ok()
                    .filter(|max| *max >= 1)
                    .ok_or_else(|| {
                        invalid(format!(
                            "max_connections must be a whole number of at least 1, got {value:?}"
                        ))
                    })?;
            }
            other => {
                return Err(invalid(format!(
                    "unknown sqlite store option {other:?}; accepted: synchronous, busy_timeout, \
                     max_connections"
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
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn sqlite_urls_parse_and_round_trip() {
        let config = StorageConfig::from_url("sqlite:///var/lib/lf/registry.db").unwrap();
        assert_eq!(config, StorageConfig::sqlite("/var/lib/lf/registry.db"));
        assert_eq!(config.url(), "sqlite:///var/lib/lf/registry.db");
        let tuned = StorageConfig::from_url(
            "sqlite:///tmp/my%20dir/r.db?synchronous=normal&busy_timeout=2s&max_connections=7",
        )
        .unwrap();
        let StorageConfig::Sqlite(sqlite) = &tuned else {
            panic!("not sqlite: {tuned:?}")
        };
        assert_eq!(sqlite.path, PathBuf::from("/tmp/my dir/r.db"));
        assert_eq!(sqlite.synchronous, Synchronous::Normal);
        assert_eq!(sqlite.busy_timeout, Duration::from_secs(2));
        assert_eq!(sqlite.max_connections, 7);
        assert_eq!(StorageConfig::from_url(&tuned.url()).unwrap(), tuned);
    }

    fn sqlite_config(
        synchronous: Synchronous,
        busy_timeout: Duration,
        max_connections: u32,
    ) -> SqliteConfig {
        SqliteConfig {
            path: PathBuf::from("/var/lib/lf/registry.db"),
            synchronous,
            busy_timeout,
            max_connections,
        }
    }

    /// Each SQLite option, at its default, its edges and a value between,
    /// alone and together, comes back equal from its URL.
    #[test]
    fn every_sqlite_option_survives_the_url_form() {
        use Synchronous::{Full, Normal};
        let default = DEFAULT_BUSY_TIMEOUT;
        let max = DEFAULT_MAX_CONNECTIONS;
        for (case, sqlite) in [
            ("defaults", sqlite_config(Full, default, max)),
            ("synchronous=normal", sqlite_config(Normal, default, max)),
            ("busy_timeout=0", sqlite_config(Full, Duration::ZERO, max)),
            (
                "busy_timeout=1ms",
                sqlite_config(Full, Duration::from_millis(1), max),
            ),
            (
                "busy_timeout=1500ms",
                sqlite_config(Full, Duration::from_millis(1500), max),
            ),
            (
                "busy_timeout=24h",
                sqlite_config(Full, MAX_BUSY_TIMEOUT, max),
            ),
            ("max_connections=1", sqlite_config(Full, default, 1)),
            ("max_connections=9", sqlite_config(Full, default, 9)),
            (
                "max_connections=max",
                sqlite_config(Full, default, u32::MAX),
            ),
            (
                "all set",
                sqlite_config(Normal, Duration::from_millis(250), 2),
            ),
        ] {
            let config = StorageConfig::Sqlite(sqlite);
            let url = config.url();
            let again = StorageConfig::from_url(&url);
            assert_eq!(again.as_ref().ok(), Some(&config), "{case}: {url}");
            assert_eq!(again.map(|again| again.url()).ok(), Some(url), "{case}");
        }
    }

    /// A setting a URL cannot hold comes back as the value the store uses.
    #[test]
    fn out_of_range_sqlite_settings_come_back_as_the_value_used() {
        for (set, used) in [
            (
                sqlite_config(Synchronous::Full, Duration::MAX, 0),
                sqlite_config(Synchronous::Full, MAX_BUSY_TIMEOUT, 1),
            ),
            (
                sqlite_config(
                    Synchronous::Normal,
                    MAX_BUSY_TIMEOUT + Duration::from_millis(1),
                    3,
                ),
                sqlite_config(Synchronous::Normal, MAX_BUSY_TIMEOUT, 3),
            ),
        ] {
            let url = StorageConfig::Sqlite(set).url();
            assert_eq!(
                StorageConfig::from_url(&url).ok(),
                Some(StorageConfig::Sqlite(used)),
                "{url}"
            );
        }
    }

    fn absolute_path_without_nul(trailing_slash: bool) -> impl Strategy<Value = PathBuf> {
        prop::collection::vec(1u8..=255, 0..24).prop_map(move |bytes| {
            let mut path = vec![b'/'];
            path.extend(bytes);
            if path.len() > 1 && path.ends_with(b"/") && !trailing_slash {
                path.push(b'x');
            }
            PathBuf::from(OsString::from_vec(path))
        })
    }

    proptest! {
        #[test]
        fn any_sqlite_config_in_range_round_trips(
            path in absolute_path_without_nul(false),
            normal in any::<bool>(),
            millis in 0..=MAX_BUSY_TIMEOUT.as_secs() * 1000,
            max_connections in 1..=u32::MAX,
        ) {
            let config = StorageConfig::Sqlite(SqliteConfig {
                path,
                synchronous: if normal { Synchronous::Normal } else { Synchronous::Full },
                busy_timeout: Duration::from_millis(millis),
                max_connections,
            });
            let url = config.url();
            prop_assert_eq!(StorageConfig::from_url(&url).ok(), Some(config), "{}", url);
        }

        #[test]
        fn any_sled_config_round_trips(path in absolute_path_without_nul(true)) {
            let config = StorageConfig::sled(path);
            let url = config.url();
            prop_assert_eq!(StorageConfig::from_url(&url).ok(), Some(config), "{}", url);
        }
    }

    /// Each of lf-handoff's PostgreSQL options, and driver options, come
    /// back equal from the URL.
    #[test]
    fn every_postgres_option_survives_the_url_form() {
        let base = StorageConfig::from_url("postgres://lf:p%40ss@db:5432/lf?sslmode=disable");
        let Ok(StorageConfig::Postgres(base)) = base else {
            panic!("not postgres: {base:?}")
        };
        let with = |change: &dyn Fn(&mut PostgresConfig)| {
            let mut config = base.clone();
            change(&mut config);
            config
        };
        for (case, postgres) in [
            ("defaults", base.clone()),
            ("schema", with(&|c| c.schema = "team_a".into())),
            ("schema of 63 bytes", with(&|c| c.schema = "a".repeat(63))),
            ("pool_size=1", with(&|c| c.pool_size = 1)),
            ("pool_size=max", with(&|c| c.pool_size = u32::MAX)),
            (
                "acquire_timeout=1ms",
                with(&|c| c.acquire_timeout = Duration::from_millis(1)),
            ),
            (
                "acquire_timeout=1500ms",
                with(&|c| c.acquire_timeout = Duration::from_millis(1500)),
            ),
            (
                "acquire_timeout=u64::MAX ms",
                with(&|c| c.acquire_timeout = Duration::from_millis(u64::MAX)),
            ),
            (
                "no driver options",
                with(&|c| c.connection = "postgresql://lf@db/lf".into()),
            ),
            (
                "all set",
                with(&|c| {
                    c.schema = "b".into();
                    c.pool_size = 2;
                    c.acquire_timeout = Duration::from_secs(90);
                }),
            ),
        ] {
            let config = StorageConfig::Postgres(postgres);
            let url = config.url();
            let again = StorageConfig::from_url(&url);
            assert_eq!(again.as_ref().ok(), Some(&config), "{case}: {url}");
            assert_eq!(again.map(|again| again.url()).ok(), Some(url), "{case}");
        }
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
            ("sqlite:///tmp/r.db?max_connections=0", "max_connections"),
            ("sqlite:///tmp/r.db?max_connections=-1", "max_connections"),
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
