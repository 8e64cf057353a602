//! The served store: `lf-handoff serve` in a child process, its address
//! read from the banner it prints, its resident set from
//! `/proc/PID/status`, stopped with SIGTERM as an operator stops it.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use lf_handoff_adapters::{open_store, StorageConfig};
use lf_handoff_conformance::serve_child::ServeChild;
use lf_handoff_server::{Limits, ServeConfig};
use tokio::process::Command;

use super::ServedLimits;

/// The first argument that makes this program the soak's server.
pub const SERVER_ARG: &str = "__lf-handoff-soak-server";

/// How long the server may take to say where it listens, and to drain.
const PATIENCE: Duration = Duration::from_secs(60);

/// The server child: opens the store at `args[0]` and runs
/// `lf_handoff_server::serve` on `127.0.0.1:0` with the tokens file
/// `args[1]`, the header and body timeouts `args[2]` and `args[3]` (ms)
/// and `args[4]` connections, until SIGTERM. `serve` prints the banner
/// the parent reads.
///
/// # Errors
/// A sentence naming what failed.
pub async fn server_child(args: &[String]) -> Result<(), String> {
    let [url, tokens, header_ms, body_ms, connections] = args else {
        return Err(format!("expected 5 arguments, got {args:?}"));
    };
    let number = |text: &str| {
        text.parse::<u64>()
            .map_err(|e| format!("not a number: {text:?}: {e}"))
    };
    let config = StorageConfig::from_url(url).map_err(|e| format!("store URL: {e}"))?;
    let store = open_store(&config)
        .await
        .map_err(|e| format!("cannot open the store: {e}"))?;
    let mut serve = ServeConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
    serve.tokens = Some(tokens.into());
    serve.limits = Limits {
        header_read_timeout: Duration::from_millis(number(header_ms)?),
        body_timeout: Duration::from_millis(number(body_ms)?),
        max_connections: usize::try_from(number(connections)?).unwrap_or(usize::MAX),
        ..Limits::default()
    };
    lf_handoff_server::serve(serve, store)
        .await
        .map_err(|e| format!("serve: {e}"))
}

/// The running server process.
#[derive(Debug)]
pub struct Server {
    served: ServeChild,
}

impl Server {
    /// Starts the server over `store_url`: `cli serve` when `cli` is
    /// given, else `exe` (this program) as [`SERVER_ARG`].
    ///
    /// # Errors
    /// A sentence naming what failed.
    pub async fn start(
        cli: Option<&Path>,
        exe: &Path,
        store_url: &str,
        tokens: &Path,
        limits: &ServedLimits,
    ) -> Result<Self, String> {
        let millis = |d: Duration| d.as_millis().to_string();
        let mut command = match cli {
            Some(cli) => {
                let mut command = Command::new(cli);
                command
                    .arg("--store")
                    .arg(store_url)
                    .args(["serve", "--listen", "127.0.0.1:0", "--tokens"])
                    .arg(tokens)
                    .arg("--header-timeout")
                    .arg(format!("{}ms", millis(limits.header_timeout)))
                    .arg("--body-timeout")
                    .arg(format!("{}ms", millis(limits.body_timeout)))
                    .arg("--max-connections")
                    .arg(limits.max_connections.to_string());
                command
            }
            None => {
                let mut command = Command::new(exe);
                command
                    .arg(SERVER_ARG)
                    .arg(store_url)
                    .arg(tokens)
                    .arg(millis(limits.header_timeout))
                    .arg(millis(limits.body_timeout))
                    .arg(limits.max_connections.to_string());
                command
            }
        };
        let served = ServeChild::start(&mut command, PATIENCE).await?;
        Ok(Self { served })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        self.served.url()
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.served.addr()
    }

    /// Its resident set now, in bytes (`VmRSS`).
    ///
    /// # Errors
    /// When `/proc` cannot be read (the server is gone).
    pub fn rss(&self) -> Result<u64, String> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.served.pid()))
            .map_err(|e| format!("cannot read the server's /proc status: {e}"))?;
        vm_rss(&status).ok_or_else(|| "the server's /proc status has no VmRSS".to_string())
    }

    /// Sends SIGTERM and waits for the drain; returns how it ended (a
    /// sentence when it did not exit 0 within the patience).
    pub async fn stop(&mut self) -> Option<String> {
        // The standard library kills with SIGKILL only; the `kill` command
        // sends SIGTERM, which starts `serve`'s drain.
        let _ = Command::new("kill")
            .args(["-TERM", &self.served.pid().to_string()])
            .status()
            .await;
        match tokio::time::timeout(PATIENCE, self.served.child.wait()).await {
            Ok(Ok(status)) if status.success() => None,
            Ok(Ok(status)) => Some(format!("the server exited with {status}")),
            Ok(Err(e)) => Some(format!("cannot wait for the server: {e}")),
            Err(_) => {
                let _ = self.served.child.kill().await;
                Some("the server did not stop within 60 s of SIGTERM".into())
            }
        }
    }
}

/// The `VmRSS` line of a `/proc/PID/status`, in bytes.
fn vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::vm_rss;

    #[test]
    fn the_resident_set_is_read_in_bytes() {
        let status = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(vm_rss(status), Some(1024 * 1024));
        assert_eq!(vm_rss("Name:\tx\n"), None);
    }
}
