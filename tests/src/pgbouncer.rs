//! A PgBouncer of a test's own (Debian's package, `apt-get install
//! pgbouncer`), in front of a PostgreSQL server, in session or transaction
//! pooling mode (contract C25).
//!
//! It runs as the `postgres` OS user when the tests run as root (as the
//! package's service does), from a configuration written into a temporary
//! directory: trust authentication on 127.0.0.1, a free port, no Unix
//! socket. It is started under a small shell that waits on a pipe from
//! this process and, when the pipe closes (the [`PgBouncer`] is dropped,
//! or the test process ends, however it ends), stops PgBouncer and removes
//! the directory: nothing outlives the tests, including the pooler the
//! conformance suite shares ([`PgBouncer::shared`]).
//!
//! When PgBouncer is not installed, [`PgBouncer::start`] says so; a test
//! then skips, unless [`REQUIRE_PGBOUNCER_VAR`] is `1` (as in CI), which
//! fails it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::own_postgres::{free_port, is_root};

/// Set to `1` to fail, instead of skip, a test that cannot start
/// PgBouncer.
pub const REQUIRE_PGBOUNCER_VAR: &str = "LF_HANDOFF_TEST_REQUIRE_PGBOUNCER";

/// Where Debian installs PgBouncer.
const PROGRAM: &str = "/usr/sbin/pgbouncer";

/// How PgBouncer hands out server sessions (its `pool_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    /// One server session per client connection, for its lifetime.
    Session,
    /// A server session per transaction.
    Transaction,
}

impl PoolMode {
    /// The `pool_mode` setting.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Session => "session",
            Self::Transaction => "transaction",
        }
    }
}

/// A running PgBouncer; stopped, and its directory removed, when dropped.
#[derive(Debug)]
pub struct PgBouncer {
    port: u16,
    dir: PathBuf,
    mode: PoolMode,
    /// Closing it stops PgBouncer (see the module docs).
    lifeline: Mutex<Option<ChildStdin>>,
    child: Mutex<Child>,
}

impl PgBouncer {
    /// Starts PgBouncer in `mode` in front of the server at
    /// `server_host:server_port` (every database of it), with `settings`
    /// (`name = value` lines) added to its `[pgbouncer]` section, and
    /// waits until it accepts connections.
    ///
    /// # Errors
    /// Why it cannot run here: not installed, or it did not start (with
    /// its log).
    pub fn start(
        mode: PoolMode,
        server_host: &str,
        server_port: u16,
        settings: &[&str],
    ) -> Result<Self, String> {
        if !Path::new(PROGRAM).is_file() {
            return Err(format!(
                "PgBouncer is not installed ({PROGRAM} is missing; apt-get install pgbouncer)"
            ));
        }
        let as_postgres = is_root();
        let dir = tempfile::Builder::new()
            .prefix("lf-pgbouncer-")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary directory: {e}"))?
            .keep();
        let port = free_port()?;
        let pool_size = match mode {
            // A client holds its server session: room for every test's
            // connections at once (the tests take at most 4 slots of
            // about 20 connections).
            PoolMode::Session => 80,
            PoolMode::Transaction => 10,
        };
        let config = format!(
            "[databases]\n\
             * = host={server_host} port={server_port}\n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = trust\n\
             auth_file = {dir}/userlist.txt\n\
             pool_mode = {mode}\n\
             max_client_conn = 1000\n\
             default_pool_size = {pool_size}\n\
             server_idle_timeout = 2\n\
             server_tls_sslmode = disable\n\
             logfile = {dir}/pgbouncer.log\n\
             {extra}\n",
            dir = dir.display(),
            mode = mode.as_str(),
            extra = settings.join("\n"),
        );
        let write = |name: &str, text: &str| {
            std::fs::write(dir.join(name), text)
                .map_err(|e| format!("cannot write {name} in {}: {e}", dir.display()))
        };
        write("pgbouncer.ini", &config)?;
        write("userlist.txt", "\"postgres\" \"\"\n")?;
        let mut command = if as_postgres {
            let chown = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(&dir)
                .status()
                .map_err(|e| format!("cannot run chown: {e}"))?;
            if !chown.success() {
                return Err(format!("cannot give {} to postgres", dir.display()));
            }
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--", "sh"]);
            command
        } else {
            Command::new("sh")
        };
        // PgBouncer in the background; when stdin closes, it is stopped
        // and its directory removed.
        command
            .arg("-c")
            .arg(
                "\"$0\" -q \"$1/pgbouncer.ini\" & pid=$!; read -r _; kill \"$pid\" 2>/dev/null; \
                 wait \"$pid\"; rm -rf \"$1\"",
            )
            .arg(PROGRAM)
            .arg(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start PgBouncer: {e}"))?;
        let lifeline = child.stdin.take();
        let bouncer = Self {
            port,
            dir,
            mode,
            lifeline: Mutex::new(lifeline),
            child: Mutex::new(child),
        };
        bouncer.wait_until_listening()?;
        Ok(bouncer)
    }

    /// The PgBouncer in `mode` that the tests of this process share, in
    /// front of the server of `LF_HANDOFF_TEST_POSTGRES_URL`, started on
    /// first use.
    ///
    /// # Errors
    /// Why it cannot run: the variable is unset or names no host and
    /// port, or [`start`](Self::start) failed.
    pub fn shared(mode: PoolMode) -> Result<&'static PgBouncer, String> {
        static SESSION: OnceLock<Result<PgBouncer, String>> = OnceLock::new();
        static TRANSACTION: OnceLock<Result<PgBouncer, String>> = OnceLock::new();
        let cell = match mode {
            PoolMode::Session => &SESSION,
            PoolMode::Transaction => &TRANSACTION,
        };
        cell.get_or_init(|| {
            let (host, port) = test_server()?;
            Self::start(mode, &host, port, &[])
        })
        .as_ref()
        .map_err(Clone::clone)
    }

