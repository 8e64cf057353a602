//! The history as a log to follow (C16): [`EventLog`] for [`SqlStore`].
//!
//! Events are read by position through the primary key. A read first asks
//! the dialect for the first position that may not be final
//! ([`Dialect::final_below`]; on SQLite, whose writers take turns, none
//! is), then reads, in a later statement, only the events below it. When
//! it finds none, it asks whether events wait at or above that position
//! to become final ([`Dialect::pending_from`]), so the watcher reads
//! again soon.

use async_trait::async_trait;
use lf_handoff_application::{Changes, EventBatch, EventLog, StoreResult};

use crate::sql::driver::Param;
use crate::sql::statements::{EVENTS_AFTER, LAST_POSITION_BELOW};
use crate::sql::{failed, Dialect, SqlStore};

#[async_trait]
impl<D: Dialect> EventLog for SqlStore<D> {
    /// The last final event's position (0 for none): every event below
    /// [`Dialect::final_below`] has committed or never will, and every
    /// later one comes above it.
    async fn last_position(&self) -> StoreResult<u64> {
        let below = D::final_below(&self.engine).await.map_err(failed)?;
        let last = self
            .engine
            .fetch_int(LAST_POSITION_BELOW, &[Param::Int(below)])
            .await
            .map_err(failed)?;
        Ok(u64::try_from(last).unwrap_or(0))
    }

    async fn events_after(&self, after: u64, limit: usize) -> StoreResult<EventBatch> {
        let below = D::final_below(&self.engine).await.map_err(failed)?;
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
        let pending = events.is_empty()
            && D::pending_from(&self.engine, below.max(after))
                .await
                .map_err(failed)?;
        Ok(EventBatch { events, pending })
    }

    async fn changes(&self) -> StoreResult<Box<dyn Changes>> {
        Ok(self.engine.subscribe())
    }
}
