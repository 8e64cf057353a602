//! [`HandoffRepository`] for [`SqlStore`]: each method one statement (a
//! transition: a read, then one compare-and-swap of the whole record), a
//! write with its history event (one statement on PostgreSQL, a
//! two-statement transaction on SQLite; see the module doc of `sql`).
//!
//! An insert the engine refuses is told apart by the unique index that
//! refused it, as the dialect recognised it (PostgreSQL names the index,
//! SQLite its columns): the active slot's (I6) is
//! [`InsertOutcome::ParentBusy`], the one over parent and step (C12)
//! [`InsertOutcome::StepTaken`].

use async_trait::async_trait;
use lf_handoff_application::ports::{
    recorded_change, Decided, Decision, HandoffRepository, InsertOutcome, ListQuery, PruneCount,
    SwapOutcome, TransitionOutcome, Versioned,
};
use lf_handoff_application::{StoreError, StoreResult};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    Actor, HandoffChange, HandoffEvent, InteractiveHandoff, Transition,
};
use lf_handoff_domain::timestamp::{micros_before, to_unix_micros};
use time::OffsetDateTime;

use crate::sql::columns::{HandoffRow, COLUMN_COUNT};
use crate::sql::engine::{EngineError, Param, SqlEngine, Statement};
use crate::sql::events::event_values;
use crate::sql::schema::{ONE_ACTIVE_PER_PARENT, ONE_PER_PARENT_STEP};
use crate::sql::statements::{
    list_statement, COUNT_PRUNABLE, DUE_HANDOFFS, DUE_HANDOFFS_PINNED, HANDOFF_BY_ID, HISTORY,
    INSERT_EVENT, INSERT_HANDOFF, INSERT_HANDOFF_WITH_EVENT, PRUNE_BATCH, PRUNE_EVENTS,
    PRUNE_HANDOFFS, SWAP_HANDOFF, SWAP_HANDOFF_WITH_EVENT,
};
use crate::sql::{failed, to_stored_version, versioned_handoff, SqlStore};

/// An insert binds every column, then the parent's id and version.
const INSERT_PARAMS: usize = COLUMN_COUNT + 2;

