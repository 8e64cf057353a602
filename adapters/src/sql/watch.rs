//! The history as a log to follow (C16): [`EventLog`] for [`SqlStore`].
//!
//! Events are read by position through the primary key. On SQLite writers
//! take turns, so positions commit in order and every committed event is
//! final. On PostgreSQL concurrent writers commit out of order; a read
//! first asks the backend's horizon ([`Dialect::EVENT_HORIZON`](crate::sql::Dialect::EVENT_HORIZON)),
//! the first position that may not be final, and then reads, in a later
//! statement, only the events below it. When it finds none, it says
//! whether committed events wait above the horizon (held back by a writer
//! still running), so the watcher reads again soon.

use async_trait::async_trait;
use lf_handoff_application::{Changes, EventBatch, EventLog, StoreResult};

use crate::sql::engine::Param;
use crate::sql::statements::{EVENTS_AFTER, EVENTS_FROM, LAST_POSITION_BELOW};
use crate::sql::{failed, SqlEngine, SqlStore};

impl<E: SqlEngine> SqlStore<E> {
    /// The first position that may not be final: the horizon, or past
    /// every position where positions commit in order.
    async fn horizon(&self) -> StoreResult<i64> {
        match self.engine.event_horizon() {
            Some(horizon) => self.engine.fetch_int(horizon, &[]).await.map_err(failed),
            None => Ok(i64::MAX),
        }
    }
}

#[async_trait]
impl<E: SqlEngine> EventLog for SqlStore<E> {
    /// The last final event's position (0 for none): every event below the
    /// horizon has committed or never will, and every later one comes
    /// above it.
    async fn last_position(&self) -> StoreResult<u64> {
        let below = self.horizon().await?;
        let last = self
            .engine
            .fetch_int(LAST_POSITION_BELOW, &[Param::Int(below)])
            .await
            .map_err(failed)?;
        Ok(u64::try_from(last).unwrap_or(0))
    }

    async fn events_after(&self, after: u64, limit: usize) -> StoreResult<EventBatch> {
        let below = self.horizon().await?;
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let rows = if after.saturating_add(1) >= below {
            Vec::new()
        } else {
            self.engine
                .fetch_events(
                    &EVENTS_AFTER,
                    &[
                        Param::Int(after),
                        Param::Int(below),
                        Param::Int(i64::try_from(limit).unwrap_or(i64::MAX)),
                    ],
                )
                .await
                .map_err(failed)?
        };
        let events = rows
            .into_iter()
            .map(|row| row.into_domain())
            .collect::<StoreResult<Vec<_>>>()?;
        let held_back = events.is_empty()
            && below < i64::MAX
            && self
                .engine
                .fetch_int(EVENTS_FROM, &[Param::Int(below.max(after))])
                .await
                .map_err(failed)?
                > 0;
        Ok(EventBatch { events, held_back })
    }

    async fn changes(&self) -> StoreResult<Box<dyn Changes>> {
        Ok(self.engine.subscribe())
    }
}
