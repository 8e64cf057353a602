//! [`HttpConfig`]: a registry served by `lf-handoff serve`, named by its
//! URL, `http://host:port` or `https://host:port` (an optional path prefix
//! for a service behind a proxy), with the options `token_file` (a file
//! holding the token), `ca` (a PEM file of the authorities to trust
//! besides the system's, for a service with a certificate of its own) and
//! `insecure=true` (send the token over plain `http://` to a host that is
//! not this machine's loopback: by default the client refuses, since
//! anyone on the way could read the token).
//!
//! The token never appears in a URL, a message or a `Debug` form: it comes
//! from [`HttpConfig::token`], the `token_file` option, or the environment
//! variable [`TOKEN_ENV`] (read when the store is opened), in that order.

use std::fmt;
use std::path::{Path, PathBuf};

use lf_handoff_application::{DeniedKind, StoreError, StoreResult, UnavailableKind};

use crate::config::text::{decode_absolute, encode_path, invalid, query_pairs, split_query};

/// The environment variable holding the token when the configuration names
/// none: what `lf-handoff` and an orchestrator's environment set.
pub const TOKEN_ENV: &str = "LF_HANDOFF_TOKEN";

/// The longest token file read, in bytes: a token is 47 bytes.
const MAX_TOKEN_FILE: u64 = 4096;

/// A bearer token. Its `Debug` form hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A token from its text, surrounding whitespace removed.
    ///
    /// # Errors
    /// `InvalidInput` for an empty token or one holding a character an
    /// HTTP header cannot carry (a control character, a non-ASCII one).
    pub fn new(text: &str) -> StoreResult<Self> {
        let text = text.trim();
        if text.is_empty() {
            return Err(invalid("the service token is empty".into()));
        }
        if !text.bytes().all(|byte| byte.is_ascii_graphic()) {
            return Err(invalid(
                "the service token holds a character a token cannot hold (a space, a control \
                 character or a non-ASCII one)"
                    .into(),
            ));
        }
        Ok(Self(text.to_string()))
    }

    /// The token's text, for the `Authorization` header.
    pub(crate) fn secret(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(***)")
    }
}

/// Settings of a registry reached through `lf-handoff serve`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// The service's base URL: scheme, host, port and an optional path
    /// prefix, without a trailing `/` or a query.
    pub base: String,
    /// The token, when the program has it in hand.
    pub token: Option<Token>,
    /// A file holding the token (read at open; mode 0600 is advised).
    pub token_file: Option<PathBuf>,
    /// A PEM file of authorities to trust besides the system's.
    pub ca: Option<PathBuf>,
    /// Whether the token may go in clear text (`http://`) to a host that
    /// is not a loopback one (`?insecure=true`).
    pub insecure: bool,
}

