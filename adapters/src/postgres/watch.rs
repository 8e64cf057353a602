//! PostgreSQL's change signal (C16): [`Notifications`], `LISTEN` on a
//! connection of its own; behind a pooler in transaction mode without a
//! `listen_url`, [`Rechecks`]. Both read the store's mark (the last final
//! event's position, `dialect::LAST_FINAL`) on a connection of their own:
//! [`Notifications`] every [`RECHECK`](crate::changes::RECHECK), for a
//! notification it missed, [`Rechecks`] every
//! [`RECHECK_EVERY`](super::RECHECK_EVERY) in place of notifications.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::PgConnection;
use sqlx::{Connection as _, Executor as _, Row as _};

use super::hosts::Hosts;
use crate::changes::{ChangeSource, Mark, Notifier};

/// The channel a write's notification goes to (C16).
const CHANNEL: &str = "lf_handoff_events";

/// Makes this session a watcher, so writes notify (the trigger of
/// `handoff_events` sends a notification only while someone watches),
/// and forgets the watchers whose sessions ended.
pub(super) const REGISTER: [&str; 2] = [
    "DELETE FROM handoff_watchers w \
     WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = w.pid)",
    "INSERT INTO handoff_watchers (pid) VALUES (pg_backend_pid()) ON CONFLICT DO NOTHING",
];

/// Ends the watch of session `$1`.
pub(super) const UNREGISTER: &str = "DELETE FROM handoff_watchers WHERE pid = $1";

/// How long a reading of the mark may take before its connection is
/// taken for broken (and made again).
const MARK_PATIENCE: Duration = Duration::from_secs(10);

/// Reads the store's mark with `sql` (`dialect::LAST_FINAL`, naming the
/// store's schema) on `conn`, as a simple query (nothing prepared, as a
/// pooler in transaction mode needs), within [`MARK_PATIENCE`].
async fn read_mark(conn: &mut PgConnection, sql: &str, server: &str) -> Result<i64, sqlx::Error> {
    // A text without arguments runs as a simple query.
    match tokio::time::timeout(MARK_PATIENCE, conn.fetch_one(sql)).await {
        Ok(row) => row?.try_get(0),
        Err(_) => Err(sqlx::Error::Protocol(format!(
            "reading the change mark on {server} took longer than {} s",
            MARK_PATIENCE.as_secs()
        ))),
    }
}

/// The change signal behind a pooler in transaction mode without
/// `listen_url`: no session can hold a `LISTEN`, so the feed reads the
/// store's mark every [`RECHECK_EVERY`](super::RECHECK_EVERY) on a
/// connection of its own, and wakes its watchers when it moved (and
/// when the connection fails, so they find out what is wrong).
#[derive(Debug)]
pub(super) struct Rechecks {
    /// The store's servers, through the pooler.
    pub hosts: Arc<Hosts>,
    pub server: String,
    /// `dialect::LAST_FINAL`, naming the store's schema.
    pub mark: String,
    /// How often the mark is read: `RECHECK_EVERY`.
    pub every: Duration,
}

#[async_trait]
impl ChangeSource for Rechecks {
    async fn run(&self, out: &Arc<Notifier>) {
        let mut conn: Option<PgConnection> = None;
        let mut mark = Mark::default();
        while out.wanted() {
            let made = match conn.take() {
                Some(made) => Ok(made),
                None => self.hosts.connect().await,
            };
            let read = match made {
                Ok(mut made) => {
                    let read = read_mark(&mut made, &self.mark, &self.server).await;
                    conn = read.is_ok().then_some(made);
                    read
                }
                Err(error) => Err(error),
            };
            match read {
                Ok(value) => mark.read(value, out),
                Err(error) => {
                    tracing::debug!("reading the change mark on {}: {error}", self.server);
                    mark.forget();
                    out.bump();
                }
            }
            tokio::time::sleep(self.every).await;
        }
        if let Some(made) = conn {
            made.close().await.ok();
        }
    }
}

