//! `serve`: the store as an HTTP service (docs/API.md), until SIGTERM.
//!
//! The service runs on a multi-threaded runtime of its own, on a thread of
//! its own, with the store opened there (a store's connections belong to
//! the runtime that opened them). Each request is logged on stderr, one
//! line at INFO (`-v` and `RUST_LOG` add to it or replace it); this run's
//! tokens, when there is no tokens file, go to stdout, never the log.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use lf_handoff_adapters::{open_store, StorageConfig, StoreError, UnavailableKind};
use lf_handoff_server::{Limits, NotifyConfig, ServeConfig, TlsFiles};
use tracing_subscriber::EnvFilter;

use crate::args::ServeArgs;
use crate::error::{CliError, CliResult};

/// Serves the store `config` names as `args` say, until SIGTERM.
///
/// # Errors
/// Exit 2 for a refused configuration (a non-loopback address without
/// tokens or TLS, an unreadable certificate); 3 for a missing tokens file;
/// 5 when the store cannot be opened or the address bound (kind
/// `address_in_use` or `cannot_listen`, found before the store is
/// opened).
pub async fn serve(config: StorageConfig, args: ServeArgs) -> CliResult<()> {
    let notify = notify_config(&args)?;
    let serve_config = ServeConfig {
        listen: args.listen,
        tokens: args.tokens,
        tls: args
            .tls_cert
            .zip(args.tls_key)
            .map(|(cert, key)| TlsFiles { cert, key }),
        behind_proxy: args.behind_proxy,
        limits: Limits {
            max_body: usize::try_from(args.max_body).unwrap_or(usize::MAX),
            max_import_body: args.max_import_body,
            header_read_timeout: args.header_timeout,
            body_timeout: args.body_timeout,
            max_connections: usize::try_from(args.max_connections).unwrap_or(usize::MAX),
            max_connections_per_peer: args
                .max_connections_per_peer
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            max_streams: usize::try_from(args.max_streams).unwrap_or(usize::MAX),
            mcp_wait: args.mcp_wait,
            ..Limits::default()
        },
        link_secret: args.link_secret,
        public_url: args.public_url,
        notify,
        // The URL without its password: the start line is not a secret.
        store_label: Some(format!("store {config}")),
    };
    // Refused before the store is opened.
    serve_config.check().map_err(CliError::from)?;
    let listener = listen(serve_config.listen)?;
    // Request lines at INFO unless -v or RUST_LOG installed a subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new("lf_handoff_server=info"))
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
    let (done, finished) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = done.send(run(config, serve_config, listener));
    });
    finished
        .await
        .map_err(|_| CliError::unavailable(UnavailableKind::Other, "the service thread stopped"))?
}

/// A socket listening on `address`, or the error that says why it cannot
/// be had and how to choose another: an address is not storage, so the
/// error is of its own kind.
fn listen(address: SocketAddr) -> CliResult<std::net::TcpListener> {
    lf_handoff_server::listen(address).map_err(|error| {
        let (kind, why) = match error.kind() {
            io::ErrorKind::AddrInUse => (
                CliError::ADDRESS_IN_USE,
                "another process listens there (another serve?)".to_string(),
            ),
            io::ErrorKind::AddrNotAvailable => (
                CliError::CANNOT_LISTEN,
                "no interface of this machine has that address".to_string(),
            ),
            io::ErrorKind::PermissionDenied => (
                CliError::CANNOT_LISTEN,
                "not permitted (a port under 1024 needs privileges)".to_string(),
            ),
            _ => (CliError::CANNOT_LISTEN, error.to_string()),
        };
        CliError::cannot_listen(kind, format!("cannot listen on {address}: {why}"))
            .hint("give another address with --listen HOST:PORT")
    })
}

fn run(
    config: StorageConfig,
    serve_config: ServeConfig,
    listener: std::net::TcpListener,
) -> CliResult<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("lf-handoff-serve")
        .build()
        .map_err(|e| CliError::no_runtime(&e))?;
    let result = runtime.block_on(async move {
        let store = open_store(&config).await?;
        lf_handoff_server::serve_on(serve_config, store, listener).await
    });
    // Tasks still holding the store (a stream the drain cut) end here.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result.map_err(CliError::from)
}

/// The notifications `--notify` and its options ask for, with the shared
/// secret read from its file.
fn notify_config(args: &ServeArgs) -> CliResult<Option<NotifyConfig>> {
    if args.notify.is_empty() {
        return Ok(None);
    }
    let mut notify = NotifyConfig::new(args.notify.clone());
    notify.before = args.notify_before;
    notify.lease = args.notify_lease;
    notify.attempts = args.notify_attempts;
    if let Some(path) = &args.notify_secret_file {
        let secret = std::fs::read(path).map_err(|error| {
            CliError::from(StoreError::InvalidInput(format!(
                "--notify-secret-file {}: {error}",
                path.display()
            )))
        })?;
        let secret = secret.trim_ascii().to_vec();
        if secret.len() < 16 {
            return Err(CliError::from(StoreError::InvalidInput(format!(
                "--notify-secret-file {}: a secret of at least 16 bytes is needed",
                path.display()
            ))));
        }
        notify.secret = Some(secret);
    }
    Ok(Some(notify))
}
