//! [`HandoffRepository`] for [`SqlStore`]: each method one statement (a
//! transition: a read, then one compare-and-swap of the whole record), a
//! write with its history event as the dialect writes it
//! ([`Dialect::write_with_event`]).
//!
//! An insert the engine refuses is told apart by the unique index that
//! refused it, as the dialect found it: the active slot's (I6) is
//! [`InsertOutcome::ParentBusy`], the one over parent and step (C12)
//! [`InsertOutcome::StepTaken`].

use async_trait::async_trait;
use lf_handoff_application::ports::{
    recorded_change, Decided, Decision, HandoffRepository, InsertOutcome, ListQuery, PruneCount,
    SwapOutcome, TransitionOutcome, Versioned,
};
use lf_handoff_application::StoreResult;
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    Actor, HandoffChange, HandoffEvent, InteractiveHandoff, Transition,
};
use lf_handoff_domain::timestamp::{micros_before, to_unix_micros};
use time::OffsetDateTime;

use crate::sql::columns::{HandoffRow, COLUMN_COUNT};
use crate::sql::driver::Param;
use crate::sql::engine::EngineError;
use crate::sql::events::event_values;
use crate::sql::list::{due_handoffs, list_statement};
use crate::sql::schema::{ONE_ACTIVE_PER_PARENT, ONE_PER_PARENT_STEP};
use crate::sql::statements::{COUNT_PRUNABLE, HANDOFF_BY_ID, HISTORY};
use crate::sql::{
    failed, to_stored_version, versioned_handoff, Dialect, HandoffWrite, SqlStore, WriteKind,
};

/// An insert binds every column, then the parent's id and version.
const INSERT_PARAMS: usize = COLUMN_COUNT + 2;

#[async_trait]
impl<D: Dialect> HandoffRepository for SqlStore<D> {
    async fn load(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<Option<Versioned<InteractiveHandoff>>> {
        if let Some(row) = self.engine.dialect.handoff_at_once(id.as_str()) {
            return row.map(versioned_handoff).transpose();
        }
        let rows = self
            .engine
            .fetch_handoffs(&HANDOFF_BY_ID, &[Param::Text(id.as_str())])
            .await
            .map_err(failed)?;
        rows.into_iter().next().map(versioned_handoff).transpose()
    }

    async fn list(&self, query: &ListQuery) -> StoreResult<Vec<InteractiveHandoff>> {
        let home = query.home.as_ref().map(ToString::to_string);
        let Some(statement) = list_statement::<D>(query, home.as_deref()) else {
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
        let written = D::write_with_event(
            &self.engine,
            HandoffWrite {
                kind: WriteKind::Insert,
                handoff,
                params: &params,
                event: event_values(&change, actor, row.answer.as_deref()),
            },
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
                &due_handoffs::<D>(),
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
        counts.prune_count()
    }

    async fn prune_batch(
        &self,
        finished_before: OffsetDateTime,
        limit: usize,
    ) -> StoreResult<PruneCount> {
        D::prune_batch(
            &self.engine,
            micros_before(finished_before),
            i64::try_from(limit).unwrap_or(i64::MAX),
        )
        .await
        .map_err(failed)
    }
}

impl<D: Dialect> SqlStore<D> {
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
        let swapped = D::write_with_event(
            &self.engine,
            HandoffWrite {
                kind: WriteKind::Swap,
                handoff,
                params: &row.swap_values(expected),
                event: event_values(change, actor, row.answer.as_deref()),
            },
        )
        .await
        .map_err(failed)?;
        Ok(if swapped {
            SwapOutcome::Swapped
        } else {
            SwapOutcome::Lost
        })
    }
}
