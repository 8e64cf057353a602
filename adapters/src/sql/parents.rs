//! [`ParentRegistry`] for [`SqlStore`]: parents and task PRs as JSON
//! records beside the columns used to find them, each write one statement
//! (a parent with its first PR: one transaction).

use async_trait::async_trait;
use lf_handoff_application::ports::{
    ParentInsert, ParentQuery, ParentRegistry, ParentWithActive, SwapOutcome, Versioned,
};
use lf_handoff_application::{ConflictKind, StoreError, StoreResult};
use lf_handoff_domain::id::TaskPrId;
use lf_handoff_domain::interactive_handoff::{InteractiveHandoffParent, StepKey};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::task::TaskPr;

use crate::sql::driver::Param;
use crate::sql::engine::{RecordRow, Statement};
use crate::sql::row::to_json;
use crate::sql::statements::{
    INSERT_PARENT, INSERT_TASK_PR, PARENT_BY_ID, PARENT_WITH_ACTIVE, SWAP_PARENT, TASK_PR_BY_ID,
};
use crate::sql::{failed, to_stored_version, to_version, versioned_handoff, Dialect, SqlStore};

/// The most parents one statement of a list reads: a list with a project
/// reads batches of this many until its page is full.
const SCAN_BATCH: usize = 256;

/// The parent a stored record holds; `what` names it for the message.
fn decode_parent(what: &dyn std::fmt::Display, record: &str) -> StoreResult<Parent> {
    serde_json::from_str(record).map_err(|e| {
        StoreError::damaged(format!(
            "stored parent {what} is unreadable ({e}); the store may be damaged"
        ))
    })
}

/// The parent a `(version, record)` row of `parents` holds, which must be
/// `reference`'s.
fn parent_from_row(
    reference: &InteractiveHandoffParent,
    row: RecordRow,
) -> StoreResult<Versioned<Parent>> {
    let parent = decode_parent(reference, &row.record)?;
    if parent.reference() != *reference {
        return Err(StoreError::damaged(format!(
            "stored parent {reference} holds {}; the store may be damaged",
            parent.reference()
        )));
    }
    Ok(Versioned {
        value: parent,
        version: to_version(row.version)?,
    })
}

#[async_trait]
impl<D: Dialect> ParentRegistry for SqlStore<D> {
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
            Some(_) => Err(StoreError::conflict(
                ConflictKind::AlreadyExists,
                format!(
                    "task PR {} already exists",
                    first_pr.map(|pr| pr.id.to_string()).unwrap_or_default()
                ),
            )),
        }
    }

    async fn load_parent(
        &self,
        reference: &InteractiveHandoffParent,
    ) -> StoreResult<Option<Versioned<Parent>>> {
        self.record_by_id(PARENT_BY_ID, reference.id_str())
            .await?
            .map(|row| parent_from_row(reference, row))
            .transpose()
    }

    async fn load_parent_with_active<'a>(
        &self,
        reference: &InteractiveHandoffParent,
        step: Option<&'a StepKey>,
    ) -> StoreResult<Option<ParentWithActive>> {
        let params = [
            Param::Text(reference.id_str()),
            Param::OptText(step.map(StepKey::as_str)),
        ];
        let Some(snapshot) = self
            .engine
            .fetch_parent_snapshot(&PARENT_WITH_ACTIVE, &params)
            .await
            .map_err(failed)?
        else {
            return Ok(None);
        };
        Ok(Some(ParentWithActive {
            parent: parent_from_row(reference, snapshot.parent)?,
            active: snapshot.active.map(versioned_handoff).transpose()?,
            at_step: snapshot.at_step.map(versioned_handoff).transpose()?,
        }))
    }

    async fn list_parents(&self, query: &ParentQuery) -> StoreResult<Vec<Parent>> {
        let limit = query.limit.unwrap_or(usize::MAX);
        let mut parents = Vec::new();
        let mut after = query.after.as_ref().map(|after| after.id_str().to_string());
        while parents.len() < limit {
            // The engine checks all but the project, so without one a batch
            // need hold no more than the page still wants.
            let batch = match query.project {
                Some(_) => SCAN_BATCH,
                None => SCAN_BATCH.min(limit - parents.len()),
            };
            let (sql, params) = list_parents_statement::<D>(query, after.as_deref(), batch);
            let rows = self
                .engine
                .fetch_records(&sql, &params)
                .await
                .map_err(failed)?;
            let read = rows.len();
            for row in rows {
                let parent = decode_parent(&"in a list", &row.record)?;
                after = Some(parent.reference().id_str().to_string());
                if query.matches(&parent) && parents.len() < limit {
                    parents.push(parent);
                }
            }
            if read < batch {
                break;
            }
        }
        Ok(parents)
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
        self.record_by_id(TASK_PR_BY_ID, id.as_str())
            .await?
            .map(|row| {
                serde_json::from_str(&row.record).map_err(|e| {
                    StoreError::damaged(format!(
                        "stored task PR {id} is unreadable ({e}); the store may be damaged"
                    ))
                })
            })
            .transpose()
    }
}

impl<D: Dialect> SqlStore<D> {
    /// The `(version, record)` row `sql` reads for the id `id` (its `$1`),
    /// if any.
    async fn record_by_id(&self, sql: &'static str, id: &str) -> StoreResult<Option<RecordRow>> {
        let rows = self
            .engine
            .fetch_records(sql, &[Param::Text(id)])
            .await
            .map_err(failed)?;
        Ok(rows.into_iter().next())
    }
}

/// The statement of a batch of [`ParentQuery`]'s scan: at most `batch`
/// parents of `query`'s kind and wave (the stored columns), after `after`
/// in id order, byte by byte on every engine (the dialect's
/// [`text_order`](crate::sql::archive::ArchiveDialect::text_order)), as
/// `(version, record)` rows. The project is not a column: the caller
/// checks it on the records. No index serves the kind or the wave; the
/// primary key orders the scan where the engine's order is byte order.
fn list_parents_statement<'a, D: Dialect>(
    query: &'a ParentQuery,
    after: Option<&'a str>,
    batch: usize,
) -> (String, Vec<Param<'a>>) {
    let order = D::ARCHIVE.text_order;
    let mut params = Vec::new();
    let mut conditions = Vec::new();
    if let Some(kind) = query.kind {
        params.push(Param::Text(kind.as_str()));
        conditions.push(format!("kind = ${}", params.len()));
    }
    if let Some(wave) = &query.wave {
        params.push(Param::Text(wave.as_str()));
        conditions.push(format!("wave_id = ${}", params.len()));
    }
    if let Some(after) = after {
        params.push(Param::Text(after));
        conditions.push(format!("id{order} > ${}", params.len()));
    }
    params.push(Param::Int(i64::try_from(batch).unwrap_or(i64::MAX)));
    let filter = match conditions.is_empty() {
        true => String::new(),
        false => format!("WHERE {} ", conditions.join(" AND ")),
    };
    let sql = format!(
        "SELECT version, record FROM parents {filter}ORDER BY id{order} LIMIT ${}",
        params.len()
    );
    (sql, params)
}
