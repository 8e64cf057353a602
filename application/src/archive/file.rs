//! The file itself: its lines as JSON, the writer a store exports
//! through and the reader an import reads through, each checking every
//! record as it goes.

use std::fmt;
use std::io::{BufRead, Write};

use lf_handoff_domain::interactive_handoff::{HandoffEvent, InteractiveHandoff};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::task::TaskPr;
use serde::{Deserialize, Serialize};

use super::checks::Checks;
use super::{
    ArchiveItem, ArchiveRecord, ArchiveSink, ArchiveSource, ArchiveSummary, Progress,
    ARCHIVE_FORMAT, ARCHIVE_VERSION,
};
use crate::error::{StoreError, StoreResult, UnavailableKind};
use crate::ports::Versioned;

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
            return Err(StoreError::InvalidInput(format!(
                "the export is empty: an lf-handoff export starts with the line \
                 {{\"format\":\"{ARCHIVE_FORMAT}\",\"version\":{ARCHIVE_VERSION}}}. Nothing \
                 was imported"
            )));
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
