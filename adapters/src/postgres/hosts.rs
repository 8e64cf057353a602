//! The servers a store URL names, and connecting to the one a store may
//! use (contract C25).
//!
//! sqlx's connection options name one host, so a URL of several
//! (`postgres://lf@db1:5432,db2:5432/lf`) is split into one set of options
//! per host (`config.rs`), and every new connection is made here: the
//! hosts are tried in the URL's order, except that the one that was chosen
//! last is tried first (after a failover the new primary is found at once
//! by every later connection, however many hosts come before it). With
//! `target_session_attrs=read-write`, the default, a server is used only
//! when it accepts writes: one query on the new connection reads
//! `pg_is_in_recovery()` (a standby) and `transaction_read_only` (a server
//! made read-only, as `default_transaction_read_only` does); a server that
//! fails either test is disconnected and the next is tried. With `any`,
//! the first server that answers is used.
//!
//! When no server qualifies, the error names each host and why it was
//! passed over ([`NoUsableHost`], which `Server::map_error` turns into an
//! `Unavailable` message); it is `Unreachable`, which the store's retry
//! window (C18) retries, when at least one host might qualify later (it
//! did not answer, or it is a standby that may be promoted). A URL of one
//! host that cannot be reached fails with that host's own error, as
//! before.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions as _, Connection as _, Row as _};

use crate::postgres::config::{Pooler, TargetSessionAttrs};

/// What a new connection asks before it is used for writing: whether the
/// server is a standby, and whether its transactions are read-only. Sent
/// as a simple query (no prepared statement, so a pooler in transaction
/// mode passes it too).
const ACCEPTS_WRITES: &str = "SELECT pg_catalog.pg_is_in_recovery()::text AS in_recovery, \
     pg_catalog.current_setting('transaction_read_only') AS read_only";

/// What a new connection runs first unless a pooler in transaction mode
/// shares its server session: a session a pooler in session mode hands
/// on without resetting it (`server_reset_query` empty) may hold another
/// client's prepared statements, whose names the driver would reuse.
const CLEAR_PREPARED: &str = "DEALLOCATE ALL";

/// The servers of one store URL.
#[derive(Debug)]
pub(crate) struct Hosts {
    hosts: Vec<Host>,
    attrs: TargetSessionAttrs,
    /// How long one host may take to connect and answer, so that a host
    /// that does not answer leaves time for the next.
    connect_timeout: Duration,
    /// Whether a new connection first drops the prepared statements its
    /// server session may hold ([`CLEAR_PREPARED`]); not behind a pooler
    /// in transaction mode, whose sessions other clients use at once.
    clear_prepared: bool,
    /// The host chosen last, tried first.
    preferred: AtomicUsize,
}

/// One server of the URL.
#[derive(Debug, Clone)]
pub(crate) struct Host {
    /// The driver's options for this server.
    pub options: PgConnectOptions,
    /// How messages name it: `host:port`, `[v6]:port` or the socket.
    pub address: String,
}

/// Why a server of the URL was passed over.
#[derive(Debug)]
pub(crate) enum Passed {
    /// The connection failed.
    Failed(sqlx::Error),
    /// Nothing answered within the host's share of the acquire timeout.
    NoAnswer(Duration),
    /// It is a standby (in recovery).
    Standby,
    /// Its transactions are read-only (`default_transaction_read_only`).
    ReadOnly,
}

impl Passed {
    /// Whether the same server may be usable a moment later: it did not
    /// answer, or it is a standby that a failover may promote.
    pub(crate) fn may_pass_later(&self) -> bool {
        !matches!(self, Self::Failed(_))
    }
}

/// No server of the URL could be used: each host with why it was passed
/// over, in the URL's order. Carried inside `sqlx::Error::Configuration`
/// through the connection pool to `Server::map_error`, which names them.
#[derive(Debug)]
pub(crate) struct NoUsableHost {
    /// Each host's address and why it was passed over.
    pub passed: Vec<(String, Passed)>,
}

impl fmt::Display for NoUsableHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hosts: Vec<&str> = self
            .passed
            .iter()
            .map(|(address, _)| address.as_str())
            .collect();
        write!(f, "no usable server among {}", hosts.join(", "))
    }
}

impl std::error::Error for NoUsableHost {}

impl Hosts {
    /// The servers `hosts` (in the URL's order), chosen by `attrs`, each
    /// given `acquire_timeout` divided by their number to connect.
    pub(crate) fn new(
        hosts: Vec<Host>,
        attrs: TargetSessionAttrs,
        acquire_timeout: Duration,
        pooler: Pooler,
    ) -> Self {
        let count = u32::try_from(hosts.len().max(1)).unwrap_or(u32::MAX);
        Self {
            hosts,
            attrs,
            connect_timeout: acquire_timeout / count,
            clear_prepared: pooler != Pooler::Transaction,
            preferred: AtomicUsize::new(0),
        }
    }

