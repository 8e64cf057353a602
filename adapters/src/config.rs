//! Choosing a backend: [`StorageConfig`], its URL form and its serde form.
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

use std::ffi::OsString;
use std::fmt;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use lf_handoff_application::{StoreError, StoreResult};
use serde::{Deserialize, Deserializer};

pub use crate::postgres::config::{
    PostgresConfig, DEFAULT_ACQUIRE_TIMEOUT, DEFAULT_POOL_SIZE, DEFAULT_POSTGRES_SCHEMA,
};

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
    let error = || {
        invalid(format!(
            "duration {text:?} is malformed: use forms like 500ms, 30s, 2m, 1h or 1m30s"
        ))
    };
    let text = text.trim();
    if text.is_empty() {
        return Err(error());
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse::<u64>()
            .ok()
            .and_then(|seconds| seconds.checked_mul(1000))
            .map(Duration::from_millis)
            .ok_or_else(error);
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(error());
        }
        let number: u64 = rest[..digits].parse().map_err(|_| error())?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "ms" => Duration::from_millis(number),
            "s" => Duration::from_secs(number),
            "m" => number
                .checked_mul(60)
                .map(Duration::from_secs)
                .ok_or_else(error)?,
            "h" => number
                .checked_mul(3600)
                .map(Duration::from_secs)
                .ok_or_else(error)?,
            _ => return Err(error()),
        };
        total = total.checked_add(part).ok_or_else(error)?;
    }
    if u64::try_from(total.as_millis()).is_err() {
        return Err(invalid(format!("duration {text:?} is too long")));
    }
    Ok(total)
}

fn invalid(message: String) -> StoreError {
    StoreError::InvalidInput(message)
}

pub(crate) fn split_query(rest: &str) -> (&str, &str) {
    rest.split_once('?').unwrap_or((rest, ""))
}

fn query_pairs(url: &str, query: &str) -> StoreResult<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(invalid(format!(
                "store URL {url:?}: option {pair:?} must be key=value"
            )));
        };
        let key = percent_decode_utf8(url, key)?;
        let value = percent_decode_utf8(url, value)?;
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
    let bytes = percent_decode(url, encoded)?;
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

fn percent_decode(url: &str, text: &str) -> StoreResult<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = bytes
                .get(index + 1..index + 3)
                .and_then(|pair| std::str::from_utf8(pair).ok())
                .and_then(|pair| u8::from_str_radix(pair, 16).ok());
            let Some(byte) = hex else {
                return Err(invalid(format!(
                    "store URL {url:?}: `%` must start an escape like %20"
                )));
            };
            out.push(byte);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    Ok(out)
}

pub(crate) fn percent_decode_utf8(url: &str, text: &str) -> StoreResult<String> {
    String::from_utf8(percent_decode(url, text)?)
        .map_err(|_| invalid(format!("store URL {url:?}: options must be UTF-8")))
}