impl HttpConfig {
    /// The service at `url` (`http://` or `https://`), without a token:
    /// one comes from `token_file` or [`TOKEN_ENV`] at open.
    ///
    /// # Errors
    /// `InvalidInput` for a malformed URL or an unknown or bad option.
    pub fn new(url: &str) -> StoreResult<Self> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| invalid(format!("service URL {url:?} has no scheme")))?;
        Self::from_url(url, scheme, rest)
    }

    /// This configuration with `token`.
    #[must_use]
    pub fn with_token(mut self, token: Token) -> Self {
        self.token = Some(token);
        self
    }

    /// Reads the `http://` or `https://` URL `url`, whose scheme is
    /// `scheme` and whose part after `://` is `rest`.
    pub(crate) fn from_url(url: &str, scheme: &str, rest: &str) -> StoreResult<Self> {
        if scheme != "http" && scheme != "https" {
            return Err(invalid(format!(
                "service URL {url:?} must start with http:// or https://"
            )));
        }
        let (location, query) = split_query(rest);
        if let Some(fragment) = location.find('#') {
            return Err(invalid(format!(
                "service URL {url:?} has a fragment ({:?}); remove it",
                &location[fragment..]
            )));
        }
        let (authority, path) = location.split_at(location.find('/').unwrap_or(location.len()));
        if authority.is_empty() {
            return Err(invalid(format!(
                "service URL {url:?} names no host, as in http://127.0.0.1:7381"
            )));
        }
        if authority.contains('@') {
            return Err(invalid(format!(
                "service URL {url:?}: a service takes a token (LF_HANDOFF_TOKEN or token_file), \
                 not a user or password in the URL"
            )));
        }
        if authority
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
            || path.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(invalid(format!(
                "service URL {url:?} holds a space or a control character"
            )));
        }
        let mut config = Self {
            base: format!("{scheme}://{authority}{}", path.trim_end_matches('/')),
            token: None,
            token_file: None,
            ca: None,
            insecure: false,
        };
        for (key, value) in query_pairs(url, query)? {
            config.set(&key, &value)?;
        }
        Ok(config)
    }

    /// Sets one option from its text form.
    pub(crate) fn set(&mut self, key: &str, value: &str) -> StoreResult<()> {
        let example = "/abs/path/file";
        match key {
            "token_file" => {
                self.token_file = Some(decode_absolute(key, &escape(value), example)?);
            }
            "ca" => self.ca = Some(decode_absolute(key, &escape(value), example)?),
            "insecure" => {
                self.insecure = match value {
                    "true" => true,
                    "false" => false,
                    other => {
                        return Err(invalid(format!(
                            "service option insecure={other:?}: give insecure=true or \
                             insecure=false"
                        )))
                    }
                }
            }
            other => {
                return Err(invalid(format!(
                    "unknown service option {other:?}; accepted: token_file, ca, insecure"
                )))
            }
        }
        Ok(())
    }

    /// The canonical URL (never the token).
    pub(crate) fn url(&self) -> String {
        let mut options = Vec::new();
        if let Some(file) = &self.token_file {
            options.push(format!("token_file={}", encode_path(file)));
        }
        if let Some(ca) = &self.ca {
            options.push(format!("ca={}", encode_path(ca)));
        }
        if self.insecure {
            options.push("insecure=true".to_string());
        }
        if options.is_empty() {
            self.base.clone()
        } else {
            format!("{}?{}", self.base, options.join("&"))
        }
    }

    /// Refuses to send the token in clear text to another machine: an
    /// `http://` URL whose host is not a loopback one (`localhost`,
    /// `127.0.0.0/8`, `::1`) needs `insecure=true`.
    ///
    /// # Errors
    /// `InvalidInput` saying how to allow it, or to use `https://`.
    pub(crate) fn check_clear_text(&self) -> StoreResult<()> {
        let Some(rest) = self.base.strip_prefix("http://") else {
            return Ok(());
        };
        if self.insecure || is_loopback(rest) {
            return Ok(());
        }
        Err(invalid(format!(
            "refusing to send the service token in clear text to {}: anyone on the way could \
             read it; use https://, or add ?insecure=true to the store URL to send it over \
             plain http:// anyway (a network you trust, a tunnel)",
            self.base
        )))
    }

    /// The token to send: the configured one, else the token file's, else
    /// the environment's.
    ///
    /// # Errors
    /// `Denied` of kind `Unauthorized` when there is none, naming the
    /// three places; `Io` or `PermissionDenied` when the token file cannot
    /// be read; `InvalidInput` for a malformed token.
    pub(crate) fn resolve_token(&self) -> StoreResult<Token> {
        if let Some(token) = &self.token {
            return Ok(token.clone());
        }
        if let Some(file) = &self.token_file {
            return read_token_file(file);
        }
        match std::env::var(TOKEN_ENV) {
            Ok(text) if !text.trim().is_empty() => Token::new(&text),
            Ok(_) | Err(std::env::VarError::NotPresent) => Err(StoreError::denied(
                DeniedKind::Unauthorized,
                format!(
                    "the service at {} needs a token: set {TOKEN_ENV}, give --token-file, or \
                     add ?token_file=/abs/path to the store URL",
                    self.base
                ),
            )),
            Err(std::env::VarError::NotUnicode(_)) => Err(invalid(format!(
                "{TOKEN_ENV} is not UTF-8, so it is not a token"
            ))),
        }
    }
}

