//! Choosing a backend: [`StorageConfig`] and its URL form. Each backend's
//! own settings and their options live in its folder (`sqlite/config.rs`,
//! `postgres/config.rs`, `sled/config.rs`); this module dispatches on the
//! URL's scheme. The serde form is in `table`; the text pieces every
//! config reads (escapes, durations, paths, options) in `text`, which
//! imports no backend.
//!
//! A store is named by a URL:
//!
//! | URL | backend |
//! | --- | --- |
//! | `sqlite:///abs/path/registry.db[?synchronous=full\|normal&busy_timeout=10s&max_connections=N]` | SQLite file |
//! | `postgres://user@host:port[,host:port...]/db[?schema=name&pool_size=N&acquire_timeout=5s&reply_timeout=30s&retry_window=10s&target_session_attrs=read-write\|any]` | PostgreSQL server, or a primary and its standbys (also `postgresql://`) |
//! | `sled:///abs/path/dir` | sled directory (one process only) |
//! | `http://host:port[/prefix][?token_file=/abs/path&ca=/abs/ca.pem]` | a registry served by `lf-handoff serve` (also `https://`); the token from `token_file` or `LF_HANDOFF_TOKEN` |
//!
//! Each backend is a cargo feature of this crate (`sqlite`, `postgres`,
//! `sled`, `http`); a build without one refuses its scheme as invalid
//! input naming the feature to enable.
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
//! reply_timeout = "30s"    # optional
//! retry_window = "10s"     # optional; also how long opening the store keeps trying
//! target_session_attrs = "read-write"   # optional
//! ```

mod table;
pub(crate) mod text;

use std::fmt;
#[cfg(any(feature = "sqlite", feature = "sled"))]
use std::path::PathBuf;

use lf_handoff_application::StoreResult;

#[cfg(feature = "http")]
use crate::http::HttpConfig;
#[cfg(feature = "postgres")]
use crate::postgres::PostgresConfig;
#[cfg(feature = "sled")]
use crate::sled::SledConfig;
#[cfg(feature = "sqlite")]
use crate::sqlite::SqliteConfig;
use text::invalid;

#[cfg(not(any(
    feature = "sqlite",
    feature = "postgres",
    feature = "sled",
    feature = "http"
)))]
compile_error!(
    "lf-handoff-adapters needs at least one backend feature: sqlite, postgres, sled or http"
);

/// The URL schemes lf-handoff knows, for error messages. A build without a
/// backend's feature refuses that backend's schemes, naming the feature
/// (see [`StorageConfig::from_url`]).
pub const ACCEPTED_SCHEMES: &str =
    "sqlite://, sled://, postgres://, postgresql://, http://, https://";

/// Each scheme of [`ACCEPTED_SCHEMES`], the cargo feature that builds its
/// backend, and whether this build has it.
const SCHEMES: [(&str, &str, bool); 6] = [
    ("sqlite", "sqlite", cfg!(feature = "sqlite")),
    ("sled", "sled", cfg!(feature = "sled")),
    ("postgres", "postgres", cfg!(feature = "postgres")),
    ("postgresql", "postgres", cfg!(feature = "postgres")),
    ("http", "http", cfg!(feature = "http")),
    ("https", "http", cfg!(feature = "http")),
];

/// The schemes this build opens, as [`ACCEPTED_SCHEMES`] writes them.
fn built_schemes() -> String {
    let built: Vec<String> = SCHEMES
        .iter()
        .filter(|(_, _, built)| *built)
        .map(|(scheme, _, _)| format!("{scheme}://"))
        .collect();
    built.join(", ")
}

/// Which backend to open, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StorageConfig {
    /// An embedded SQLite file (the default backend; feature `sqlite`).
    #[cfg(feature = "sqlite")]
    Sqlite(SqliteConfig),
    /// A PostgreSQL server, shared by several machines (feature
    /// `postgres`).
    #[cfg(feature = "postgres")]
    Postgres(PostgresConfig),
    /// An embedded sled directory, usable by one process at a time
    /// (feature `sled`).
    #[cfg(feature = "sled")]
    Sled(SledConfig),
    /// A registry served by `lf-handoff serve`, reached over HTTP(S)
    /// (feature `http`).
    #[cfg(feature = "http")]
    Http(HttpConfig),
}

