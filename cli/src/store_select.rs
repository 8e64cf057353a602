//! Which store a command uses (docs/CONTRACT.md, choosing a store).
//!
//! The first of these that is set wins:
//!
//! 1. the `--store URL` flag;
//! 2. the `LF_HANDOFF_STORE` environment variable (ignored when empty);
//! 3. the config file: `--config FILE` (which must exist), else
//!    `$XDG_CONFIG_HOME/lf-handoff/config.toml` (falling back to
//!    `~/.config`), key `store.url` (or `store = "URL"`, or a `[store]`
//!    table with backend options: `StorageConfig`'s serde form);
//! 4. the default SQLite file: `$LF_HOME/registry.db` when `LF_HOME` is
//!    set, else `$XDG_DATA_HOME/lf-handoff/registry.db`, else
//!    `~/.local/share/lf-handoff/registry.db`; its directory is created
//!    (mode 0700) when missing.
//!
//! Nothing past the winning source is read, so a command given `--store`
//! touches no config file. URLs are parsed by `StorageConfig::from_url`, so
//! every backend the adapters crate accepts works here unchanged.

use std::ffi::OsString;
use std::fs::DirBuilder;
use std::io::ErrorKind;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use lf_handoff_adapters::{StorageConfig, StoreError, UnavailableKind};
use lf_handoff_domain::interactive_handoff::Actor;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::error::{CliError, CliResult};

/// The environment variable naming the store.
pub const STORE_ENV: &str = "LF_HANDOFF_STORE";

/// What the environment holds, read once so tests can build it by hand.
#[derive(Debug, Default, Clone)]
pub struct Environment {
    /// `LF_HANDOFF_STORE`.
    pub store: Option<OsString>,
    /// `LF_HOME`.
    pub lf_home: Option<OsString>,
    /// `XDG_CONFIG_HOME`.
    pub xdg_config_home: Option<OsString>,
    /// `XDG_DATA_HOME`.
    pub xdg_data_home: Option<OsString>,
    /// `HOME`.
    pub home: Option<OsString>,
}

impl Environment {
    /// Reads the variables of this process; empty values count as unset.
    pub fn from_process() -> Self {
        let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
        Self {
            store: var(STORE_ENV),
            lf_home: var("LF_HOME"),
            xdg_config_home: var("XDG_CONFIG_HOME"),
            xdg_data_home: var("XDG_DATA_HOME"),
            home: var("HOME"),
        }
    }
}

/// Chooses the store for a command.
///
/// # Errors
/// Exit 2 for a malformed URL, an unknown scheme (naming the accepted ones),
/// a `--config` file that cannot be read or a config file that does not
/// parse, or no place for the default store; exit 5 when the default
/// store's directory cannot be created.
pub fn select(
    flag: Option<&str>,
    config_file: Option<&Path>,
    env: &Environment,
) -> CliResult<StorageConfig> {
    if let Some(url) = flag {
        return parse_url(url, "--store");
    }
    if let Some(url) = &env.store {
        let Some(url) = url.to_str() else {
            return Err(CliError::usage(format!(
                "{STORE_ENV} is not valid UTF-8; set it to a URL such as sqlite:///abs/path/registry.db"
            )));
        };
        return parse_url(url, STORE_ENV);
    }
    if let Some((path, explicit)) = self::config_file(config_file, env) {
        if let Some(config) = read_config_file(&path, explicit)? {
            return Ok(config);
        }
    }
    default_store(env)
}

/// Applies to `config` what only a registry served by `lf-handoff serve`
/// takes, and returns the actor to name: the token file of
/// `--token-file`, and no actor of this process's own (the service names
/// the token's name in the history, C20). `actor` is the actor chosen and
/// whether `--actor` chose it.
///
/// # Errors
/// Exit 2 for `--token-file` with a local store, `serve` of a served
/// registry, or `--actor` with one (the history would not name it).
pub fn through_service(
    config: &mut StorageConfig,
    token_file: Option<PathBuf>,
    actor: (Option<Actor>, bool),
    serving: bool,
) -> CliResult<Option<Actor>> {
    let StorageConfig::Http(http) = config else {
        if token_file.is_some() {
            return Err(CliError::usage(
                "--token-file is for a store served by `lf-handoff serve` (an http:// or \
                 https:// store URL)",
            ));
        }
        return Ok(actor.0);
    };
    if serving {
        return Err(CliError::usage(format!(
            "serve serves a store of its own (sqlite://, sled:// or postgres://), not the \
             service at {}",
            http.base
        )));
    }
    if actor.1 {
        return Err(CliError::usage(
            "--actor: through a service the history names the token's name; make a token \
             with the name to show (lf-handoff token create NAME)",
        ));
    }
    if let Some(file) = token_file {
        let file = std::path::absolute(&file)
            .map_err(|e| CliError::usage(format!("--token-file {}: {e}", file.display())))?;
        http.token_file = Some(file);
    }
    Ok(None)
}

