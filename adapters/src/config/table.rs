//! The serde form of [`StorageConfig`]: a URL string, or a table (a config
//! file's `[store]`) with `url` and optional backend options that override
//! the URL's query.

use lf_handoff_application::StoreResult;
use serde::{Deserialize, Deserializer};

use super::StorageConfig;

#[derive(Deserialize)]
#[serde(untagged)]
enum ConfigRepr {
    Url(String),
    Table(Box<ConfigTable>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigTable {
    url: String,
    synchronous: Option<String>,
    busy_timeout: Option<String>,
    max_connections: Option<u32>,
    schema: Option<String>,
    pool_size: Option<u32>,
    acquire_timeout: Option<String>,
    reply_timeout: Option<String>,
    retry_window: Option<String>,
    token_file: Option<String>,
    ca: Option<String>,
    target_session_attrs: Option<String>,
}

impl<'de> Deserialize<'de> for StorageConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let config = match ConfigRepr::deserialize(deserializer)? {
            ConfigRepr::Url(url) => Self::from_url(&url),
            ConfigRepr::Table(table) => from_table(*table),
        };
        config.map_err(serde::de::Error::custom)
    }
}

/// The table's URL, with each option the table sets applied through the
/// backend's `set`, as if the URL's query held it.
fn from_table(table: ConfigTable) -> StoreResult<StorageConfig> {
    let mut config = StorageConfig::from_url(&table.url)?;
    let options = [
        ("synchronous", table.synchronous),
        ("busy_timeout", table.busy_timeout),
        (
            "max_connections",
            table.max_connections.map(|max| max.to_string()),
        ),
        ("schema", table.schema),
        ("pool_size", table.pool_size.map(|size| size.to_string())),
        ("acquire_timeout", table.acquire_timeout),
        ("reply_timeout", table.reply_timeout),
        ("retry_window", table.retry_window),
        ("token_file", table.token_file),
        ("ca", table.ca),
        ("target_session_attrs", table.target_session_attrs),
    ];
    for (key, value) in options {
        if let Some(value) = value {
            config.set(key, &value)?;
        }
    }
    Ok(config)
}

#[cfg(test)]
// A build without every backend leaves some of these imports unused, and
// its one variant irrefutable.
#[cfg_attr(
    not(all(feature = "sqlite", feature = "sled", feature = "postgres")),
    allow(unused_imports, irrefutable_let_patterns, dead_code)
)]
mod tests {
    use std::time::Duration;

    use super::*;
    #[cfg(feature = "sqlite")]
    use crate::sqlite::Synchronous;

    #[derive(Deserialize, Debug)]
    struct File {
        store: StorageConfig,
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn config_deserializes_from_a_url_or_a_table() {
        let from_url: File = toml::from_str("store = \"sqlite:///tmp/a.db\"").unwrap();
        assert_eq!(from_url.store, StorageConfig::sqlite("/tmp/a.db"));
        let from_table: File = toml::from_str(
            "[store]\nurl = \"sqlite:///tmp/a.db\"\nsynchronous = \"normal\"\nbusy_timeout = \"5s\"\n\
             max_connections = 2\n",
        )
        .unwrap();
        let StorageConfig::Sqlite(sqlite) = &from_table.store else {
            panic!("not sqlite")
        };
        assert_eq!(sqlite.synchronous, Synchronous::Normal);
        assert_eq!(sqlite.busy_timeout, Duration::from_secs(5));
        assert_eq!(sqlite.max_connections, 2);
        assert_eq!(
            StorageConfig::from_url(&from_table.store.url()).unwrap(),
            from_table.store
        );
        assert!(toml::from_str::<File>("store = \"ftp://x\"").is_err());
        assert!(toml::from_str::<File>("[store]\nurl = \"sqlite:///a.db\"\ncolour = 1\n").is_err());
        let err =
            toml::from_str::<File>("[store]\nurl = \"sqlite:///a.db\"\nmax_connections = 0\n")
                .unwrap_err();
        assert!(err.to_string().contains("max_connections"), "{err}");
    }

    #[cfg(feature = "sled")]
    #[test]
    fn sled_config_deserializes_and_refuses_sqlite_options() {
        let from_url: File = toml::from_str("store = \"sled:///tmp/s\"").unwrap();
        assert_eq!(from_url.store, StorageConfig::sled("/tmp/s"));
        let from_table: File = toml::from_str("[store]\nurl = \"sled:///tmp/s\"\n").unwrap();
        assert_eq!(from_table.store, StorageConfig::sled("/tmp/s"));
        let err =
            toml::from_str::<File>("[store]\nurl = \"sled:///tmp/s\"\nsynchronous = \"normal\"\n")
                .unwrap_err();
        assert!(err.to_string().contains("sled stores take cache"), "{err}");
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn postgres_config_deserializes_from_a_table() {
        let file: File = toml::from_str(
            "[store]\nurl = \"postgres://lf@db:5432/lf?pool_size=8\"\nschema = \"team_b\"\n\
             pool_size = 3\nacquire_timeout = \"2s\"\nreply_timeout = \"45s\"\n\
             retry_window = \"20s\"\n",
        )
        .unwrap();
        let StorageConfig::Postgres(postgres) = &file.store else {
            panic!("not postgres: {:?}", file.store)
        };
        assert_eq!(postgres.schema, "team_b");
        assert_eq!(postgres.pool_size, 3);
        assert_eq!(postgres.acquire_timeout, Duration::from_secs(2));
        assert_eq!(postgres.reply_timeout, Duration::from_secs(45));
        assert_eq!(postgres.retry_window, Duration::from_secs(20));
        assert_eq!(
            StorageConfig::from_url(&file.store.url()).unwrap(),
            file.store
        );
        for bad in [
            "[store]\nurl = \"postgres://lf@db/lf\"\nsynchronous = \"normal\"\n",
            "[store]\nurl = \"postgres://lf@db/lf\"\nmax_connections = 2\n",
            "[store]\nurl = \"postgres://lf@db/lf\"\npool_size = 0\n",
            "[store]\nurl = \"sqlite:///tmp/a.db\"\nschema = \"x\"\n",
        ] {
            assert!(toml::from_str::<File>(bad).is_err(), "{bad}");
        }
    }
}