impl StorageConfig {
    /// An embedded SQLite store at `path` with the default settings:
    /// `synchronous=FULL`, a 30 s busy timeout, at most 4 connections.
    #[cfg(feature = "sqlite")]
    pub fn sqlite(path: impl Into<PathBuf>) -> Self {
        Self::Sqlite(SqliteConfig::new(path.into()))
    }

    /// A PostgreSQL store named by a `postgres://` (or `postgresql://`) URL,
    /// as in `postgres://lf@db.internal:5432/lf?schema=team_a`. Options:
    /// `schema` (default `lf_handoff`), `pool_size` (default 4),
    /// `acquire_timeout` (default 5s), `reply_timeout` (default 30s),
    /// `retry_window` (default 10s), and the driver's libpq-style options
    /// such as `sslmode` or `application_name`.
    ///
    /// # Errors
    /// `InvalidInput` for a malformed URL or an unknown or bad option.
    #[cfg(feature = "postgres")]
    pub fn postgres(url: &str) -> StoreResult<Self> {
        PostgresConfig::from_url(url).map(Self::Postgres)
    }

    /// An embedded sled store in the directory `path`. Only one process may
    /// open it at a time; every write is synced to disk before it returns.
    #[cfg(feature = "sled")]
    pub fn sled(path: impl Into<PathBuf>) -> Self {
        Self::Sled(SledConfig::new(path))
    }

    /// Parses a store URL (see the module docs).
    ///
    /// # Errors
    /// `InvalidInput` for a malformed URL, an unknown scheme (naming the
    /// accepted ones), the scheme of a backend this build lacks (naming the
    /// cargo feature that builds it), a relative path or an unknown option.
    pub fn from_url(url: &str) -> StoreResult<Self> {
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(invalid(format!(
                "store URL {url:?} has no scheme; accepted schemes: {}",
                built_schemes()
            )));
        };
        // Unused in a build of PostgreSQL alone, which parses the whole URL.
        let _ = rest;
        match scheme {
            #[cfg(feature = "sqlite")]
            "sqlite" => SqliteConfig::from_url(url, rest).map(Self::Sqlite),
            #[cfg(feature = "postgres")]
            "postgres" | "postgresql" => Self::postgres(url),
            #[cfg(feature = "sled")]
            "sled" => SledConfig::from_url(url, rest).map(Self::Sled),
            #[cfg(feature = "http")]
            "http" | "https" => HttpConfig::from_url(url, scheme, rest).map(Self::Http),
            other => Err(invalid(
                match SCHEMES.iter().find(|(known, _, _)| *known == other) {
                    Some((_, feature, _)) => format!(
                        "store URL scheme {other:?} needs the `{feature}` feature of \
                         lf-handoff-adapters, which this build lacks (features = \
                         [\"{feature}\"]); accepted schemes: {}",
                        built_schemes()
                    ),
                    None => format!(
                        "store URL scheme {other:?} is unknown; accepted schemes: {}",
                        built_schemes()
                    ),
                },
            )),
        }
    }

    /// The same store, opened so that other processes can use it whenever
    /// this one runs no call: for short-lived and waiting processes such as
    /// the command line, whose `wait` may park for an hour while a person
    /// finishes the handoff from another terminal.
    ///
    /// Only sled needs it, since it lets one process open a store at a
    /// time: its store is then held only while calls run and for
    /// [`SLED_LINGER`](crate::SLED_LINGER) after
    /// ([`SledHold::DuringCalls`](crate::SledHold::DuringCalls)). SQLite,
    /// PostgreSQL and a served store are shared between processes anyway
    /// and are returned unchanged.
    #[must_use]
    pub fn shared_with_other_processes(self) -> Self {
        match self {
            #[cfg(feature = "sled")]
            Self::Sled(mut sled) => {
                sled.hold = crate::SledHold::DuringCalls;
                Self::Sled(sled)
            }
            #[allow(unreachable_patterns)]
            other => other,
        }
    }

    /// The backend's name: `sqlite`, `sled`, `postgres` or `http`.
    pub fn backend(&self) -> &'static str {
        match self {
            #[cfg(feature = "sqlite")]
            Self::Sqlite(_) => "sqlite",
            #[cfg(feature = "postgres")]
            Self::Postgres(_) => "postgres",
            #[cfg(feature = "sled")]
            Self::Sled(_) => "sled",
            #[cfg(feature = "http")]
            Self::Http(_) => "http",
        }
    }

    /// Sets one backend option from its text form.
    fn set(&mut self, key: &str, value: &str) -> StoreResult<()> {
        match self {
            #[cfg(feature = "sqlite")]
            Self::Sqlite(sqlite) => sqlite.set(key, value),
            #[cfg(feature = "postgres")]
            Self::Postgres(postgres) => postgres.set(key, value),
            #[cfg(feature = "sled")]
            Self::Sled(sled) => sled.set(key, value),
            #[cfg(feature = "http")]
            Self::Http(http) => http.set(key, value),
        }
    }

    /// The canonical URL of this configuration; `from_url(config.url())`
    /// gives back an equal configuration. A PostgreSQL URL keeps its
    /// password here (a second process needs it); `Display` hides it.
    ///
    /// A SQLite setting outside what a URL accepts is written as the value
    /// the store uses for it: a busy timeout beyond
    /// [`MAX_BUSY_TIMEOUT`](crate::MAX_BUSY_TIMEOUT) as that, 0 connections
    /// as 1. The busy timeout is written in whole milliseconds, SQLite's
    /// unit.
    pub fn url(&self) -> String {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(postgres) => postgres.url(),
            #[cfg(feature = "sqlite")]
            Self::Sqlite(sqlite) => sqlite.url(),
            #[cfg(feature = "sled")]
            Self::Sled(sled) => sled.url(),
            #[cfg(feature = "http")]
            Self::Http(http) => http.url(),
        }
    }
}

