//! [`SledConfig`]: the settings of the sled backend and its URL form,
//! `sled:///abs/path/dir[?cache=64MiB][&hold=calls]`.

use std::path::PathBuf;
use std::time::Duration;

use lf_handoff_application::StoreResult;

use crate::config::text::{decode_absolute, encode_path, invalid, query_pairs, split_query};

/// sled's page cache by default: 64 MiB, against sled's own 1 GiB, which
/// a command-line process or an orchestrator beside other work should not
/// hold (docs/BENCHMARKS.md has what a store costs at each size).
pub const DEFAULT_SLED_CACHE: u64 = 64 * MIB;

/// The smallest and largest cache a URL may ask for.
const CACHE_RANGE: std::ops::RangeInclusive<u64> = MIB..=64 * 1024 * MIB;

const MIB: u64 = 1024 * 1024;

/// How long a store held only during calls ([`SledHold::DuringCalls`])
/// stays open after its last call ended: the calls of one command follow
/// each other within it and share one open, and another process waits at
/// most this long for the store after this one went idle.
pub const SLED_LINGER: Duration = Duration::from_millis(100);

/// When a process holds a sled store (sled lets one process open a store
/// at a time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SledHold {
    /// From the open until the last handle is dropped: the fastest, for a
    /// process that owns the store (an orchestrator, `lf-handoff serve`).
    /// Changes reach this process's watchers and waiters at once.
    #[default]
    WhileOpen,
    /// Only while calls run, and [`SLED_LINGER`] after the last one ended
    /// (the URL's `hold=calls`): other processes can use the store
    /// whenever this one is idle, as the command line needs (a `wait`
    /// parked for an hour must not lock out the person's `complete`).
    /// Every call after a pause opens the store again, which costs
    /// sled's cold open (tens of milliseconds at thousands of handoffs,
    /// most of a second at a million). Watchers and waiters are woken by
    /// a file notification that every write gives (see the backend's
    /// module docs).
    DuringCalls,
}

/// Settings of the sled backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SledConfig {
    /// The store directory; created (mode 0700) when missing.
    pub path: PathBuf,
    /// sled's page cache, in bytes ([`DEFAULT_SLED_CACHE`]; the URL's
    /// `cache=`). A process shares one open store among its handles, so
    /// the first handle's cache is the one used.
    pub cache: u64,
    /// When the store is held ([`SledHold::WhileOpen`] by default; the
    /// URL's `hold=calls` for [`SledHold::DuringCalls`]).
    pub hold: SledHold,
}

impl SledConfig {
    /// The store in `path`, with the default cache, held while open.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            cache: DEFAULT_SLED_CACHE,
            hold: SledHold::WhileOpen,
        }
    }
}

impl SledConfig {
    /// Reads the `sled://` URL `url`, whose part after the scheme is
    /// `rest`.
    pub(crate) fn from_url(url: &str, rest: &str) -> StoreResult<Self> {
        let (path, query) = split_query(rest);
        let mut config = Self::new(decode_absolute(url, path, "sled:///abs/path/dir")?);
        for (key, value) in query_pairs(url, query)? {
            config.set(&key, &value)?;
        }
        Ok(config)
    }

    /// Sets the option `key` (`cache`, a size such as `64MiB`; `hold`,
    /// `open` or `calls`).
    pub(crate) fn set(&mut self, key: &str, value: &str) -> StoreResult<()> {
        match key {
            "hold" => {
                self.hold = match value {
                    "open" => SledHold::WhileOpen,
                    "calls" => SledHold::DuringCalls,
                    _ => {
                        return Err(invalid(format!(
                            "sled store option hold={value:?} is not open (hold the store \
                             while it is open) or calls (only while calls run)"
                        )))
                    }
                };
                Ok(())
            }
            "cache" => {
                let bytes = parse_size(value).filter(|bytes| CACHE_RANGE.contains(bytes));
                self.cache = bytes.ok_or_else(|| {
                    invalid(format!(
                        "sled store option cache={value:?} is not a size from 1MiB to 64GiB \
                         (such as 64MiB, 512KiB in bytes, or 1GiB)"
                    ))
                })?;
                Ok(())
            }
            _ => Err(invalid(format!(
                "unknown sled store option {key:?}; sled stores take cache (such as \
                 cache=64MiB) and hold (open or calls)"
            ))),
        }
    }