#[async_trait]
impl<E: SqlEngine> HandoffRepository for SqlStore<E> {
    async fn load(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<Option<Versioned<InteractiveHandoff>>> {
        let rows = self
            .engine
            .fetch_handoffs(&HANDOFF_BY_ID, &[Param::Text(id.as_str())])
            .await
            .map_err(failed)?;
        rows.into_iter().next().map(versioned_handoff).transpose()
    }

    async fn list(&self, query: &ListQuery) -> StoreResult<Vec<InteractiveHandoff>> {
        let home = query.home.as_ref().map(ToString::to_string);
        let Some(statement) = list_statement(query, home.as_deref(), self.engine.pins_indexes())
        else {
            return Ok(Vec::new());
        };
        let rows = self
            .engine
            .fetch_handoffs(&statement.sql, &statement.params)
            .await
            .map_err(failed)?;
        rows.into_iter().map(HandoffRow::into_domain).collect()
    }

    async fn insert(
        &self,
        handoff: &InteractiveHandoff,
        parent_version: u64,
        actor: &Actor,
    ) -> StoreResult<InsertOutcome> {
        let change = recorded_change(None, handoff)?;
        let row = HandoffRow::from_domain(handoff, 1)?;
        let mut params = [Param::Int(to_stored_version(parent_version)?); INSERT_PARAMS];
        params[..COLUMN_COUNT].copy_from_slice(&row.values());
        params[COLUMN_COUNT] = Param::Text(handoff.parent.id_str());
        let written = self
            .write_with_event(
                (&INSERT_HANDOFF, &INSERT_HANDOFF_WITH_EVENT),
                &params,
                handoff,
                &change,
                actor,
            )
            .await;
        match written {
            Ok(true) => {
                self.written.remember(handoff, 1);
                Ok(InsertOutcome::Inserted)
            }
            Ok(false) => Ok(InsertOutcome::ParentChanged),
            Err(EngineError::Unique {
                index: Some(index), ..
            }) if index == ONE_ACTIVE_PER_PARENT => Ok(InsertOutcome::ParentBusy),
            Err(EngineError::Unique {
                index: Some(index), ..
            }) if index == ONE_PER_PARENT_STEP => Ok(InsertOutcome::StepTaken),
            Err(error) => Err(failed(error)),
        }
    }

    async fn transition(
        &self,
        id: &InteractiveHandoffId,
        decide: Decision,
        actor: &Actor,
    ) -> StoreResult<Option<TransitionOutcome>> {
        // The record this handle wrote last, when it has one: a change
        // decided on it is written with its version, so it is stored only
        // if the record is still that one; otherwise (or for a replay or a
        // refusal, which write nothing to check them against) the record is
        // read as usual.
        if let Some(known) = self.written.get(id) {
            if let Ok(Decided {
                transition: Transition::Changed(handoff),
                answer,
            }) = decide(&known.value)
            {
                let change = recorded_change(Some(&known.value), &handoff)?;
                match self.swap(known.version, &handoff, &change, actor).await? {
                    SwapOutcome::Swapped => {
                        self.written
                            .remember(&handoff, known.version.saturating_add(1));
                        return Ok(Some(TransitionOutcome::Applied {
                            handoff: Box::new(handoff),
                            answer,
                        }));
                    }
                    SwapOutcome::Lost => self.written.forget(id),
                }
            }
        }
        let Some(current) = self.load(id).await? else {
            self.written.forget(id);
            return Ok(None);
        };
        let Decided { transition, answer } = decide(&current.value)?;
        match transition {
            Transition::Unchanged(handoff) => Ok(Some(TransitionOutcome::Applied {
                handoff: Box::new(handoff),
                answer,
            })),
            Transition::Changed(handoff) => {
                let change = recorded_change(Some(&current.value), &handoff)?;
                let swapped = self.swap(current.version, &handoff, &change, actor).await?;
                Ok(Some(match swapped {
                    SwapOutcome::Swapped => {
                        self.written
                            .remember(&handoff, current.version.saturating_add(1));
                        TransitionOutcome::Applied {
                            handoff: Box::new(handoff),
                            answer,
                        }
                    }
                    SwapOutcome::Lost => TransitionOutcome::Lost,
                }))
            }
        }
    }

    async fn due(
        &self,
        now: OffsetDateTime,
        limit: usize,
    ) -> StoreResult<Vec<InteractiveHandoffId>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .engine
            .fetch_handoffs(
                if self.engine.pins_indexes() {
                    &DUE_HANDOFFS_PINNED
                } else {
                    &DUE_HANDOFFS
                },
                &[Param::Int(to_unix_micros(now)), Param::Int(limit)],
            )
            .await
            .map_err(failed)?;
        rows.into_iter()
            .map(|row| row.into_domain().map(|handoff| handoff.id))
            .collect()
    }

    async fn history(&self, id: &InteractiveHandoffId) -> StoreResult<Vec<HandoffEvent>> {
        let rows = self
            .engine
            .fetch_events(&HISTORY, &[Param::Text(id.as_str())])
            .await
            .map_err(failed)?;
        rows.into_iter().map(|row| row.into_domain()).collect()
    }

    async fn count_prunable(&self, finished_before: OffsetDateTime) -> StoreResult<PruneCount> {
        let counts = self
            .engine
            .fetch_counts(
                &COUNT_PRUNABLE,
                &[Param::Int(micros_before(finished_before))],
            )
            .await
            .map_err(failed)?;
        prune_count(counts.handoffs, counts.events)
    }