/// PostgreSQL's change signal (C16): `LISTEN` on a connection of its own,
/// registered in `handoff_watchers` so writes send their notification (in
/// the writing transaction, by a trigger). A write whose statement began
/// before the registration committed does not notify; it ends within
/// moments, so the feed wakes its watchers again [`LATE_WAKES`] after
/// each registration. A lost connection is made again, with a wake, so
/// the watchers catch up; while the server is unreachable the feed keeps
/// trying, and the watchers' own reads report it.
///
/// The safety check: the store's mark is read once the session is
/// registered (which wakes the watchers: what committed before it is
/// theirs to read), then every `recheck` on a second connection, waking
/// the watchers when it moved. A notification lost any way (a listening
/// connection that died without a word, a write that began before the
/// registration and ran for long) so costs at most `recheck`. A mark
/// that cannot be read makes the session again; so does a listening
/// connection that stopped delivering (its [`Echo`] went unheard).
#[derive(Debug)]
pub(super) struct Notifications {
    /// The servers to listen on: the one that accepts writes (where writes
    /// notify) is chosen for each session.
    pub hosts: Arc<Hosts>,
    pub server: String,
    /// [`REGISTER`] and [`UNREGISTER`], naming the store's schema.
    pub register: Vec<String>,
    pub unregister: String,
    /// `dialect::LAST_FINAL`, naming the store's schema.
    pub mark: String,
    /// How often the mark is read: [`RECHECK`](crate::changes::RECHECK).
    pub recheck: Duration,
}

/// When, after a registration, the feed wakes its watchers again.
const LATE_WAKES: [Duration; 2] = [Duration::from_millis(100), Duration::from_secs(1)];

impl Notifications {
    /// One session: listens and registers, then passes notifications on
    /// until nobody watches (`Ok`) or the connection fails (`Err`). The
    /// listener runs on a task of its own, never interrupted while it
    /// reads (a read cut short would leave the connection mid-message);
    /// it is stopped, and its session unregistered, when nobody watches.
    async fn session(&self, out: &Arc<Notifier>) -> Result<(), sqlx::Error> {
        let options = self.hosts.usable_options().await?;
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect_lazy_with(options);
        let Begun {
            mut listener,
            mut checker,
            pid,
            mut echo,
            first,
        } = match tokio::time::timeout(SESSION_PATIENCE, self.begin(&pool)).await {
            Ok(begun) => begun?,
            Err(_) => {
                return Err(sqlx::Error::Protocol(format!(
                    "starting to watch {} took longer than {} s",
                    self.server,
                    SESSION_PATIENCE.as_secs()
                )))
            }
        };
        // The first reading wakes the watchers (after the registration,
        // so a write committed after it either notifies or moves the mark).
        let mut mark = Mark::default();
        mark.read(first, out);
        let mut recheck_at = tokio::time::Instant::now() + self.recheck;
        let server = self.server.clone();
        let forward = out.clone();
        let (channel, heard) = (echo.channel.clone(), echo.heard.clone());
        let mut listening = tokio::spawn(async move {
            loop {
                match listener.try_recv().await {
                    Ok(Some(notification)) if notification.channel() == channel => {
                        if let Ok(number) = notification.payload().parse::<u64>() {
                            heard.fetch_max(number, Ordering::Relaxed);
                        }
                    }
                    Ok(Some(_)) => forward.bump(),
                    Ok(None) => {
                        return Err(sqlx::Error::Protocol(format!(
                            "the watch connection to {server} was lost"
                        )))
                    }
                    Err(error) => return Err(error),
                }
            }
        });
        let started = tokio::time::Instant::now();
        let mut late: Vec<tokio::time::Instant> = LATE_WAKES
            .iter()
            .rev()
            .map(|after| started + *after)
            .collect();
        loop {
            let tick = late
                .last()
                .copied()
                .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(1))
                .min(recheck_at);
            tokio::select! {
                ended = &mut listening => {
                    return match ended {
                        Ok(result) => result,
                        Err(join) => Err(sqlx::Error::Protocol(format!("the watch task failed: {join}"))),
                    };
                }
                () = tokio::time::sleep_until(tick) => {
                    if late.last().is_some_and(|at| *at <= tokio::time::Instant::now()) {
                        late.pop();
                        out.bump();
                    }
                    if !out.wanted() {
                        listening.abort();
                        sqlx::query(&self.unregister).bind(pid).execute(&mut *checker).await?;
                        return Ok(());
                    }
                    if recheck_at <= tokio::time::Instant::now() {
                        let checked = match echo.missing(&self.server) {
                            Err(error) => Err(error),
                            Ok(()) => match read_mark(&mut checker, &self.mark, &self.server).await {
                                Ok(value) => {
                                    mark.read(value, out);
                                    echo.send(&mut checker, &self.server).await
                                }
                                Err(error) => Err(error),
                            },
                        };
                        if let Err(error) = checked {
                            listening.abort();
                            return Err(error);
                        }
                        recheck_at = tokio::time::Instant::now() + self.recheck;
                    }
                }
            }
        }
    }
}

