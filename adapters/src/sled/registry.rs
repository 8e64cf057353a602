//! [`ParentRegistry`] on sled: parents and task PRs, each a versioned record.

use std::ops::Bound;

use async_trait::async_trait;
use lf_handoff_application::ports::{
    ParentInsert, ParentQuery, ParentRegistry, ParentWithActive, SwapOutcome, Versioned,
};
use lf_handoff_application::{ConflictKind, StoreError, StoreResult};
use lf_handoff_domain::id::TaskPrId;
use lf_handoff_domain::interactive_handoff::{InteractiveHandoffParent, StepKey};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::task::TaskPr;

use super::error::{abort, failed, Abort};
use super::repository::{active_of, at_step_of};
use super::{keys, record, SledStore};

#[async_trait]
impl ParentRegistry for SledStore {
    async fn insert_parent<'a>(
        &self,
        parent: &Parent,
        first_pr: Option<&'a TaskPr>,
    ) -> StoreResult<ParentInsert> {
        let parent_key = keys::parent(&parent.reference());
        let parent_record = record::encode(1, parent)?;
        let pr = first_pr
            .map(|pr| {
                Ok::<_, StoreError>((
                    pr.id.clone(),
                    keys::task_pr(pr.id.as_str()),
                    record::encode(1, pr)?,
                ))
            })
            .transpose()?;
        self.run(move |shared| {
            let outcome = shared.commit(|tx| {
                if tx.parents.get(&parent_key)?.is_some() {
                    return abort(Abort::Exists);
                }
                if let Some((_, pr_key, _)) = &pr {
                    if tx.task_prs.get(pr_key)?.is_some() {
                        return abort(Abort::PrTaken);
                    }
                }
                tx.parents
                    .insert(parent_key.as_slice(), parent_record.as_slice())?;
                if let Some((_, pr_key, pr_record)) = &pr {
                    tx.task_prs
                        .insert(pr_key.as_slice(), pr_record.as_slice())?;
                }
                Ok(())
            })?;
            match outcome {
                Ok(()) => Ok(ParentInsert::Inserted),
                Err(Abort::PrTaken) => Err(StoreError::conflict(
                    ConflictKind::AlreadyExists,
                    format!(
                        "task PR {} already exists",
                        pr.as_ref()
                            .map(|(id, _, _)| id.to_string())
                            .unwrap_or_default()
                    ),
                )),
                Err(_) => Ok(ParentInsert::AlreadyExists),
            }
        })
        .await
    }

    async fn load_parent(
        &self,
        reference: &InteractiveHandoffParent,
    ) -> StoreResult<Option<Versioned<Parent>>> {
        let reference = reference.clone();
        self.run(move |shared| {
            shared.get(&shared.trees.parents, &keys::parent(&reference), |bytes| {
                record::parent(&reference, &bytes)
            })
        })
        .await
    }

    async fn load_parent_with_active<'a>(
        &self,
        reference: &InteractiveHandoffParent,
        step: Option<&'a StepKey>,
    ) -> StoreResult<Option<ParentWithActive>> {
        let reference = reference.clone();
        let step = step.cloned();
        self.run(move |shared| {
            let stored = shared.trees.parents.get(keys::parent(&reference));
            let Some(bytes) = stored.map_err(|e| shared.engine(e))? else {
                shared.settle_reads()?;
                return Ok(None);
            };
            let parent = record::parent(&reference, &bytes)?;
            let active = active_of(shared, &reference)?;
            let at_step = step
                .map(|step| at_step_of(shared, &reference, &step))
                .transpose()?
                .flatten();
            shared.settle_reads()?;
            Ok(Some(ParentWithActive {
                parent,
                active,
                at_step,
            }))
        })
        .await
    }

    async fn list_parents(&self, query: &ParentQuery) -> StoreResult<Vec<Parent>> {
        let query = query.clone();
        self.run(move |shared| {
            let limit = query.limit.unwrap_or(usize::MAX);
            // A key is the reference, `kind:id`, and the kinds sort as
            // their ids' prefixes do (`project:ps_` < `task:ts_` <
            // `wave:wv_`), so key order is id order. A kind is a prefix.
            let prefix = query
                .kind
                .map(|kind| format!("{kind}:").into_bytes())
                .unwrap_or_default();
            let start = match query.after.as_ref().map(keys::parent) {
                Some(after) if after >= prefix => Bound::Excluded(after),
                _ => Bound::Included(prefix.clone()),
            };
            let mut parents = Vec::new();
            for entry in shared.trees.parents.range((start, Bound::Unbounded)) {
                if parents.len() >= limit {
                    break;
                }
                let (key, bytes) = entry.map_err(|e| shared.engine(e))?;
                if !key.starts_with(&prefix) {
                    break;
                }
                let reference = std::str::from_utf8(&key)
                    .ok()
                    .and_then(|text| InteractiveHandoffParent::parse(text).ok())
                    .ok_or_else(|| {
                        StoreError::damaged(format!(
                            "a stored parent's key {:?} is not a parent reference; the store \
                             may be damaged",
                            String::from_utf8_lossy(&key)
                        ))
                    })?;
                let parent = record::parent(&reference, &bytes)?.value;
                if query.matches(&parent) {
                    parents.push(parent);
                }
            }
            shared.settle_reads()?;
            Ok(parents)
        })
        .await
    }

    async fn swap_parent(&self, expected: u64, parent: &Parent) -> StoreResult<SwapOutcome> {
        let reference = parent.reference();
        let next = record::next_version(&format_args!("parent {reference}"), expected)?;
        let stored = record::encode(next, parent)?;
        self.run(move |shared| {
            let key = keys::parent(&reference);
            let outcome = shared.commit(|tx| {
                let Some(current) = tx.parents.get(&key)? else {
                    return abort(Abort::Lost);
                };
                let version = record::version(&reference, &current).map_err(failed)?;
                if version != expected {
                    return abort(Abort::Lost);
                }
                tx.parents.insert(key.as_slice(), stored.as_slice())?;
                Ok(())
            })?;
            match outcome {
                Ok(()) => Ok(SwapOutcome::Swapped),
                Err(_) => Ok(SwapOutcome::Lost),
            }
        })
        .await
    }

    async fn load_task_pr(&self, id: &TaskPrId) -> StoreResult<Option<TaskPr>> {
        let id = id.clone();
        self.run(move |shared| {
            shared.get(
                &shared.trees.task_prs,
                &keys::task_pr(id.as_str()),
                |bytes| record::task_pr(id.as_str(), &bytes),
            )
        })
        .await
    }
}
