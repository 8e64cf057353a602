//! The storage ports: what an adapter must implement.
//!
//! Rules for every port in this file:
//!
//! - Ports store and load; they never decide a transition. The service asks
//!   the domain, then writes what it decided through these methods; for a
//!   transition of a stored handoff it hands the domain's decision to
//!   [`HandoffRepository::transition`], which runs it between its load and
//!   its compare-and-swap (so an adapter whose calls are costly to start,
//!   such as sled's hop to a blocking thread, makes one call, not two).
//! - Every write is atomic: it happens completely or not at all, and a write
//!   that returns `Ok` is durable (contract C8).
//! - Races are detected by the engine, never by a read-then-write gap:
//!   compare-and-swap by version, and a unique slot per parent for the
//!   active handoff (invariant I6).
//! - Every record read MUST pass `validate()`; a record that does not is
//!   refused with [`StoreError::Unavailable`](crate::StoreError::Unavailable), never returned.
//! - Engine failures are [`StoreError::Unavailable`](crate::StoreError::Unavailable) with a message a person
//!   can act on. Ports never return `InvalidInput`, `NotFound` or `Conflict`
//!   except where a method says so.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use lf_handoff_domain::error::DomainResult;
use lf_handoff_domain::id::{InteractiveHandoffId, ProjectSessionId, TaskPrId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    Actor, HandoffChange, HandoffEvent, InteractiveHandoff, InteractiveHandoffParent,
    InteractiveHandoffStatus, StepKey, Transition, WakeClaim,
};
use lf_handoff_domain::parent::{Parent, ParentKind};
use lf_handoff_domain::task::TaskPr;
use lf_handoff_domain::wave_home::WaveHome;
use time::OffsetDateTime;

use crate::error::StoreResult;

/// A record together with the version its compare-and-swap expects.
///
/// Versions start at 1 when a record is inserted and increase by one with
/// every successful swap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned<T> {
    /// The record.
    pub value: T,
    /// Its version in storage.
    pub version: u64,
}

/// The result of [`HandoffRepository::insert`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertOutcome {
    /// The handoff was stored at version 1.
    Inserted,
    /// The parent already has a non-terminal handoff; nothing was written.
    ParentBusy,
    /// The parent is no longer at the expected version (a new body was
    /// recorded, say); nothing was written.
    ParentChanged,
    /// The parent already has a handoff for the new handoff's step (C12),
    /// even one a concurrent process just stored; nothing was written.
    StepTaken,
}

/// The result of a compare-and-swap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwapOutcome {
    /// The record was replaced (its version is one more than expected).
    Swapped,
    /// The stored version was not the expected one; nothing was written.
    Lost,
}

/// What the domain decided for one stored handoff: the transition to
/// store, and the caller's answer besides the record (for a wake claim,
/// whether the claiming generation holds the wake; for a sweep, whether
/// this call expired it; `Ok(true)` otherwise). The answer is an error
/// when the transition stored is not the one asked for: attaching,
/// finishing or extending a due handoff stores its expiry (C14) and
/// answers [`ConflictKind::Expired`](lf_handoff_domain::ConflictKind::Expired).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    /// The record to store, or the replay that writes nothing.
    pub transition: Transition,
    /// The caller's answer, taken from the same decision that was stored.
    pub answer: DomainResult<bool>,
}

impl From<Transition> for Decided {
    fn from(transition: Transition) -> Self {
        Self {
            transition,
            answer: Ok(true),
        }
    }
}

impl From<WakeClaim> for Decided {
    fn from(claim: WakeClaim) -> Self {
        Self {
            transition: claim.transition,
            answer: Ok(claim.claimed),
        }
    }
}

/// The history event a stored change appends (C15), as the domain names
/// it: what every adapter calls between deciding a write and making it.
///
/// # Errors
/// `Unavailable` when the domain cannot name the change (a bug: no
/// transition makes such a change); nothing is written then.
pub fn recorded_change(
    before: Option<&InteractiveHandoff>,
    after: &InteractiveHandoff,
) -> StoreResult<HandoffChange> {
    HandoffChange::between(before, after).map_err(|e| {
        crate::StoreError::unavailable(
            crate::UnavailableKind::Other,
            format!("refusing a change its history cannot record: {e}"),
        )
    })
}

