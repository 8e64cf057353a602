//! The repository shared by the SQL backends (SQLite and PostgreSQL).
//!
//! [`SqlStore`] implements both storage ports once, over a small
//! [`SqlEngine`] trait that each backend implements for its own pool: run a
//! query and decode rows, execute a statement, execute a batch in one
//! transaction. The engine maps its driver's errors in one place
//! ([`EngineError`]); nothing about sqlx leaks past this module.
//!
//! **Races are settled by the engine.** A transition is one `UPDATE ...
//! WHERE id = $1 AND version = $2`; opening is one `INSERT ... SELECT ...
//! WHERE EXISTS (parent at version)`, and the partial unique index
//! `handoffs_one_active_per_parent` refuses a second active handoff for a
//! parent even from another process. Each is a single atomic statement, so
//! there is no read-then-write gap to lose.

pub(crate) mod connections;
mod row;
pub(crate) mod schema;
mod statements;

use std::fmt::Debug;
use std::future::Future;
use std::ops::DerefMut;

use async_trait::async_trait;
use lf_handoff_application::ports::{
    Decision, HandoffRepository, InsertOutcome, ListQuery, ParentInsert, ParentRegistry,
    ParentWithActive, SwapOutcome, TransitionOutcome, Versioned,
};
use lf_handoff_application::{StoreError, StoreResult};
use lf_handoff_domain::id::{InteractiveHandoffId, TaskPrId};
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffParent, Transition,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::task::TaskPr;

pub(crate) use row::HandoffRow;
use row::{micros, to_json};
use statements::*;

/// A bind parameter.
#[derive(Debug, Clone)]
pub(crate) enum Param<'a> {
    Text(&'a str),
    OptText(Option<&'a str>),
    Int(i64),
    OptInt(Option<i64>),
}

/// A `(version, record)` pair read from `parents` or `task_prs`.
#[derive(Debug, Clone)]
pub(crate) struct RecordRow {
    pub version: i64,
    pub record: String,
}

/// What an engine reports besides success.
#[derive(Debug)]
pub(crate) enum EngineError {
    /// A unique constraint refused the write; the text names the constraint
    /// or the columns.
    Unique(String),
    /// Anything else, already mapped to an actionable `StoreError`.
    Failed(StoreError),
}

impl From<StoreError> for EngineError {
    fn from(error: StoreError) -> Self {
        Self::Failed(error)
    }
}

/// One statement of a batch, with the rows it must affect.
pub(crate) struct Statement<'a> {
    pub sql: &'static str,
    pub params: Vec<Param<'a>>,
}

