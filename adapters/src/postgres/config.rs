//! [`PostgresConfig`]: the settings of the PostgreSQL backend and its URL form.
//!
//! ```text
//! postgres://user[:password]@host[:port][,host[:port]...]/database[?schema=name&pool_size=N&acquire_timeout=5s&reply_timeout=30s&retry_window=10s&target_session_attrs=read-write&<driver options>]
//! ```
//!
//! `postgresql://` is accepted too. lf-handoff's own options (`schema`,
//! `pool_size`, `acquire_timeout`, `reply_timeout`, `retry_window`,
//! `target_session_attrs`, `pooler`, `listen_url`) are taken out of the query; what remains is
//! handed to the driver (sqlx's `PgConnectOptions`), which understands the
//! libpq names listed in [`DRIVER_OPTIONS`]. Any other option is refused,
//! so a typo never passes silently.
//!
//! **Several hosts**, as libpq writes them: a comma-separated list before
//! the path (`db1:5432,db2:5432`), or in the options (`host=db1,db2` with
//! `port=5432` for all or `port=5432,5433` one per host). The driver takes
//! one host, so the URL is split here into one driver URL per host
//! ([`PostgresConfig::host_options`]), and the store picks among them when
//! it connects (`postgres/hosts.rs`).

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use lf_handoff_application::{StoreError, StoreResult, DEFAULT_RETRY_WINDOW};
use sqlx::postgres::PgConnectOptions;

use crate::config::text::{at_least_one, decode_option, invalid, parse_duration, split_query};

/// The schema that holds the tables when the URL names none.
pub const DEFAULT_POSTGRES_SCHEMA: &str = "lf_handoff";

/// The most connections one store handle opens when the URL says nothing.
pub const DEFAULT_POOL_SIZE: u32 = 4;

/// How long a call waits for a connection (including connecting to the
/// server) when the URL says nothing.
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a statement waits for the server's answer before its
/// connection is taken for dead, when the URL says nothing.
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(30);

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

const OWN_OPTIONS: &str =
    "schema, pool_size, acquire_timeout, reply_timeout, retry_window, target_session_attrs, pooler, \
     listen_url";

/// What stands between the store and the server, as the URL says
/// (`pooler=`): how a connection pooler in front of the server hands out
/// server sessions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Pooler {
    /// No pooler, or one the store need not know of: the default.
    #[default]
    None,
    /// A pooler in session mode (PgBouncer's `pool_mode = session`): each
    /// connection keeps one server session. The store behaves as with
    /// none (it depends on no session state a pooler may drop or share).
    Session,
    /// A pooler in transaction mode (PgBouncer's `pool_mode =
    /// transaction`, RDS Proxy, Supavisor, Neon's pooler): each
    /// transaction may run in another server session. The store prepares
    /// no statement (it sends each as a simple query, its values written
    /// into its text) and listens for changes only on `listen_url`
    /// (without one, watchers and waiters read again every second).
    Transaction,
}

impl Pooler {
    /// The option's value in a URL.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Session => "session",
            Self::Transaction => "transaction",
        }
    }

    fn parse(value: &str) -> StoreResult<Self> {
        match value {
            "none" => Ok(Self::None),
            "session" => Ok(Self::Session),
            "transaction" => Ok(Self::Transaction),
            other => Err(invalid(format!(
                "pooler {other:?} is unknown; accepted: none (the default), session, \
                 transaction (the pooler's pool mode; statement mode cannot run a store)"
            ))),
        }
    }
}

/// PostgreSQL's port when a URL names none.
const DEFAULT_PORT: u16 = 5432;

/// Which of the URL's servers a store may use (libpq's
/// `target_session_attrs`, of which a store accepts two values).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TargetSessionAttrs {
    /// A server that accepts writes: not in recovery (not a standby) and
    /// with `transaction_read_only` off. The default, as a store writes.
    #[default]
    ReadWrite,
    /// Whichever server answers first, as it is: for reading from a
    /// standby. Writes there fail.
    Any,
}

