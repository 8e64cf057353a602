//! [`SledConfig`]: the settings of the sled backend and its URL form,
//! `sled:///abs/path/dir[?cache=64MiB]`.

use std::path::PathBuf;

use lf_handoff_application::StoreResult;

use crate::config::text::{decode_absolute, encode_path, invalid, query_pairs, split_query};

/// sled's page cache by default: 64 MiB, against sled's own 1 GiB, which
/// a command-line process or an orchestrator beside other work should not
/// hold (docs/BENCHMARKS.md has what a store costs at each size).
pub const DEFAULT_SLED_CACHE: u64 = 64 * MIB;

/// The smallest and largest cache a URL may ask for.
const CACHE_RANGE: std::ops::RangeInclusive<u64> = MIB..=64 * 1024 * MIB;

const MIB: u64 = 1024 * 1024;

/// Settings of the sled backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SledConfig {
    /// The store directory; created (mode 0700) when missing.
    pub path: PathBuf,
    /// sled's page cache, in bytes ([`DEFAULT_SLED_CACHE`]; the URL's
    /// `cache=`). A process shares one open store among its handles, so
    /// the first handle's cache is the one used.
    pub cache: u64,
}

impl SledConfig {
    /// The store in `path`, with the default cache.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            cache: DEFAULT_SLED_CACHE,
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

    /// Sets the option `key` (`cache`, a size such as `64MiB`).
    pub(crate) fn set(&mut self, key: &str, value: &str) -> StoreResult<()> {
        match key {
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
                "unknown sled store option {key:?}; sled stores take cache (such as cache=64MiB)"
            ))),
        }
    }

    /// The canonical URL.
    pub(crate) fn url(&self) -> String {
        let path = encode_path(&self.path);
        if self.cache == DEFAULT_SLED_CACHE {
            format!("sled://{path}")
        } else if self.cache % MIB == 0 {
            format!("sled://{path}?cache={}MiB", self.cache / MIB)
        } else {
            format!("sled://{path}?cache={}", self.cache)
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
        ] {
            let error = parsed(bad).unwrap_err();
            assert!(error.is_invalid_input(), "{bad}: {error}");
        }
    }
}
