//! Driving worker processes: separate OS processes that use one store, for
//! the cross-process races and the `kill -9` durability scenario.
//!
//! The worker binary (`lf-handoff-conformance-worker`) opens the store named
//! by a URL, prints `ready`, waits for a line on stdin, performs one
//! operation and prints its result; or, for `churn`, runs lifecycles and
//! prints `ack <step> <id>` after every write the store acknowledged; or,
//! for `populate`, fills the store, prints `populated` and exits.
//!
//! For single-process backends (sled), `hold` keeps the store open from
//! `ready` until it reads a line (then prints `released`), and `probe [id]`
//! only tries to open the store: `opened [status]` and exit 0, or
//! `unavailable <message>` and exit 5 (the CLI's code for `Unavailable`).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

static WORKER: OnceLock<PathBuf> = OnceLock::new();

/// Records where the worker binary is (the test's `CARGO_BIN_EXE_...`).
pub fn set_worker(path: &str) {
    let _ = WORKER.set(PathBuf::from(path));
}

/// The worker binary.
pub fn worker_path() -> PathBuf {
    WORKER
        .get()
        .cloned()
        .expect("the conformance macro sets the worker path")
}

/// A running worker with its output lines.
#[derive(Debug)]
pub struct Worker {
    pub child: Child,
    pub lines: Lines<BufReader<ChildStdout>>,
}

impl Worker {
    /// Starts `worker <url> <args...>`.
    pub fn spawn(url: &str, args: &[String]) -> Worker {
        let mut child = Command::new(worker_path())
            .arg(url)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("worker starts");
        let stdout = child.stdout.take().expect("piped stdout");
        Worker {
            child,
            lines: BufReader::new(stdout).lines(),
        }
    }

    /// The next line the worker printed.
    pub async fn line(&mut self) -> Option<String> {
        self.lines
            .next_line()
            .await
            .expect("worker output is readable")
    }
}

/// Starts one worker per argument list, waits until every one has opened
/// the store, releases them together, and returns each one's result line.
pub async fn race(url: &str, runs: &[Vec<String>]) -> Vec<String> {
    race_all(url, runs)
        .await
        .into_iter()
        .map(|lines| {
            lines
                .into_iter()
                .next()
                .unwrap_or_else(|| "no output".into())
        })
        .collect()
}

/// Like [`race`], returning every line each worker printed after `ready`.
pub async fn race_all(url: &str, runs: &[Vec<String>]) -> Vec<Vec<String>> {
    race_at(url, runs, time::OffsetDateTime::now_utc()).await
}

/// Like [`race_all`], sending `go` no earlier than `at` (when every worker
/// is ready).
pub async fn race_at(
    url: &str,
    runs: &[Vec<String>],
    at: time::OffsetDateTime,
) -> Vec<Vec<String>> {
    let mut workers: Vec<Worker> = runs.iter().map(|args| Worker::spawn(url, args)).collect();
    for worker in &mut workers {
        assert_eq!(worker.line().await.as_deref(), Some("ready"));
    }
    let left = at - time::OffsetDateTime::now_utc();
    if left.is_positive() {
        tokio::time::sleep(left.unsigned_abs()).await;
    }
    for worker in &mut workers {
        let stdin = worker.child.stdin.as_mut().expect("piped stdin");
        stdin.write_all(b"go\n").await.expect("worker reads stdin");
        stdin.flush().await.expect("worker reads stdin");
    }
    let mut results = Vec::new();
    for worker in &mut workers {
        let mut lines = Vec::new();
        while let Some(line) = worker.line().await {
            lines.push(line);
        }
        results.push(lines);
        let status = worker.child.wait().await.expect("worker exits");
        assert!(status.success(), "worker failed: {status}");
    }
    results
}
