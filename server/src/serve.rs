//! What `lf-handoff serve` runs once the store is chosen: bind, print where
//! the service listens and what it serves (the start line, and this run's
//! tokens), then serve until SIGTERM or SIGINT, re-reading the tokens file
//! on SIGHUP.

use std::io::Write as _;

use lf_handoff_adapters::{Store, StoreError, StoreResult, UnavailableKind};

use crate::listen::{bind_with, ServeConfig, Server};

/// Serves `store` as `config` says until SIGTERM or SIGINT: binds, prints
/// where it listens (and, without a tokens file, this run's tokens and
/// the sign-in URL) on stdout, re-reads the tokens file on SIGHUP, and
/// drains on the way out. This is all `lf-handoff serve` does after
/// choosing the store. It needs tokio's multi-threaded runtime (export and
/// import run the store on a blocking thread).
///
/// # Errors
/// As [`bind`](crate::bind); `Unavailable` when the signal handlers cannot be set up.
pub async fn serve(config: ServeConfig, store: Store) -> StoreResult<()> {
    serve_with(config, store, None).await
}

/// [`serve`] on `listener`, a socket already listening on `config.listen`
/// ([`listen`]): what `lf-handoff serve` runs, having bound the address
/// before it opened the store.
///
/// # Errors
/// As [`serve`], but for binding.
pub async fn serve_on(
    config: ServeConfig,
    store: Store,
    listener: std::net::TcpListener,
) -> StoreResult<()> {
    serve_with(config, store, Some(listener)).await
}

async fn serve_with(
    config: ServeConfig,
    store: Store,
    listener: Option<std::net::TcpListener>,
) -> StoreResult<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let label = config
        .store_label
        .clone()
        .unwrap_or_else(|| format!("{} store", store.backend()));
    let server = bind_with(config, store, listener).await?;
    print_banner(&server, &label);
    let signals = |kind: SignalKind| {
        signal(kind).map_err(|error| {
            StoreError::unavailable(
                UnavailableKind::Other,
                format!("cannot set up signal handling: {error}"),
            )
        })
    };
    let mut hangup = signals(SignalKind::hangup())?;
    let mut terminate = signals(SignalKind::terminate())?;
    let mut interrupt = signals(SignalKind::interrupt())?;
    let reloader = server.reloader();
    let shutdown = async move {
        loop {
            tokio::select! {
                _ = hangup.recv() => match reloader.reload() {
                    Ok(count) => tracing::info!(
                        "SIGHUP: the tokens file and the link secret were read again: {count} tokens"
                    ),
                    Err(error) => tracing::warn!(
                        "SIGHUP: the tokens file or the link secret could not be read ({error}); \
                         the tokens in use stay"
                    ),
                },
                _ = terminate.recv() => break,
                _ = interrupt.recv() => break,
            }
        }
    };
    server.run(shutdown).await
}

/// Where the service listens and the store it serves (`store`, without
/// secrets), and this run's tokens when it made them, on stdout (never in
/// the log). Each token is a line of its own that a shell takes as an
/// assignment, `LF_HANDOFF_AGENT_TOKEN=lfh_...` (the scope in the name), so
/// pasting them all, or `eval` of those lines, defines three variables and
/// overwrites none.
fn print_banner(server: &Server, store: &str) {
    let mut text = format!("lf-handoff serve: {} ({store})\n", server.url());
    if !server.run_tokens().is_empty() {
        text.push_str(
            "tokens for this run only (no --tokens file); each ends with this process:\n",
        );
        for token in server.run_tokens() {
            text.push_str(&format!(
                "LF_HANDOFF_{}_TOKEN={}\n",
                token.scope.as_str().to_ascii_uppercase(),
                token.token
            ));
        }
        if let Some(url) = server.sign_in_url() {
            text.push_str(&format!("sign in (person): {url}\n"));
        }
    }
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}
