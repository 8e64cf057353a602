//! The rules of an export file, checked record by record (see the
//! module's "Checks"): the same for what a store exports and what a file
//! imports.

use std::collections::{HashMap, HashSet};

use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    HandoffEvent, HandoffEventKind, InteractiveHandoff, InteractiveHandoffParent, StepKey,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::task::TaskPr;
use lf_handoff_domain::text::check_text;
use lf_handoff_domain::timestamp::{is_normalized, to_unix_micros};

use super::{ArchiveRecord, ArchiveSummary};
use crate::ports::Versioned;

/// Where in the file a record is: sections come in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Section {
    Parents,
    TaskPrs,
    Handoffs,
    Events,
}

impl Section {
    fn name(self) -> &'static str {
        match self {
            Self::Parents => "parents",
            Self::TaskPrs => "task PRs",
            Self::Handoffs => "handoffs",
            Self::Events => "events",
        }
    }
}

/// What the checks remember of a handoff until the end.
#[derive(Debug)]
struct HandoffSeen {
    /// Its event counter.
    events: u64,
    /// The seq of its last event met so far.
    seen: u64,
}

/// The rules of the file, checked record by record: the same for what a
/// store exports and what a file imports. It remembers one small entry per
/// parent and per handoff (some 50 bytes: 50 MB for a million handoffs),
/// and the step keys.
#[derive(Debug, Default)]
pub(super) struct Checks {
    section: Option<Section>,
    pub(super) summary: ArchiveSummary,
    last_parent: Option<String>,
    last_pr: Option<String>,
    last_handoff: Option<(i64, String)>,
    last_position: u64,
    /// Every parent met.
    parents: HashSet<ParentKey>,
    /// Every handoff met, by the UUID of its id.
    handoffs: HashMap<u128, HandoffSeen>,
    /// Parents with an active handoff (I6).
    busy: HashSet<ParentKey>,
    /// Parents and their steps (C12).
    steps: HashSet<(ParentKey, StepKey)>,
}

/// A parent as the checks remember it: its kind and the UUID of its id
/// (a few bytes, where the reference is a few dozen).
type ParentKey = (u8, u128);

fn parent_key(parent: &InteractiveHandoffParent) -> ParentKey {
    match parent {
        InteractiveHandoffParent::Wave(id) => (0, id.uuid().as_u128()),
        InteractiveHandoffParent::Project(id) => (1, id.uuid().as_u128()),
        InteractiveHandoffParent::Task(id) => (2, id.uuid().as_u128()),
    }
}

/// The largest number every backend stores (SQL's BIGINT).
const LARGEST: u64 = i64::MAX as u64;

impl Checks {
    /// Checks `record`, which comes after every record checked so far.
    /// The error is the problem, for a message naming the line.
    pub(super) fn record(&mut self, record: &ArchiveRecord) -> Result<(), String> {
        let section = match record {
            ArchiveRecord::Parent(_) => Section::Parents,
            ArchiveRecord::TaskPr(_) => Section::TaskPrs,
            ArchiveRecord::Handoff { .. } => Section::Handoffs,
            ArchiveRecord::Event(_) => Section::Events,
        };
        if let Some(current) = self.section {
            if section < current {
                return Err(format!(
                    "a record of the {} comes after the {}; each kind of record has its own \
                     section, in the order parents, task PRs, handoffs, events",
                    section.name(),
                    current.name()
                ));
            }
        }
        self.section = Some(section);
        match record {
            ArchiveRecord::Parent(parent) => self.parent(parent),
            ArchiveRecord::TaskPr(pr) => self.task_pr(pr),
            ArchiveRecord::Handoff { handoff, events } => self.handoff(handoff, *events),
            ArchiveRecord::Event(event) => self.event(event),
        }
    }

    fn parent(&mut self, parent: &Versioned<Parent>) -> Result<(), String> {
        let reference = parent.value.reference();
        check_version(&format!("parent {reference}"), parent.version)?;
        parent
            .value
            .validate_new()
            .map_err(|e| format!("parent {reference} is invalid: {e}"))?;
        let id = reference.id_str().to_string();
        if let Some(last) = &self.last_parent {
            if id.as_str() <= last.as_str() {
                return Err(out_of_order("parent", &id, last));
            }
        }
        self.parents.insert(parent_key(&reference));
        self.last_parent = Some(id);
        self.summary.parents += 1;
        Ok(())
    }

    fn task_pr(&mut self, pr: &TaskPr) -> Result<(), String> {
        let id = pr.id.as_str().to_string();
        if let Some(last) = &self.last_pr {
            if id.as_str() <= last.as_str() {
                return Err(out_of_order("task PR", &id, last));
            }
        }
        let task = InteractiveHandoffParent::Task(pr.task_session_id.clone());
        if !self.parents.contains(&parent_key(&task)) {
            return Err(format!(
                "task PR {id} belongs to {task}, which is not among the parents before it"
            ));
        }
        self.last_pr = Some(id);
        self.summary.task_prs += 1;
        Ok(())
    }