/// Whether the authority at the start of `rest` (`host:port/path`) names
/// this machine's loopback: `localhost`, an address of `127.0.0.0/8`, or
/// `::1`.
fn is_loopback(rest: &str) -> bool {
    let authority = rest.split('/').next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        // `[::1]:7381`: the address is what the brackets hold.
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => authority
            .rsplit_once(':')
            .map_or(authority, |(host, _)| host),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

/// `value` as a URL escapes it, so [`decode_absolute`] (which decodes
/// escapes) reads it back as it was given: an option set from a table or
/// a flag is not escaped.
fn escape(value: &str) -> String {
    value.replace('%', "%25")
}

/// Reads a token from `file`.
fn read_token_file(file: &Path) -> StoreResult<Token> {
    use std::io::Read as _;
    let unreadable = |error: std::io::Error| {
        let kind = if error.kind() == std::io::ErrorKind::PermissionDenied {
            UnavailableKind::PermissionDenied
        } else {
            UnavailableKind::Io
        };
        StoreError::unavailable(
            kind,
            format!("cannot read the token file {}: {error}", file.display()),
        )
    };
    let mut text = String::new();
    std::fs::File::open(file)
        .map_err(unreadable)?
        .take(MAX_TOKEN_FILE)
        .read_to_string(&mut text)
        .map_err(|error| {
            if error.kind() == std::io::ErrorKind::InvalidData {
                invalid(format!("the token file {} is not UTF-8", file.display()))
            } else {
                unreadable(error)
            }
        })?;
    let first = text.lines().next().unwrap_or_default();
    Token::new(first).map_err(|error| {
        invalid(format!(
            "the token file {}: {}",
            file.display(),
            error.message()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_urls_parse_and_round_trip() {
        let config = HttpConfig::new("http://127.0.0.1:7381/").unwrap();
        assert_eq!(config.base, "http://127.0.0.1:7381");
        assert_eq!(config.url(), "http://127.0.0.1:7381");
        let config =
            HttpConfig::new("https://lf.example:443/registry?token_file=/run/t%20k&ca=/etc/ca.pem")
                .unwrap();
        assert_eq!(config.base, "https://lf.example:443/registry");
        assert_eq!(config.token_file.as_deref(), Some(Path::new("/run/t k")));
        assert_eq!(config.ca.as_deref(), Some(Path::new("/etc/ca.pem")));
        assert_eq!(HttpConfig::new(&config.url()).unwrap(), config);
    }

    #[test]
    fn the_insecure_option_round_trips_and_only_loopback_hosts_go_without_it() {
        let config = HttpConfig::new("http://10.0.0.7:7381?insecure=true").unwrap();
        assert!(config.insecure);
        assert_eq!(config.url(), "http://10.0.0.7:7381?insecure=true");
        assert_eq!(HttpConfig::new(&config.url()).unwrap(), config);
        assert!(config.check_clear_text().is_ok());
        for loopback in [
            "http://127.0.0.1:7381",
            "http://127.8.9.10:1/prefix",
            "http://localhost:7381",
            "http://LOCALHOST",
            "http://[::1]:7381",
            "https://10.0.0.7:7381",
            "https://lf.example",
        ] {
            let config = HttpConfig::new(loopback).unwrap();
            assert!(config.check_clear_text().is_ok(), "{loopback}");
        }
        for remote in [
            "http://10.0.0.7:7381",
            "http://lf.example",
            "http://localhost.evil.example:1",
            "http://127.0.0.1.evil.example",
            "http://[::ffff:10.0.0.7]:1",
            "http://10.0.0.7:1?insecure=false",
        ] {
            let error = HttpConfig::new(remote)
                .unwrap()
                .check_clear_text()
                .unwrap_err();
            assert!(error.is_invalid_input(), "{remote}: {error}");
            assert!(error.to_string().contains("?insecure=true"), "{error}");
        }
        assert!(HttpConfig::new("http://h:1?insecure=yes").is_err());
    }

    #[test]
    fn bad_service_urls_are_refused_naming_what_is_wrong() {
        for (url, names) in [
            ("http://", "names no host"),
            ("http://u:pw@host:1", "not a user or password"),
            (
                "http://host:1?token=abc",
                "unknown service option \"token\"",
            ),
            ("http://host:1?token_file=relative", "absolute path"),
            ("http://ho st:1", "a space"),
            ("http://host:1/#top", "fragment"),
            ("ftp://host", "http:// or https://"),
        ] {
            let error = HttpConfig::new(url).unwrap_err();
            assert!(
                matches!(error, StoreError::InvalidInput(_)),
                "{url}: {error:?}"
            );
            assert!(error.to_string().contains(names), "{url}: {error}");
        }
    }

    #[test]
    fn a_token_never_shows_in_debug_or_the_url() {
        let token = Token::new(" lfh_secret \n").unwrap();
        let config = HttpConfig::new("http://h:1").unwrap().with_token(token);
        assert_eq!(config.resolve_token().unwrap().secret(), "lfh_secret");
        assert!(!format!("{config:?}").contains("lfh_secret"));
        assert!(!config.url().contains("lfh_secret"));
        assert!(Token::new("a b").is_err());
        assert!(Token::new("   ").is_err());
        assert!(Token::new("tøken").is_err());
    }

    #[test]
    fn a_token_file_gives_its_first_line_and_a_missing_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "lfh_abc\n").unwrap();
        let mut config = HttpConfig::new("http://h:1").unwrap();
        config.set("token_file", file.to_str().unwrap()).unwrap();
        assert_eq!(config.resolve_token().unwrap().secret(), "lfh_abc");
        config.token_file = Some(dir.path().join("missing"));
        let error = config.resolve_token().unwrap_err();
        assert_eq!(error.unavailable_kind(), Some(UnavailableKind::Io));
        assert!(error.to_string().contains("missing"), "{error}");
    }
}
