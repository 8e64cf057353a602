//! A PostgreSQL server of a test's own: a new cluster (`initdb`) in a
//! temporary directory, on a free port, that the test may stop, start and
//! restart without disturbing the shared test server other tests use.
//!
//! Run as root, the server's programs run as the `postgres` OS user
//! (`runuser -u postgres --`), since PostgreSQL refuses to run as root;
//! otherwise as the current user. When no PostgreSQL installation is found
//! or the server cannot be started, [`OwnPostgres::start`] says why, and
//! [`skip_or_fail`] skips the test saying so, unless
//! [`REQUIRE_OWN_POSTGRES_VAR`] is `1` (as in CI), which fails it.
//!
//! [`OwnPostgres`] stops the server and removes the cluster when dropped,
//! also when the test fails.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use lf_handoff_adapters::StorageConfig;
use tempfile::TempDir;

/// Set to `1` to fail, instead of skip, a test that cannot start a server
/// of its own.
pub const REQUIRE_OWN_POSTGRES_VAR: &str = "LF_HANDOFF_TEST_REQUIRE_OWN_POSTGRES";

/// Where Debian and Ubuntu install PostgreSQL's programs, one directory per
/// major version.
const INSTALLATIONS: &str = "/usr/lib/postgresql";

/// How long `pg_ctl` waits for the server to start or stop.
const PG_CTL_WAIT_SECONDS: &str = "30";

/// A private PostgreSQL server; stopped and removed when dropped.
#[derive(Debug)]
pub struct OwnPostgres {
    bin: PathBuf,
    dir: TempDir,
    port: u16,
    as_postgres: bool,
}

impl OwnPostgres {
    /// Creates a cluster in a new temporary directory and starts it on a
    /// free port of 127.0.0.1, with its Unix socket in that directory.
    ///
    /// # Errors
    /// Why it cannot run here: no `initdb` under `/usr/lib/postgresql`,
    /// `runuser` failing, or `initdb` or `pg_ctl` failing (with their
    /// output).
    pub fn start() -> Result<Self, String> {
        let bin = find_bin()?;
        let as_postgres = is_root();
        let dir = tempfile::Builder::new()
            .prefix("lf-own-pg-")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        if as_postgres {
            run(Command::new("chown").arg("postgres:").arg(dir.path()))
                .map_err(|e| format!("cannot give the cluster's directory to postgres: {e}"))?;
        }
        let port = free_port()?;
        let server = Self {
            bin,
            dir,
            port,
            as_postgres,
        };
        server
            .program("initdb")
            .args(["--auth=trust", "--username=postgres", "--encoding=UTF8"])
            .args(["--no-sync", "--no-instructions", "-D"])
            .arg(server.data())
            .output_checked()
            .map_err(|e| format!("initdb failed: {e}"))?;
        server.start_again()?;
        Ok(server)
    }

    /// The port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster's directory (the data directory, its log and socket are
    /// inside).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The URL of database `postgres` on this server, as user `postgres`
    /// over TCP; `query` (without `?`) adds lf-handoff's options.
    pub fn url(&self, query: &str) -> String {
        let mut url = format!("postgres://postgres@127.0.0.1:{}/postgres", self.port);
        if !query.is_empty() {
            url.push('?');
            url.push_str(query);
        }
        url
    }

    /// The store configuration of [`url`](Self::url).
    ///
    /// # Panics
    /// When lf-handoff refuses the URL (a bug in the test).
    pub fn config(&self, query: &str) -> StorageConfig {
        StorageConfig::from_url(&self.url(query)).expect("the own server's URL is valid")
    }

