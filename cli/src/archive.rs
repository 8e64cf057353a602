//! `export` and `import` (C17): the whole registry as versioned JSON lines,
//! to move a registry between backends or keep a backup.
//!
//! - **Files are prepared before the store is opened.** `--output FILE`
//!   is refused (exit 2) when it exists, without `--force`, or when its
//!   directory takes no new file; `--input FILE` when it cannot be opened;
//!   `import` without `--input` when stdin is a terminal (there is nothing
//!   to read). Nothing is opened or written then.
//! - **An export file is whole or absent.** It is written to a temporary
//!   file beside FILE (mode 0600: an export holds every handoff's
//!   environment), synced, then renamed onto FILE and the directory
//!   synced; a failed export removes the temporary file. Without
//!   `--force` the rename refuses a FILE that appeared meanwhile.
//! - **Counts at the end.** A note on stderr (`exported 20 handoffs, ...`),
//!   or with `--json` a JSON object on stdout; `export` to stdout writes
//!   its JSON counts on stderr, as one line, since stdout is the export.
//! - **Progress** is drawn on stderr, only when stderr is a terminal and
//!   only once the work has taken a moment, and erased at the end.
//! - **A closed stdout is an error for `export`** (exit 5), unlike for the
//!   other commands: an export cut short is no backup.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lf_handoff_adapters::archive::Progress;
use lf_handoff_adapters::{ArchiveSummary, UnavailableKind};
use tempfile::NamedTempFile;

use lf_handoff_api::Counts;

use crate::context::Context;
use crate::error::{CliError, CliResult};
use crate::output::{emit_json, note};

/// How long the work runs before progress is drawn.
const PROGRESS_AFTER: Duration = Duration::from_millis(300);
/// How often progress is redrawn.
const PROGRESS_TICK: Duration = Duration::from_millis(100);

/// Where `export` writes.
#[derive(Debug)]
pub enum ExportTarget {
    /// Standard output.
    Stdout,
    /// A temporary file beside `path`, renamed onto it once whole.
    File {
        temporary: NamedTempFile,
        path: PathBuf,
        force: bool,
    },
}

/// Where `import` reads.
#[derive(Debug)]
pub enum ImportSource {
    /// Standard input.
    Stdin,
    /// A file.
    File { file: File, path: PathBuf },
}

