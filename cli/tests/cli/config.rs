//! Store selection: `--store`, then `LF_HANDOFF_STORE`, then the config
//! file, then the default file (docs/CONTRACT.md).

use std::path::{Path, PathBuf};

use crate::support::{Run, Sandbox};

fn url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

/// Creates a wave with the sandbox's environment changed by `setup`, and
/// returns which of `stores` now exist.
fn used(
    sandbox: &Sandbox,
    stores: &[&PathBuf],
    setup: impl FnOnce(&mut std::process::Command),
) -> Vec<bool> {
    let mut command = sandbox.command(&["wave", "create", "--name", "w", "--repo", "/r"]);
    setup(&mut command);
    let run = Run::from_output(command.output().unwrap());
    assert_eq!(run.code, 0, "{run:?}");
    stores.iter().map(|store| store.exists()).collect()
}

#[test]
fn the_flag_wins_then_the_variable_then_the_file_then_the_default() {
    let sandbox = Sandbox::new();
    let flag = sandbox.path("flag.db");
    let env = sandbox.path("env.db");
    let file = sandbox.path("file.db");
    let default = sandbox.default_store();
    let config = sandbox.mkdir("config/lf-handoff").join("config.toml");
    std::fs::write(&config, format!("[store]\nurl = \"{}\"\n", url(&file))).unwrap();
    let all = [&flag, &env, &file, &default];

    let seen = used(&sandbox, &all, |c| {
        c.args(["--store", &url(&flag)])
            .env("LF_HANDOFF_STORE", url(&env));
    });
    assert_eq!(seen, [true, false, false, false], "--store wins");

    let seen = used(&sandbox, &all, |c| {
        c.env("LF_HANDOFF_STORE", url(&env));
    });
    assert_eq!(seen, [true, true, false, false], "then LF_HANDOFF_STORE");

    let seen = used(&sandbox, &all, |c| {
        c.env("LF_HANDOFF_STORE", "");
    });
    assert_eq!(
        seen,
        [true, true, true, false],
        "then the config file (an empty variable is unset)"
    );

    std::fs::remove_file(&config).unwrap();
    let seen = used(&sandbox, &all, |_| {});
    assert_eq!(seen, [true, true, true, true], "then $LF_HOME/registry.db");

    let listed = sandbox.json(&["list", "--store", &url(&flag)]);
    assert_eq!(listed, serde_json::json!([]), "each store is its own");
}

#[test]
fn the_config_flag_replaces_the_default_config_file() {
    let sandbox = Sandbox::new();
    let chosen = sandbox.path("chosen.db");
    let ignored = sandbox.path("ignored.db");
    let default_config = sandbox.mkdir("config/lf-handoff").join("config.toml");
    std::fs::write(&default_config, format!("store = \"{}\"\n", url(&ignored))).unwrap();
    let other_config = sandbox.path("other.toml");
    std::fs::write(
        &other_config,
        format!(
            "# lf-handoff settings\n[store]\nurl = \"{}\"\nsynchronous = \"normal\"\nbusy_timeout = \"5s\"\n\n[unrelated]\nkey = 1\n",
            url(&chosen)
        ),
    )
    .unwrap();
    let seen = used(&sandbox, &[&chosen, &ignored], |c| {
        c.args(["--config", other_config.to_str().unwrap()]);
    });
    assert_eq!(seen, [true, false]);
    let seen = used(&sandbox, &[&chosen, &ignored], |_| {});
    assert_eq!(
        seen,
        [true, true],
        "without --config the default file is read"
    );
}

#[test]
fn the_default_store_falls_back_to_the_data_directory() {
    let sandbox = Sandbox::new();
    let xdg = sandbox.path("xdg-data/lf-handoff/registry.db");
    let home = sandbox.path("home/.local/share/lf-handoff/registry.db");
    let seen = used(&sandbox, &[&xdg, &home], |c| {
        c.env_remove("LF_HOME")
            .env("XDG_DATA_HOME", sandbox.path("xdg-data"));
    });
    assert_eq!(seen, [true, false], "XDG_DATA_HOME, its directory created");
    let seen = used(&sandbox, &[&xdg, &home], |c| {
        c.env_remove("LF_HOME");
    });
    assert_eq!(seen, [true, true], "then ~/.local/share");
    assert!(!sandbox.default_store().exists());

    sandbox.fails_with(&["list"], 2, "usage", |c| {
        c.env_remove("LF_HOME").env_remove("HOME");
    });
}