    fn handoff(
        &mut self,
        handoff: &Versioned<InteractiveHandoff>,
        events: u64,
    ) -> Result<(), String> {
        let record = &handoff.value;
        let id = &record.id;
        check_version(&format!("handoff {id}"), handoff.version)?;
        if events > LARGEST {
            return Err(format!(
                "handoff {id} counts {events} events, too many to store"
            ));
        }
        record
            .validate()
            .map_err(|violation| format!("invalid {violation}"))?;
        let key = (to_unix_micros(record.created_at), id.as_str().to_string());
        if let Some(last) = &self.last_handoff {
            if key <= *last {
                return Err(format!(
                    "handoff {id} is out of order: handoffs come by created_at, then by id, \
                     each once, and it is not after handoff {} created at the same time or \
                     earlier",
                    last.1
                ));
            }
        }
        let parent = parent_key(&record.parent);
        if !self.parents.contains(&parent) {
            return Err(format!(
                "handoff {id} belongs to {}, which is not among the parents",
                record.parent
            ));
        }
        if record.is_active() && !self.busy.insert(parent) {
            return Err(format!(
                "handoff {id} is a second active handoff of {} (invariant I6)",
                record.parent
            ));
        }
        if let Some(step) = &record.step {
            if !self.steps.insert((parent, step.clone())) {
                return Err(format!(
                    "handoff {id} is a second handoff of {} for step {:?} (C12)",
                    record.parent,
                    step.as_str()
                ));
            }
        }
        if self
            .handoffs
            .insert(id.uuid().as_u128(), HandoffSeen { events, seen: 0 })
            .is_some()
        {
            return Err(format!("handoff {id} appears twice"));
        }
        self.last_handoff = Some(key);
        self.summary.handoffs += 1;
        Ok(())
    }

    fn event(&mut self, event: &HandoffEvent) -> Result<(), String> {
        let (id, position, seq) = (&event.handoff_id, event.position, event.seq);
        let what = format!("event {seq} of handoff {id} (position {position})");
        if position == 0 || position > LARGEST || seq == 0 || seq > LARGEST {
            return Err(format!("{what} has a position or seq out of range"));
        }
        if position <= self.last_position {
            return Err(format!(
                "{what} is out of order: events come by position, each once, and it is not \
                 after position {}",
                self.last_position
            ));
        }
        if !is_normalized(event.at) {
            return Err(format!("{what} is not at whole UTC microseconds"));
        }
        if (event.kind == HandoffEventKind::Opened) != event.status_before.is_none() {
            return Err(format!(
                "{what} is {} with {} status before it",
                event.kind,
                if event.status_before.is_some() {
                    "a"
                } else {
                    "no"
                }
            ));
        }
        if event.kind == HandoffEventKind::Opened && seq != 1 {
            return Err(format!("{what} opens its handoff, so it must be event 1"));
        }
        if let Some(detail) = &event.detail {
            check_text("detail", detail).map_err(|e| format!("{what}: {e}"))?;
        }
        let Some(handoff) = self.handoffs.get_mut(&id.uuid().as_u128()) else {
            return Err(format!("{what} belongs to no handoff before it"));
        };
        if seq != handoff.seen + 1 || seq > handoff.events {
            return Err(format!(
                "{what} is not the next event of its handoff: after event {}, of {} it counts",
                handoff.seen, handoff.events
            ));
        }
        handoff.seen = seq;
        self.last_position = position;
        self.summary.events += 1;
        Ok(())
    }

    /// Checks the end: `claimed` is what the end line says (or, exporting,
    /// what the store says), against the records checked.
    pub(super) fn end(&self, claimed: &ArchiveSummary) -> Result<ArchiveSummary, String> {
        let mut counted = self.summary;
        counted.last_position = claimed.last_position;
        if *claimed != counted {
            return Err(format!(
                "the end line counts {claimed}, but the file holds {counted}"
            ));
        }
        if claimed.last_position < self.last_position || claimed.last_position > LARGEST {
            return Err(format!(
                "the last position given, {}, is not at or after the last event's, {}",
                claimed.last_position, self.last_position
            ));
        }
        if let Some((id, handoff)) = self
            .handoffs
            .iter()
            .find(|(_, handoff)| handoff.seen != handoff.events)
        {
            return Err(format!(
                "handoff {} counts {} events, but the file holds {}",
                InteractiveHandoffId::from_uuid(uuid::Uuid::from_u128(*id)),
                handoff.events,
                handoff.seen
            ));
        }
        Ok(*claimed)
    }
}

fn check_version(what: &str, version: u64) -> Result<(), String> {
    if version == 0 || version > LARGEST {
        return Err(format!("{what} has version {version}, out of range"));
    }
    Ok(())
}

fn out_of_order(what: &str, id: &str, last: &str) -> String {
    format!(
        "{what} {id} is out of order: {what}s come by id, each once, and it is not after {last}"
    )
}
