//! [`PostgresConfig`]: the settings of the PostgreSQL backend and its URL form.
//!
//! ```text
//! postgres://user[:password]@host[:port]/database[?schema=name&pool_size=N&acquire_timeout=5s&<driver options>]
//! ```
//!
//! `postgresql://` is accepted too. lf-handoff's own options (`schema`,
//! `pool_size`, `acquire_timeout`) are taken out of the query; what remains
//! is handed to the driver (sqlx's `PgConnectOptions`), which understands
//! the libpq names listed in [`DRIVER_OPTIONS`]. Any other option is
//! refused, so a typo never passes silently.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use lf_handoff_application::StoreResult;
use sqlx::postgres::PgConnectOptions;

use crate::config::text::{at_least_one, decode_option, invalid, parse_duration, split_query};

/// The schema that holds the tables when the URL names none.
pub const DEFAULT_POSTGRES_SCHEMA: &str = "lf_handoff";

/// The most connections one store handle opens when the URL says nothing.
pub const DEFAULT_POOL_SIZE: u32 = 4;

/// How long a call waits for a connection (including connecting to the
/// server) when the URL says nothing.
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// The query options handed to the driver; anything else that is not one of
/// lf-handoff's own options is refused.
pub const DRIVER_OPTIONS: &[&str] = &[
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "application_name",
    "options",
];

const OWN_OPTIONS: &str = "schema, pool_size, acquire_timeout";

/// Settings of the PostgreSQL backend.
///
/// `Debug` and the store's `Display` never show the password.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresConfig {
    /// How to reach the server: the store URL without lf-handoff's own
    /// options. Its remaining query options go to the driver.
    pub connection: String,
    /// The schema holding the tables; created when missing. Lowercase ASCII
    /// letters, digits and `_`, not starting with a digit or `pg_`, at most
    /// 63 bytes.
    pub schema: String,
    /// The most connections one store handle opens (at least 1).
    pub pool_size: u32,
    /// How long a call waits for a connection, including connecting to the
    /// server; an unreachable server is reported after at most this long.
    pub acquire_timeout: Duration,
}

impl PostgresConfig {
    /// Parses a `postgres://` or `postgresql://` store URL.
    ///
    /// # Errors
    /// `InvalidInput` naming the problem: a malformed URL, an unknown or
    /// repeated option, or a bad schema name, pool size or duration.
    pub fn from_url(url: &str) -> StoreResult<Self> {
        let shown = redact(url);
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(invalid(format!("store URL {shown:?} has no scheme")));
        };
        if !matches!(scheme, "postgres" | "postgresql") {
            return Err(invalid(format!(
                "store URL {shown:?} is not a postgres:// URL"
            )));
        }
        if rest.contains('#') {
            return Err(invalid(format!(
                "store URL {shown:?}: `#` is not allowed; escape it as %23"
            )));
        }
        let (location, query) = split_query(rest);
        let mut config = Self {
            connection: String::new(),
            schema: DEFAULT_POSTGRES_SCHEMA.to_string(),
            pool_size: DEFAULT_POOL_SIZE,
            acquire_timeout: DEFAULT_ACQUIRE_TIMEOUT,
        };
        let mut seen: Vec<String> = Vec::new();
        let mut driver_pairs: Vec<&str> = Vec::new();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let Some((raw_key, raw_value)) = pair.split_once('=') else {
                return Err(invalid(format!(
                    "store URL {shown:?}: option {:?} must be key=value",
                    redact_pair(pair)
                )));
            };
            let key = decode_option(&shown, raw_key)?;
            if seen.contains(&key) {
                return Err(invalid(format!(
                    "store URL {shown:?}: option {key:?} is given twice"
                )));
            }
            seen.push(key.clone());
            if is_driver_option(&key) {
                if names_a_file(&key) {
                    let file = decode_option(&shown, raw_value)?;
                    if !Path::new(&file).is_file() {
                        return Err(invalid(format!(
                            "store URL {shown:?}: {key} names {file:?}, which is not a \
                             readable file; give the path of the PEM file"
                        )));
                    }
                }
                driver_pairs.push(pair);
            } else {
                let value = decode_option(&shown, raw_value)?;
                config.set(&key, &value)?;
            }
        }
        config.connection = format!("{scheme}://{location}");
        if !driver_pairs.is_empty() {
            config.connection.push('?');
            config.connection.push_str(&driver_pairs.join("&"));
        }
        config.connect_options()?;
        Ok(config)
    }

    /// Sets one of lf-handoff's own options from its text form.
    pub(crate) fn set(&mut self, key: &str, value: &str) -> StoreResult<()> {
        match key {
            "schema" => {
                check_schema(value)?;
                self.schema = value.to_string();
            }
            "pool_size" => self.pool_size = at_least_one(key, value)?,
            "acquire_timeout" => {
                let timeout = parse_duration(value)?;
                if timeout.is_zero() {
                    return Err(invalid(
                        "acquire_timeout must be longer than zero, as in 5s".into(),
                    ));
                }
                self.acquire_timeout = timeout;
            }
            other => {
                return Err(invalid(format!(
                    "unknown postgres store option {other:?}; accepted: {OWN_OPTIONS}, and the \
                     driver's {}",
                    DRIVER_OPTIONS.join(", ")
                )))
            }
        }
        Ok(())
    }

    /// The canonical URL: the connection URL with lf-handoff's options that
    /// differ from their defaults appended, so `from_url(url())` gives back
    /// an equal configuration. It holds the password, if any.
    pub fn url(&self) -> String {
        let mut options = Vec::new();
        if self.schema != DEFAULT_POSTGRES_SCHEMA {
            options.push(format!("schema={}", self.schema));
        }
        if self.pool_size != DEFAULT_POOL_SIZE {
            options.push(format!("pool_size={}", self.pool_size));
        }
        if self.acquire_timeout != DEFAULT_ACQUIRE_TIMEOUT {
            options.push(format!(
                "acquire_timeout={}ms",
                self.acquire_timeout.as_millis()
            ));
        }
        let mut url = self.connection.clone();
        if !options.is_empty() {
            url.push(if url.contains('?') { '&' } else { '?' });
            url.push_str(&options.join("&"));
        }
        url
    }

    /// The driver's connection options, with the search path set to the
    /// store's schema.
    ///
    /// # Errors
    /// `InvalidInput` when the connection URL or the schema is unusable.
    pub(crate) fn connect_options(&self) -> StoreResult<PgConnectOptions> {
        let shown = redact(&self.connection);
        check_schema(&self.schema)?;
        let options = PgConnectOptions::from_str(&self.connection)
            .map_err(|e| invalid(format!("store URL {shown:?} is malformed: {e}")))?;
        let options = if options.get_application_name().is_none() {
            options.application_name("lf-handoff")
        } else {
            options
        };
        Ok(options.options([("search_path", self.schema.as_str())]))
    }

    /// The URL with its password replaced by `***`, for messages.
    pub fn redacted_url(&self) -> String {
        redact(&self.url())
    }
}

