//! Where a body runs: this machine, or a remote host reached over SSH.
//!
//! Accepted spellings: `user@local` (this machine), `ssh://user@host[:port]`,
//! and the shorthand `user@host[:port]`. IPv6 hosts must be bracketed
//! (`ssh://jack@[::1]:2222`). Display is canonical: a local home prints as
//! `user@local`, a remote one as `ssh://user@host[:port]`, so
//! `parse(home.to_string()) == home`.
//!
//! Users and hosts may not start with `-`, so a home can never be mistaken
//! for an option when it is put on an `ssh` command line.

use std::fmt;
use std::net::Ipv6Addr;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::DomainError;

/// The machine a wave's bodies run on.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum WaveHome {
    /// This machine, as `user`.
    Local {
        /// The local account.
        user: String,
    },
    /// A remote machine reached with `ssh`.
    Ssh {
        /// The remote account.
        user: String,
        /// A host name, an IPv4 address, or an IPv6 address (unbracketed).
        host: String,
        /// The SSH port when not the default.
        port: Option<u16>,
    },
}

impl WaveHome {
    /// Parses a home; see the module docs for the accepted spellings.
    ///
    /// # Errors
    /// [`DomainError::InvalidInput`] naming what is wrong.
    pub fn parse(text: &str) -> Result<Self, DomainError> {
        let (explicit_ssh, rest) = match text.strip_prefix("ssh://") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let Some((user, host_port)) = rest.split_once('@') else {
            return Err(DomainError::invalid(format!(
                "home {text:?} must be user@local, ssh://user@host[:port] or user@host[:port]"
            )));
        };
        check_user(text, user)?;
        let (host, port) = split_host_port(text, host_port)?;
        if host == "local" {
            if explicit_ssh || port.is_some() {
                return Err(DomainError::invalid(format!(
                    "home {text:?}: `local` names this machine; write {user}@local"
                )));
            }
            return Ok(Self::Local {
                user: user.to_string(),
            });
        }
        Ok(Self::Ssh {
            user: user.to_string(),
            host,
            port,
        })
    }

    /// Returns true if and only if this home is the local machine.
    pub fn is_local(&self) -> bool {
        matches!(self, Self::Local { .. })
    }

    /// The account name.
    pub fn user(&self) -> &str {
        match self {
            Self::Local { user } | Self::Ssh { user, .. } => user,
        }
    }

    /// `localhost` for a local home, the SSH host otherwise.
    pub fn host(&self) -> &str {
        match self {
            Self::Local { .. } => "localhost",
            Self::Ssh { host, .. } => host,
        }
    }

    /// The SSH port, when one was given.
    pub fn port(&self) -> Option<u16> {
        match self {
            Self::Local { .. } => None,
            Self::Ssh { port, .. } => *port,
        }
    }
}

fn check_user(text: &str, user: &str) -> Result<(), DomainError> {
    let valid = !user.is_empty()
        && !user.starts_with('-')
        && user
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if valid {
        Ok(())
    } else {
        Err(DomainError::invalid(format!(
            "home {text:?}: the user must be letters, digits, `.`, `_` or `-` and not start with `-`"
        )))
    }
}

fn split_host_port(text: &str, host_port: &str) -> Result<(String, Option<u16>), DomainError> {
    let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
        let Some((inside, after)) = bracketed.split_once(']') else {
            return Err(DomainError::invalid(format!(
                "home {text:?}: an IPv6 host needs a closing `]`"
            )));
        };
        if inside.parse::<Ipv6Addr>().is_err() {
            return Err(DomainError::invalid(format!(
                "home {text:?}: {inside:?} is not an IPv6 address"
            )));
        }
        let port = match after {
            "" => None,
            _ => match after.strip_prefix(':') {
                Some(port) => Some(port),
                None => {
                    return Err(DomainError::invalid(format!(
                        "home {text:?}: unexpected {after:?} after the IPv6 host"
                    )))
                }
            },
        };
        (inside.to_string(), port)
    } else {
        let (host, port) = match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        };
        let valid = !host.is_empty()
            && !host.starts_with('-')
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
        if !valid {
            return Err(DomainError::invalid(format!(
                "home {text:?}: the host must be a name, an IPv4 address or a bracketed IPv6 address"
            )));
        }
        (host.to_ascii_lowercase(), port)
    };
    let port = match port {
        None => None,
        Some(port) => match port.parse::<u16>() {
            // Digits only and no leading zero, so the port prints back as written.
            Ok(number)
                if number > 0
                    && port.bytes().all(|b| b.is_ascii_digit())
                    && !port.starts_with('0') =>
            {
                Some(number)
            }
            _ => {
                return Err(DomainError::invalid(format!(
                    "home {text:?}: the port must be a number from 1 to 65535"
                )))
            }
        },
    };
    Ok((host, port))
}

impl fmt::Display for WaveHome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Local { user } => write!(f, "{user}@local"),
            Self::Ssh { user, host, port } => {
                if host.contains(':') {
                    write!(f, "ssh://{user}@[{host}]")?;
                } else {
                    write!(f, "ssh://{user}@{host}")?;
                }
                match port {
                    Some(port) => write!(f, ":{port}"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl fmt::Debug for WaveHome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WaveHome({self})")
    }
}

impl FromStr for WaveHome {
    type Err = DomainError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl Serialize for WaveHome {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for WaveHome {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for WaveHome {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        crate::openapi::text_schema(
            "Where the work runs: `user@local`, or `ssh://user@host[:port]`.",
            None,
        )
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for WaveHome {}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) -> String {
        let home = WaveHome::parse(text).unwrap();
        let shown = home.to_string();
        assert_eq!(WaveHome::parse(&shown).unwrap(), home, "{text}");
        shown
    }

    #[test]
    fn local_home_stays_local() {
        assert_eq!(round_trip("jack@local"), "jack@local");
        let home = WaveHome::parse("jack@local").unwrap();
        assert!(home.is_local());
        assert_eq!(home.host(), "localhost");
    }

    #[test]
    fn remote_homes_print_as_ssh_urls() {
        assert_eq!(round_trip("jack@build-1"), "ssh://jack@build-1");
        assert_eq!(round_trip("jack@build-1:2222"), "ssh://jack@build-1:2222");
        assert_eq!(round_trip("ssh://jack@10.0.0.7"), "ssh://jack@10.0.0.7");
        assert_eq!(round_trip("ssh://jack@[::1]:22"), "ssh://jack@[::1]:22");
        let home = WaveHome::parse("ssh://jack@[fe80::1]").unwrap();
        assert_eq!(home.host(), "fe80::1");
        assert_eq!(home.port(), None);
    }

    #[test]
    fn malformed_homes_are_refused() {
        for bad in [
            "",
            "jack",
            "@local",
            "jack@",
            "-oProxyCommand=x@host",
            "jack@-host",
            "jack@::1",
            "ssh://jack@[::1",
            "ssh://jack@[not-v6]",
            "jack@host:0",
            "jack@host:65536",
            "jack@host:022",
            "jack@host:",
            "jack@host:22x",
            "ssh://jack@local",
            "jack@local:22",
            "jack@ho st",
            "ja ck@host",
            "ssh://jack@[::1]x",
        ] {
            assert!(WaveHome::parse(bad).is_err(), "{bad:?} parsed");
        }
    }
}