    async fn prune_batch(
        &self,
        finished_before: OffsetDateTime,
        limit: usize,
    ) -> StoreResult<PruneCount> {
        let params = vec![
            Param::Int(micros_before(finished_before)),
            Param::Int(i64::try_from(limit).unwrap_or(i64::MAX)),
        ];
        if self.engine.writes_events_in_one_statement() {
            // PostgreSQL: one statement (see `PRUNE_BATCH`).
            let counts = self
                .engine
                .fetch_counts(&PRUNE_BATCH, &params)
                .await
                .map_err(failed)?;
            return prune_count(counts.handoffs, counts.events);
        }
        // SQLite: the events, then their handoffs, in one write transaction.
        let batch = [
            Statement {
                sql: &PRUNE_EVENTS,
                params: params.clone(),
            },
            Statement {
                sql: &PRUNE_HANDOFFS,
                params,
            },
        ];
        match self.engine.execute_all(&batch).await.map_err(failed)?[..] {
            [events, handoffs] => Ok(PruneCount { handoffs, events }),
            ref other => Err(StoreError::damaged(format!(
                "a prune batch of two statements reported {} counts",
                other.len()
            ))),
        }
    }
}

/// A prune's counts as the engine returned them.
fn prune_count(handoffs: i64, events: i64) -> StoreResult<PruneCount> {
    let count = |n: i64| {
        u64::try_from(n).map_err(|_| StoreError::damaged(format!("a prune counted {n} rows")))
    };
    Ok(PruneCount {
        handoffs: count(handoffs)?,
        events: count(events)?,
    })
}

impl<E: SqlEngine> SqlStore<E> {
    /// Replaces the stored handoff with `handoff`, every column but the
    /// id, if and only if its stored version is `expected`: one `UPDATE
    /// ... WHERE id AND version`.
    async fn swap(
        &self,
        expected: u64,
        handoff: &InteractiveHandoff,
        change: &HandoffChange,
        actor: &Actor,
    ) -> StoreResult<SwapOutcome> {
        let expected = to_stored_version(expected)?;
        let row = HandoffRow::from_domain(handoff, expected.saturating_add(1))?;
        let swapped = self
            .write_with_event(
                (&SWAP_HANDOFF, &SWAP_HANDOFF_WITH_EVENT),
                &row.swap_values(expected),
                handoff,
                change,
                actor,
            )
            .await
            .map_err(failed)?;
        Ok(if swapped {
            SwapOutcome::Swapped
        } else {
            SwapOutcome::Lost
        })
    }

    /// Runs `statements.0` (a write of `handoff`'s row, with `params`) and
    /// appends `change`'s event by `actor` in the same atomic write: one
    /// statement (`statements.1`, the same write with its event) where the
    /// engine allows, else a transaction of the write and
    /// [`INSERT_EVENT`]. `Ok(true)` if and only if the write changed its
    /// row; `Ok(false)` when its condition held no row (nothing written).
    async fn write_with_event(
        &self,
        statements: (&'static str, &'static str),
        params: &[Param<'_>],
        handoff: &InteractiveHandoff,
        change: &HandoffChange,
        actor: &Actor,
    ) -> Result<bool, EngineError> {
        let event = event_values(change, actor);
        if self.engine.writes_events_in_one_statement() {
            let all: Vec<Param<'_>> = params.iter().copied().chain(event).collect();
            return Ok(self.engine.execute(statements.1, &all).await? == 1);
        }
        let mut event_params = vec![Param::Text(handoff.id.as_str())];
        event_params.extend(event);
        let batch = [
            Statement {
                sql: statements.0,
                params: params.to_vec(),
            },
            Statement {
                sql: &INSERT_EVENT,
                params: event_params,
            },
        ];
        match self.engine.execute_batch(&batch).await? {
            None => Ok(true),
            Some(0) => Ok(false),
            Some(_) => Err(EngineError::Failed(StoreError::damaged(format!(
                "the event of handoff {} could not be appended beside its change; nothing was                  written",
                handoff.id
            )))),
        }
    }
}
