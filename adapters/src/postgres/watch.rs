//! PostgreSQL's change signal (C16): [`Notifications`], `LISTEN` on a
//! connection of its own; behind a pooler in transaction mode without a
//! `listen_url`, [`Rechecks`].

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::hosts::Hosts;
use super::RECHECK_EVERY;
use crate::changes::{ChangeSource, Notifier};

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

/// The change signal behind a pooler in transaction mode without
/// `listen_url`: no session can hold a `LISTEN`, so the feed wakes its
/// watchers every [`RECHECK_EVERY`], and each reads the store again.
#[derive(Debug)]
pub(super) struct Rechecks;

#[async_trait]
impl ChangeSource for Rechecks {
    async fn run(&self, out: &Arc<Notifier>) {
        while out.wanted() {
            tokio::time::sleep(RECHECK_EVERY).await;
            out.bump();
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
#[derive(Debug)]
pub(super) struct Notifications {
    /// The servers to listen on: the one that accepts writes (where writes
    /// notify) is chosen for each session.
    pub hosts: Arc<Hosts>,
    pub server: String,
    /// [`REGISTER`] and [`UNREGISTER`], naming the store's schema.
    pub register: Vec<String>,
    pub unregister: String,
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
        let mut listener = sqlx::postgres::PgListener::connect_with(&pool).await?;
        listener.listen(CHANNEL).await?;
        for statement in &self.register {
            sqlx::query(statement).execute(&mut listener).await?;
        }
        let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut listener)
            .await?;
        out.bump();
        let server = self.server.clone();
        let forward = out.clone();
        let mut listening = tokio::spawn(async move {
            loop {
                match listener.try_recv().await {
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
                .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(1));
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
                        sqlx::query(&self.unregister).bind(pid).execute(&pool).await?;
                        return Ok(());
                    }
                }
            }
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