/// Parses a store URL, naming `source` (the flag or variable) in errors.
pub fn parse_url(url: &str, source: &str) -> CliResult<StorageConfig> {
    StorageConfig::from_url(url).map_err(|error| match error {
        StoreError::InvalidInput(message) => CliError::usage(format!("{source}: {message}")),
        other => CliError::from(other),
    })
}

/// The config file's shape as store selection reads it: only `store`;
/// other keys are left to other readers (`attach` reads its own table).
#[derive(Deserialize)]
struct ConfigFile {
    store: Option<StorageConfig>,
}

fn read_config_file(path: &Path, explicit: bool) -> CliResult<Option<StorageConfig>> {
    let file: Option<ConfigFile> = read_config(
        path,
        explicit,
        "set store.url to a URL such as sqlite:///abs/path/registry.db",
    )?;
    Ok(file.and_then(|file| file.store))
}

/// Reads the config file at `path` as a `T`. A missing file is `None`
/// unless `explicit` (named by `--config`).
///
/// # Errors
/// Exit 2 for a file that cannot be read, or that does not parse as a
/// `T`, naming the line and ending with `hint`.
pub fn read_config<T: DeserializeOwned>(
    path: &Path,
    explicit: bool,
    hint: &str,
) -> CliResult<Option<T>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == ErrorKind::NotFound && !explicit => return Ok(None),
        Err(error) => {
            return Err(CliError::usage(format!(
                "cannot read config file {}: {error}",
                path.display()
            ))
            .hint("pass an existing file to --config"))
        }
    };
    match toml::from_str::<T>(&text) {
        Ok(file) => Ok(Some(file)),
        Err(error) => {
            let line = error
                .span()
                .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
            let at = line
                .map(|line| format!(" (line {line})"))
                .unwrap_or_default();
            Err(CliError::usage(format!(
                "config file {}{at}: {}",
                path.display(),
                error.message()
            ))
            .hint(hint))
        }
    }
}

/// The config file a command reads: `--config FILE` (`true`: it must
/// exist), else `$XDG_CONFIG_HOME/lf-handoff/config.toml` (or under
/// `~/.config`), if either is known.
pub fn config_file(flag: Option<&Path>, env: &Environment) -> Option<(PathBuf, bool)> {
    match flag {
        Some(path) => Some((path.to_path_buf(), true)),
        None => default_config_file(env).map(|path| (path, false)),
    }
}

fn default_config_file(env: &Environment) -> Option<PathBuf> {
    let base = absolute(env.xdg_config_home.as_ref())
        .or_else(|| absolute(env.home.as_ref()).map(|home| home.join(".config")))?;
    Some(base.join("lf-handoff").join("config.toml"))
}

/// The default store file, without creating anything.
pub fn default_store_path(env: &Environment) -> CliResult<PathBuf> {
    if let Some(lf_home) = &env.lf_home {
        let lf_home = PathBuf::from(lf_home);
        let lf_home = if lf_home.is_absolute() {
            lf_home
        } else {
            std::env::current_dir()
                .map_err(|error| {
                    CliError::usage(format!(
                        "LF_HOME {} is relative and the current directory is unreadable: {error}",
                        lf_home.display()
                    ))
                })?
                .join(lf_home)
        };
        return Ok(lf_home.join("registry.db"));
    }
    let data = absolute(env.xdg_data_home.as_ref())
        .or_else(|| absolute(env.home.as_ref()).map(|home| home.join(".local").join("share")));
    match data {
        Some(data) => Ok(data.join("lf-handoff").join("registry.db")),
        None => Err(CliError::usage(
            "no store is configured and neither LF_HOME nor HOME is set; \
             pass --store sqlite:///abs/path/registry.db or set LF_HANDOFF_STORE",
        )),
    }
}

