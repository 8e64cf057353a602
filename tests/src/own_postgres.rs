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
//!
//! For the failover tests (`tests/src/failover.rs`), a server can be
//! started with settings of its own ([`OwnPostgres::start_with`]), copied
//! into a streaming standby ([`OwnPostgres::standby_of`], `pg_basebackup
//! -R`), killed as a crashing machine would be ([`OwnPostgres::kill_9`]),
//! promoted ([`OwnPostgres::promote`]) and rebuilt as a standby of another
//! ([`OwnPostgres::rebuild_as_standby_of`]).

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
    /// Server settings given at every start (`name=value`, as `-c`).
    settings: Vec<String>,
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
        Self::start_with(&[])
    }

    /// [`start`](Self::start), with server `settings` (`name=value`, each
    /// given as `-c` at every start of this server and of its standbys).
    ///
    /// # Errors
    /// As `start`.
    pub fn start_with(settings: &[&str]) -> Result<Self, String> {
        let server = Self::unstarted(settings.iter().map(|s| (*s).to_string()).collect())?;
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

    /// A server of its own directory and port, not created yet.
    fn unstarted(settings: Vec<String>) -> Result<Self, String> {
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
        Ok(Self {
            bin,
            dir,
            port,
            as_postgres,
            settings,
        })
    }

    /// A new streaming standby of `primary` (`pg_basebackup -R`, which
    /// writes `primary_conninfo` and `standby.signal`), with `primary`'s
    /// settings, started on a port of its own.
    ///
    /// # Errors
    /// Why it could not be made or started (with the programs' output).
    pub fn standby_of(primary: &OwnPostgres) -> Result<Self, String> {
        let standby = Self::unstarted(primary.settings.clone())?;
        standby.copy_of(primary)?;
        standby.start_again()?;
        Ok(standby)
    }

    /// Makes this (killed or stopped) server a new standby of `primary`:
    /// its data are removed and copied again from `primary`, as an
    /// operator rebuilds a failed primary, and it is started on its own
    /// port.
    ///
    /// # Errors
    /// As [`standby_of`](Self::standby_of).
    pub fn rebuild_as_standby_of(&self, primary: &OwnPostgres) -> Result<(), String> {
        let data = self.data();
        if data.exists() {
            std::fs::remove_dir_all(&data)
                .map_err(|e| format!("cannot remove {}: {e}", data.display()))?;
        }
        self.copy_of(primary)?;
        self.start_again()
    }

    /// Copies `primary`'s data into this server's data directory as a
    /// standby's (`pg_basebackup -R`, a fast checkpoint, WAL streamed).
    fn copy_of(&self, primary: &OwnPostgres) -> Result<(), String> {
        self.program("pg_basebackup")
            .arg("-D")
            .arg(self.data())
            .arg("-d")
            .arg(format!(
                "host=127.0.0.1 port={} user=postgres application_name=standby_{}",
                primary.port, self.port
            ))
            .args(["-R", "--checkpoint=fast", "--no-sync", "-X", "stream"])
            .output_checked()
            .map_err(|e| format!("pg_basebackup failed: {e}"))
    }

    /// Kills the server as a crashing machine would: every process of it
    /// (the postmaster and its children) is stopped at once, then killed
    /// with SIGKILL; nothing of it writes or answers after this returns.
    /// Its shared memory segment is removed, and its data are left as
    /// they were.
    ///
    /// # Errors
    /// When the server's processes cannot be found or killed.
    pub fn kill_9(&self) -> Result<(), String> {
        let pid_file = self.data().join("postmaster.pid");
        let text = std::fs::read_to_string(&pid_file)
            .map_err(|e| format!("cannot read {}: {e}", pid_file.display()))?;
        let lines: Vec<&str> = text.lines().collect();
        let postmaster: u32 = lines
            .first()
            .and_then(|pid| pid.trim().parse().ok())
            .ok_or_else(|| format!("{} names no process", pid_file.display()))?;
        // Stopped first, the postmaster starts no process after its
        // children are listed.
        run(Command::new("kill").args(["-STOP", &postmaster.to_string()]))?;
        let mut pids = vec![postmaster];
        pids.extend(children_of(postmaster));
        let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
        // A child may have ended meanwhile: `kill` then fails for it alone.
        let _ = Command::new("kill").arg("-STOP").args(&pids).output();
        let _ = Command::new("kill").arg("-KILL").args(&pids).output();
        let started = std::time::Instant::now();
        while pids.iter().any(|pid| is_alive(pid)) {
            if started.elapsed() > Duration::from_secs(10) {
                return Err(format!("the processes {pids:?} outlived SIGKILL by 10 s"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        // The segment is the seventh line's second number (key, id).
        if let Some(id) = lines.get(6).and_then(|line| line.split_whitespace().nth(1)) {
            let _ = run(Command::new("ipcrm").args(["-m", id]));
        }
        // A killed process nobody reaps stays a zombie, which a starting
        // server takes for a live one holding its lock files: they are
        // removed, as a machine's restart would leave no such process.
        let socket = self.dir.path().join(format!(".s.PGSQL.{}", self.port));
        let mut lock = socket.clone().into_os_string();
        lock.push(".lock");
        for stale in [socket, PathBuf::from(lock), pid_file] {
            let _ = std::fs::remove_file(stale);
        }
        Ok(())
    }

    /// Promotes this standby (`SELECT pg_promote()`, which waits until it
    /// is done).
    ///
    /// # Errors
    /// When the promotion fails or takes over a minute.
    pub fn promote(&self) -> Result<(), String> {
        let done = self.psql("SELECT pg_promote(true, 60)")?;
        if done == "t" {
            Ok(())
        } else {
            Err(format!(
                "pg_promote() answered {done:?}; {}",
                self.log_tail()
            ))
        }
    }

    /// Runs `sql` on this server's database `postgres` (`psql -Atq`) and
    /// returns what it printed, trimmed.
    ///
    /// # Errors
    /// psql's output when it fails.
    pub fn psql(&self, sql: &str) -> Result<String, String> {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-X",
                "-w",
                "-Atq",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
            ])
            .arg("-p")
            .arg(self.port.to_string())
            .args(["-U", "postgres", "-d", "postgres", "-c", sql])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run psql: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(format!(
                "psql -c {sql:?} on port {} failed: {}",
                self.port,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// Waits (at most `limit`) until a standby streams from this server
    /// as a synchronous one (`sync_state = 'sync'` in
    /// `pg_stat_replication`).
    ///
    /// # Errors
    /// When none is synchronous by then.
    pub fn wait_for_sync_standby(&self, limit: Duration) -> Result<(), String> {
        let started = std::time::Instant::now();
        loop {
            let sync = self.psql(
                "SELECT count(*) FROM pg_catalog.pg_stat_replication WHERE sync_state = 'sync'",
            )?;
            if sync != "0" {
                return Ok(());
            }
            if started.elapsed() > limit {
                let states = self.psql(
                    "SELECT string_agg(application_name || ' ' || state || ' ' || sync_state, \
                     ', ') FROM pg_catalog.pg_stat_replication",
                )?;
                return Err(format!(
                    "no synchronous standby on port {} within {limit:?} (standbys: {states:?})",
                    self.port
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
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
        let mut options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.path().display()
        );
        for setting in &self.settings {
            options.push_str(" -c ");
            options.push_str(setting);
        }
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
            lines[lines.len().saturating_sub(20)..].join("\n")
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

/// Whether this process runs as root.
pub(crate) fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// Whether process `pid` still runs (exists and is not a zombie).
fn is_alive(pid: &str) -> bool {
    let Ok(stat) = std::fs::read_to_string(Path::new("/proc").join(pid).join("stat")) else {
        return false;
    };
    stat.rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().next())
        .is_some_and(|state| state != "Z" && state != "X")
}

/// The processes whose parent is `parent` (from `/proc`).
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // `pid (comm) state ppid ...`; comm may hold spaces and `)`.
            let after = &stat[stat.rfind(')')? + 1..];
            let ppid: u32 = after.split_whitespace().nth(1)?.parse().ok()?;
            (ppid == parent).then_some(pid)
        })
        .collect()
}

/// A port of 127.0.0.1 that nothing listens on right now.
pub(crate) fn free_port() -> Result<u16, String> {
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
