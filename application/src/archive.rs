//! Export and import of a whole registry (contract C17): the record type,
//! the file format, its checks, and the port a backend implements.
//!
//! # The file
//!
//! An export is UTF-8 JSON, one value per line (JSON lines), `\n` after
//! every line:
//!
//! ```text
//! {"format":"lf-handoff-export","version":1}
//! {"parent":{"version":1,"record":{"kind":"wave","value":{...}}}}
//! {"task_pr":{"id":"pr_...",...}}
//! {"handoff":{"version":3,"events":3,"record":{"id":"ih_...",...}}}
//! {"event":{"position":1,"handoff_id":"ih_...","seq":1,...}}
//! {"end":{"parents":3,"task_prs":1,"handoffs":1,"events":3,"last_position":3}}
//! ```
//!
//! - **The header** names the format and its version, and nothing else: no
//!   backend, host or time, so two stores holding equal registries export
//!   byte-identical files, whatever their backends.
//! - **The records**, in one order that depends only on the registry:
//!   parents by id, task PRs by id, handoffs by `created_at` then id, events
//!   by position (ids compared as bytes). Every field is kept, with what a
//!   round trip needs to be exact: the compare-and-swap `version` of each
//!   parent and handoff, each handoff's event counter (`events`, the `seq`
//!   of its last event), and each event's `position` and `seq`. A record is
//!   the domain's own JSON form (`Parent`, `TaskPr`, `InteractiveHandoff`,
//!   `HandoffEvent`).
//! - **The end line** counts each kind of record and carries the store's
//!   last event position given (`last_position`, at least the largest
//!   position in the file, larger when the newest events were removed), so
//!   an imported store never gives a position twice. A file without it was
//!   cut short and is refused.
//!
//! # Checks
//!
//! [`ArchiveReader`] refuses, as `InvalidInput` naming the line number: a
//! line that is not JSON or not a record, a record out of order or
//! duplicated, a handoff that fails `validate()` or breaks I6 or C12 within
//! the file, a handoff whose parent or a PR whose task is not in the file
//! before it, an event whose handoff does not precede it or whose `seq` is
//! not the next one, counts that disagree with the end line, anything
//! after the end line, and a file without one. A header of a newer format
//! version is refused with a message that says to upgrade. [`ArchiveWriter`]
//! runs the same checks on what a store exports, so an export that would
//! not import fails instead of being written.
//!
//! # The port
//!
//! A backend implements [`Archive`]: `export` streams its registry to an
//! [`ArchiveSink`] from one consistent snapshot, `import` loads an
//! [`ArchiveSource`] into an empty store, atomically. `Store::export_to`
//! and `Store::import_from` join the two.

use std::collections::{HashMap, HashSet};
use std::fmt::{self, Debug};
use std::io::{BufRead, Write};

use async_trait::async_trait;
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    HandoffEvent, HandoffEventKind, InteractiveHandoff, InteractiveHandoffParent, StepKey,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::task::TaskPr;
use lf_handoff_domain::text::check_text;
use lf_handoff_domain::timestamp::{is_normalized, to_unix_micros};
use serde::{Deserialize, Serialize};

use crate::error::{StoreError, StoreResult, UnavailableKind};
use crate::ports::Versioned;

/// The header's `format`: what makes a file an lf-handoff export.
pub const ARCHIVE_FORMAT: &str = "lf-handoff-export";

/// The format version this build writes, and the newest it reads.
pub const ARCHIVE_VERSION: u32 = 1;

/// One record of an export, in file order: the parents, the task PRs, the
/// handoffs, then the events.
// Records stream one at a time, so a `Box` would cost an allocation per
// record and save nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveRecord {
    /// A wave, project session or task session, with its version.
    Parent(Versioned<Parent>),
    /// A task PR (PRs never change, so they have no version).
    TaskPr(TaskPr),
    /// A handoff with its version and its event counter: the `seq` of its
    /// last event (0 for a handoff stored by a release without history
    /// that has not changed since).
    Handoff {
        /// The handoff and its version.
        handoff: Versioned<InteractiveHandoff>,
        /// Its event counter.
        events: u64,
    },
    /// One history event, with its position and seq.
    Event(HandoffEvent),
}

/// What an export holds: the count of each kind of record, and the store's
/// last event position given (0 when it never gave one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveSummary {
    /// Waves, project sessions and task sessions.
    pub parents: u64,
    /// Task PRs.
    pub task_prs: u64,
    /// Handoffs.
    pub handoffs: u64,
    /// History events.
    pub events: u64,
    /// The last event position the store gave: an imported store gives the
    /// next one after it.
    pub last_position: u64,
}