impl fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresConfig")
            .field("connection", &redact(&self.connection))
            .field("schema", &self.schema)
            .field("pool_size", &self.pool_size)
            .field("acquire_timeout", &self.acquire_timeout)
            .finish()
    }
}

/// Whether a driver option names a certificate or key file (every `ssl`
/// option but the mode). Such a file is checked when the URL is read, so a
/// typo is an input error, not a failed connection.
fn names_a_file(key: &str) -> bool {
    key.starts_with("ssl") && !key.ends_with("mode")
}

fn is_driver_option(key: &str) -> bool {
    DRIVER_OPTIONS.contains(&key) || (key.starts_with("options[") && key.ends_with(']'))
}

/// Refuses a schema name that would need quoting or is reserved.
fn check_schema(schema: &str) -> StoreResult<()> {
    let mut bytes = schema.bytes();
    let valid_start = bytes
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b == b'_');
    let valid_rest = bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !valid_start || !valid_rest || schema.len() > 63 || schema.starts_with("pg_") {
        return Err(invalid(format!(
            "postgres schema {schema:?} is not allowed: use lowercase ASCII letters, digits and \
             `_`, not starting with a digit or `pg_`, at most 63 characters"
        )));
    }
    Ok(())
}

/// `url` with the password (in the user info, or a `password=` option)
/// replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (url, None),
    };
    let mut out = match head.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let authority = match authority.rsplit_once('@') {
                Some((userinfo, host)) => match userinfo.split_once(':') {
                    Some((user, _password)) => format!("{user}:***@{host}"),
                    None => authority.to_string(),
                },
                None => authority.to_string(),
            };
            format!("{scheme}://{authority}{path}")
        }
        None => head.to_string(),
    };
    if let Some(query) = query {
        out.push('?');
        let pairs: Vec<String> = query.split('&').map(redact_pair).collect();
        out.push_str(&pairs.join("&"));
    }
    out
}