/// What a SQL backend provides to [`SqlStore`].
#[async_trait]
pub(crate) trait SqlEngine: Debug + Send + Sync + 'static {
    /// Runs a query returning handoff rows (in `handoff_columns!` order).
    async fn fetch_handoffs(
        &self,
        sql: &'static str,
        params: &[Param<'_>],
    ) -> Result<Vec<HandoffRow>, EngineError>;

    /// Runs a query returning `(version, record)` rows, each followed by
    /// the columns of a handoff or by as many NULLs; `None` for no row.
    /// More than one row is `Unavailable`.
    async fn fetch_record_with_handoff(
        &self,
        sql: &'static str,
        params: &[Param<'_>],
    ) -> Result<Option<(RecordRow, Option<HandoffRow>)>, EngineError>;

    /// Runs a query returning `(version, record)` rows.
    async fn fetch_records(
        &self,
        sql: &'static str,
        params: &[Param<'_>],
    ) -> Result<Vec<RecordRow>, EngineError>;

    /// Executes one statement, returning the rows it affected.
    async fn execute(&self, sql: &'static str, params: &[Param<'_>]) -> Result<u64, EngineError>;

    /// Executes `statements` in one write transaction. Each must affect
    /// exactly one row; if one does not, the transaction is rolled back and
    /// its index is returned.
    async fn execute_batch(
        &self,
        statements: &[Statement<'_>],
    ) -> Result<Option<usize>, EngineError>;
}

/// Where an engine's statements get their connection (see
/// [`connections`]). [`sql_engine!`] takes every connection from its
/// engine's `pool` field through this.
pub(crate) trait ConnectionSource<DB: sqlx::Database>: Send + Sync {
    /// A lent connection, given back when dropped.
    type Lease<'a>: DerefMut<Target = DB::Connection> + LeaseHealth + Send
    where
        Self: 'a;

    /// Waits for a connection.
    fn lend(&self) -> impl Future<Output = Result<Self::Lease<'_>, sqlx::Error>> + Send;
}

/// Told when a statement failed on a lent connection, so its source can
/// stop reusing a broken one.
pub(crate) trait LeaseHealth {
    /// A statement on this connection failed with `error`.
    fn failed(&mut self, error: &sqlx::Error);
}

/// Both storage ports over any [`SqlEngine`].
#[derive(Debug)]
pub(crate) struct SqlStore<E> {
    engine: E,
}

impl<E: SqlEngine> SqlStore<E> {
    pub(crate) fn new(engine: E) -> Self {
        Self { engine }
    }

    async fn fetch_one(
        &self,
        sql: &'static str,
        params: &[Param<'_>],
    ) -> StoreResult<Option<Versioned<InteractiveHandoff>>> {
        let rows = self
            .engine
            .fetch_handoffs(sql, params)
            .await
            .map_err(failed)?;
        rows.into_iter().next().map(versioned_handoff).transpose()
    }
}

fn failed(error: EngineError) -> StoreError {
    match error {
        EngineError::Failed(error) => error,
        EngineError::Unique(detail) => {
            StoreError::unavailable(format!("unexpected unique constraint violation: {detail}"))
        }
    }
}

/// The handoff a row holds, with its version, checked as `into_domain` does.
fn versioned_handoff(row: HandoffRow) -> StoreResult<Versioned<InteractiveHandoff>> {
    let version = to_version(row.version)?;
    Ok(Versioned {
        value: row.into_domain()?,
        version,
    })
}

/// The parent a `(version, record)` row of `parents` holds, which must be
/// `reference`'s.
fn parent_from_row(
    reference: &InteractiveHandoffParent,
    row: RecordRow,
) -> StoreResult<Versioned<Parent>> {
    let parent: Parent = serde_json::from_str(&row.record).map_err(|e| {
        StoreError::unavailable(format!(
            "stored parent {reference} is unreadable ({e}); the store may be damaged"
        ))
    })?;
    if parent.reference() != *reference {
        return Err(StoreError::unavailable(format!(
            "stored parent {reference} holds {}; the store may be damaged",
            parent.reference()
        )));
    }
    Ok(Versioned {
        value: parent,
        version: to_version(row.version)?,
    })
}

fn to_version(version: i64) -> StoreResult<u64> {
    u64::try_from(version)
        .map_err(|_| StoreError::unavailable(format!("stored version {version} is negative")))
}

fn to_stored_version(version: u64) -> StoreResult<i64> {
    i64::try_from(version)
        .map_err(|_| StoreError::unavailable(format!("version {version} does not fit storage")))
}

#[async_trait]
impl<E: SqlEngine> HandoffRepository for SqlStore<E> {
    async fn load(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<Option<Versioned<InteractiveHandoff>>> {
        self.fetch_one(HANDOFF_BY_ID, &[Param::Text(id.as_str())])
            .await
    }

    async fn list(&self, query: &ListQuery) -> StoreResult<Vec<InteractiveHandoff>> {
        let rows = match (&query.parent, query.active_only) {
            (None, false) => self.engine.fetch_handoffs(LIST_ALL, &[]).await,
            (None, true) => self.engine.fetch_handoffs(LIST_ACTIVE, &[]).await,
            (Some(parent), false) => {
                self.engine
                    .fetch_handoffs(LIST_PARENT, &[Param::Text(parent.id_str())])
                    .await
            }
            (Some(parent), true) => {
                self.engine
                    .fetch_handoffs(LIST_PARENT_ACTIVE, &[Param::Text(parent.id_str())])
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
    ) -> StoreResult<InsertOutcome> {
        let row = HandoffRow::from_domain(handoff, 1)?;
        let parent_version = to_stored_version(parent_version)?;
        let params = [
            Param::Text(&row.id),
            Param::Text(&row.parent_kind),
            Param::Text(&row.parent_id),
            Param::Text(&row.wave_id),
            Param::Text(&row.home),
            Param::Text(&row.cwd),
            Param::Text(&row.provider),
            Param::OptText(row.provider_session_id.as_deref()),
            Param::Int(row.body_generation),
            Param::Text(&row.reason),
            Param::Text(&row.environment),
            Param::Text(&row.attach_argv),
            Param::Text(&row.status),
            Param::OptText(row.outcome_text.as_deref()),
            Param::Int(row.created_at),
            Param::Int(row.updated_at),
            Param::OptInt(row.attached_at),
            Param::OptInt(row.terminal_at),
            Param::OptInt(row.wake_claimed_at),
            Param::OptInt(row.wake_claimed_by_generation),
            Param::Int(parent_version),
        ];
        match self.engine.execute(INSERT_HANDOFF, &params).await {
            Ok(1) => Ok(InsertOutcome::Inserted),
            Ok(_) => Ok(InsertOutcome::ParentChanged),
            Err(EngineError::Unique(detail))
                if detail.contains("parent_id") || detail.contains("one_active_per_parent") =>
            {
                Ok(InsertOutcome::ParentBusy)
            }
            Err(error) => Err(failed(error)),
        }
    }

    async fn transition(
        &self,
        id: &InteractiveHandoffId,
        decide: Decision,
    ) -> StoreResult<Option<TransitionOutcome>> {
        let Some(current) = self.load(id).await? else {
            return Ok(None);
        };
        match decide(&current.value)? {
            Transition::Unchanged(handoff) => {
                Ok(Some(TransitionOutcome::Applied(Box::new(handoff))))
            }
            Transition::Changed(handoff) => {
                Ok(Some(match self.swap(current.version, &handoff).await? {
                    SwapOutcome::Swapped => TransitionOutcome::Applied(Box::new(handoff)),
                    SwapOutcome::Lost => TransitionOutcome::Lost,
                }))
            }
        }
    }
}

impl<E: SqlEngine> SqlStore<E> {
    /// Replaces the stored handoff with `handoff` if and only if its stored
    /// version is `expected`: one `UPDATE ... WHERE id AND version`.
    async fn swap(&self, expected: u64, handoff: &InteractiveHandoff) -> StoreResult<SwapOutcome> {
        let expected_stored = to_stored_version(expected)?;
        let params = [
            Param::Text(handoff.id.as_str()),
            Param::Int(expected_stored),
            Param::Text(handoff.status.as_str()),
            Param::OptText(handoff.outcome.as_ref().map(|o| o.text())),
            Param::Int(lf_handoff_domain::timestamp::to_unix_micros(
                handoff.updated_at,
            )),
            Param::OptInt(micros(handoff.attached_at)),
            Param::OptInt(micros(handoff.terminal_at)),
            Param::OptInt(micros(handoff.wake_claimed_at)),
            Param::OptInt(handoff.wake_claimed_by_generation.map(i64::from)),
        ];
        match self
            .engine
            .execute(SWAP_HANDOFF, &params)
            .await
            .map_err(failed)?
        {
            0 => Ok(SwapOutcome::Lost),
            _ => Ok(SwapOutcome::Swapped),
        }
    }
}

#[async_trait]
impl<E: SqlEngine> ParentRegistry for SqlStore<E> {
    async fn insert_parent<'a>(
        &self,
        parent: &Parent,
        first_pr: Option<&'a TaskPr>,
    ) -> StoreResult<ParentInsert> {
        let reference = parent.reference();
        let record = to_json(parent)?;
        let pr = first_pr
            .map(|pr| Ok::<_, StoreError>((pr, to_json(pr)?)))
            .transpose()?;
        let mut statements = vec![Statement {
            sql: INSERT_PARENT,
            params: vec![
                Param::Text(reference.id_str()),
                Param::Text(reference.kind()),
                Param::Text(parent.wave_id().as_str()),
                Param::Text(&record),
            ],
        }];
        if let Some((pr, pr_record)) = &pr {
            statements.push(Statement {
                sql: INSERT_TASK_PR,
                params: vec![
                    Param::Text(pr.id.as_str()),
                    Param::Text(pr.task_session_id.as_str()),
                    Param::Text(pr_record),
                ],
            });
        }
        match self
            .engine
            .execute_batch(&statements)
            .await
            .map_err(failed)?
        {
            None => Ok(ParentInsert::Inserted),
            Some(0) => Ok(ParentInsert::AlreadyExists),
            Some(_) => Err(StoreError::Conflict(format!(
                "task PR {} already exists",
                first_pr.map(|pr| pr.id.to_string()).unwrap_or_default()
            ))),
        }
    }

    async fn load_parent(
        &self,
        reference: &InteractiveHandoffParent,
    ) -> StoreResult<Option<Versioned<Parent>>> {
        let rows = self
            .engine
            .fetch_records(PARENT_BY_ID, &[Param::Text(reference.id_str())])
            .await
            .map_err(failed)?;
        rows.into_iter()
            .next()
            .map(|row| parent_from_row(reference, row))
            .transpose()
    }

    async fn load_parent_with_active(
        &self,
        reference: &InteractiveHandoffParent,
    ) -> StoreResult<Option<ParentWithActive>> {
        let Some((parent, active)) = self
            .engine
            .fetch_record_with_handoff(PARENT_WITH_ACTIVE, &[Param::Text(reference.id_str())])
            .await
            .map_err(failed)?
        else {
            return Ok(None);
        };
        Ok(Some(ParentWithActive {
            parent: parent_from_row(reference, parent)?,
            active: active.map(versioned_handoff).transpose()?,
        }))
    }

    async fn swap_parent(&self, expected: u64, parent: &Parent) -> StoreResult<SwapOutcome> {
        let record = to_json(parent)?;
        let reference = parent.reference();
        let params = [
            Param::Text(reference.id_str()),
            Param::Int(to_stored_version(expected)?),
            Param::Text(&record),
        ];
        match self
            .engine
            .execute(SWAP_PARENT, &params)
            .await
            .map_err(failed)?
        {
            0 => Ok(SwapOutcome::Lost),
            _ => Ok(SwapOutcome::Swapped),
        }
    }

    async fn load_task_pr(&self, id: &TaskPrId) -> StoreResult<Option<TaskPr>> {
        let rows = self
            .engine
            .fetch_records(TASK_PR_BY_ID, &[Param::Text(id.as_str())])
            .await
            .map_err(failed)?;
        rows.into_iter()
            .next()
            .map(|row| {
                serde_json::from_str(&row.record).map_err(|e| {
                    StoreError::unavailable(format!(
                        "stored task PR {id} is unreadable ({e}); the store may be damaged"
                    ))
                })
            })
            .transpose()
    }
}

/// Implements [`SqlEngine`] for a backend struct with a `pool` field (a
/// [`ConnectionSource`] of the given sqlx database) and a
/// `map_error(&self, sqlx::Error) -> EngineError` method. `$begin` is the
/// statement that opens a write transaction.
macro_rules! sql_engine {
    ($engine:ty, $db:ty, $begin:expr) => {
        impl $engine {
            fn bind<'q>(
                mut query: sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments<'q>>,
                params: &'q [$crate::sql::Param<'q>],
            ) -> sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments<'q>> {
                for param in params {
                    query = match param {
                        $crate::sql::Param::Text(value) => query.bind(*value),
                        $crate::sql::Param::OptText(value) => query.bind(*value),
                        $crate::sql::Param::Int(value) => query.bind(*value),
                        $crate::sql::Param::OptInt(value) => query.bind(*value),
                    };
                }
                query
            }

            /// Lends a connection from the engine's source.
            async fn lend(
                &self,
            ) -> Result<
                impl std::ops::DerefMut<Target = <$db as sqlx::Database>::Connection>
                    + $crate::sql::LeaseHealth
                    + Send
                    + '_,
                $crate::sql::EngineError,
            > {
                $crate::sql::ConnectionSource::<$db>::lend(&self.pool)
                    .await
                    .map_err(|e| self.map_error(e))
            }

            /// Runs a query on a lent connection and returns its rows; the
            /// connection goes back before the rows are decoded.
            async fn fetch_rows(
                &self,
                sql: &'static str,
                params: &[$crate::sql::Param<'_>],
            ) -> Result<Vec<<$db as sqlx::Database>::Row>, $crate::sql::EngineError> {
                let mut conn = self.lend().await?;
                match Self::bind(sqlx::query(sql), params)
                    .fetch_all(&mut *conn)
                    .await
                {
                    Ok(rows) => Ok(rows),
                    Err(e) => Err(self.statement_failed(&mut conn, e)),
                }
            }

            /// Decodes the handoff columns (in `handoff_columns!` order)
            /// that start at column `at`.
            fn decode_handoff(
                row: &<$db as sqlx::Database>::Row,
                at: usize,
            ) -> Result<$crate::sql::HandoffRow, sqlx::Error> {
                use sqlx::Row as _;
                Ok($crate::sql::HandoffRow {
                    id: row.try_get(at)?,
                    version: row.try_get(at + 1)?,
                    parent_kind: row.try_get(at + 2)?,
                    parent_id: row.try_get(at + 3)?,
                    wave_id: row.try_get(at + 4)?,
                    home: row.try_get(at + 5)?,
                    cwd: row.try_get(at + 6)?,
                    provider: row.try_get(at + 7)?,
                    provider_session_id: row.try_get(at + 8)?,
                    body_generation: row.try_get(at + 9)?,
                    reason: row.try_get(at + 10)?,
                    environment: row.try_get(at + 11)?,
                    attach_argv: row.try_get(at + 12)?,
                    status: row.try_get(at + 13)?,
                    outcome_text: row.try_get(at + 14)?,
                    created_at: row.try_get(at + 15)?,
                    updated_at: row.try_get(at + 16)?,
                    attached_at: row.try_get(at + 17)?,
                    terminal_at: row.try_get(at + 18)?,
                    wake_claimed_at: row.try_get(at + 19)?,
                    wake_claimed_by_generation: row.try_get(at + 20)?,
                })
            }

            /// Decodes a `(version, record)` pair from columns 0 and 1.
            fn decode_record(
                row: &<$db as sqlx::Database>::Row,
            ) -> Result<$crate::sql::RecordRow, sqlx::Error> {
                use sqlx::Row as _;
                Ok($crate::sql::RecordRow {
                    version: row.try_get(0)?,
                    record: row.try_get(1)?,
                })
            }

            /// Maps a statement's error, telling the connection's source.
            fn statement_failed(
                &self,
                conn: &mut impl $crate::sql::LeaseHealth,
                error: sqlx::Error,
            ) -> $crate::sql::EngineError {
                conn.failed(&error);
                self.map_error(error)
            }
        }

        #[async_trait::async_trait]
        impl $crate::sql::SqlEngine for $engine {
            async fn fetch_handoffs(
                &self,
                sql: &'static str,
                params: &[$crate::sql::Param<'_>],
            ) -> Result<Vec<$crate::sql::HandoffRow>, $crate::sql::EngineError> {
                let rows = self.fetch_rows(sql, params).await?;
                rows.iter()
                    .map(|row| Self::decode_handoff(row, 0).map_err(|e| self.map_error(e)))
                    .collect()
            }

            async fn fetch_record_with_handoff(
                &self,
                sql: &'static str,
                params: &[$crate::sql::Param<'_>],
            ) -> Result<
                Option<($crate::sql::RecordRow, Option<$crate::sql::HandoffRow>)>,
                $crate::sql::EngineError,
            > {
                use sqlx::Row as _;
                let rows = self.fetch_rows(sql, params).await?;
                let row = match rows.as_slice() {
                    [] => return Ok(None),
                    [row] => row,
                    [..] => {
                        return Err($crate::sql::EngineError::Failed(
                            lf_handoff_application::StoreError::unavailable(format!(
                                "a parent has {} active handoffs, where the store allows one; \
                                 the store may be damaged",
                                rows.len()
                            )),
                        ))
                    }
                };
                let decode = || -> Result<_, sqlx::Error> {
                    let record = Self::decode_record(row)?;
                    let handoff_id: Option<String> = row.try_get(2)?;
                    let handoff = match handoff_id {
                        None => None,
                        Some(_) => Some(Self::decode_handoff(row, 2)?),
                    };
                    Ok(Some((record, handoff)))
                };
                decode().map_err(|e| self.map_error(e))
            }

            async fn fetch_records(
                &self,
                sql: &'static str,
                params: &[$crate::sql::Param<'_>],
            ) -> Result<Vec<$crate::sql::RecordRow>, $crate::sql::EngineError> {
                let rows = self.fetch_rows(sql, params).await?;
                rows.iter()
                    .map(|row| Self::decode_record(row).map_err(|e| self.map_error(e)))
                    .collect()
            }

            async fn execute(
                &self,
                sql: &'static str,
                params: &[$crate::sql::Param<'_>],
            ) -> Result<u64, $crate::sql::EngineError> {
                let mut conn = self.lend().await?;
                match Self::bind(sqlx::query(sql), params)
                    .execute(&mut *conn)
                    .await
                {
                    Ok(done) => Ok(done.rows_affected()),
                    Err(e) => Err(self.statement_failed(&mut conn, e)),
                }
            }

            async fn execute_batch(
                &self,
                statements: &[$crate::sql::Statement<'_>],
            ) -> Result<Option<usize>, $crate::sql::EngineError> {
                let mut conn = self.lend().await?;
                let result = async {
                    let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await?;
                    for (index, statement) in statements.iter().enumerate() {
                        let affected = Self::bind(sqlx::query(statement.sql), &statement.params)
                            .execute(&mut *tx)
                            .await?
                            .rows_affected();
                        if affected != 1 {
                            tx.rollback().await?;
                            return Ok(Some(index));
                        }
                    }
                    tx.commit().await?;
                    Ok(None)
                }
                .await;
                result.map_err(|e| self.statement_failed(&mut conn, e))
            }
        }
    };
}
pub(crate) use sql_engine;