impl TargetSessionAttrs {
    /// The option's value in a URL.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadWrite => "read-write",
            Self::Any => "any",
        }
    }

    fn parse(value: &str) -> StoreResult<Self> {
        match value {
            "read-write" => Ok(Self::ReadWrite),
            "any" => Ok(Self::Any),
            "read-only" | "primary" | "standby" | "prefer-standby" => Err(invalid(format!(
                "target_session_attrs={value} is not accepted: a store writes, so it needs a \
                 server that accepts writes; use read-write (the default) or any"
            ))),
            other => Err(invalid(format!(
                "target_session_attrs {other:?} is unknown; accepted: read-write (the default), \
                 any"
            ))),
        }
    }
}

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
    /// With several hosts, each is given an equal share of it to connect.
    pub acquire_timeout: Duration,
    /// How long a statement (or a write's transaction) waits for the
    /// server's answer. A server that has not answered by then is taken for
    /// gone without a word (powered off, cut off by the network, a
    /// firewall that forgot the connection: TCP itself would wait about 15
    /// minutes): the connection is closed, with every idle one, and the
    /// call fails as `unreachable`, which the store retries on a new
    /// connection within its retry window. Exports and imports, which
    /// stream, are not bounded by it.
    pub reply_timeout: Duration,
    /// How long the store keeps trying a call, opening the store included,
    /// that found no usable server (refused, gone silent, restarting, or
    /// only standbys while a failover is under way), counted from the first
    /// failure; zero tries once. The store opened from this configuration
    /// has it as its [`retry_window`](lf_handoff_application::Store::retry_window).
    pub retry_window: Duration,
    /// Which of the URL's hosts the store uses: by default the first, in
    /// the URL's order, that accepts writes.
    pub target_session_attrs: TargetSessionAttrs,
    /// The connection pooler in front of the server, if the store must
    /// know of it (transaction mode).
    pub pooler: Pooler,
    /// Where the store listens for changes (C16), when not on its own URL:
    /// a `postgres://` URL of the server itself (or of a pooler in session
    /// mode), for a store behind a pooler in transaction mode, which
    /// cannot hold a `LISTEN`. Its own options other than
    /// `target_session_attrs` are ignored: the store's schema is the
    /// store's.
    pub listen_url: Option<String>,
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
            reply_timeout: DEFAULT_REPLY_TIMEOUT,
            retry_window: DEFAULT_RETRY_WINDOW,
            target_session_attrs: TargetSessionAttrs::default(),
            pooler: Pooler::default(),
            listen_url: None,
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
        config.host_options()?;
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
            "acquire_timeout" => self.acquire_timeout = longer_than_zero(key, value, "5s")?,
            "reply_timeout" => self.reply_timeout = longer_than_zero(key, value, "30s")?,
            "retry_window" => self.retry_window = parse_duration(value)?,
            "target_session_attrs" => {
                self.target_session_attrs = TargetSessionAttrs::parse(value)?;
            }
            "pooler" => self.pooler = Pooler::parse(value)?,
            "listen_url" => {
                let listen = Self::from_url(value).map_err(|e| {
                    invalid(format!(
                        "listen_url must be a postgres:// URL of the server: {}",
                        e.message()
                    ))
                })?;
                if listen.listen_url.is_some() || listen.pooler == Pooler::Transaction {
                    return Err(invalid(
                        "listen_url names where the store listens, which cannot be behind a \
                         pooler in transaction mode or name a listen_url of its own"
                            .into(),
                    ));
                }
                self.listen_url = Some(value.to_string());
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
        if self.reply_timeout != DEFAULT_REPLY_TIMEOUT {
            options.push(format!(
                "reply_timeout={}ms",
                self.reply_timeout.as_millis()
            ));
        }
        if self.retry_window != DEFAULT_RETRY_WINDOW {
            options.push(format!("retry_window={}ms", self.retry_window.as_millis()));
        }
        if self.target_session_attrs != TargetSessionAttrs::default() {
            options.push(format!(
                "target_session_attrs={}",
                self.target_session_attrs.as_str()
            ));
        }
        if self.pooler != Pooler::default() {
            options.push(format!("pooler={}", self.pooler.as_str()));
        }
        if let Some(listen) = &self.listen_url {
            options.push(format!("listen_url={}", encode_option(listen)));
        }
        let mut url = self.connection.clone();
        if !options.is_empty() {
            url.push(if url.contains('?') { '&' } else { '?' });
            url.push_str(&options.join("&"));
        }
        url
    }

    /// The driver's connection options of each host the URL names, in the
    /// URL's order (one for a URL of one host). The startup packet carries
    /// nothing a pooler may refuse or drop: no `search_path` (every
    /// statement names the store's schema) and no `extra_float_digits`
    /// (the store reads no floating-point value), only what PgBouncer
    /// keeps per client (`client_encoding`, `DateStyle`, `TimeZone`,
    /// `application_name`) and the URL's own `options`, if any.
    ///
    /// # Errors
    /// `InvalidInput` when the connection URL or the schema is unusable: a
    /// malformed URL, an empty or repeated host, a port out of range, or
    /// ports that do not match the hosts.
    pub(crate) fn host_options(&self) -> StoreResult<Vec<PgConnectOptions>> {
        let shown = redact(&self.connection);
        check_schema(&self.schema)?;
        host_urls(&self.connection)?
            .iter()
            .map(|url| {
                let options = PgConnectOptions::from_str(url)
                    .map_err(|e| invalid(format!("store URL {shown:?} is malformed: {e}")))?;
                let options = if options.get_application_name().is_none() {
                    options.application_name("lf-handoff")
                } else {
                    options
                };
                Ok(options.extra_float_digits(None))
            })
            .collect()
    }

    /// The driver's connection options of the URL's first host (see
    /// [`host_options`](Self::host_options)).
    ///
    /// # Errors
    /// As `host_options`.
    #[cfg(test)]
    pub(crate) fn connect_options(&self) -> StoreResult<PgConnectOptions> {
        self.host_options()?
            .into_iter()
            .next()
            .ok_or_else(|| invalid(format!("store URL {:?} names no host", self.redacted_url())))
    }

    /// The driver's connection options of each host of
    /// [`listen_url`](Self::listen_url), or `None` without one.
    ///
    /// # Errors
    /// As [`host_options`](Self::host_options).
    pub(crate) fn listen_options(
        &self,
    ) -> StoreResult<Option<(Vec<PgConnectOptions>, TargetSessionAttrs)>> {
        let Some(listen) = &self.listen_url else {
            return Ok(None);
        };
        let mut listen = Self::from_url(listen)?;
        listen.schema.clone_from(&self.schema);
        Ok(Some((listen.host_options()?, listen.target_session_attrs)))
    }

    /// The URL with its password replaced by `***`, for messages.
    pub fn redacted_url(&self) -> String {
        redact(&self.url())
    }
}

