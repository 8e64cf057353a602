//! Bad input: store URLs and durations, arbitrary or near-valid, never
//! panic; each is refused with `InvalidInput` or parses to a value whose
//! canonical form parses back to the same value. Store configurations that
//! are out of range never make `open_store` panic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use lf_handoff_application::ListQuery;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::time::Duration;

use lf_handoff_adapters::{
    open_store, parse_duration, SqliteConfig, StorageConfig, StoreError, Synchronous,
    MAX_BUSY_TIMEOUT,
};
use proptest::prelude::*;

fn refused_as_invalid_input(error: &StoreError) -> Result<(), TestCaseError> {
    prop_assert!(
        error.is_invalid_input(),
        "refused with {error:?}, not InvalidInput"
    );
    Ok(())
}

/// Percent-encodes some bytes (as `%XX`, in either case) and keeps the rest.
fn encode(bytes: &[u8], escape_all: bool, upper: bool) -> String {
    let mut out = String::new();
    for &byte in bytes {
        if !escape_all && byte.is_ascii_graphic() && byte != b'%' && byte != b'?' {
            out.push(char::from(byte));
        } else if upper {
            out.push_str(&format!("%{byte:02X}"));
        } else {
            out.push_str(&format!("%{byte:02x}"));
        }
    }
    out
}

/// Arbitrary text, or a URL built from a scheme, a path (raw or escaped
/// bytes, absolute or not) and options known and unknown.
fn url_like() -> impl Strategy<Value = String> {
    let scheme = prop::sample::select(vec![
        "sqlite",
        "sled",
        "postgres",
        "postgresql",
        "SQLITE",
        "mysql",
        "file",
        "",
    ]);
    let separator = prop::sample::select(vec!["://", ":/", ":", "//", ":///"]);
    let path = (
        any::<bool>(),
        prop::collection::vec(any::<u8>(), 0..16),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(absolute, bytes, escape_all, upper)| {
            let body = encode(&bytes, escape_all, upper);
            if absolute {
                format!("/{body}")
            } else {
                body
            }
        });
    let option = (
        prop::sample::select(vec![
            "synchronous",
            "busy_timeout",
            "pool_size",
            "schema",
            "colour",
            "",
        ]),
        prop_oneof![
            prop::sample::select(vec![
                "full",
                "normal",
                "off",
                "30s",
                "1m30s",
                "5",
                "600h",
                "18446744073709552s",
                "",
                "%zz"
            ])
            .prop_map(String::from),
            any::<String>(),
        ],
    )
        .prop_map(|(key, value)| format!("{key}={value}"));
    let query = prop::collection::vec(option, 0..3).prop_map(|options| {
        if options.is_empty() {
            String::new()
        } else {
            format!("?{}", options.join("&"))
        }
    });
    let near = (scheme, separator, path, query)
        .prop_map(|(scheme, separator, path, query)| format!("{scheme}{separator}{path}{query}"));
    prop_oneof![any::<String>(), near]
}

