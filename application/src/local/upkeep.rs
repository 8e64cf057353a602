//! Upkeep of the whole registry: expiring what is due (C14), pruning
//! what is finished (C17), export and import (C17).

use std::io::{BufRead, Write};

use lf_handoff_domain::interactive_handoff::InteractiveHandoff;
use time::OffsetDateTime;

use super::{CallTimer, Local};
use crate::archive::{ArchiveReader, ArchiveSummary, ArchiveWriter, Progress};
use crate::error::{StoreError, StoreResult};
use crate::ports::PruneCount;

/// How many due handoffs one round of [`Store::expire_due`] reads.
const EXPIRE_BATCH: usize = 256;

/// How many handoffs one atomic write of [`Store::prune`](crate::Store::prune) removes at most,
/// unless its [`PruneOptions`] say otherwise: enough that a large prune
/// takes few writes, few enough that one write holds a transaction (and on
/// SQLite, the store's one writer) briefly.
pub const PRUNE_BATCH: usize = 256;

/// What [`Store::prune`](crate::Store::prune) removes, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneOptions {
    /// Only handoffs that finished (`terminal_at`) strictly before this
    /// instant.
    pub finished_before: OffsetDateTime,
    /// Remove nothing; count what would be removed now.
    pub dry_run: bool,
    /// At most this many handoffs per atomic write (at least 1;
    /// [`PRUNE_BATCH`] by default).
    pub batch: usize,
}

impl PruneOptions {
    /// Prune what finished before `finished_before`, in batches of
    /// [`PRUNE_BATCH`].
    pub fn finished_before(finished_before: OffsetDateTime) -> Self {
        Self {
            finished_before,
            dry_run: false,
            batch: PRUNE_BATCH,
        }
    }

    /// These options, counting instead of removing.
    #[must_use]
    pub fn dry_run(self) -> Self {
        Self {
            dry_run: true,
            ..self
        }
    }
}

impl Local {
    /// Expires every handoff that is due (C14), each with its own
    /// compare-and-swap, and returns those this call expired: a handoff a
    /// concurrent sweeper expired, or that was finished in time, is not in
    /// the list, so racing sweepers report each expiry once.
    ///
    /// # Errors
    /// `Unavailable` on storage failure; handoffs expired before it are
    /// expired all the same.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend))]
    pub async fn expire_due(&self) -> StoreResult<Vec<InteractiveHandoff>> {
        let _call = CallTimer::start();
        let mut expired = Vec::new();
        let mut tried = std::collections::HashSet::new();
        loop {
            let due = self
                .retry("reading due handoffs", || {
                    self.handoffs.due(self.clock.now(), EXPIRE_BATCH)
                })
                .await?;
            let fresh: Vec<_> = due
                .into_iter()
                .filter(|id| tried.insert(id.clone()))
                .collect();
            if fresh.is_empty() {
                return Ok(expired);
            }
            for id in fresh {
                match self.apply(&id, self.expiry()).await {
                    Ok((handoff, true)) => expired.push(handoff),
                    // Finished in time, or expired by another sweeper, or
                    // removed meanwhile.
                    Ok((_, false)) | Err(StoreError::NotFound(_)) => {}
                    Err(error) => return Err(error),
                }
            }
        }
    }

    /// Prunes the registry (C17): removes every terminal handoff whose wake
    /// has been claimed and that finished before `options.finished_before`,
    /// with its history, in atomic batches of at most `options.batch`
    /// handoffs, until a batch removes nothing. An active handoff and one
    /// whose wake is unclaimed are never removed. A dry run removes nothing
    /// and counts what would be removed now.
    ///
    /// A pruned handoff is gone: `get` returns `None`, `history` is
    /// `NotFound`, and its step is forgotten, so a body that opens at that
    /// step again gets a new handoff (C12 holds until the prune).
    ///
    /// # Errors
    /// `InvalidInput` for a batch of 0 (checked before anything is read);
    /// `Unavailable` on storage failure; the batches before it stay
    /// removed.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, dry_run = options.dry_run))]
    pub async fn prune(&self, options: PruneOptions) -> StoreResult<PruneCount> {
        let _call = CallTimer::start();
        let PruneOptions {
            finished_before,
            dry_run,
            batch,
        } = options;
        if batch == 0 {
            return Err(StoreError::InvalidInput(
                "a prune batch must remove at least one handoff".into(),
            ));
        }
        if dry_run {
            return self
                .retry("counting prunable handoffs", || {
                    self.handoffs.count_prunable(finished_before)
                })
                .await;
        }
        let mut removed = PruneCount::default();
        loop {
            let count = self
                .retry("pruning", || {
                    self.handoffs.prune_batch(finished_before, batch)
                })
                .await?;
            if count.handoffs == 0 {
                return Ok(removed);
            }
            removed += count;
        }
    }

    /// Writes the whole registry to `out` as an export (versioned JSON
    /// lines, see [`archive`](crate::archive)) read from one consistent
    /// snapshot, while other handles and processes go on writing, calling
    /// `progress` (when given) with the counts so far after every record.
    /// Returns what it wrote. `out` is written as the records come; buffer
    /// it.
    ///
    /// # Errors
    /// `Unavailable` when the store fails or `out` cannot be written (what
    /// was written before is not a whole export: it has no end line, and
    /// an import refuses it).
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend))]
    pub async fn export<W: Write + Send>(
        &self,
        out: W,
        progress: Option<Progress<'_>>,
    ) -> StoreResult<ArchiveSummary> {
        let _call = CallTimer::start();
        let mut writer = ArchiveWriter::new(out, progress)?;
        self.archive.export(&mut writer).await
    }

    /// Loads an export read from `input` into this store, which must be
    /// empty, atomically, and returns what it loaded, calling `progress`
    /// (when given) with the counts so far after every record read. Every
    /// line is checked as it is read; the store is changed only if the
    /// whole export is good.
    ///
    /// # Errors
    /// `InvalidInput` for a damaged line (naming its number), a file cut
    /// short or one written by a newer lf-handoff; `Conflict` of kind
    /// `NotEmpty` for a store that holds anything; `Unavailable` when the
    /// store fails or `input` cannot be read. Nothing was imported then.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend))]
    pub async fn import<R: BufRead + Send>(
        &self,
        input: R,
        progress: Option<Progress<'_>>,
    ) -> StoreResult<ArchiveSummary> {
        let _call = CallTimer::start();
        let mut reader = ArchiveReader::new(input, progress);
        self.archive.import(&mut reader).await
    }
}