/// The duration `value` of the option `key`, which must be longer than
/// zero (as `example` is).
fn longer_than_zero(key: &str, value: &str, example: &str) -> StoreResult<Duration> {
    let duration = parse_duration(value)?;
    if duration.is_zero() {
        return Err(invalid(format!(
            "{key} must be longer than zero, as in {example}"
        )));
    }
    Ok(duration)
}

impl fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresConfig")
            .field("connection", &redact(&self.connection))
            .field("schema", &self.schema)
            .field("pool_size", &self.pool_size)
            .field("acquire_timeout", &self.acquire_timeout)
            .field("reply_timeout", &self.reply_timeout)
            .field("retry_window", &self.retry_window)
            .field("target_session_attrs", &self.target_session_attrs)
            .field("pooler", &self.pooler)
            .field("listen_url", &self.listen_url.as_deref().map(redact))
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

/// One server of a URL's host list, as written: a host name, an address
/// (an IPv6 one in brackets before the path, without them in `host=`) or a
/// socket directory, and its port when the URL gives one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostEntry<'a> {
    host: &'a str,
    port: Option<u16>,
}

/// One driver URL per host of `connection` (a store URL without
/// lf-handoff's own options), in the URL's order: `connection` itself when
/// it names one host, else a URL naming one host each (as `host=` and
/// `port=` options), with every other part and option kept.
///
/// # Errors
/// `InvalidInput` naming the problem: an empty or repeated host, a port
/// that is not a number from 1 to 65535, hosts named both before the path
/// and in `host=`, or a `port=` list whose length matches neither one nor
/// the hosts.
fn host_urls(connection: &str) -> StoreResult<Vec<String>> {
    let shown = redact(connection);
    let (scheme, rest) = connection
        .split_once("://")
        .unwrap_or(("postgres", connection));
    let (location, query) = split_query(rest);
    let (authority, path) = location.split_at(location.find('/').unwrap_or(location.len()));
    let (userinfo, hostlist) = match authority.rsplit_once('@') {
        Some((userinfo, hostlist)) => (Some(userinfo), hostlist),
        None => (None, authority),
    };
    let mut pairs: Vec<&str> = query.split('&').filter(|pair| !pair.is_empty()).collect();
    let mut take = |key: &str| {
        let at = pairs
            .iter()
            .position(|pair| pair.split_once('=').is_some_and(|(k, _)| k == key))?;
        pairs.remove(at).split_once('=').map(|(_, value)| value)
    };
    let host_option = take("host");
    let port_option = take("port");
    if host_option.is_some_and(|value| value.contains(',')) && take("hostaddr").is_some() {
        return Err(invalid(format!(
            "store URL {shown:?}: hostaddr cannot go with several hosts; name each host in host="
        )));
    }
    let in_authority = hostlist.contains(',');
    let in_option = host_option.is_some_and(|value| value.contains(','));
    let ports_listed = port_option.is_some_and(|value| value.contains(','));
    let mut hosts: Vec<HostEntry<'_>> = Vec::new();
    if !hostlist.is_empty() {
        for (index, entry) in hostlist.split(',').enumerate() {
            hosts.push(authority_host(&shown, entry, index + 1)?);
        }
    }
    if !in_authority && !in_option && !ports_listed {
        // One host: the driver reads the URL as it is; only the ports are
        // checked here, so that one out of range is named.
        if let Some(port) = port_option {
            let host = hosts.first().map(|h| h.host).or(host_option);
            parse_port(&shown, port, host.unwrap_or("the host"))?;
        }
        return Ok(vec![connection.to_string()]);
    }
    if let Some(listed) = host_option {
        option_hosts(&shown, listed, &mut hosts)?;
    }
    if hosts.is_empty() {
        return Err(invalid(format!(
            "store URL {shown:?} lists several ports but no hosts; name the hosts before the \
             path or in host="
        )));
    }
    if let Some(listed) = port_option {
        assign_ports(&shown, listed, &mut hosts)?;
    }
    one_url_per_host(&shown, (scheme, userinfo, path), &pairs, &hosts)
}