    /// The canonical URL.
    pub(crate) fn url(&self) -> String {
        let mut options = Vec::new();
        if self.cache != DEFAULT_SLED_CACHE {
            options.push(if self.cache % MIB == 0 {
                format!("cache={}MiB", self.cache / MIB)
            } else {
                format!("cache={}", self.cache)
            });
        }
        if self.hold == SledHold::DuringCalls {
            options.push("hold=calls".to_owned());
        }
        let path = encode_path(&self.path);
        if options.is_empty() {
            format!("sled://{path}")
        } else {
            format!("sled://{path}?{}", options.join("&"))
        }
    }
}

/// A size in bytes: a whole number, alone (bytes) or with `KiB`, `MiB` or
/// `GiB`; `None` for anything else or an overflow.
fn parse_size(text: &str) -> Option<u64> {
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let scale = match unit {
        "" | "B" => 1,
        "KiB" => 1024,
        "MiB" => MIB,
        "GiB" => 1024 * MIB,
        _ => return None,
    };
    number.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(url: &str) -> StoreResult<SledConfig> {
        SledConfig::from_url(url, url.trim_start_matches("sled://"))
    }

    #[test]
    fn the_cache_is_an_option_with_a_default_and_round_trips() {
        let default = parsed("sled:///srv/lf").unwrap();
        assert_eq!(default.cache, DEFAULT_SLED_CACHE);
        assert_eq!(default.url(), "sled:///srv/lf");
        for (url, bytes) in [
            ("sled:///srv/lf?cache=16MiB", 16 * MIB),
            ("sled:///srv/lf?cache=2GiB", 2048 * MIB),
            ("sled:///srv/lf?cache=4096KiB", 4 * MIB),
            ("sled:///srv/lf?cache=1048577", MIB + 1),
            ("sled:///srv/lf?hold=calls&cache=16MiB", 16 * MIB),
        ] {
            let config = parsed(url).unwrap();
            assert_eq!(config.cache, bytes, "{url}");
            assert_eq!(parsed(&config.url()).unwrap(), config, "{url}");
        }
        for bad in [
            "sled:///srv/lf?cache=",
            "sled:///srv/lf?cache=64MB",
            "sled:///srv/lf?cache=-1",
            "sled:///srv/lf?cache=1KiB",
            "sled:///srv/lf?cache=65GiB",
            "sled:///srv/lf?cache=99999999999999999999",
            "sled:///srv/lf?cache=1.5GiB",
            "sled:///srv/lf?size=1GiB",
            "sled:///srv/lf?hold=",
            "sled:///srv/lf?hold=Calls",
        ] {
            let error = parsed(bad).unwrap_err();
            assert!(error.is_invalid_input(), "{bad}: {error}");
        }
    }

    #[test]
    fn the_hold_is_an_option_that_round_trips() {
        assert_eq!(parsed("sled:///srv/lf").unwrap().hold, SledHold::WhileOpen);
        assert_eq!(
            parsed("sled:///srv/lf?hold=open").unwrap().url(),
            "sled:///srv/lf"
        );
        let calls = parsed("sled:///srv/lf?hold=calls&cache=16MiB").unwrap();
        assert_eq!(calls.hold, SledHold::DuringCalls);
        assert_eq!(calls.url(), "sled:///srv/lf?cache=16MiB&hold=calls");
        assert_eq!(parsed(&calls.url()).unwrap(), calls);
    }
}