    /// The port PgBouncer listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its pooling mode.
    pub fn mode(&self) -> PoolMode {
        self.mode
    }

    /// The end of its log, for failure messages.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        format!(
            "PgBouncer log: {}",
            lines[lines.len().saturating_sub(15)..].join("\n")
        )
    }

    fn wait_until_listening(&self) -> Result<(), String> {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            if let Ok(Some(status)) = self
                .child
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .try_wait()
            {
                return Err(format!(
                    "PgBouncer exited with {status}; {}",
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "PgBouncer did not listen on port {} within 10 s; {}",
            self.port,
            self.log_tail()
        ))
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        // Closing the pipe stops it (see the module docs).
        drop(
            self.lifeline
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(),
        );
        let _ = self
            .child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .wait();
    }
}

/// Skips the calling test, saying `reason` on stderr, unless
/// [`REQUIRE_PGBOUNCER_VAR`] is `1`: then fails it.
///
/// # Panics
/// When [`REQUIRE_PGBOUNCER_VAR`] is `1`.
pub fn skip_or_fail(reason: &str) {
    if std::env::var(REQUIRE_PGBOUNCER_VAR).as_deref() == Ok("1") {
        panic!("{REQUIRE_PGBOUNCER_VAR}=1 but no PgBouncer: {reason}");
    }
    let test = std::thread::current().name().unwrap_or("test").to_string();
    let _ = writeln!(std::io::stderr(), "skipped {test}: {reason}");
}

/// The host and port of `LF_HANDOFF_TEST_POSTGRES_URL`.
fn test_server() -> Result<(String, u16), String> {
    let var = crate::backends::postgres::TEST_URL_VAR;
    let url = std::env::var(var).map_err(|_| format!("{var} is not set"))?;
    let authority = url
        .split_once("://")
        .map(|(_, rest)| rest)
        .and_then(|rest| rest.split(['/', '?']).next())
        .ok_or_else(|| format!("{var} is not a URL"))?;
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = hostport.rsplit_once(':').unwrap_or((hostport, "5432"));
    let port = port
        .parse()
        .map_err(|_| format!("{var} names port {port:?}"))?;
    let host = if host.is_empty() { "127.0.0.1" } else { host };
    Ok((host.to_string(), port))
}