/// Adds the hosts of a `host=` list to `hosts`, which must hold none from
/// before the path.
fn option_hosts<'a>(
    shown: &str,
    listed: &'a str,
    hosts: &mut Vec<HostEntry<'a>>,
) -> StoreResult<()> {
    if !hosts.is_empty() {
        return Err(invalid(format!(
            "store URL {shown:?} names hosts both before the path and in host=; name them \
             in one place"
        )));
    }
    for (index, host) in listed.split(',').enumerate() {
        if host.is_empty() {
            return Err(empty_host(shown, index + 1));
        }
        hosts.push(HostEntry { host, port: None });
    }
    Ok(())
}

/// Gives each of `hosts` its port from a `port=` list: one port for all,
/// or one per host; a host with a port after its name too is refused.
fn assign_ports(shown: &str, listed: &str, hosts: &mut [HostEntry<'_>]) -> StoreResult<()> {
    let ports: Vec<&str> = listed.split(',').collect();
    if ports.len() != 1 && ports.len() != hosts.len() {
        return Err(invalid(format!(
            "store URL {shown:?}: port= lists {} ports for {} hosts; give one port for all \
             or one per host",
            ports.len(),
            hosts.len()
        )));
    }
    for (index, host) in hosts.iter_mut().enumerate() {
        let port = ports[if ports.len() == 1 { 0 } else { index }];
        if host.port.is_some() {
            return Err(invalid(format!(
                "store URL {shown:?}: host {} has its port both after its name and in port=; \
                 give it once",
                host.host
            )));
        }
        host.port = Some(parse_port(shown, port, host.host)?);
    }
    Ok(())
}

/// One driver URL per host: the URL's `(scheme, userinfo, path)` and its
/// other options `pairs`, with the host (and its port) as options; a
/// server named twice is refused.
fn one_url_per_host(
    shown: &str,
    (scheme, userinfo, path): (&str, Option<&str>, &str),
    pairs: &[&str],
    hosts: &[HostEntry<'_>],
) -> StoreResult<Vec<String>> {
    let mut seen: Vec<(String, u16)> = Vec::new();
    let mut urls = Vec::with_capacity(hosts.len());
    for host in hosts {
        let bare = host.host.trim_start_matches('[').trim_end_matches(']');
        let key = (bare.to_ascii_lowercase(), host.port.unwrap_or(DEFAULT_PORT));
        if seen.contains(&key) {
            return Err(invalid(format!(
                "store URL {shown:?} names host {}:{} twice; name each server once",
                host.host, key.1
            )));
        }
        seen.push(key);
        let mut url = format!("{scheme}://");
        if let Some(userinfo) = userinfo {
            url.push_str(userinfo);
            url.push('@');
            // The driver's URL parser wants a host after the user; the
            // host= option below replaces it.
            url.push_str("localhost");
        }
        url.push_str(path);
        url.push('?');
        let mut options = vec![format!("host={bare}")];
        if let Some(port) = host.port {
            options.push(format!("port={port}"));
        }
        options.extend(pairs.iter().map(|pair| (*pair).to_string()));
        url.push_str(&options.join("&"));
        urls.push(url);
    }
    Ok(urls)
}

/// Reads entry `number` (1-based) of the host list before the path:
/// `host`, `host:port`, `[v6]` or `[v6]:port`.
fn authority_host<'a>(shown: &str, entry: &'a str, number: usize) -> StoreResult<HostEntry<'a>> {
    let (host, port) = if entry.starts_with('[') {
        match entry.find(']') {
            Some(end) => {
                let (host, after) = entry.split_at(end + 1);
                match after.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None if after.is_empty() => (host, None),
                    None => {
                        return Err(invalid(format!(
                            "store URL {shown:?} is malformed: host {number} ({entry:?}) has \
                             text after its address"
                        )))
                    }
                }
            }
            None => {
                return Err(invalid(format!(
                    "store URL {shown:?} is malformed: host {number} ({entry:?}) opens `[` \
                     without closing it"
                )))
            }
        }
    } else {
        match entry.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (entry, None),
        }
    };
    if host.is_empty() || host == "[]" {
        return Err(empty_host(shown, number));
    }
    let port = port.map(|port| parse_port(shown, port, host)).transpose()?;
    Ok(HostEntry { host, port })
}

