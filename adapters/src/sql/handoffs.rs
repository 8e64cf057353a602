//! [`HandoffRepository`] for [`SqlStore`]: each method one statement (a
//! transition: a read, then one compare-and-swap of the whole record).
//!
//! An insert the engine refuses is told apart by the unique index that
//! refused it, as the dialect recognised it (PostgreSQL names the index,
//! SQLite its columns): the active slot's (I6) is
//! [`InsertOutcome::ParentBusy`], the one over parent and step (C12)
//! [`InsertOutcome::StepTaken`].

use async_trait::async_trait;
use lf_handoff_application::ports::{
    Decided, Decision, HandoffRepository, InsertOutcome, ListQuery, SwapOutcome, TransitionOutcome,
    Versioned,
};
use lf_handoff_application::StoreResult;
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{Actor, InteractiveHandoff, Transition};

use crate::sql::columns::{HandoffRow, COLUMN_COUNT};
use crate::sql::engine::{EngineError, Param, SqlEngine};
use crate::sql::schema::{ONE_ACTIVE_PER_PARENT, ONE_PER_PARENT_STEP};
use crate::sql::statements::{
    HANDOFF_BY_ID, INSERT_HANDOFF, LIST_ACTIVE, LIST_ALL, LIST_PARENT, LIST_PARENT_ACTIVE,
    SWAP_HANDOFF,
};
use crate::sql::{failed, to_stored_version, versioned_handoff, SqlStore};

/// An insert binds every column, then the parent's id and version.
const INSERT_PARAMS: usize = COLUMN_COUNT + 2;

#[async_trait]
impl<E: SqlEngine> HandoffRepository for SqlStore<E> {
    async fn due(
        &self,
        _now: time::OffsetDateTime,
        _limit: usize,
    ) -> StoreResult<Vec<InteractiveHandoffId>> {
        Err(lf_handoff_application::StoreError::unavailable(
            lf_handoff_application::UnavailableKind::Other,
            "WIP: deadlines are not stored yet",
        ))
    }

    async fn history(
        &self,
        _id: &InteractiveHandoffId,
    ) -> StoreResult<Vec<lf_handoff_domain::interactive_handoff::HandoffEvent>> {
        Ok(Vec::new())
    }

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
        let rows = match (&query.parent, query.active_only) {
            (None, false) => self.engine.fetch_handoffs(&LIST_ALL, &[]).await,
            (None, true) => self.engine.fetch_handoffs(&LIST_ACTIVE, &[]).await,
            (Some(parent), false) => {
                self.engine
                    .fetch_handoffs(&LIST_PARENT, &[Param::Text(parent.id_str())])
                    .await
            }
            (Some(parent), true) => {
                self.engine
                    .fetch_handoffs(&LIST_PARENT_ACTIVE, &[Param::Text(parent.id_str())])
                    .await
            }
        }
        .map_err(failed)?;
        rows.into_iter().map(HandoffRow::into_domain).collect()
    }

    async fn insert(
        &self,
        handoff: &InteractiveHandoff,
        parent_version: u64,
        _actor: &Actor,
    ) -> StoreResult<InsertOutcome> {
        let row = HandoffRow::from_domain(handoff, 1)?;
        let mut params = [Param::Int(to_stored_version(parent_version)?); INSERT_PARAMS];
        params[..COLUMN_COUNT].copy_from_slice(&row.values());
        params[COLUMN_COUNT] = Param::Text(handoff.parent.id_str());
        match self.engine.execute(&INSERT_HANDOFF, &params).await {
            Ok(1) => Ok(InsertOutcome::Inserted),
            Ok(_) => Ok(InsertOutcome::ParentChanged),
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
        _actor: &Actor,
    ) -> StoreResult<Option<TransitionOutcome>> {
        let Some(current) = self.load(id).await? else {
            return Ok(None);
        };
        let Decided { transition, answer } = decide(&current.value)?;
        match transition {
            Transition::Unchanged(handoff) => Ok(Some(TransitionOutcome::Applied {
                handoff: Box::new(handoff),
                answer,
            })),
            Transition::Changed(handoff) => {
                Ok(Some(match self.swap(current.version, &handoff).await? {
                    SwapOutcome::Swapped => TransitionOutcome::Applied {
                        handoff: Box::new(handoff),
                        answer,
                    },
                    SwapOutcome::Lost => TransitionOutcome::Lost,
                }))
            }
        }
    }
}

impl<E: SqlEngine> SqlStore<E> {
    /// Replaces the stored handoff with `handoff`, every column but the
    /// id, if and only if its stored version is `expected`: one `UPDATE
    /// ... WHERE id AND version`.
    async fn swap(&self, expected: u64, handoff: &InteractiveHandoff) -> StoreResult<SwapOutcome> {
        let expected = to_stored_version(expected)?;
        let row = HandoffRow::from_domain(handoff, expected.saturating_add(1))?;
        match self
            .engine
            .execute(&SWAP_HANDOFF, &row.swap_values(expected))
            .await
            .map_err(failed)?
        {
            0 => Ok(SwapOutcome::Lost),
            _ => Ok(SwapOutcome::Swapped),
        }
    }
}