/// The domain's decision for one stored handoff, as the service hands it to
/// [`HandoffRepository::transition`]: the record as stored in, the
/// transition to store and the caller's answer (or the domain's refusal)
/// out. It reads the clock itself, so its timestamps come after the load.
pub type Decision = Arc<dyn Fn(&InteractiveHandoff) -> DomainResult<Decided> + Send + Sync>;

/// The result of [`HandoffRepository::transition`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransitionOutcome {
    /// The decision was stored (a [`Transition::Changed`]) or needed no
    /// write (a [`Transition::Unchanged`] replay): the record as it now is,
    /// and the decision's answer.
    Applied {
        /// The record as it now is.
        handoff: Box<InteractiveHandoff>,
        /// [`Decided::answer`] of the decision that was applied.
        answer: DomainResult<bool>,
    },
    /// The record changed between the load and the compare-and-swap;
    /// nothing was written. The caller decides again on the new record.
    Lost,
}

/// The result of [`ParentRegistry::insert_parent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentInsert {
    /// The parent (and the task's PR) was stored at version 1.
    Inserted,
    /// A parent with this id already exists; nothing was written.
    AlreadyExists,
}

/// Which parents [`ParentRegistry::list_parents`] returns: those that
/// pass every filter given (the filters are and-ed), in id order (byte
/// by byte: `ps_...`, then `ts_...`, then `wv_...`), from just after
/// [`after`](Self::after), at most [`limit`](Self::limit) of them.
///
/// A wave belongs to itself and a project to itself, so
/// `wave: Some(w)` gives the wave `w`, its projects and their tasks, and
/// `project: Some(p)` the project `p` and its tasks; with a
/// [`kind`](Self::kind), only those of that kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParentQuery {
    /// Only parents of this kind.
    pub kind: Option<ParentKind>,
    /// Only the parents of this wave: the wave, its projects, its tasks.
    pub wave: Option<WaveId>,
    /// Only the parents of this project: the project and its tasks.
    pub project: Option<ProjectSessionId>,
    /// Only parents after this one in id order: the last of the previous
    /// page. It need not exist.
    pub after: Option<InteractiveHandoffParent>,
    /// At most this many parents (the first ones in id order).
    pub limit: Option<usize>,
}

impl ParentQuery {
    /// Whether `parent` passes the filters (kind, wave, project); the
    /// page's position and size ([`after`](Self::after),
    /// [`limit`](Self::limit)) are not filters.
    pub fn matches(&self, parent: &Parent) -> bool {
        self.kind.is_none_or(|kind| parent.kind() == kind)
            && self
                .wave
                .as_ref()
                .is_none_or(|wave| parent.wave_id() == wave)
            && self
                .project
                .as_ref()
                .is_none_or(|project| parent.project_id() == Some(project))
    }
}

/// Which handoffs [`HandoffRepository::list`] returns: those that pass
/// every filter given (the filters are and-ed), in list order
/// (`created_at`, then id; reversed with [`newest_first`](Self::newest_first)),
/// from just after [`after`](Self::after), at most [`limit`](Self::limit)
/// of them (C4, C17).
///
/// Build one with `..Default::default()` for the filters not given:
/// `ListQuery { active_only: true, ..Default::default() }`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Only this parent's handoffs.
    pub parent: Option<InteractiveHandoffParent>,
    /// Only non-terminal handoffs.
    pub active_only: bool,
    /// Only handoffs in one of these statuses; empty: any status. With
    /// [`active_only`](Self::active_only), only the active ones of them.
    pub statuses: Vec<InteractiveHandoffStatus>,
    /// Only handoffs whose work runs at this home.
    pub home: Option<WaveHome>,
    /// Only handoffs created strictly before this instant (the command
    /// line's `list --older-than D` is "created more than D ago").
    pub created_before: Option<OffsetDateTime>,
    /// Only handoffs due by this instant: active, with a deadline at or
    /// before it (C14's due, as of that instant: the current time gives
    /// the handoffs due now, an hour ahead those due within the hour).
    /// Served by the index of due handoffs, so a list with it reads the
    /// handoffs due by then only; they are sorted into list order, so each
    /// page reads all of them (and keeps at most its limit).
    pub due_by: Option<OffsetDateTime>,
    /// Only handoffs after this one in list order (`created_at`, then id,
    /// or their reverse newest first): the last id of the previous page. The handoff it names need not pass
    /// the filters; one that does not exist gives an empty page from the
    /// repository, and `NotFound` from the service.
    pub after: Option<InteractiveHandoffId>,
    /// At most this many handoffs (the first ones in list order).
    pub limit: Option<usize>,
    /// The list order reversed: newest first (`created_at`, then id, both
    /// descending), so [`after`](Self::after) pages towards older handoffs
    /// and [`limit`](Self::limit) keeps the newest. Served by the same
    /// indexes, read backwards.
    pub newest_first: bool,
}