/// The URL, with any password replaced by `***`.
impl fmt::Display for StorageConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(postgres) => f.write_str(&postgres.redacted_url()),
            #[allow(unreachable_patterns)]
            _ => f.write_str(&self.url()),
        }
    }
}

#[cfg(test)]
// A build without every backend leaves some of these imports unused, and
// its one variant irrefutable.
#[cfg_attr(
    not(all(feature = "sqlite", feature = "sled", feature = "postgres")),
    allow(unused_imports, irrefutable_let_patterns)
)]
mod tests {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    use std::time::Duration;

    use lf_handoff_application::StoreError;
    use proptest::prelude::*;

    use super::*;
    #[cfg(feature = "sqlite")]
    use crate::sqlite::{
        Synchronous, DEFAULT_BUSY_TIMEOUT, DEFAULT_MAX_CONNECTIONS, MAX_BUSY_TIMEOUT,
    };
    use text::parse_duration;

    #[cfg(feature = "sqlite")]
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

    #[cfg(feature = "sqlite")]
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

    #[cfg(feature = "sqlite")]
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

    #[cfg(feature = "sqlite")]
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

    #[cfg(any(feature = "sqlite", feature = "sled"))]
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
        #[cfg(feature = "sqlite")]
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

        #[cfg(feature = "sled")]
        #[test]
        fn any_sled_config_round_trips(path in absolute_path_without_nul(true)) {
            let config = StorageConfig::sled(path);
            let url = config.url();
            prop_assert_eq!(StorageConfig::from_url(&url).ok(), Some(config), "{}", url);
        }
    }

    #[cfg(feature = "postgres")]
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
                "reply_timeout=1500ms",
                with(&|c| c.reply_timeout = Duration::from_millis(1500)),
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
                    c.reply_timeout = Duration::from_secs(5);
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

    #[cfg(feature = "sqlite")]
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

    #[cfg(feature = "sqlite")]
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

    #[cfg(all(feature = "sqlite", feature = "postgres"))]
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
                "\"soon\" is not a duration: a number must come before each unit; \
                 write a duration such as 500ms, 30s, 2m, 1h or 1m30s",
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

    #[cfg(feature = "sled")]
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
            ("sled:///tmp/store?cache=1", "not a size from 1MiB to 64GiB"),
            ("sled:///tmp/store?journal=1", "sled stores take cache"),
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

    #[cfg(feature = "sqlite")]
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

    #[cfg(feature = "postgres")]
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

    /// A scheme whose backend this build lacks is invalid input naming the
    /// cargo feature that builds it (a build with every backend has none).
    #[test]
    fn a_scheme_whose_backend_is_not_built_names_its_feature() {
        for (scheme, feature, built) in SCHEMES {
            if built {
                continue;
            }
            let err = StorageConfig::from_url(&format!("{scheme}:///tmp/store")).unwrap_err();
            assert!(err.is_invalid_input(), "{scheme}: {err}");
            assert!(
                err.to_string().contains(&format!("`{feature}` feature")),
                "{scheme}: {err}"
            );
        }
    }
}