/// Arbitrary text, or a duration built from numbers and units, some of
/// them wrong.
fn duration_like() -> impl Strategy<Value = String> {
    let part = (
        prop_oneof![0u64..100_000, any::<u64>()],
        prop::sample::select(vec!["ms", "s", "m", "h", "", "d", "S", " s", ".5s"]),
    )
        .prop_map(|(number, unit)| format!("{number}{unit}"));
    let near = (
        prop::collection::vec(part, 0..4),
        prop::sample::select(vec!["", " ", "-", "+"]),
    )
        .prop_map(|(parts, pad)| format!("{pad}{}", parts.join("")));
    prop_oneof![any::<String>(), near]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn store_urls_round_trip_or_refuse(url in url_like()) {
        match StorageConfig::from_url(&url) {
            Ok(config) => {
                let canonical = config.url();
                let again = StorageConfig::from_url(&canonical);
                prop_assert!(again.is_ok(), "{canonical:?} from {url:?}: {again:?}");
                let again = again.unwrap();
                prop_assert_eq!(&again, &config);
                prop_assert_eq!(again.url(), canonical);
                prop_assert_eq!(config.to_string(), config.url());
            }
            Err(error) => refused_as_invalid_input(&error)?,
        }
    }

    #[test]
    fn every_absolute_sqlite_path_survives_the_url_form(
        bytes in prop::collection::vec(any::<u8>().prop_filter("no NUL", |b| *b != 0), 1..40),
    ) {
        let mut path = vec![b'/'];
        path.extend(bytes);
        if path.ends_with(b"/") {
            path.push(b'x');
        }
        let path = PathBuf::from(OsString::from_vec(path));
        let config = StorageConfig::sqlite(path.clone());
        prop_assert_eq!(StorageConfig::from_url(&config.url()).unwrap(), config);
    }

    #[test]
    fn durations_parse_or_refuse(text in duration_like()) {
        match parse_duration(&text) {
            Ok(duration) => {
                let millis = u64::try_from(duration.as_millis());
                prop_assert!(millis.is_ok());
                let shown = format!("{}ms", millis.unwrap());
                prop_assert_eq!(parse_duration(&shown).unwrap(), duration);
            }
            Err(error) => refused_as_invalid_input(&error)?,
        }
    }

    #[test]
    fn durations_add_up_their_parts(
        hours in 0u64..1000,
        minutes in 0u64..1000,
        seconds in 0u64..1000,
        millis in 0u64..1000,
    ) {
        let text = format!("{hours}h{minutes}m{seconds}s{millis}ms");
        let expected = Duration::from_secs(hours * 3600 + minutes * 60 + seconds)
            + Duration::from_millis(millis);
        prop_assert_eq!(parse_duration(&text).unwrap(), expected);
        prop_assert_eq!(parse_duration(&seconds.to_string()).unwrap(), Duration::from_secs(seconds));
    }

    #[test]
    fn config_tables_deserialize_or_refuse(
        url in url_like(),
        synchronous in prop::option::of(any::<String>()),
        busy_timeout in prop::option::of(duration_like()),
    ) {
        let mut table = serde_json::Map::new();
        table.insert("url".into(), url.into());
        if let Some(value) = synchronous {
            table.insert("synchronous".into(), value.into());
        }
        if let Some(value) = busy_timeout {
            table.insert("busy_timeout".into(), value.into());
        }
        if let Ok(config) = serde_json::from_value::<StorageConfig>(serde_json::Value::Object(table)) {
            prop_assert_eq!(StorageConfig::from_url(&config.url()).unwrap(), config);
        }
    }
}

/// A busy timeout set directly on the struct, beyond what SQLite can hold,
/// used to panic inside the driver (or overflow a `Duration` addition); it is
/// now treated as the longest allowed.
#[tokio::test]
async fn an_enormous_busy_timeout_set_in_code_opens_the_store() {
    let dir = tempfile::tempdir().unwrap();
    for (n, timeout) in [
        MAX_BUSY_TIMEOUT + Duration::from_secs(1),
        Duration::from_millis(u64::from(u32::MAX)),
        Duration::MAX,
    ]
    .into_iter()
    .enumerate()
    {
        let config = StorageConfig::Sqlite(SqliteConfig {
            path: dir.path().join(format!("r{n}.db")),
            synchronous: Synchronous::Full,
            busy_timeout: timeout,
            max_connections: 2,
        });
        let store = open_store(&config).await.unwrap();
        assert!(store
            .list_interactive_handoffs(ListQuery::default())
            .await
            .unwrap()
            .is_empty());
    }
}

/// SQLite only opens UTF-8 file names. A store URL may name any path, so a
/// non-UTF-8 one must be refused as input before anything is created; it
/// used to create the directory and an empty file, then fail in the driver.
#[tokio::test]
async fn a_non_utf8_sqlite_path_is_refused_before_anything_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let odd = dir
        .path()
        .join(OsString::from_vec(b"odd-\xff\xfe".to_vec()));
    let config = StorageConfig::sqlite(odd.join("registry.db"));
    assert_eq!(StorageConfig::from_url(&config.url()).unwrap(), config);
    match open_store(&config).await {
        Err(StoreError::InvalidInput(message)) => {
            assert!(message.contains("not valid UTF-8"), "{message}")
        }
        other => panic!("expected InvalidInput, got {:?}", other.map(|_| ())),
    }
    assert!(!odd.exists(), "the refused open created {}", odd.display());
    let file = dir.path().join(OsString::from_vec(b"odd-\xff.db".to_vec()));
    assert!(open_store(&StorageConfig::sqlite(file.clone()))
        .await
        .unwrap_err()
        .is_invalid_input());
    assert!(!file.exists());
}