impl From<&InteractiveHandoffParent> for ListQuery {
    /// The handoffs of one parent.
    fn from(parent: &InteractiveHandoffParent) -> Self {
        Self {
            parent: Some(parent.clone()),
            ..Self::default()
        }
    }
}

impl ListQuery {
    /// The statuses a listed handoff may have, in lifecycle order: `None`
    /// when any status passes, an empty list when none can (the active
    /// filter, or [`due_by`](Self::due_by), which only an active handoff
    /// passes, and statuses that are all terminal).
    pub fn wanted_statuses(&self) -> Option<Vec<InteractiveHandoffStatus>> {
        let active = self.active_only || self.due_by.is_some();
        if self.statuses.is_empty() && !active {
            return None;
        }
        Some(
            InteractiveHandoffStatus::ALL
                .into_iter()
                .filter(|status| self.statuses.is_empty() || self.statuses.contains(status))
                .filter(|status| !active || !status.is_terminal())
                .collect(),
        )
    }

    /// Whether `handoff` passes the filters (parent, activity, statuses,
    /// home, creation, deadline); the page's position and size
    /// ([`after`](Self::after), [`limit`](Self::limit)) are not filters.
    pub fn matches(&self, handoff: &InteractiveHandoff) -> bool {
        self.parent
            .as_ref()
            .is_none_or(|parent| handoff.parent == *parent)
            && (!self.active_only || handoff.is_active())
            && (self.statuses.is_empty() || self.statuses.contains(&handoff.status))
            && self.home.as_ref().is_none_or(|home| handoff.home == *home)
            && self
                .created_before
                .is_none_or(|before| handoff.created_at < before)
            && self.due_by.is_none_or(|by| handoff.is_due(by))
    }
}

/// What a prune removed, or would remove (C17).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneCount {
    /// Handoffs.
    pub handoffs: u64,
    /// Their history events.
    pub events: u64,
}

impl std::ops::AddAssign for PruneCount {
    fn add_assign(&mut self, other: Self) {
        self.handoffs = self.handoffs.saturating_add(other.handoffs);
        self.events = self.events.saturating_add(other.events);
    }
}

/// A parent with its version, its non-terminal handoff if it has one, and
/// its handoff for a step if one was asked for and it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentWithActive {
    /// The parent.
    pub parent: Versioned<Parent>,
    /// Its non-terminal handoff.
    pub active: Option<Versioned<InteractiveHandoff>>,
    /// Its handoff for the step asked for, whatever its status (C12).
    pub at_step: Option<Versioned<InteractiveHandoff>>,
}

