//! The service's figures (issue 22): `lf-handoff serve` against the
//! library and against a bare handler of the same HTTP stack.
//!
//! - [`lifecycle`]: the lifecycle through the `http` backend's `Store`
//!   against a server of this process serving the backend's store, and the
//!   same lifecycle through the library on a store of the same backend,
//!   taking turns;
//! - [`get`]: `GET /v1/handoffs/{id}` requests per second at 1 and 64
//!   keep-alive connections, against the same connection loop serving a
//!   bare handler that answers the same bytes;
//! - [`events`] (PostgreSQL): a finish through one server to an
//!   event-stream client of another server on the same store;
//! - [`idle`]: the memory and CPU of an `lf-handoff serve` process holding
//!   1,000 idle event streams and 1,000 pending long polls;
//! - [`hostile`] (C29): `GET /v1/handoffs/{id}` from one address while
//!   another trickles bodies on every connection it may hold and a third
//!   floods idle connections, against the same client without them.
//!
//! Servers of this process listen on `127.0.0.1:0` and end with their
//! [`Service`]; every client uses one token of every scope, from a tokens
//! file of the run's own.

pub mod events;
pub mod get;
pub mod hostile;
pub mod idle;
pub mod lifecycle;
mod load;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use lf_handoff_adapters::{HttpConfig, StorageConfig, Store, StoreResult, Token};
use lf_handoff_api::Scope;
use lf_handoff_server::{bind, tokens, ServeConfig};
use time::OffsetDateTime;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::error::{BenchResult, Context};

/// How long a server of this process has to drain when it is stopped.
const STOP_PATIENCE: Duration = Duration::from_secs(15);

/// The run's tokens file, holding one token of every scope, and the token.
/// The directory is removed when this is dropped.
#[derive(Debug)]
pub struct Access {
    dir: PathBuf,
    tokens: PathBuf,
    token: String,
}

impl Access {
    /// A fresh tokens file in a directory of its own under the system's
    /// temporary directory.
    ///
    /// # Errors
    /// When the directory or the file cannot be made.
    pub fn create() -> BenchResult<Self> {
        let dir = std::env::temp_dir().join(format!(
            "lf-handoff-bench-serve-{}-{}",
            std::process::id(),
            OffsetDateTime::now_utc().unix_timestamp_nanos()
        ));
        std::fs::create_dir_all(&dir).context(format!("create {}", dir.display()))?;
        let tokens = dir.join("tokens");
        let made = tokens::create(&tokens, "bench", &Scope::ALL, OffsetDateTime::now_utc())
            .context("make the bench's token")?;
        Ok(Self {
            dir,
            tokens,
            token: made.token,
        })
    }

    /// The tokens file, for `lf-handoff serve --tokens`.
    pub fn tokens_file(&self) -> &std::path::Path {
        &self.tokens
    }

    /// The token, for an `Authorization: Bearer` header.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The `http` backend's store configuration for the service at `url`.
    ///
    /// # Errors
    /// When `url` is not a service URL.
    pub fn client_config(&self, url: &str) -> BenchResult<StorageConfig> {
        let token = Token::new(&self.token).context("the bench's token")?;
        let http = HttpConfig::new(url)
            .context("service URL")?
            .with_token(token);
        Ok(StorageConfig::Http(http))
    }

    /// The `http` backend's store for the service at `url`.
    ///
    /// # Errors
    /// As [`client_config`](Self::client_config) and opening it.
    pub async fn client(&self, url: &str) -> BenchResult<Store> {
        lf_handoff_adapters::open_store(&self.client_config(url)?)
            .await
            .context("open the service's client")
    }
}

impl Drop for Access {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

/// A server of this process on `127.0.0.1:0`, with the run's tokens;
/// stopped by [`stop`](Self::stop), or when dropped.
#[derive(Debug)]
pub struct Service {
    url: String,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<StoreResult<()>>>,
}

impl Service {
    /// Serves `store`: the service's routes, or `router` in their place
    /// (through the same connection loop).
    ///
    /// # Errors
    /// When the server cannot bind.
    pub async fn start(
        store: Store,
        access: &Access,
        router: Option<axum::Router>,
    ) -> BenchResult<Self> {
        let mut config = ServeConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
        config.tokens = Some(access.tokens.clone());
        let server = bind(config, store).await.context("start a server")?;
        let (url, addr) = (server.url(), server.local_addr());
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        };
        let task = match router {
            None => tokio::spawn(server.run(shutdown)),
            Some(router) => tokio::spawn(server.run_router(router, shutdown)),
        };
        Ok(Self {
            url,
            addr,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops it and waits for it to drain (at most a few seconds).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(STOP_PATIENCE, task).await;
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

#[cfg(test)]
mod tests;