#[test]
fn bad_store_urls_and_config_files_exit_2_naming_the_source() {
    let sandbox = Sandbox::new();
    for bad in ["mysql://db/x", "registry.db", "sqlite://relative.db"] {
        let error = sandbox.fails(&["list", "--store", bad], 2, "usage");
        assert!(error.contains("--store"), "{error}");
        let error = sandbox.fails_with(&["list"], 2, "usage", |c| {
            c.env("LF_HANDOFF_STORE", bad);
        });
        assert!(error.contains("LF_HANDOFF_STORE"), "{error}");
    }

    let config = sandbox.path("bad.toml");
    let config_arg = config.to_str().unwrap();
    std::fs::write(&config, "\n[store]\nurl = \"ftp://host/x\"\n").unwrap();
    let error = sandbox.fails(&["list", "--config", config_arg], 2, "usage");
    assert!(error.contains(config_arg), "{error}");
    std::fs::write(&config, "[store\nurl = 1").unwrap();
    let error = sandbox.fails(&["list", "--config", config_arg], 2, "usage");
    assert!(error.contains(config_arg), "{error}");
    let missing = sandbox.path("missing.toml");
    let error = sandbox.fails(&["list", "--config", missing.to_str().unwrap()], 2, "usage");
    assert!(error.contains("missing.toml"), "{error}");
    assert!(
        !sandbox.default_store().exists(),
        "no fallback past a bad source"
    );
}

#[test]
fn an_unreachable_postgres_server_exits_5_with_one_line_naming_it() {
    let sandbox = Sandbox::new();
    let error = sandbox.fails(
        &[
            "--store",
            "postgres://postgres@127.0.0.1:1/none?retry_window=300ms",
            "list",
        ],
        5,
        "unreachable",
    );
    assert!(error.contains("127.0.0.1:1"), "{error}");
    // Opening the store tried again within the URL's retry window.
    assert!(error.contains("gave up on opening the store"), "{error}");
}

#[test]
fn every_backend_is_reached_through_the_store_flag() {
    let sandbox = Sandbox::new();
    let sled = format!("sled://{}", sandbox.path("sled-store").display());
    let sqlite = format!("sqlite://{}", sandbox.path("other.db").display());
    for store in [sled, sqlite] {
        let wave = sandbox.ok(&[
            "--store", &store, "wave", "create", "--name", "w", "--repo", "/r",
        ]);
        let cwd = sandbox.mkdir("work");
        let opened = sandbox.ok(&[
            "--store",
            &store,
            "open",
            "--parent",
            &format!("wave:{}", wave.trim()),
            "--home",
            "jack@local",
            "--cwd",
            cwd.to_str().unwrap(),
            "--provider",
            "codex",
            "--generation",
            "1",
            "--reason",
            "login",
            "--",
            "true",
        ]);
        let listed = sandbox.ok(&["--store", &store, "list"]);
        assert!(listed.contains(opened.trim()), "{store}: {listed}");
    }
    // Nothing went to the default store.
    assert!(!sandbox.default_store().exists());
}

#[test]
fn a_certificate_no_trusted_authority_signed_exits_5_naming_the_server() {
    let (Ok(server), Ok(_)) = (
        std::env::var("LF_HANDOFF_TEST_POSTGRES_URL"),
        std::env::var("LF_HANDOFF_TEST_POSTGRES_TLS_CA"),
    ) else {
        eprintln!(
            "skipped: LF_HANDOFF_TEST_POSTGRES_URL and LF_HANDOFF_TEST_POSTGRES_TLS_CA name a \
             PostgreSQL server with TLS and its authority; set both to run this test"
        );
        return;
    };
    let host =
        std::env::var("LF_HANDOFF_TEST_POSTGRES_TLS_HOST").unwrap_or_else(|_| "localhost".into());
    let sandbox = Sandbox::new();
    // An empty system certificate store: nothing vouches for the server.
    let no_roots = sandbox.path("no-roots.pem");
    std::fs::write(&no_roots, "").unwrap();
    let no_root_dir = sandbox.mkdir("no-roots");
    let joint = if server.contains('?') { '&' } else { '?' };
    let store = format!("{server}{joint}sslmode=verify-full&host={host}&schema=lft_untrusted");
    let error = sandbox.fails_with(&["--store", &store, "list"], 5, "refused", |c| {
        c.env("SSL_CERT_FILE", &no_roots)
            .env("SSL_CERT_DIR", &no_root_dir);
    });
    assert!(error.contains(&host), "{error}");
}

#[test]
fn a_certificate_file_that_does_not_exist_exits_2_naming_it() {
    let sandbox = Sandbox::new();
    let missing = sandbox.path("no-such-ca.pem");
    let store = format!(
        "postgres://postgres@127.0.0.1:1/none?sslmode=verify-full&sslrootcert={}",
        missing.display()
    );
    let error = sandbox.fails(&["--store", &store, "list"], 2, "usage");
    assert!(error.contains("no-such-ca.pem"), "{error}");
}