/// How long starting a session (its listening connection, the
/// registration, the first reading of the mark) may take before it is
/// given up and made again.
const SESSION_PATIENCE: Duration = Duration::from_secs(20);

/// A session's connections once it listens and is registered.
struct Begun {
    listener: sqlx::postgres::PgListener,
    checker: sqlx::pool::PoolConnection<sqlx::Postgres>,
    /// The listening connection's server process.
    pid: i32,
    echo: Echo,
    /// The mark's first reading.
    first: i64,
}

impl Notifications {
    /// Listens and registers on a connection of `pool`, then reads the
    /// mark on the other.
    async fn begin(&self, pool: &sqlx::PgPool) -> Result<Begun, sqlx::Error> {
        let mut listener = sqlx::postgres::PgListener::connect_with(pool).await?;
        listener.listen(CHANNEL).await?;
        for statement in &self.register {
            sqlx::query(statement).execute(&mut listener).await?;
        }
        let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut listener)
            .await?;
        // The session's own channel, for its echo.
        let echo = Echo::new(pid);
        listener.listen(&echo.channel).await?;
        let mut checker = pool.acquire().await?;
        let first = read_mark(&mut checker, &self.mark, &self.server).await?;
        Ok(Begun {
            listener,
            checker,
            pid,
            echo,
            first,
        })
    }
}

/// A listening connection's echo: at each recheck the feed sends a
/// notification to the session's own channel (`lf_handoff_echo_PID_NONCE`)
/// from its second connection and expects the listener to have heard it
/// by the next. A listening connection that stopped delivering without
/// a word (a firewall or NAT that forgot an idle connection, a host gone
/// with no reset) is so found within two rechecks and made again; the
/// echo's traffic also keeps such a connection from looking idle.
struct Echo {
    channel: String,
    /// The highest echo the listener heard.
    heard: Arc<AtomicU64>,
    /// The last echo sent.
    sent: u64,
}

impl Echo {
    fn new(pid: i32) -> Self {
        // A random part too, so nothing meant for an earlier session whose
        // server process had the same id is taken for this one's echo.
        let nonce = {
            use std::hash::{BuildHasher as _, Hasher as _};
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_i32(pid);
            hasher.finish()
        };
        Self {
            channel: format!("lf_handoff_echo_{pid}_{nonce:016x}"),
            heard: Arc::new(AtomicU64::new(0)),
            sent: 0,
        }
    }

    /// An error when the last echo sent was not heard.
    fn missing(&self, server: &str) -> Result<(), sqlx::Error> {
        if self.heard.load(Ordering::Relaxed) >= self.sent {
            return Ok(());
        }
        Err(sqlx::Error::Protocol(format!(
            "the watch connection to {server} stopped delivering notifications (its echo did \
             not come back)"
        )))
    }

    /// Sends the next echo on `conn` (a simple query, within
    /// [`MARK_PATIENCE`]).
    async fn send(&mut self, conn: &mut PgConnection, server: &str) -> Result<(), sqlx::Error> {
        self.sent += 1;
        // The channel is ours (a pid's digits and hex digits) and the
        // payload a number: nothing to quote.
        let sql = format!("SELECT pg_notify('{}', '{}')", self.channel, self.sent);
        match tokio::time::timeout(MARK_PATIENCE, conn.execute(sql.as_str())).await {
            Ok(done) => done.map(|_| ()),
            Err(_) => Err(sqlx::Error::Protocol(format!(
                "sending the watch's echo on {server} took longer than {} s",
                MARK_PATIENCE.as_secs()
            ))),
        }
    }
}

#[async_trait]
impl ChangeSource for Notifications {
    async fn run(&self, out: &Arc<Notifier>) {
        let mut pause = Duration::from_millis(50);
        while out.wanted() {
            match self.session(out).await {
                Ok(()) => return,
                Err(error) => {
                    tracing::debug!("watching {}: {error}; connecting again", self.server);
                    // Whatever came meanwhile is read after the pause.
                    tokio::time::sleep(pause).await;
                    out.bump();
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
            }
        }
    }
}
