//! Choosing a backend: [`StorageConfig`], its URL form and its serde form.
//!
//! A store is named by a URL:
//!
//! | URL | backend |
//! | --- | --- |
//! | `sqlite:///abs/path/registry.db[?synchronous=full\|normal&busy_timeout=10s]` | SQLite file |
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

use std::ffi::OsString;
use std::fmt;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use lf_handoff_application::{StoreError, StoreResult};
use serde::{Deserialize, Deserializer};

/// The URL schemes this build accepts, for error messages.
pub const ACCEPTED_SCHEMES: &str = "sqlite://";

/// Which backend to open, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StorageConfig {
    /// An embedded SQLite file (the default backend).
    Sqlite(SqliteConfig),
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
                let Self::Sqlite(sqlite) = &mut config;
                for (key, value) in query_pairs(url, query)? {
                    sqlite.set(&key, &value)?;
                }
                Ok(config)
            }
            other => Err(invalid(format!(
                "store URL scheme {other:?} is unknown; accepted schemes: {ACCEPTED_SCHEMES}"
            ))),
        }
    }

    /// The backend's name: `sqlite`.
    pub fn backend(&self) -> &'static str {
        match self {
            Self::Sqlite(_) => "sqlite",
        }
    }

    /// The canonical URL of this configuration; `from_url(config.url())`
    /// gives back an equal configuration.
    pub fn url(&self) -> String {
        match self {
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
        }
    }
}

impl fmt::Display for StorageConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url())
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

fn split_query(rest: &str) -> (&str, &str) {
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
    let bytes = percent_decode(url, encoded)?;
    if bytes.contains(&0) {
        return Err(invalid(format!(
            "store URL {url:?}: the path holds a NUL byte"
        )));
    }
    let path = PathBuf::from(OsString::from_vec(bytes));
    if !path.is_absolute() {
        return Err(invalid(format!(
            "store URL {url:?} must name an absolute path, as in sqlite:///abs/path/registry.db"
        )));
    }
    if path.as_os_str().as_bytes().ends_with(b"/") && path.as_os_str().len() > 1 {
        return Err(invalid(format!(
            "store URL {url:?} names a directory; name a file"
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

fn percent_decode_utf8(url: &str, text: &str) -> StoreResult<String> {
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
        let Self::Sqlite(sqlite) = &mut config;
        if let Some(value) = &table.synchronous {
            sqlite.set("synchronous", value)?;
        }
        if let Some(value) = &table.busy_timeout {
            sqlite.set("busy_timeout", value)?;
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
        let StorageConfig::Sqlite(sqlite) = &tuned;
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
        let StorageConfig::Sqlite(sqlite) = parsed;
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
        let StorageConfig::Sqlite(sqlite) = &day;
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
        let StorageConfig::Sqlite(sqlite) = &from_table.store;
        assert_eq!(sqlite.synchronous, Synchronous::Normal);
        assert_eq!(sqlite.busy_timeout, Duration::from_secs(5));
        assert!(toml::from_str::<File>("store = \"ftp://x\"").is_err());
        assert!(toml::from_str::<File>("[store]\nurl = \"sqlite:///a.db\"\ncolour = 1\n").is_err());
    }
}
