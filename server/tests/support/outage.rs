//! A store whose server goes away and comes back: its handoff and parent
//! ports answer `Unavailable` of the kind set while it is down, and pass
//! every call through to a real store otherwise.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use lf_handoff_adapters::domain::id::{InteractiveHandoffId, TaskPrId};
use lf_handoff_adapters::domain::interactive_handoff::{
    Actor, HandoffEvent, InteractiveHandoff, InteractiveHandoffParent, StepKey,
};
use lf_handoff_adapters::domain::parent::Parent;
use lf_handoff_adapters::domain::task::TaskPr;
use lf_handoff_adapters::ports::{
    Decision, HandoffRepository, InsertOutcome, ListQuery, ParentInsert, ParentRegistry,
    ParentWithActive, PruneCount, SwapOutcome, TransitionOutcome, Versioned,
};
use lf_handoff_adapters::{
    open_ports, StorageConfig, Store, StoreError, StoreResult, UnavailableKind,
};
use time::OffsetDateTime;

/// The switch between a real store and an outage.
#[derive(Debug)]
pub struct Outage {
    handoffs: Arc<dyn HandoffRepository>,
    parents: Arc<dyn ParentRegistry>,
    down: Mutex<Option<UnavailableKind>>,
}

impl Outage {
    /// From now on, every call fails with `kind` (`None`: the store is
    /// back).
    pub fn set(&self, kind: Option<UnavailableKind>) {
        *self.down.lock().unwrap_or_else(PoisonError::into_inner) = kind;
    }

    fn check(&self) -> StoreResult<()> {
        match *self.down.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(kind) => Err(StoreError::unavailable(
                kind,
                format!("the test took the store down ({kind})"),
            )),
            None => Ok(()),
        }
    }
}

/// A SQLite store in `dir` behind an [`Outage`] switch.
pub async fn store_with_outage(dir: &std::path::Path) -> (Store, Arc<Outage>) {
    let mut ports = open_ports(&StorageConfig::sqlite(dir.join("registry.db")))
        .await
        .unwrap();
    let outage = Arc::new(Outage {
        handoffs: ports.handoffs.clone(),
        parents: ports.parents.clone(),
        down: Mutex::new(None),
    });
    ports.handoffs = outage.clone();
    ports.parents = outage.clone();
    (Store::new(ports), outage)
}

#[async_trait]
impl HandoffRepository for Outage {
    async fn load(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<Option<Versioned<InteractiveHandoff>>> {
        self.check()?;
        self.handoffs.load(id).await
    }

    async fn list(&self, query: &ListQuery) -> StoreResult<Vec<InteractiveHandoff>> {
        self.check()?;
        self.handoffs.list(query).await
    }

    async fn insert(
        &self,
        handoff: &InteractiveHandoff,
        parent_version: u64,
        actor: &Actor,
    ) -> StoreResult<InsertOutcome> {
        self.check()?;
        self.handoffs.insert(handoff, parent_version, actor).await
    }

    async fn transition(
        &self,
        id: &InteractiveHandoffId,
        decide: Decision,
        actor: &Actor,
    ) -> StoreResult<Option<TransitionOutcome>> {
        self.check()?;
        self.handoffs.transition(id, decide, actor).await
    }

    async fn due(
        &self,
        now: OffsetDateTime,
        limit: usize,
    ) -> StoreResult<Vec<InteractiveHandoffId>> {
        self.check()?;
        self.handoffs.due(now, limit).await
    }

    async fn history(&self, id: &InteractiveHandoffId) -> StoreResult<Vec<HandoffEvent>> {
        self.check()?;
        self.handoffs.history(id).await
    }

    async fn count_prunable(&self, finished_before: OffsetDateTime) -> StoreResult<PruneCount> {
        self.check()?;
        self.handoffs.count_prunable(finished_before).await
    }

    async fn prune_batch(
        &self,
        finished_before: OffsetDateTime,
        limit: usize,
    ) -> StoreResult<PruneCount> {
        self.check()?;
        self.handoffs.prune_batch(finished_before, limit).await
    }
}

#[async_trait]
impl ParentRegistry for Outage {
    async fn insert_parent<'a>(
        &self,
        parent: &Parent,
        first_pr: Option<&'a TaskPr>,
    ) -> StoreResult<ParentInsert> {
        self.check()?;
        self.parents.insert_parent(parent, first_pr).await
    }

    async fn load_parent(
        &self,
        reference: &InteractiveHandoffParent,
    ) -> StoreResult<Option<Versioned<Parent>>> {
        self.check()?;
        self.parents.load_parent(reference).await
    }

    async fn load_parent_with_active<'a>(
        &self,
        reference: &InteractiveHandoffParent,
        step: Option<&'a StepKey>,
    ) -> StoreResult<Option<ParentWithActive>> {
        self.check()?;
        self.parents.load_parent_with_active(reference, step).await
    }

    async fn swap_parent(&self, expected: u64, parent: &Parent) -> StoreResult<SwapOutcome> {
        self.check()?;
        self.parents.swap_parent(expected, parent).await
    }

    async fn load_task_pr(&self, id: &TaskPrId) -> StoreResult<Option<TaskPr>> {
        self.check()?;
        self.parents.load_task_pr(id).await
    }
}
