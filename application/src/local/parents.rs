//! Parents (contract C10): waves, project sessions, task sessions with
//! their PRs, and the body generations recorded on them.

use async_trait::async_trait;
use lf_handoff_domain::child_session::ChildProcessGeneration;
use lf_handoff_domain::id::TaskPrId;
use lf_handoff_domain::interactive_handoff::InteractiveHandoffParent;
use lf_handoff_domain::parent::{check_task_pr, Parent};
use lf_handoff_domain::project_session::ProjectSession;
use lf_handoff_domain::task::{TaskPr, TaskSession};
use lf_handoff_domain::wave::Wave;
use lf_handoff_domain::ConflictKind;

use super::{lost_a_race, lost_too_often, not_found, CallTimer, Local, MAX_RACE_ATTEMPTS};
use crate::error::{StoreError, StoreResult};
use crate::ports::{ParentInsert, ParentQuery, SwapOutcome, Versioned};
use crate::registry::Parents;

#[async_trait]
impl Parents for Local {
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, wave = %wave.id()))]
    async fn create_wave(&self, wave: &Wave) -> StoreResult<()> {
        let _call = CallTimer::start();
        self.create_parent(Parent::Wave(wave.clone()), None).await
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, project = %project.id))]
    async fn create_project_session(&self, project: &ProjectSession) -> StoreResult<()> {
        let _call = CallTimer::start();
        self.require(&InteractiveHandoffParent::Wave(project.wave_id.clone()))
            .await?;
        self.create_parent(Parent::Project(project.clone()), None)
            .await
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, task = %task.id))]
    async fn create_task_session(&self, task: &TaskSession, pr: &TaskPr) -> StoreResult<()> {
        let _call = CallTimer::start();
        check_task_pr(task, pr)?;
        let project = self
            .require(&InteractiveHandoffParent::Project(
                task.project_session_id.clone(),
            ))
            .await?;
        if project.value.wave_id() != &task.wave_id {
            return Err(StoreError::conflict(
                ConflictKind::WaveMismatch,
                format!(
                    "task {} names wave {} but its project {} belongs to wave {}",
                    task.id,
                    task.wave_id,
                    task.project_session_id,
                    project.value.wave_id()
                ),
            ));
        }
        self.create_parent(Parent::Task(task.clone()), Some(pr))
            .await
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, parent = %reference))]
    async fn get_parent(
        &self,
        reference: &InteractiveHandoffParent,
    ) -> StoreResult<Option<Parent>> {
        let _call = CallTimer::start();
        Ok(self
            .retry("loading the parent", || self.parents.load_parent(reference))
            .await?
            .map(|v| v.value))
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend))]
    async fn list_parents(&self, query: ParentQuery) -> StoreResult<Vec<Parent>> {
        let _call = CallTimer::start();
        if let Some(wave) = &query.wave {
            self.require(&InteractiveHandoffParent::Wave(wave.clone()))
                .await?;
        }
        if let Some(project) = &query.project {
            self.require(&InteractiveHandoffParent::Project(project.clone()))
                .await?;
        }
        self.retry("listing parents", || self.parents.list_parents(&query))
            .await
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, pr = %id))]
    async fn get_task_pr(&self, id: &TaskPrId) -> StoreResult<Option<TaskPr>> {
        let _call = CallTimer::start();
        self.retry("loading the task PR", || self.parents.load_task_pr(id))
            .await
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, parent = %reference, generation = process.generation))]
    async fn record_body(
        &self,
        reference: &InteractiveHandoffParent,
        process: ChildProcessGeneration,
    ) -> StoreResult<Parent> {
        let _call = CallTimer::start();
        for _ in 0..MAX_RACE_ATTEMPTS {
            let current = self.require(reference).await?;
            if current.value.is_current_body(&process) {
                return Ok(current.value);
            }
            let next = current
                .value
                .record_body(process.clone(), self.clock.now())?;
            match self
                .retry("storing the parent", || {
                    self.parents.swap_parent(current.version, &next)
                })
                .await?
            {
                SwapOutcome::Swapped => return Ok(next),
                SwapOutcome::Lost => lost_a_race("the parent"),
            }
        }
        Err(lost_too_often(reference))
    }
}

impl Local {
    async fn create_parent(&self, parent: Parent, first_pr: Option<&TaskPr>) -> StoreResult<()> {
        parent.validate_new()?;
        let reference = parent.reference();
        match self
            .retry("storing the parent", || {
                self.parents.insert_parent(&parent, first_pr)
            })
            .await?
        {
            ParentInsert::Inserted => Ok(()),
            ParentInsert::AlreadyExists => {
                let stored = self.require(&reference).await?;
                let same_pr = match first_pr {
                    None => true,
                    Some(pr) => {
                        self.retry("loading the task PR", || self.parents.load_task_pr(&pr.id))
                            .await?
                            .as_ref()
                            == Some(pr)
                    }
                };
                if stored.value == parent && same_pr {
                    Ok(())
                } else {
                    Err(StoreError::conflict(
                        ConflictKind::AlreadyExists,
                        format!("{reference} already exists with different fields"),
                    ))
                }
            }
        }
    }

    async fn require(
        &self,
        reference: &InteractiveHandoffParent,
    ) -> StoreResult<Versioned<Parent>> {
        self.retry("loading the parent", || self.parents.load_parent(reference))
            .await?
            .ok_or_else(|| not_found(reference))
    }
}