impl ArchiveSummary {
    /// How many records: parents, PRs, handoffs and events.
    pub fn records(&self) -> u64 {
        self.parents
            .saturating_add(self.task_prs)
            .saturating_add(self.handoffs)
            .saturating_add(self.events)
    }
}

impl fmt::Display for ArchiveSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = |n: u64, one: &str| {
            if n == 1 {
                format!("1 {one}")
            } else {
                format!("{n} {one}s")
            }
        };
        write!(
            f,
            "{}, {}, {}, {}",
            count(self.parents, "parent"),
            count(self.task_prs, "task PR"),
            count(self.handoffs, "handoff"),
            count(self.events, "event")
        )
    }
}

/// What [`ArchiveSource::next_item`] gives: a record, or the end of the
/// file with what it holds (after which there is nothing more).
#[allow(clippy::large_enum_variant)] // As ArchiveRecord: one at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveItem {
    /// The next record, checked.
    Record(ArchiveRecord),
    /// The end line, checked against every record before it.
    End(ArchiveSummary),
}

/// Where [`Archive::export`] writes: records in file order, then the end.
pub trait ArchiveSink: Send {
    /// The next record, in file order.
    ///
    /// # Errors
    /// `InvalidInput` when the record breaks the file's rules (out of
    /// order, an invalid handoff, ...); `Unavailable` when it cannot be
    /// written. The export stops at the first error.
    fn record(&mut self, record: &ArchiveRecord) -> StoreResult<()>;

    /// The end of the export: `last_position` is the last event position
    /// the store gave.
    ///
    /// # Errors
    /// As [`record`](Self::record).
    fn end(&mut self, last_position: u64) -> StoreResult<ArchiveSummary>;
}

/// Where [`Archive::import`] reads from.
pub trait ArchiveSource: Send {
    /// The next record or the end, already checked.
    ///
    /// # Errors
    /// `InvalidInput` for a damaged line, naming its number, and for a file
    /// of a newer format; `Unavailable` when the input cannot be read.
    fn next_item(&mut self) -> StoreResult<ArchiveItem>;
}

/// Export and import of a whole registry (contract C17), implemented by
/// each backend beside its two storage ports.
#[async_trait]
pub trait Archive: Debug + Send + Sync + 'static {
    /// Writes every record of the store to `sink`, in file order (parents
    /// by id, task PRs by id, handoffs by `created_at` then id, events by
    /// position; ids compared as bytes), then calls [`ArchiveSink::end`]
    /// with the last event position given, and returns what it returned.
    ///
    /// The records MUST come from one consistent snapshot even while other
    /// handles or processes write: every event's handoff and every
    /// handoff's parent is in it, and each handoff's events are all those
    /// its counter says. Records are streamed, not gathered in memory.
    ///
    /// # Errors
    /// The sink's error as it is; `Unavailable` on engine failure or a
    /// record that is unreadable.
    async fn export(&self, sink: &mut dyn ArchiveSink) -> StoreResult<ArchiveSummary>;

    /// Loads every record of `source` into this store, which MUST be
    /// empty, atomically: afterwards the store holds exactly the records of
    /// the source, with their versions, event counters, positions and
    /// seqs, every index as the store's own writes would have made it, and
    /// gives the position after the source's `last_position` next; or, on
    /// any error, it is as it was. Returns the source's summary.
    ///
    /// # Errors
    /// MUST return `Conflict` of kind [`NotEmpty`](crate::ConflictKind::NotEmpty)
    /// when the store holds any record, writing nothing; the source's error
    /// as it is; `Unavailable` on engine failure.
    async fn import(&self, source: &mut dyn ArchiveSource) -> StoreResult<ArchiveSummary>;
}

/// The error [`Archive::import`] returns for a store that is not empty.
pub fn not_empty(store: &dyn fmt::Display) -> StoreError {
    StoreError::conflict(
        crate::ConflictKind::NotEmpty,
        format!(
            "{store} is not empty: an import loads a whole registry and goes only into an \
             empty store. Nothing was imported; import into a new store"
        ),
    )
}

/// A progress report: called with the counts so far after each record.
pub type Progress<'a> = Box<dyn FnMut(&ArchiveSummary) + Send + 'a>;

// ----- the lines -----

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    format: String,
    version: u32,
}