/// Stores handoff records.
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait HandoffRepository: Debug + Send + Sync + 'static {
    /// Loads one handoff with its version.
    ///
    /// # Errors
    /// MUST return `Ok(None)` for an unknown id, and `Unavailable` for a
    /// stored record that fails `validate()`.
    async fn load(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<Option<Versioned<InteractiveHandoff>>>;

    /// Lists handoffs matching `query`, ordered by `created_at` then id
    /// (both descending when `query.newest_first`): those after
    /// `query.after` in that order, at most `query.limit`.
    ///
    /// Every filter (parent, active, statuses, home, creation, deadline)
    /// and the page's start MUST be served by an index, so a page costs
    /// what it returns, not what the store holds; when several filters are
    /// given, one index serves and the records it names are checked against
    /// the others. A deadline bound ([`ListQuery::due_by`]) is served by
    /// the due handoffs' index, which is in deadline order: a page of it
    /// costs what is due by the bound (sorted into list order), in memory
    /// bounded by the page's limit. A handoff removed (pruned) while the
    /// list reads is left out.
    ///
    /// # Errors
    /// MUST return an empty list (not an error) when `query.after` names
    /// no stored handoff. `Unavailable` on engine failure or an invalid
    /// stored record.
    async fn list(&self, query: &ListQuery) -> StoreResult<Vec<InteractiveHandoff>>;

    /// Stores a new handoff at version 1, atomically and only if its parent
    /// is still at `parent_version`, has no non-terminal handoff and, when
    /// the handoff has a step, no handoff for that step (C12), with its
    /// `opened` event by `actor` in the same atomic write (C15).
    ///
    /// # Errors
    /// MUST return [`InsertOutcome::ParentBusy`] (not an error) when the
    /// parent's active slot is taken, even by a concurrent process,
    /// [`InsertOutcome::StepTaken`] when the parent's step is taken (the
    /// engine enforces one handoff per parent and step), and
    /// [`InsertOutcome::ParentChanged`] when the parent's version moved.
    /// `Unavailable` on engine failure.
    async fn insert(
        &self,
        handoff: &InteractiveHandoff,
        parent_version: u64,
        actor: &Actor,
    ) -> StoreResult<InsertOutcome>;

    /// One attempt at a transition: loads handoff `id`, asks `decide` (the
    /// domain) what to do with it, and stores a [`Transition::Changed`]
    /// record if and only if the stored version is still the one loaded,
    /// keeping the parent's active slot and the deadline index in step (a
    /// handoff that becomes terminal frees the slot in the same write),
    /// with the change's event ([`recorded_change`]) by `actor` in the same
    /// atomic write (C15). A [`Transition::Unchanged`] writes nothing.
    ///
    /// # Errors
    /// MUST return `Ok(None)` for an unknown id, [`TransitionOutcome::Lost`]
    /// (not an error) when the version moved or the record went between the
    /// load and the write, and `decide`'s error as it is, with nothing
    /// written. `Unavailable` on engine failure or an invalid stored record.
    async fn transition(
        &self,
        id: &InteractiveHandoffId,
        decide: Decision,
        actor: &Actor,
    ) -> StoreResult<Option<TransitionOutcome>>;

    /// The ids of at most `limit` active handoffs whose deadline is at or
    /// before `now`, earliest deadline first (C14), read through an index
    /// over the deadlines of active handoffs only.
    ///
    /// # Errors
    /// `Unavailable` on engine failure.
    async fn due(
        &self,
        now: OffsetDateTime,
        limit: usize,
    ) -> StoreResult<Vec<InteractiveHandoffId>>;

    /// The events of handoff `id`, in order (C15); empty for an unknown id
    /// and for a handoff stored by a release without history that has not
    /// changed since.
    ///
    /// # Errors
    /// `Unavailable` on engine failure or an unreadable event.
    async fn history(&self, id: &InteractiveHandoffId) -> StoreResult<Vec<HandoffEvent>>;

    /// How many handoffs [`prune_batch`](Self::prune_batch) with
    /// `finished_before` would remove if nothing changed meanwhile, and how
    /// many events they hold: the terminal handoffs whose wake is claimed
    /// and whose `terminal_at` is before `finished_before` (C17). Read
    /// through an index over the claimed handoffs' `terminal_at`.
    ///
    /// # Errors
    /// `Unavailable` on engine failure.
    async fn count_prunable(&self, finished_before: OffsetDateTime) -> StoreResult<PruneCount>;

    /// Removes at most `limit` handoffs that are terminal, whose wake is
    /// claimed and whose `terminal_at` is before `finished_before`, oldest
    /// finish first, each with every event of its history and every index
    /// entry (its step too: a pruned step may be opened again), in one
    /// atomic write that checks that condition again (C17). A handoff
    /// changed by a concurrent write may be left for a later batch; an
    /// active handoff and one whose wake is unclaimed are never removed,
    /// and no event is left without its handoff. Returns what it removed.
    ///
    /// # Errors
    /// `Unavailable` on engine failure; nothing of the batch is removed
    /// then.
    async fn prune_batch(
        &self,
        finished_before: OffsetDateTime,
        limit: usize,
    ) -> StoreResult<PruneCount>;
}

