//! The store's sled trees as one value: [`Trees`], opened once when the
//! store opens (`handle.rs`), and the one transaction over all of them
//! that every multi-tree read and write runs ([`Trees::transaction`]),
//! each tree under its name.
//!
//! A transaction over every tree costs a few microseconds more than one
//! over the trees it touches (sled makes an empty overlay per tree), and
//! takes no lock more: sled runs every transaction under one process-wide
//! lock whatever its trees.

use std::path::Path;

use ::sled::transaction::{
    ConflictableTransactionError, ConflictableTransactionResult, TransactionResult,
    Transactional as _, TransactionalTree,
};
use ::sled::{Db, Tree};
use lf_handoff_application::StoreResult;

use super::error::{engine, Abort};
use super::keys;

/// One of each of the store's trees (the key layout is in the module doc
/// of `sled`): [`Tree`]s as opened, or [`TxTrees`] as a transaction sees
/// them.
#[derive(Debug, Clone)]
pub(super) struct Trees<T = Tree> {
    /// `handoffs`: the records.
    pub handoffs: T,
    /// `handoffs_by_created`.
    pub by_created: T,
    /// `handoffs_by_parent`.
    pub by_parent: T,
    /// `handoffs_active`.
    pub active: T,
    /// `active_slots`: a parent's non-terminal handoff (I6).
    pub slots: T,
    /// `handoff_steps`: a parent's handoff for a step (C12).
    pub steps: T,
    /// `parents`.
    pub parents: T,
    /// `task_prs`.
    pub task_prs: T,
    /// `handoffs_due`.
    pub due: T,
    /// `handoffs_by_status`.
    pub by_status: T,
    /// `handoffs_by_home`.
    pub by_home: T,
    /// `handoffs_prunable`.
    pub prunable: T,
    /// `handoff_events`: the history by position.
    pub events: T,
    /// `handoff_history`: a handoff's events by seq.
    pub history: T,
    /// `handoff_counters`; last, since it holds an import's marker, which
    /// an import removes last.
    pub counters: T,
}

/// The trees as one transaction sees them.
pub(super) type TxTrees<'t> = Trees<&'t TransactionalTree>;

/// What a step of a transaction returns: `?` aborts the transaction.
pub(super) type TxResult = Result<(), ConflictableTransactionError<Abort>>;

impl Trees {
    /// Opens (creating when missing) every tree of the store in `db`.
    pub(super) fn open(db: &Db, dir: &Path) -> StoreResult<Self> {
        let tree = |name: &[u8]| db.open_tree(name).map_err(|e| engine(dir, e));
        Ok(Self {
            handoffs: tree(keys::HANDOFFS)?,
            by_created: tree(keys::BY_CREATED)?,
            by_parent: tree(keys::BY_PARENT)?,
            active: tree(keys::ACTIVE)?,
            slots: tree(keys::ACTIVE_SLOTS)?,
            steps: tree(keys::STEPS)?,
            parents: tree(keys::PARENTS)?,
            task_prs: tree(keys::TASK_PRS)?,
            due: tree(keys::DUE)?,
            by_status: tree(keys::BY_STATUS)?,
            by_home: tree(keys::BY_HOME)?,
            prunable: tree(keys::PRUNABLE)?,
            events: tree(keys::EVENTS)?,
            history: tree(keys::HISTORY)?,
            counters: tree(keys::COUNTERS)?,
        })
    }

    /// Every tree, in field order (`counters` last).
    pub(super) fn all(&self) -> Vec<&Tree> {
        let mut all = Vec::new();
        self.map(|tree| all.push(tree));
        all
    }

    /// Runs `body` as one sled transaction over every tree, retried as
    /// sled retries it.
    pub(super) fn transaction<A>(
        &self,
        body: impl Fn(&TxTrees<'_>) -> ConflictableTransactionResult<A, Abort>,
    ) -> TransactionResult<A, Abort> {
        // Each tree's place in `all`, under its name: `map` visits the
        // fields in one order, so the places and `all` agree.
        let mut next = 0;
        let places = self.map(|_| {
            next += 1;
            next - 1
        });
        self.all()
            .as_slice()
            .transaction(|views: &Vec<TransactionalTree>| body(&places.map(|&at| &views[at])))
    }
}

impl<T> Trees<T> {
    /// `f` of each tree, under the same names, visiting the fields in
    /// their order.
    fn map<'s, U>(&'s self, mut f: impl FnMut(&'s T) -> U) -> Trees<U> {
        Trees {
            handoffs: f(&self.handoffs),
            by_created: f(&self.by_created),
            by_parent: f(&self.by_parent),
            active: f(&self.active),
            slots: f(&self.slots),
            steps: f(&self.steps),
            parents: f(&self.parents),
            task_prs: f(&self.task_prs),
            due: f(&self.due),
            by_status: f(&self.by_status),
            by_home: f(&self.by_home),
            prunable: f(&self.prunable),
            events: f(&self.events),
            history: f(&self.history),
            counters: f(&self.counters),
        }
    }
}
