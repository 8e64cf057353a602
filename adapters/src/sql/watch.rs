//! The history as a log to follow (C16): [`EventLog`] for [`SqlStore`].
//!
//! Events are read by position through the primary key. On SQLite writers
//! take turns, so positions commit in order and every committed event is
//! final. On PostgreSQL concurrent writers commit out of order; a read
//! first asks the backend's horizon ([`Dialect::EVENT_HORIZON`](crate::sql::Dialect::EVENT_HORIZON)),
//! the first position that may not be final, and then reads, in a later
//! statement, only the events below it.

use async_trait::async_trait;
use lf_handoff_application::{Changes, EventLog, StoreResult};
use lf_handoff_domain::interactive_handoff::HandoffEvent;

use crate::sql::engine::Param;
use crate::sql::statements::{EVENTS_AFTER, LAST_POSITION};
use crate::sql::{failed, SqlEngine, SqlStore};

#[async_trait]
impl<E: SqlEngine> EventLog for SqlStore<E> {
    async fn last_position(&self) -> StoreResult<u64> {
        let last = match self.engine.event_horizon() {
            Some(horizon) => self
                .engine
                .fetch_int(horizon, &[])
                .await
                .map_err(failed)?
                .saturating_sub(1),
            None => self
                .engine
                .fetch_int(LAST_POSITION, &[])
                .await
                .map_err(failed)?,
        };
        Ok(u64::try_from(last).unwrap_or(0))
    }

    async fn events_after(&self, after: u64, limit: usize) -> StoreResult<Vec<HandoffEvent>> {
        let below = match self.engine.event_horizon() {
            Some(horizon) => self.engine.fetch_int(horizon, &[]).await.map_err(failed)?,
            None => i64::MAX,
        };
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        if after.saturating_add(1) >= below {
            return Ok(Vec::new());
        }
        let rows = self
            .engine
            .fetch_events(
                &EVENTS_AFTER,
                &[
                    Param::Int(after),
                    Param::Int(below),
                    Param::Int(i64::try_from(limit).unwrap_or(i64::MAX)),
                ],
            )
            .await
            .map_err(failed)?;
        rows.into_iter().map(|row| row.into_domain()).collect()
    }

    async fn changes(&self) -> StoreResult<Box<dyn Changes>> {
        Ok(self.engine.subscribe())
    }
}