    /// Starts the (stopped) server and waits until it accepts connections.
    ///
    /// # Errors
    /// `pg_ctl`'s output when it fails.
    pub fn start_again(&self) -> Result<(), String> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.path().display()
        );
        self.pg_ctl("start")
            .arg("-l")
            .arg(self.dir.path().join("server.log"))
            .arg("-o")
            .arg(options)
            .output_checked()
            .map_err(|e| format!("pg_ctl start failed: {e}; {}", self.log_tail()))
    }

    /// Stops the server with `mode` (`fast`: sessions are terminated, as
    /// a restart by an administrator does; `immediate`: as a crash) and
    /// waits until it is down.
    ///
    /// # Errors
    /// `pg_ctl`'s output when it fails.
    pub fn stop(&self, mode: &str) -> Result<(), String> {
        self.pg_ctl("stop")
            .args(["-m", mode])
            .output_checked()
            .map_err(|e| format!("pg_ctl stop failed: {e}"))
    }

    /// Stops the server (`-m fast`), leaves it down for `down`, and starts
    /// it again.
    ///
    /// # Errors
    /// As [`stop`](Self::stop) and [`start_again`](Self::start_again).
    pub fn restart(&self, down: Duration) -> Result<(), String> {
        self.stop("fast")?;
        std::thread::sleep(down);
        self.start_again()
    }

    /// The end of the server's log, for failure messages.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        format!(
            "server log: {}",
            lines[lines.len().saturating_sub(10)..].join("\n")
        )
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn pg_ctl(&self, action: &str) -> Command {
        let mut command = self.program("pg_ctl");
        command
            .arg(action)
            .arg("-D")
            .arg(self.data())
            .args(["-w", "-t", PG_CTL_WAIT_SECONDS]);
        command
    }

    /// A command running PostgreSQL's program `name`, as `postgres` when
    /// this process is root.
    fn program(&self, name: &str) -> Command {
        let program = self.bin.join(name);
        if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        }
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        // Immediate: nothing of the cluster is kept. Errors are ignored (it
        // may be down already); the directory goes with `self.dir`.
        let _ = self
            .pg_ctl("stop")
            .args(["-m", "immediate"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Skips the calling test, saying `reason` on stderr, unless
/// [`REQUIRE_OWN_POSTGRES_VAR`] is `1`: then fails it.
///
/// # Panics
/// When [`REQUIRE_OWN_POSTGRES_VAR`] is `1`.
pub fn skip_or_fail(reason: &str) {
    if std::env::var(REQUIRE_OWN_POSTGRES_VAR).as_deref() == Ok("1") {
        panic!("{REQUIRE_OWN_POSTGRES_VAR}=1 but no PostgreSQL server of the test's own: {reason}");
    }
    let test = std::thread::current().name().unwrap_or("test").to_string();
    let _ = writeln!(
        std::io::stderr(),
        "skipped {test}: no PostgreSQL server of its own: {reason}"
    );
}

/// The `bin` directory of the newest PostgreSQL installed that has
/// `initdb`.
fn find_bin() -> Result<PathBuf, String> {
    let entries = std::fs::read_dir(INSTALLATIONS)
        .map_err(|e| format!("no PostgreSQL installation in {INSTALLATIONS} ({e})"))?;
    let mut found: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| format!("no {INSTALLATIONS}/*/bin/initdb"))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// A port of 127.0.0.1 that nothing listens on right now.
fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("cannot find a free port: {e}"))?;
    listener
        .local_addr()
        .map(|address| address.port())
        .map_err(|e| format!("cannot find a free port: {e}"))
}

fn run(command: &mut Command) -> Result<(), String> {
    command.output_checked()
}

/// Runs a command, failing with its output when it cannot run or fails.
trait OutputChecked {
    fn output_checked(&mut self) -> Result<(), String>;
}

impl OutputChecked for Command {
    fn output_checked(&mut self) -> Result<(), String> {
        let out = self
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {:?}: {e}", self.get_program()))?;
        if out.status.success() {
            return Ok(());
        }
        Err(format!(
            "{:?} {:?} exited with {}: {}{}",
            self.get_program(),
            self.get_args().collect::<Vec<_>>(),
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
