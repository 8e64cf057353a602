//! Upkeep of the whole registry: expiring what is due (C14), pruning
//! what is finished (C17), export and import (C17).

use std::io::{BufRead, Write};

use async_trait::async_trait;

use lf_handoff_domain::interactive_handoff::InteractiveHandoff;

use super::{CallTimer, Local};
use crate::archive::{ArchiveReader, ArchiveSummary, ArchiveWriter, Progress};
use crate::error::{StoreError, StoreResult};
use crate::ports::PruneCount;
use crate::registry::{PruneOptions, Upkeep};

/// How many due handoffs one round of [`Upkeep::expire_due`] reads.
const EXPIRE_BATCH: usize = 256;

#[async_trait]
impl Upkeep for Local {
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend))]
    async fn expire_due(&self) -> StoreResult<Vec<InteractiveHandoff>> {
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

    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, dry_run = options.dry_run))]
    async fn prune(&self, options: PruneOptions) -> StoreResult<PruneCount> {
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

    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend))]
    async fn export(
        &self,
        out: &mut (dyn Write + Send),
        progress: Option<Progress<'_>>,
    ) -> StoreResult<ArchiveSummary> {
        let _call = CallTimer::start();
        let mut writer = ArchiveWriter::new(out, progress)?;
        self.archive.export(&mut writer).await
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend))]
    async fn import(
        &self,
        input: &mut (dyn BufRead + Send),
        progress: Option<Progress<'_>>,
    ) -> StoreResult<ArchiveSummary> {
        let _call = CallTimer::start();
        let mut reader = ArchiveReader::new(input, progress);
        self.archive.import(&mut reader).await
    }
}