/// A line as written, borrowing the record.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum LineOut<'a> {
    Parent {
        version: u64,
        record: &'a Parent,
    },
    TaskPr(&'a TaskPr),
    Handoff {
        version: u64,
        events: u64,
        record: &'a InteractiveHandoff,
    },
    Event(&'a HandoffEvent),
    End(&'a ArchiveSummary),
}

/// A line as read.
#[allow(clippy::large_enum_variant)] // As ArchiveRecord: one at a time.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum LineIn {
    Parent {
        version: u64,
        record: Parent,
    },
    TaskPr(TaskPr),
    Handoff {
        version: u64,
        events: u64,
        record: InteractiveHandoff,
    },
    Event(HandoffEvent),
    End(ArchiveSummary),
}

impl<'a> LineOut<'a> {
    fn of(record: &'a ArchiveRecord) -> Self {
        match record {
            ArchiveRecord::Parent(parent) => Self::Parent {
                version: parent.version,
                record: &parent.value,
            },
            ArchiveRecord::TaskPr(pr) => Self::TaskPr(pr),
            ArchiveRecord::Handoff { handoff, events } => Self::Handoff {
                version: handoff.version,
                events: *events,
                record: &handoff.value,
            },
            ArchiveRecord::Event(event) => Self::Event(event),
        }
    }
}

// ----- the checks -----

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
struct Checks {
    section: Option<Section>,
    summary: ArchiveSummary,
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
    fn record(&mut self, record: &ArchiveRecord) -> Result<(), String> {
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
    fn end(&self, claimed: &ArchiveSummary) -> Result<ArchiveSummary, String> {
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

// ----- writing -----

/// Writes an export to `out` (an [`ArchiveSink`]): the header at once,
/// each record as it comes, checked, and the end line.
pub struct ArchiveWriter<'p, W: Write + Send> {
    out: W,
    checks: Checks,
    progress: Option<Progress<'p>>,
}

impl<W: Write + Send> fmt::Debug for ArchiveWriter<'_, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArchiveWriter")
            .field("summary", &self.checks.summary)
            .finish_non_exhaustive()
    }
}

impl<'p, W: Write + Send> ArchiveWriter<'p, W> {
    /// A writer to `out`, which gets the header now.
    ///
    /// # Errors
    /// `Unavailable` when `out` cannot be written.
    pub fn new(out: W, progress: Option<Progress<'p>>) -> StoreResult<Self> {
        let mut writer = Self {
            out,
            checks: Checks::default(),
            progress,
        };
        let header = Header {
            format: ARCHIVE_FORMAT.into(),
            version: ARCHIVE_VERSION,
        };
        writer.line(&header)?;
        Ok(writer)
    }

    /// The output, once the export is written.
    pub fn into_inner(self) -> W {
        self.out
    }

    fn line(&mut self, value: &impl Serialize) -> StoreResult<()> {
        serde_json::to_writer(&mut self.out, value).map_err(|e| {
            if let Some(kind) = e.io_error_kind() {
                write_failed(std::io::Error::new(kind, e))
            } else {
                StoreError::unavailable(
                    UnavailableKind::Other,
                    format!("cannot encode a record of the export: {e}"),
                )
            }
        })?;
        self.out.write_all(b"\n").map_err(write_failed)
    }
}

fn write_failed(error: std::io::Error) -> StoreError {
    StoreError::unavailable_because(
        UnavailableKind::of_io_error(&error),
        format!("cannot write the export: {error}"),
        error,
    )
}

impl<W: Write + Send> ArchiveSink for ArchiveWriter<'_, W> {
    fn record(&mut self, record: &ArchiveRecord) -> StoreResult<()> {
        self.checks.record(record).map_err(|problem| {
            StoreError::damaged(format!(
                "the store holds a record an export cannot carry: {problem}; the store may be \
                 damaged. Nothing more was exported"
            ))
        })?;
        self.line(&LineOut::of(record))?;
        if let Some(progress) = &mut self.progress {
            progress(&self.checks.summary);
        }
        Ok(())
    }

    fn end(&mut self, last_position: u64) -> StoreResult<ArchiveSummary> {
        let claimed = ArchiveSummary {
            last_position,
            ..self.checks.summary
        };
        let summary = self.checks.end(&claimed).map_err(|problem| {
            StoreError::damaged(format!(
                "the store's records do not add up: {problem}; the store may be damaged"
            ))
        })?;
        self.line(&LineOut::End(&summary))?;
        self.out.flush().map_err(write_failed)?;
        Ok(summary)
    }
}

// ----- reading -----

/// What serde says is wrong with a line, at its column (serde's own "line
/// 1" would be the line's, not the file's).
fn json_problem(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let place = format!(" at line {} column {}", error.line(), error.column());
    match text.strip_suffix(&place) {
        Some(problem) if error.column() > 0 => format!("{problem} at column {}", error.column()),
        Some(problem) => problem.to_string(),
        None => text,
    }
}

/// Reads an export from `input` (an [`ArchiveSource`]), checking every
/// line as it comes.
pub struct ArchiveReader<'p, R: BufRead + Send> {
    input: R,
    /// The number of the last line read (1-based).
    line: u64,
    buffer: Vec<u8>,
    started: bool,
    ended: bool,
    checks: Checks,
    progress: Option<Progress<'p>>,
}