/// Stores waves, project sessions, task sessions and task PRs.
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait ParentRegistry: Debug + Send + Sync + 'static {
    /// Stores a new parent at version 1 and, for a task, its first PR, in
    /// one atomic write.
    ///
    /// # Errors
    /// MUST return [`ParentInsert::AlreadyExists`] without writing when a
    /// parent with the same id exists; `Conflict` when the PR id is taken by
    /// another task; `Unavailable` on engine failure.
    async fn insert_parent<'a>(
        &self,
        parent: &Parent,
        first_pr: Option<&'a TaskPr>,
    ) -> StoreResult<ParentInsert>;

    /// Loads a parent with its version. The parent's kind matches the
    /// reference's.
    ///
    /// # Errors
    /// MUST return `Ok(None)` for an unknown parent; `Unavailable` on engine
    /// failure or an unreadable record.
    async fn load_parent(
        &self,
        reference: &InteractiveHandoffParent,
    ) -> StoreResult<Option<Versioned<Parent>>>;

    /// Loads a parent with its version and, in the same read where the
    /// engine allows it, the parent's non-terminal handoff and (when `step`
    /// is given) its handoff for that step: the snapshot `open` decides
    /// from, in one round trip to a server.
    ///
    /// The active handoff MUST be found through an index on the parent's
    /// active slot, and the step's through the index over parent and step,
    /// not a scan.
    ///
    /// The pair need not be one consistent snapshot: `open` writes with
    /// [`HandoffRepository::insert`], which checks the parent's version and
    /// its active slot in the engine, so a stale read costs a retry, never
    /// a wrong write.
    ///
    /// # Errors
    /// MUST return `Ok(None)` for an unknown parent; `Unavailable` on engine
    /// failure, an unreadable parent or an invalid stored handoff.
    async fn load_parent_with_active<'a>(
        &self,
        reference: &InteractiveHandoffParent,
        step: Option<&'a StepKey>,
    ) -> StoreResult<Option<ParentWithActive>>;

    /// Lists the parents that pass `query`'s filters, in id order (byte by
    /// byte), after `query.after` (which need not exist), at most
    /// `query.limit` (`Some(0)`: none).
    ///
    /// No index serves the filters: an adapter MAY scan the parents (in id
    /// order from the page's start, checking each against
    /// [`ParentQuery::matches`]), so a page costs up to what the store's
    /// parents number, not what it returns; the kind and the wave MAY be
    /// checked by the engine on stored columns. A page MUST hold every
    /// parent that passes, in order, up to the limit: paging with the last
    /// id of each page skips and repeats none that existed throughout.
    ///
    /// # Errors
    /// MUST return `Unavailable` on engine failure or an unreadable
    /// record; never `NotFound` (an unknown wave or project is not the
    /// port's to report).
    async fn list_parents(&self, query: &ParentQuery) -> StoreResult<Vec<Parent>>;

    /// Replaces a parent if and only if its stored version is `expected`.
    ///
    /// # Errors
    /// MUST return [`SwapOutcome::Lost`] when the version moved.
    /// `Unavailable` on engine failure.
    async fn swap_parent(&self, expected: u64, parent: &Parent) -> StoreResult<SwapOutcome>;

    /// Loads a task PR.
    ///
    /// # Errors
    /// MUST return `Ok(None)` for an unknown id; `Unavailable` on engine failure.
    async fn load_task_pr(&self, id: &TaskPrId) -> StoreResult<Option<TaskPr>>;
}

/// The source of `now`. A port so tests control time.
#[cfg_attr(test, mockall::automock)]
pub trait Clock: Debug + Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> OffsetDateTime;
}

/// The source of new handoff ids. A port so tests control ids.
#[cfg_attr(test, mockall::automock)]
pub trait IdSource: Debug + Send + Sync + 'static {
    /// A fresh, never-used handoff id.
    fn new_handoff_id(&self) -> InteractiveHandoffId;
}