/// A port as the URL gives it for `host`: a number from 1 to 65535.
fn parse_port(shown: &str, port: &str, host: &str) -> StoreResult<u16> {
    match port.parse::<u64>() {
        Ok(number) => u16::try_from(number)
            .ok()
            .filter(|port| *port > 0)
            .ok_or_else(|| {
                invalid(format!(
                    "store URL {shown:?}: port {number} of {host} is out of range; a port is \
                     a number from 1 to 65535"
                ))
            }),
        Err(_) => Err(invalid(format!(
            "store URL {shown:?} is malformed: port {port:?} of {host} is not a number from 1 \
             to 65535"
        ))),
    }
}

fn empty_host(shown: &str, number: usize) -> StoreError {
    invalid(format!(
        "store URL {shown:?}: host {number} of its host list is empty; remove the extra comma \
         or name the host"
    ))
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
        Some(("listen_url", value)) => match crate::config::text::percent_decode_utf8(value) {
            Ok(listen) => format!("listen_url={}", encode_option(&redact(&listen))),
            Err(_) => "listen_url=***".to_string(),
        },
        _ => pair.to_string(),
    }
}

/// `value` with every byte that has a meaning in a URL's query (and any
/// that is not plain ASCII) escaped as `%XX`, so that it reads back as
/// one option's value.
fn encode_option(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~:/@,".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
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
        assert_eq!(config.reply_timeout, DEFAULT_REPLY_TIMEOUT);
        assert_eq!(config.retry_window, DEFAULT_RETRY_WINDOW);
        assert_eq!(config.url(), "postgres://postgres@127.0.0.1:5432/test");

        let tuned = PostgresConfig::from_url(
            "postgresql://lf:s%40cret@db.example:6543/registry?sslmode=disable&schema=team_a\
             &pool_size=2&application_name=orch&acquire_timeout=1500ms&reply_timeout=2m\
             &retry_window=2500ms",
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
        assert_eq!(tuned.reply_timeout, Duration::from_secs(120));
        assert_eq!(tuned.retry_window, Duration::from_millis(2500));
        // A window of zero tries once.
        let once = PostgresConfig::from_url("postgres://h/db?retry_window=0s").unwrap();
        assert_eq!(once.retry_window, Duration::ZERO);
        assert_eq!(PostgresConfig::from_url(&once.url()).unwrap(), once);
        assert_eq!(PostgresConfig::from_url(&tuned.url()).unwrap(), tuned);
        let options = tuned.connect_options().unwrap();
        assert_eq!(options.get_host(), "db.example");
        assert_eq!(options.get_port(), 6543);
        assert_eq!(options.get_database(), Some("registry"));
        assert_eq!(options.get_application_name(), Some("orch"));
        // Nothing a pooler refuses or drops is in the startup packet.
        assert_eq!(options.get_options(), None);
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
            ("postgres://h/db?reply_timeout=0s", "reply_timeout"),
            ("postgres://h/db?reply_timeout=later", "duration"),
            ("postgres://h/db?retry_window=forever", "duration"),
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

    /// The driver's view of each host of `url`: `(host or socket, port)`.
    fn servers(url: &str) -> Vec<(String, u16)> {
        PostgresConfig::from_url(url)
            .unwrap()
            .host_options()
            .unwrap()
            .iter()
            .map(|options| {
                let host = match options.get_socket() {
                    Some(socket) => socket.display().to_string(),
                    None => options.get_host().to_string(),
                };
                (host, options.get_port())
            })
            .collect()
    }

    #[test]
    fn several_hosts_are_read_as_libpq_writes_them() {
        let two = "postgres://lf:s%40cret@db1:5432,db2:5433/registry?sslmode=disable&schema=team_a";
        let config = PostgresConfig::from_url(two).unwrap();
        assert_eq!(config.target_session_attrs, TargetSessionAttrs::ReadWrite);
        assert_eq!(PostgresConfig::from_url(&config.url()).unwrap(), config);
        let options = config.host_options().unwrap();
        assert_eq!(
            servers(two),
            [("db1".to_string(), 5432), ("db2".to_string(), 5433)]
        );
        for options in &options {
            assert_eq!(options.get_username(), "lf");
            assert_eq!(options.get_database(), Some("registry"));
            assert!(matches!(
                options.get_ssl_mode(),
                sqlx::postgres::PgSslMode::Disable
            ));
            assert_eq!(options.get_options(), None);
        }
        assert!(!format!("{config:?}").contains("cret"));
        assert!(!config.redacted_url().contains("cret"));

        assert_eq!(
            servers("postgres://lf@db1,[::1]:6000,db3/lf"),
            [
                ("db1".to_string(), 5432),
                ("::1".to_string(), 6000),
                ("db3".to_string(), 5432)
            ]
        );
        assert_eq!(
            servers("postgres:///lf?user=lf&host=db1,db2&port=6432"),
            [("db1".to_string(), 6432), ("db2".to_string(), 6432)]
        );
        assert_eq!(
            servers("postgres://lf@/lf?host=db1,/var/run/postgresql&port=5432,5433"),
            [
                ("db1".to_string(), 5432),
                ("/var/run/postgresql".to_string(), 5433)
            ]
        );
        assert_eq!(
            servers("postgres://lf@db1,db2/lf?port=6543"),
            [("db1".to_string(), 6543), ("db2".to_string(), 6543)]
        );

        let any =
            PostgresConfig::from_url("postgres://lf@db1,db2/lf?target_session_attrs=any").unwrap();
        assert_eq!(any.target_session_attrs, TargetSessionAttrs::Any);
        assert!(
            any.url().contains("target_session_attrs=any"),
            "{}",
            any.url()
        );
        assert_eq!(PostgresConfig::from_url(&any.url()).unwrap(), any);
        let default =
            PostgresConfig::from_url("postgres://lf@db1,db2/lf?target_session_attrs=read-write")
                .unwrap();
        assert!(!default.url().contains("target_session_attrs"));
    }

    #[test]
    fn bad_host_lists_are_invalid_input_naming_the_problem() {
        for (url, needle) in [
            (
                "postgres://lf@db1,,db2/lf",
                "host 2 of its host list is empty",
            ),
            ("postgres://lf@db1,/lf", "host 2 of its host list is empty"),
            ("postgres://lf@,db2/lf", "host 1 of its host list is empty"),
            ("postgres://lf@db1:,db2/lf", "port \"\" of db1"),
            (
                "postgres:///lf?host=db1,,db2",
                "host 2 of its host list is empty",
            ),
            ("postgres://lf@db1:5432,db1/lf", "names host db1:5432 twice"),
            ("postgres://lf@DB1,db1:5432/lf", "twice"),
            (
                "postgres:///lf?host=db1,db2&port=1,2,3",
                "3 ports for 2 hosts",
            ),
            (
                "postgres://lf@db1:1,db2/lf?port=5,6",
                "both after its name and in port=",
            ),
            (
                "postgres://lf@db1,db2/lf?host=db3,db4",
                "both before the path and in host=",
            ),
            (
                "postgres://lf@db1:70000,db2/lf",
                "port 70000 of db1 is out of range",
            ),
            (
                "postgres://lf@db1:0,db2/lf",
                "port 0 of db1 is out of range",
            ),
            (
                "postgres://lf@db1:70000/lf",
                "port 70000 of db1 is out of range",
            ),
            (
                "postgres:///lf?host=db1&port=99999",
                "port 99999 of db1 is out of range",
            ),
            (
                "postgres:///lf?host=db1,db2&port=5432,http",
                "port \"http\" of db2",
            ),
            ("postgres://lf@[::1,db2/lf", "without closing it"),
            (
                "postgres://lf@db1,db2/lf?target_session_attrs=standby",
                "target_session_attrs=standby",
            ),
            (
                "postgres://lf@db1/lf?target_session_attrs=primary",
                "a store writes",
            ),
            (
                "postgres://lf@db1/lf?target_session_attrs=whatever",
                "target_session_attrs \"whatever\" is unknown",
            ),
        ] {
            match PostgresConfig::from_url(url) {
                Err(err) => {
                    assert!(err.is_invalid_input(), "{url}: {err}");
                    assert!(err.to_string().contains(needle), "{url}: {err}");
                }
                Ok(config) => panic!("{url} was accepted: {config:?}"),
            }
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
        use rustls::CertificateError;
        let wrapped =
            |error: rustls::Error| std::io::Error::new(std::io::ErrorKind::InvalidData, error);
        let refused = |certificate: CertificateError| {
            tls_failure(&wrapped(rustls::Error::InvalidCertificate(certificate)))
        };
        assert_eq!(
            refused(CertificateError::NotValidForName),
            Some(TlsFailure::HostName)
        );
        assert_eq!(
            refused(CertificateError::UnknownIssuer),
            Some(TlsFailure::UnknownIssuer)
        );
        assert_eq!(refused(CertificateError::Expired), Some(TlsFailure::Other));
        assert_eq!(
            tls_failure(&wrapped(rustls::Error::DecryptError)),
            Some(TlsFailure::Other)
        );
        // Not about TLS, whatever its text says.
        for plain in [
            std::io::Error::from(std::io::ErrorKind::ConnectionReset),
            std::io::Error::other("invalid peer certificate: UnknownIssuer"),
        ] {
            assert_eq!(tls_failure(&plain), None, "{plain}");
        }
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