impl<R: BufRead + Send> fmt::Debug for ArchiveReader<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArchiveReader")
            .field("line", &self.line)
            .field("summary", &self.checks.summary)
            .finish_non_exhaustive()
    }
}

impl<'p, R: BufRead + Send> ArchiveReader<'p, R> {
    /// A reader of `input`.
    pub fn new(input: R, progress: Option<Progress<'p>>) -> Self {
        Self {
            input,
            line: 0,
            buffer: Vec::new(),
            started: false,
            ended: false,
            checks: Checks::default(),
            progress,
        }
    }

    /// The next line, without its `\n`; `None` at the end of the input.
    fn next_line(&mut self) -> StoreResult<Option<&[u8]>> {
        self.buffer.clear();
        let read = self
            .input
            .read_until(b'\n', &mut self.buffer)
            .map_err(|e| {
                StoreError::unavailable_because(
                    UnavailableKind::of_io_error(&e),
                    format!("cannot read the export after line {}: {e}", self.line),
                    e,
                )
            })?;
        if read == 0 {
            return Ok(None);
        }
        self.line += 1;
        if self.buffer.last() == Some(&b'\n') {
            self.buffer.pop();
        }
        Ok(Some(&self.buffer))
    }

    fn damaged(&self, problem: impl fmt::Display) -> StoreError {
        StoreError::InvalidInput(format!(
            "line {} of the export: {problem}. Nothing was imported",
            self.line
        ))
    }

    fn header(&mut self) -> StoreResult<()> {
        let Some(line) = self.next_line()? else {
            return Err(StoreError::InvalidInput(
                "the export is empty: an lf-handoff export starts with the line \
                 {\"format\":\"lf-handoff-export\",\"version\":1}. Nothing was imported"
                    .into(),
            ));
        };
        let header: Option<Header> = serde_json::from_slice(line).ok();
        let Some(header) = header.filter(|header| header.format == ARCHIVE_FORMAT) else {
            return Err(self.damaged(format!(
                "this is not an lf-handoff export, whose first line is \
                 {{\"format\":\"{ARCHIVE_FORMAT}\",\"version\":N}}"
            )));
        };
        if header.version > ARCHIVE_VERSION {
            return Err(StoreError::InvalidInput(format!(
                "the export has format version {}, newer than this build reads \
                 ({ARCHIVE_VERSION}): it was written by a newer lf-handoff. Upgrade lf-handoff \
                 to import it. Nothing was imported",
                header.version
            )));
        }
        if header.version == 0 {
            return Err(self.damaged("format version 0 does not exist"));
        }
        Ok(())
    }
}

impl<R: BufRead + Send> ArchiveSource for ArchiveReader<'_, R> {
    fn next_item(&mut self) -> StoreResult<ArchiveItem> {
        if self.ended {
            return Err(StoreError::InvalidInput(
                "the export was read to its end already".into(),
            ));
        }
        if !self.started {
            self.header()?;
            self.started = true;
        }
        let Some(line) = self.next_line()? else {
            return Err(StoreError::InvalidInput(format!(
                "the export ends after line {} without its end line: it was cut short. \
                 Nothing was imported",
                self.line
            )));
        };
        let parsed: LineIn = match serde_json::from_slice(line) {
            Ok(parsed) => parsed,
            Err(e) => {
                return Err(
                    self.damaged(format!("not a record of an export ({})", json_problem(&e)))
                )
            }
        };
        let record = match parsed {
            LineIn::Parent { version, record } => ArchiveRecord::Parent(Versioned {
                value: record,
                version,
            }),
            LineIn::TaskPr(pr) => ArchiveRecord::TaskPr(pr),
            LineIn::Handoff {
                version,
                events,
                record,
            } => ArchiveRecord::Handoff {
                handoff: Versioned {
                    value: record,
                    version,
                },
                events,
            },
            LineIn::Event(event) => ArchiveRecord::Event(event),
            LineIn::End(claimed) => {
                let summary = self
                    .checks
                    .end(&claimed)
                    .map_err(|problem| self.damaged(problem))?;
                if self.next_line()?.is_some() {
                    return Err(self.damaged("nothing may follow the end line"));
                }
                self.ended = true;
                return Ok(ArchiveItem::End(summary));
            }
        };
        self.checks
            .record(&record)
            .map_err(|problem| self.damaged(problem))?;
        if let Some(progress) = &mut self.progress {
            progress(&self.checks.summary);
        }
        Ok(ArchiveItem::Record(record))
    }
}

#[cfg(test)]
pub(crate) mod tests;