/// Checks `--output` and creates the temporary file, before any store is
/// opened.
///
/// # Errors
/// Exit 2 when FILE exists (without `force`) or is a directory, or when no
/// file can be created beside it.
pub fn prepare_export(output: Option<&Path>, force: bool) -> CliResult<ExportTarget> {
    let Some(path) = output else {
        return Ok(ExportTarget::Stdout);
    };
    if path.is_dir() {
        return Err(CliError::usage(format!(
            "--output {} is a directory; name a file",
            path.display()
        )));
    }
    if path.exists() && !force {
        return Err(CliError::usage(format!(
            "--output {} exists; pass --force to replace it",
            path.display()
        )));
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let temporary = tempfile::Builder::new()
        .prefix(".lf-handoff-export-")
        .tempfile_in(dir)
        .map_err(|e| {
            CliError::usage(format!(
                "--output {}: cannot create a file in {}: {e}",
                path.display(),
                dir.display()
            ))
        })?;
    Ok(ExportTarget::File {
        temporary,
        path: path.to_path_buf(),
        force,
    })
}

/// Checks `--input` (or stdin), before any store is opened.
///
/// # Errors
/// Exit 2 when FILE cannot be opened, or without `--input` when stdin is a
/// terminal.
pub fn prepare_import(input: Option<&Path>) -> CliResult<ImportSource> {
    match input {
        Some(path) => File::open(path)
            .map(|file| ImportSource::File {
                file,
                path: path.to_path_buf(),
            })
            .map_err(|e| CliError::usage(format!("--input {}: {e}", path.display()))),
        None if io::stdin().is_terminal() => Err(CliError::usage(
            "import reads an export from stdin, which is a terminal: pipe the export in, or \
             pass --input FILE",
        )),
        None => Ok(ImportSource::Stdin),
    }
}

/// Writes the export to `target` and reports the counts.
///
/// # Errors
/// Exit 5 when the store or the output fails (the file is not created).
pub async fn export(ctx: &Context, target: ExportTarget) -> CliResult<()> {
    let drawn = Drawn::new();
    match target {
        ExportTarget::Stdout => {
            let mut out = BufWriter::new(io::stdout());
            let summary = ctx
                .store
                .export(&mut out, drawn.progress("exporting"))
                .await;
            drawn.clear();
            let summary = summary.map_err(|e| ctx.fail(e))?;
            if ctx.json {
                counts_line(&summary)
            } else {
                note(&format!("exported {summary}"));
                Ok(())
            }
        }
        ExportTarget::File {
            mut temporary,
            path,
            force,
        } => {
            let summary = ctx
                .store
                .export(
                    &mut BufWriter::new(temporary.as_file_mut()),
                    drawn.progress("exporting"),
                )
                .await;
            drawn.clear();
            let summary = summary.map_err(|e| ctx.fail(e))?;
            temporary
                .as_file()
                .sync_all()
                .map_err(|e| io_error(&path, e))?;
            let placed = if force {
                temporary.persist(&path)
            } else {
                temporary.persist_noclobber(&path)
            };
            if let Err(refused) = placed {
                return Err(if refused.error.kind() == io::ErrorKind::AlreadyExists {
                    CliError::usage(format!(
                        "--output {} appeared while exporting; nothing was written. Pass \
                         --force to replace it",
                        path.display()
                    ))
                } else {
                    io_error(&path, refused.error)
                });
            }
            sync_parent(&path)?;
            report(
                ctx,
                &format!("exported {summary} to {}", path.display()),
                &summary,
            )
        }
    }
}

/// Loads the export `source` into the store and reports the counts.
///
/// # Errors
/// Exit 2 for a damaged file (naming the line) or one of a newer format;
/// 4 (`not_empty`) for a store that holds anything; 5 when the store or
/// the input fails. Nothing was imported then.
pub async fn import(ctx: &Context, source: ImportSource) -> CliResult<()> {
    let drawn = Drawn::new();
    let progress = drawn.progress("importing");
    let (summary, from) = match source {
        ImportSource::Stdin => (
            ctx.store
                .import(&mut BufReader::new(io::stdin()), progress)
                .await,
            "stdin".to_string(),
        ),
        ImportSource::File { file, path } => (
            ctx.store.import(&mut BufReader::new(file), progress).await,
            path.display().to_string(),
        ),
    };
    drawn.clear();
    let summary = summary.map_err(|e| ctx.fail(e))?;
    report(
        ctx,
        &format!("imported {summary} from {from} into {}", ctx.url),
        &summary,
    )
}

/// The counts: `note` on stderr, or JSON on stdout.
fn report(ctx: &Context, note_text: &str, summary: &ArchiveSummary) -> CliResult<()> {
    if ctx.json {
        emit_json(&Counts::from(summary))
    } else {
        note(note_text);
        Ok(())
    }
}

/// The counts as one JSON line on stderr (stdout holds the export).
fn counts_line(summary: &ArchiveSummary) -> CliResult<()> {
    let line = serde_json::to_string(&Counts::from(summary)).map_err(|e| {
        CliError::unavailable(UnavailableKind::Other, format!("cannot encode JSON: {e}"))
    })?;
    note(&line);
    Ok(())
}

fn io_error(path: &Path, error: io::Error) -> CliError {
    CliError::unavailable(
        UnavailableKind::of_io_error(&error),
        format!("cannot write {}: {error}", path.display()),
    )
}

/// Syncs the directory of `path`, so the rename survives a crash.
fn sync_parent(path: &Path) -> CliResult<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|dir| dir.sync_all())
        .map_err(|e| io_error(path, e))
}

/// Progress drawn on stderr when it is a terminal.
#[derive(Debug)]
struct Drawn {
    terminal: bool,
}

impl Drawn {
    fn new() -> Self {
        Self {
            terminal: io::stderr().is_terminal(),
        }
    }

    /// A progress report drawing `verb: counts`, after a moment, at most
    /// every [`PROGRESS_TICK`]; none when stderr is not a terminal.
    fn progress(&self, verb: &'static str) -> Option<Progress<'static>> {
        if !self.terminal {
            return None;
        }
        let started = Instant::now();
        let mut drawn: Option<Instant> = None;
        Some(Box::new(move |summary: &ArchiveSummary| {
            let now = Instant::now();
            let due = match drawn {
                None => now.duration_since(started) >= PROGRESS_AFTER,
                Some(at) => now.duration_since(at) >= PROGRESS_TICK,
            };
            if due {
                drawn = Some(now);
                let _ = write!(io::stderr().lock(), "\r\x1b[K{verb}: {summary}");
            }
        }))
    }

    /// Erases the progress line.
    fn clear(&self) {
        if self.terminal {
            let _ = write!(io::stderr().lock(), "\r\x1b[K");
        }
    }
}