fn default_store(env: &Environment) -> CliResult<StorageConfig> {
    let path = default_store_path(env)?;
    if let Some(dir) = path.parent() {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|error| {
                CliError::unavailable(
                    UnavailableKind::of_io_error(&error),
                    format!(
                        "cannot create the store directory {}: {error}",
                        dir.display()
                    ),
                )
                .hint("set LF_HOME to a writable directory or pass --store")
            })?;
    }
    Ok(StorageConfig::sqlite(path))
}

/// The variable as a path when it is absolute (the XDG rule: relative
/// values are ignored).
fn absolute(value: Option<&OsString>) -> Option<PathBuf> {
    value.map(PathBuf::from).filter(|path| path.is_absolute())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_with(dir: &Path) -> Environment {
        Environment {
            home: Some(dir.join("home").into()),
            ..Environment::default()
        }
    }

    #[test]
    fn the_flag_wins_over_everything() {
        let dir = tempfile::tempdir().unwrap();
        let env = Environment {
            store: Some("sqlite:///from/env.db".into()),
            lf_home: Some(dir.path().into()),
            ..env_with(dir.path())
        };
        let config = select(Some("sqlite:///from/flag.db"), None, &env).unwrap();
        assert_eq!(config, StorageConfig::sqlite("/from/flag.db"));
        let config = select(None, None, &env).unwrap();
        assert_eq!(config, StorageConfig::sqlite("/from/env.db"));
    }

    #[test]
    fn a_config_file_gives_the_url_or_a_table() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "[store]\nurl = \"sqlite:///from/file.db\"\n").unwrap();
        let env = env_with(dir.path());
        let config = select(None, Some(&file), &env).unwrap();
        assert_eq!(config, StorageConfig::sqlite("/from/file.db"));
        std::fs::write(&file, "store = \"sqlite:///plain.db\"\nother = 1\n").unwrap();
        let config = select(None, Some(&file), &env).unwrap();
        assert_eq!(config, StorageConfig::sqlite("/plain.db"));
    }

    #[test]
    fn a_config_file_without_a_store_falls_through_to_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "[other]\nkey = 1\n").unwrap();
        let env = Environment {
            lf_home: Some(dir.path().join("lf").into()),
            ..env_with(dir.path())
        };
        let config = select(None, Some(&file), &env).unwrap();
        assert_eq!(
            config,
            StorageConfig::sqlite(dir.path().join("lf").join("registry.db"))
        );
        assert!(dir.path().join("lf").is_dir(), "the directory is created");
    }

    #[test]
    fn bad_sources_are_usage_errors_naming_the_source() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_with(dir.path());
        let error = select(Some("mysql://x/y"), None, &env).unwrap_err();
        assert_eq!(error.code(), crate::error::USAGE);
        assert!(error.to_string().contains("--store"), "{error}");
        assert!(error.to_string().contains("sqlite://"), "{error}");

        let missing = dir.path().join("missing.toml");
        let error = select(None, Some(&missing), &env).unwrap_err();
        assert_eq!(error.code(), crate::error::USAGE);

        let file = dir.path().join("bad.toml");
        std::fs::write(&file, "\n[store]\nurl = \"ftp://x\"\n").unwrap();
        let error = select(None, Some(&file), &env).unwrap_err();
        assert_eq!(error.code(), crate::error::USAGE);
        assert!(error.to_string().contains("accepted schemes"), "{error}");
        assert!(error.to_string().contains("line"), "{error}");
    }

    #[test]
    fn the_default_falls_back_from_lf_home_to_xdg_to_home() {
        let dir = tempfile::tempdir().unwrap();
        let mut env = env_with(dir.path());
        assert_eq!(
            default_store_path(&env).unwrap(),
            dir.path().join("home/.local/share/lf-handoff/registry.db")
        );
        env.xdg_data_home = Some("relative/ignored".into());
        assert_eq!(
            default_store_path(&env).unwrap(),
            dir.path().join("home/.local/share/lf-handoff/registry.db")
        );
        env.xdg_data_home = Some(dir.path().join("data").into());
        assert_eq!(
            default_store_path(&env).unwrap(),
            dir.path().join("data/lf-handoff/registry.db")
        );
        env.lf_home = Some(dir.path().join("lf").into());
        assert_eq!(
            default_store_path(&env).unwrap(),
            dir.path().join("lf/registry.db")
        );
        let error = default_store_path(&Environment::default()).unwrap_err();
        assert_eq!(error.code(), crate::error::USAGE);
    }
}
