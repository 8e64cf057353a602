//! A backend served by `lf-handoff serve` (C24): each store the scenario
//! asks for is served by a server of its own, on `127.0.0.1:0`, over the
//! inner backend's store at that location, and the scenario reaches it
//! through the `http` backend with a token of every scope. So the
//! Store-level scenarios check that a served registry keeps every clause
//! a local one keeps, with the same error kinds.
//!
//! The servers run on the test's runtime and end with it. The scenarios
//! that reach a store's own files, ports, engine or actors are in the
//! [`Needs::OwnStorage`](crate::Needs::OwnStorage) group of their table
//! and skip here, saying why.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use lf_handoff_adapters::{open_store, HttpConfig, StorageConfig};
use lf_handoff_api::Scope;
use lf_handoff_server::{bind, tokens, ServeConfig};
use tempfile::TempDir;

use crate::upgrade::Release;
use crate::{Backend, BoxFuture, Unusable};

/// The inner backend, served.
pub struct ServedBackend {
    inner: Box<dyn Backend>,
    name: &'static str,
    /// The tokens file every server of this backend reads (`tokens`), and
    /// the token (`token`).
    tokens: TempDir,
    /// The service of each store location asked for.
    services: Mutex<HashMap<String, StorageConfig>>,
}

/// The backend `inner` builds, served; skipped when `inner` is.
pub async fn served(
    inner: impl std::future::Future<Output = Result<Box<dyn Backend>, String>>,
) -> Result<Box<dyn Backend>, String> {
    let inner = inner.await?;
    let name = match inner.name() {
        "sqlite" => "served-sqlite",
        "sled" => "served-sled",
        "postgres" => "served-postgres",
        _ => "served",
    };
    let tokens = tempfile::tempdir().unwrap();
    let made = tokens::create(
        &tokens.path().join("tokens"),
        "conformance",
        &Scope::ALL,
        time::OffsetDateTime::now_utc(),
    )
    .unwrap();
    // The client's token file (processes of the scenario read it too).
    std::fs::write(tokens.path().join("token"), made.token).unwrap();
    Ok(Box::new(ServedBackend {
        inner,
        name,
        tokens,
        services: Mutex::new(HashMap::new()),
    }))
}

/// The served SQLite backend.
#[cfg(feature = "sqlite")]
pub async fn served_sqlite() -> Result<Box<dyn Backend>, String> {
    served(super::sqlite()).await
}

/// The served sled backend.
#[cfg(feature = "sled")]
pub async fn served_sled() -> Result<Box<dyn Backend>, String> {
    served(super::sled()).await
}

/// The served PostgreSQL backend; skipped as PostgreSQL is.
#[cfg(feature = "postgres")]
pub async fn served_postgres() -> Result<Box<dyn Backend>, String> {
    served(super::postgres()).await
}

impl std::fmt::Debug for ServedBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServedBackend")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ServedBackend {
    /// The service of the store `config` names, started on first use, or
    /// anew when `fresh` (a store made again at the same place, such as a
    /// release's store in a server backend's schema: a server started on
    /// the store before would not know it changed under it).
    fn service(&self, config: StorageConfig, fresh: bool) -> StorageConfig {
        let key = config.url();
        let mut services = self.services.lock().unwrap();
        if let Some(service) = services.get(&key).filter(|_| !fresh) {
            return service.clone();
        }
        let tokens = self.tokens.path().join("tokens");
        let handle = tokio::runtime::Handle::current();
        let url = tokio::task::block_in_place(|| {
            handle.block_on(async {
                let store = open_store(&config).await.unwrap();
                let mut serve = ServeConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
                serve.tokens = Some(tokens.clone());
                let server = bind(serve, store).await.unwrap();
                let url = server.url();
                tokio::spawn(server.run(std::future::pending()));
                url
            })
        });
        let mut http = HttpConfig::new(&url).unwrap();
        http.token_file = Some(self.tokens.path().join("token"));
        let service = StorageConfig::Http(http);
        services.insert(key, service.clone());
        service
    }
}

impl Backend for ServedBackend {
    fn name(&self) -> &'static str {
        self.name
    }

    fn config(&self, location: PathBuf) -> StorageConfig {
        self.service(self.inner.config(location), false)
    }

    fn shares_across_processes(&self) -> bool {
        // Any number of processes reach one service.
        true
    }

    fn is_served(&self) -> bool {
        true
    }

    fn other_config(&self, name: &str, location: PathBuf) -> StorageConfig {
        self.service(self.inner.other_config(name, location), false)
    }

    fn unusable_stores<'a>(&'a self, _dir: &'a Path) -> BoxFuture<'a, Vec<Unusable>> {
        Box::pin(async { Vec::new() })
    }

    fn release_store<'a>(
        &'a self,
        release: Release,
        dir: &'a Path,
    ) -> BoxFuture<'a, StorageConfig> {
        Box::pin(async move {
            let config = self.inner.release_store(release, dir).await;
            self.service(config, true)
        })
    }

    fn cleanup(&self) -> BoxFuture<'_, ()> {
        self.inner.cleanup()
    }
}