/// Escapes every byte of `path` that is not safe in a URL path.
pub(crate) fn encode_path(path: &Path) -> String {
    let mut out = String::new();
    for &byte in path.as_os_str().as_bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~+,=@:".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The serde form: a URL string, or a table with `url` and optional
/// per-backend settings that override the URL's query.
#[derive(Deserialize)]
#[serde(untagged)]
enum ConfigRepr {
    Url(String),
    Table(ConfigTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigTable {
    url: String,
    synchronous: Option<String>,
    busy_timeout: Option<String>,
    schema: Option<String>,
    pool_size: Option<u32>,
    acquire_timeout: Option<String>,
}

impl<'de> Deserialize<'de> for StorageConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let config = match ConfigRepr::deserialize(deserializer)? {
            ConfigRepr::Url(url) => Self::from_url(&url),
            ConfigRepr::Table(table) => Self::from_table(table),
        };
        config.map_err(serde::de::Error::custom)
    }
}

impl StorageConfig {
    fn from_table(table: ConfigTable) -> StoreResult<Self> {
        let mut config = Self::from_url(&table.url)?;
        let options = [
            ("synchronous", table.synchronous),
            ("busy_timeout", table.busy_timeout),
            ("schema", table.schema),
            ("pool_size", table.pool_size.map(|size| size.to_string())),
            ("acquire_timeout", table.acquire_timeout),
        ];
        for (key, value) in options {
            if let Some(value) = value {
                config.set(key, &value)?;
            }
        }
        Ok(config)
    }
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
    fn sled_config_deserializes_and_refuses_sqlite_options() {
        #[derive(Deserialize, Debug)]
        struct File {
            store: StorageConfig,
        }
        let from_url: File = toml::from_str("store = \"sled:///tmp/s\"").unwrap();
        assert_eq!(from_url.store, StorageConfig::sled("/tmp/s"));
        let from_table: File = toml::from_str("[store]\nurl = \"sled:///tmp/s\"\n").unwrap();
        assert_eq!(from_table.store, StorageConfig::sled("/tmp/s"));
        let err =
            toml::from_str::<File>("[store]\nurl = \"sled:///tmp/s\"\nsynchronous = \"normal\"\n")
                .unwrap_err();
        assert!(
            err.to_string().contains("sled stores take no options"),
            "{err}"
        );
    }

    #[test]
    fn durations_parse_in_common_forms() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("45").unwrap(), Duration::from_secs(45));
        for bad in [
            "",
            "s",
            "10x",
            "-1s",
            "1.5s",
            "99999999999999999999h",
            "10 s",
            // Whole, but longer than u64::MAX milliseconds.
            "18446744073709552s",
            "18446744073709552",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} parsed");
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
    fn config_deserializes_from_a_url_or_a_table() {
        #[derive(Deserialize)]
        struct File {
            store: StorageConfig,
        }
        let from_url: File = toml::from_str("store = \"sqlite:///tmp/a.db\"").unwrap();
        assert_eq!(from_url.store, StorageConfig::sqlite("/tmp/a.db"));
        let from_table: File = toml::from_str(
            "[store]\nurl = \"sqlite:///tmp/a.db\"\nsynchronous = \"normal\"\nbusy_timeout = \"5s\"\n",
        )
        .unwrap();
        let StorageConfig::Sqlite(sqlite) = &from_table.store else {
            panic!("not sqlite")
        };
        assert_eq!(sqlite.synchronous, Synchronous::Normal);
        assert_eq!(sqlite.busy_timeout, Duration::from_secs(5));
        assert!(toml::from_str::<File>("store = \"ftp://x\"").is_err());
        assert!(toml::from_str::<File>("[store]\nurl = \"sqlite:///a.db\"\ncolour = 1\n").is_err());
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

    #[test]
    fn postgres_config_deserializes_from_a_table() {
        #[derive(Deserialize)]
        struct File {
            store: StorageConfig,
        }
        let file: File = toml::from_str(
            "[store]\nurl = \"postgres://lf@db:5432/lf?pool_size=8\"\nschema = \"team_b\"\n\
             pool_size = 3\nacquire_timeout = \"2s\"\n",
        )
        .unwrap();
        let StorageConfig::Postgres(postgres) = &file.store else {
            panic!("not postgres: {:?}", file.store)
        };
        assert_eq!(postgres.schema, "team_b");
        assert_eq!(postgres.pool_size, 3);
        assert_eq!(postgres.acquire_timeout, Duration::from_secs(2));
        assert_eq!(
            StorageConfig::from_url(&file.store.url()).unwrap(),
            file.store
        );
        for bad in [
            "[store]\nurl = \"postgres://lf@db/lf\"\nsynchronous = \"normal\"\n",
            "[store]\nurl = \"postgres://lf@db/lf\"\npool_size = 0\n",
            "[store]\nurl = \"sqlite:///tmp/a.db\"\nschema = \"x\"\n",
        ] {
            assert!(toml::from_str::<File>(bad).is_err(), "{bad}");
        }
    }
}