    /// The servers, in the URL's order.
    pub(crate) fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// A new connection to a server the store may use: the one chosen
    /// last, else the others in the URL's order.
    ///
    /// # Errors
    /// With one host that fails to connect, its own error; otherwise
    /// `sqlx::Error::Configuration` holding a [`NoUsableHost`].
    pub(crate) async fn connect(&self) -> Result<PgConnection, sqlx::Error> {
        self.connect_to_one().await.map(|(_, conn)| conn)
    }

    /// [`connect`](Self::connect), with the index of the host connected to.
    async fn connect_to_one(&self) -> Result<(usize, PgConnection), sqlx::Error> {
        let first = self.preferred.load(Ordering::Relaxed) % self.hosts.len().max(1);
        let order =
            std::iter::once(first).chain((0..self.hosts.len()).filter(move |at| *at != first));
        let mut passed = Vec::new();
        for at in order {
            let Some(host) = self.hosts.get(at) else {
                continue;
            };
            match self.try_host(host).await {
                Ok(conn) => {
                    self.preferred.store(at, Ordering::Relaxed);
                    return Ok((at, conn));
                }
                Err(why) => passed.push((at, why)),
            }
        }
        if let [(_, Passed::Failed(_))] = passed.as_slice() {
            if let Some((_, Passed::Failed(error))) = passed.pop() {
                return Err(error);
            }
        }
        passed.sort_by_key(|(at, _)| *at);
        let passed = passed
            .into_iter()
            .filter_map(|(at, why)| Some((self.hosts.get(at)?.address.clone(), why)))
            .collect();
        Err(sqlx::Error::Configuration(Box::new(NoUsableHost {
            passed,
        })))
    }

    /// Connects to `host` and, for a store that writes, checks that it
    /// accepts writes.
    async fn try_host(&self, host: &Host) -> Result<PgConnection, Passed> {
        let attempt = async {
            let mut conn = host.options.connect().await.map_err(Passed::Failed)?;
            let check = match (self.attrs, self.clear_prepared) {
                (TargetSessionAttrs::Any, false) => return Ok(conn),
                (TargetSessionAttrs::Any, true) => {
                    sqlx::Executor::execute(&mut conn, CLEAR_PREPARED)
                        .await
                        .map_err(Passed::Failed)?;
                    return Ok(conn);
                }
                (TargetSessionAttrs::ReadWrite, false) => ACCEPTS_WRITES.to_string(),
                // One round trip for both (a simple query of two statements).
                (TargetSessionAttrs::ReadWrite, true) => {
                    format!("{CLEAR_PREPARED}; {ACCEPTS_WRITES}")
                }
            };
            let row = match sqlx::Executor::fetch_one(&mut conn, check.as_str()).await {
                Ok(row) => row,
                Err(error) => return Err(Passed::Failed(error)),
            };
            let in_recovery: String = row.try_get(0).map_err(Passed::Failed)?;
            let read_only: String = row.try_get(1).map_err(Passed::Failed)?;
            let passed = if in_recovery == "true" {
                Passed::Standby
            } else if read_only == "on" {
                Passed::ReadOnly
            } else {
                return Ok(conn);
            };
            conn.close().await.ok();
            Err(passed)
        };
        if self.hosts.len() == 1 {
            // The pool's acquire timeout bounds it.
            return attempt.await;
        }
        tokio::time::timeout(self.connect_timeout, attempt)
            .await
            .unwrap_or(Err(Passed::NoAnswer(self.connect_timeout)))
    }

    /// The options of a server the store may use now, for a connection
    /// made elsewhere (the change signal's listener): the check
    /// connection is closed.
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    pub(crate) async fn usable_options(&self) -> Result<PgConnectOptions, sqlx::Error> {
        let (at, conn) = self.connect_to_one().await?;
        conn.close().await.ok();
        self.hosts
            .get(at)
            .map(|host| host.options.clone())
            .ok_or_else(|| sqlx::Error::Protocol("the chosen host is gone".into()))
    }
}

/// How a message names the server `options` reach: `host:port`,
/// `[v6]:port`, or the Unix socket.
pub(crate) fn address_of(options: &PgConnectOptions) -> String {
    match options.get_socket() {
        Some(socket) => format!("socket {} (port {})", socket.display(), options.get_port()),
        None if options.get_host().contains(':') && !options.get_host().starts_with('[') => {
            format!("[{}]:{}", options.get_host(), options.get_port())
        }
        None => format!("{}:{}", options.get_host(), options.get_port()),
    }
}
