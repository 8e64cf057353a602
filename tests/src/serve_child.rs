//! `serve` in a child process, found by its start line: the soak and the
//! benchmark each run a server whose memory and CPU time are its own, and
//! read where it listens from the first line it prints
//! (`lf-handoff serve: http://127.0.0.1:PORT (...)`).

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, ChildStdout, Command};

/// A running server child: its process, and where it listens.
#[derive(Debug)]
pub struct ServeChild {
    /// The process (killed when dropped).
    pub child: Child,
    /// Kept open, so a later line of the server finds its reader.
    _stdout: BufReader<ChildStdout>,
    pid: u32,
    url: String,
    addr: SocketAddr,
}

impl ServeChild {
    /// Starts `command` (a `serve` on `127.0.0.1:0` that prints its start
    /// line first) with no input, its output piped and its errors and
    /// request log dropped (they would be most of a long run's output),
    /// and reads where it listens from its first line, waiting at most
    /// `patience`.
    ///
    /// # Errors
    /// A sentence naming what failed: the start, a silent server, or a
    /// first line that names no `http://` address.
    pub async fn start(command: &mut Command, patience: Duration) -> Result<Self, String> {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start the server: {e}"))?;
        let Some(pid) = child.id() else {
            return Err("the server exited at once".into());
        };
        let Some(stdout) = child.stdout.take() else {
            return Err("the server's stdout is not a pipe".into());
        };
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        match tokio::time::timeout(patience, stdout.read_line(&mut line)).await {
            Ok(Ok(n)) if n > 0 => {}
            _ => return Err("the server did not say where it listens".into()),
        }
        let (url, addr) = listening(&line)
            .ok_or_else(|| format!("cannot read where the server listens: {line:?}"))?;
        Ok(Self {
            child,
            _stdout: stdout,
            pid,
            url,
            addr,
        })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// The URL and address of a start line, `lf-handoff serve:
/// http://127.0.0.1:PORT (sqlite store)`.
fn listening(line: &str) -> Option<(String, SocketAddr)> {
    let url = line.split_whitespace().nth(2)?;
    let addr = url.strip_prefix("http://")?.parse().ok()?;
    Some((url.to_string(), addr))
}

#[cfg(test)]
mod tests {
    use super::listening;

    #[test]
    fn the_start_line_names_where_the_server_listens() {
        let (url, addr) =
            listening("lf-handoff serve: http://127.0.0.1:7381 (store sqlite:///x)\n").unwrap();
        assert_eq!(url, "http://127.0.0.1:7381");
        assert_eq!(addr.port(), 7381);
        assert_eq!(listening("lf-handoff serve: https://h:1 (x)"), None);
        assert_eq!(listening("nothing"), None);
    }
}