fn redact_pair(pair: &str) -> String {
    match pair.split_once('=') {
        Some(("password", _)) => "password=***".to_string(),
        _ => pair.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_defaults_and_round_trip() {
        let config = PostgresConfig::from_url("postgres://postgres@127.0.0.1:5432/test").unwrap();
        assert_eq!(config.connection, "postgres://postgres@127.0.0.1:5432/test");
        assert_eq!(config.schema, "lf_handoff");
        assert_eq!(config.pool_size, DEFAULT_POOL_SIZE);
        assert_eq!(config.acquire_timeout, DEFAULT_ACQUIRE_TIMEOUT);
        assert_eq!(config.url(), "postgres://postgres@127.0.0.1:5432/test");

        let tuned = PostgresConfig::from_url(
            "postgresql://lf:s%40cret@db.example:6543/registry?sslmode=disable&schema=team_a\
             &pool_size=2&application_name=orch&acquire_timeout=1500ms",
        )
        .unwrap();
        assert_eq!(
            tuned.connection,
            "postgresql://lf:s%40cret@db.example:6543/registry?sslmode=disable\
             &application_name=orch"
        );
        assert_eq!(tuned.schema, "team_a");
        assert_eq!(tuned.pool_size, 2);
        assert_eq!(tuned.acquire_timeout, Duration::from_millis(1500));
        assert_eq!(PostgresConfig::from_url(&tuned.url()).unwrap(), tuned);
        let options = tuned.connect_options().unwrap();
        assert_eq!(options.get_host(), "db.example");
        assert_eq!(options.get_port(), 6543);
        assert_eq!(options.get_database(), Some("registry"));
        assert_eq!(options.get_application_name(), Some("orch"));
        assert!(options
            .get_options()
            .unwrap()
            .contains("search_path=team_a"));
    }

    #[test]
    fn bad_urls_are_invalid_input_naming_the_problem() {
        for (url, needle) in [
            (
                "postgres://h/db?colour=red",
                "unknown postgres store option",
            ),
            ("postgres://h/db?schema=Team", "schema"),
            ("postgres://h/db?schema=pg_catalog", "schema"),
            ("postgres://h/db?schema=1abc", "schema"),
            ("postgres://h/db?schema=a;drop", "schema"),
            ("postgres://h/db?pool_size=0", "pool_size"),
            ("postgres://h/db?pool_size=many", "pool_size"),
            ("postgres://h/db?acquire_timeout=soon", "duration"),
            ("postgres://h/db?acquire_timeout=0s", "acquire_timeout"),
            ("postgres://h/db?schema=a&schema=b", "twice"),
            ("postgres://h/db?pool_size", "key=value"),
            ("postgres://h:notaport/db", "malformed"),
            ("postgres://h/db?sslmode=sometimes", "malformed"),
            ("postgres://h/db#x", "#"),
        ] {
            let err = PostgresConfig::from_url(url).unwrap_err();
            assert!(err.is_invalid_input(), "{url}: {err}");
            assert!(err.to_string().contains(needle), "{url}: {err}");
        }
    }

    #[test]
    fn certificate_files_must_exist_when_the_url_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\n").unwrap();
        let files: Vec<&str> = DRIVER_OPTIONS
            .iter()
            .copied()
            .filter(|key| names_a_file(key))
            .collect();
        assert_eq!(files.len(), 7, "{files:?}");
        for key in files {
            let url = format!("postgres://h/db?sslmode=verify-full&{key}={}", ca.display());
            assert!(PostgresConfig::from_url(&url).is_ok(), "{url}");
            let missing = format!("postgres://h/db?{key}={}/missing.pem", dir.path().display());
            let err = PostgresConfig::from_url(&missing).unwrap_err();
            assert!(err.is_invalid_input(), "{missing}: {err}");
            let message = err.to_string();
            assert!(
                message.contains(key) && message.contains("missing.pem"),
                "{message}"
            );
        }
        // A directory is not a certificate file.
        let url = format!("postgres://h/db?sslrootcert={}", dir.path().display());
        assert!(PostgresConfig::from_url(&url)
            .unwrap_err()
            .is_invalid_input());
    }

    #[test]
    fn tls_failures_are_told_apart_by_what_a_person_can_do() {
        use crate::postgres::error::{tls_failure, TlsFailure};
        assert_eq!(
            tls_failure(
                "invalid peer certificate: certificate not valid for name \"127.0.0.1\"; \
                 certificate is only valid for DnsName(\"localhost\")"
            ),
            Some(TlsFailure::HostName)
        );
        assert_eq!(
            tls_failure("invalid peer certificate: UnknownIssuer"),
            Some(TlsFailure::UnknownIssuer)
        );
        assert_eq!(
            tls_failure("invalid peer certificate: Expired"),
            Some(TlsFailure::Other)
        );
        assert_eq!(tls_failure("Connection reset by peer (os error 104)"), None);
    }

    #[test]
    fn passwords_never_reach_messages_or_debug() {
        let config =
            PostgresConfig::from_url("postgres://lf:hunter2@db:5432/r?password=hunter3").unwrap();
        assert!(config.url().contains("hunter2"), "url() must round-trip");
        for shown in [config.redacted_url(), format!("{config:?}")] {
            assert!(!shown.contains("hunter"), "{shown}");
            assert!(shown.contains("lf:***@db:5432"), "{shown}");
        }
        let err = PostgresConfig::from_url("postgres://lf:hunter2@db/r?colour=1&schema=X")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("hunter2"), "{err}");
    }
}
