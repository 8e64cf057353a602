//! The raw-engine side for sled: the lifecycle as plain sled operations,
//! and the bulk loader, on the store's own directory.
//!
//! The keys and record bytes are the adapter's (`adapters/src/sled/keys.rs`
//! and `record.rs`): a record is a format byte, an 8-byte big-endian
//! version and the domain record's JSON; the index trees hold
//! `created_at ++ id` keys, under a status's or a home's name and `0x00`
//! in `handoffs_by_status` and `handoffs_by_home`, and `handoffs_prunable`
//! holds `terminal_at ++ id` of the claimed ones. The bulk loader fills
//! every list index; the raw lifecycle keeps those the first version had
//! (it writes no history either), so it stays the same baseline. The durability is the adapter's too: after
//! every write, `Db::flush` and an `fdatasync` of sled's log. The bench's
//! tests check that the store reads what this module writes.
//!
//! A raw transition is sled's own compare-and-swap of the whole record
//! (attach, claim) or, where index entries move as well (open, finish), one
//! multi-tree transaction that checks the stored bytes first.

use std::fs::{File, OpenOptions};
use std::ops::Range;
use std::path::{Path, PathBuf};

use std::time::{Duration, Instant};

use async_trait::async_trait;
use lf_handoff_adapters::domain::id::InteractiveHandoffId;
use lf_handoff_adapters::domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffParent,
};
use lf_handoff_adapters::domain::timestamp::to_unix_micros;
use serde::Serialize;
use sled::transaction::{ConflictableTransactionError, TransactionError, Transactional as _};
use sled::{Batch, Db, Tree};
use time::OffsetDateTime;

use crate::backends::RawEngine;
use crate::error::{fail, BenchResult, Context, Failure};
use crate::population::{version_of, Population};

/// The record format the adapter writes.
const FORMAT: u8 = 1;
/// Handoffs per bulk-load batch (one sync each).
const HANDOFFS_PER_BATCH: u64 = 50_000;

/// sled opened directly on a store directory.
pub struct RawSled {
    db: Db,
    handoffs: Tree,
    by_created: Tree,
    by_parent: Tree,
    active: Tree,
    slots: Tree,
    parents: Tree,
    by_status: Tree,
    by_home: Tree,
    prunable: Tree,
    log: File,
}

impl RawSled {
    /// Opens the store directory `dir` (created by the adapter), waiting
    /// for a store handle of this process that is still closing.
    pub async fn open(dir: &Path) -> BenchResult<Self> {
        let dir = dir.to_path_buf();
        tokio::task::spawn_blocking(move || Self::open_blocking(dir))
            .await
            .context("raw sled open")?
    }

    fn open_blocking(dir: PathBuf) -> BenchResult<Self> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let db = loop {
            match sled::Config::new().path(&dir).open() {
                Ok(db) => break db,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(error) => return fail(format!("raw sled open {}: {error}", dir.display())),
            }
        };
        let tree = |name: &str| db.open_tree(name).context(format!("sled tree {name}"));
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.join("db"))
            .context("sled log")?;
        Ok(Self {
            handoffs: tree("handoffs")?,
            by_created: tree("handoffs_by_created")?,
            by_parent: tree("handoffs_by_parent")?,
            active: tree("handoffs_active")?,
            slots: tree("active_slots")?,
            parents: tree("parents")?,
            by_status: tree("handoffs_by_status")?,
            by_home: tree("handoffs_by_home")?,
            prunable: tree("handoffs_prunable")?,
            log,
            db,
        })
    }

    /// The adapter's durability: write sled's log, then `fdatasync` it.
    fn durable(&self) -> BenchResult<()> {
        self.db.flush().context("sled flush")?;
        self.log.sync_data().context("sled log fdatasync")
    }
}

fn micros_key(instant: OffsetDateTime) -> [u8; 8] {
    #[allow(clippy::cast_sign_loss)]
    let bits = to_unix_micros(instant) as u64;
    (bits ^ (1 << 63)).to_be_bytes()
}

fn parent_key(parent: &InteractiveHandoffParent) -> Vec<u8> {
    parent.to_string().into_bytes()
}

fn created_key(handoff: &InteractiveHandoff) -> Vec<u8> {
    let mut key = micros_key(handoff.created_at).to_vec();
    key.extend_from_slice(handoff.id.as_str().as_bytes());
    key
}

fn by_parent_key(handoff: &InteractiveHandoff) -> Vec<u8> {
    let mut key = parent_key(&handoff.parent);
    key.push(0);
    key.extend_from_slice(&created_key(handoff));
    key
}

/// `prefix ++ 0x00 ++ created_at ++ id`: the key of `handoffs_by_status`
/// (the status's name) and `handoffs_by_home` (the home's text).
fn prefixed_key(prefix: &str, handoff: &InteractiveHandoff) -> Vec<u8> {
    let mut key = prefix.as_bytes().to_vec();
    key.push(0);
    key.extend_from_slice(&created_key(handoff));
    key
}

/// `terminal_at ++ id`, the key of `handoffs_prunable`, for a handoff
/// whose wake is claimed.
fn prunable_key(handoff: &InteractiveHandoff) -> Option<Vec<u8>> {
    let finished = handoff
        .terminal_at
        .filter(|_| handoff.wake_claimed_at.is_some())?;
    let mut key = micros_key(finished).to_vec();
    key.extend_from_slice(handoff.id.as_str().as_bytes());
    Some(key)
}

/// The adapter's record bytes.
pub fn encode<T: Serialize>(version: u64, value: &T) -> BenchResult<Vec<u8>> {
    let mut bytes = Vec::with_capacity(512);
    bytes.push(FORMAT);
    bytes.extend_from_slice(&version.to_be_bytes());
    serde_json::to_writer(&mut bytes, value).context("encode record")?;
    Ok(bytes)
}

fn record(handoff: &InteractiveHandoff) -> BenchResult<Vec<u8>> {
    encode(version_of(handoff) as u64, handoff)
}

fn tx_failed(what: &str, error: TransactionError<String>) -> Failure {
    match error {
        TransactionError::Abort(reason) => Failure(format!("raw sled {what}: {reason}")),
        TransactionError::Storage(error) => Failure(format!("raw sled {what}: {error}")),
    }
}

#[async_trait]
impl RawEngine for RawSled {
    async fn insert(&self, handoff: &InteractiveHandoff) -> BenchResult<()> {
        let id = handoff.id.as_str().as_bytes().to_vec();
        let stored = record(handoff)?;
        let (created, by_parent, slot) = (
            created_key(handoff),
            by_parent_key(handoff),
            parent_key(&handoff.parent),
        );
        // sled calls block; the benchmark makes one call at a time, so the
        // raw side runs them inline, free of the thread hop the adapter
        // pays (one spawn_blocking per call).
        let raw = self;
        {
            (
                &raw.handoffs,
                &raw.by_created,
                &raw.by_parent,
                &raw.active,
                &raw.slots,
            )
                .transaction(|(handoffs, by_created, by_parent_tree, active, slots)| {
                    if slots.get(&slot)?.is_some() {
                        return Err(ConflictableTransactionError::Abort(
                            "the parent already has an active handoff".to_string(),
                        ));
                    }
                    handoffs.insert(id.as_slice(), stored.as_slice())?;
                    by_created.insert(created.as_slice(), &[][..])?;
                    by_parent_tree.insert(by_parent.as_slice(), &[][..])?;
                    active.insert(created.as_slice(), &[][..])?;
                    slots.insert(slot.as_slice(), id.as_slice())?;
                    Ok(())
                })
                .map_err(|e| tx_failed("insert", e))?;
            raw.durable()
        }
    }

    async fn get(&self, id: &InteractiveHandoffId) -> BenchResult<bool> {
        let found = self
            .handoffs
            .get(id.as_str().as_bytes())
            .context("raw sled get")?;
        Ok(found.is_some())
    }

    async fn attach(
        &self,
        current: &InteractiveHandoff,
        next: &InteractiveHandoff,
    ) -> BenchResult<()> {
        self.swap("attach", current, next)
    }

    async fn finish(
        &self,
        current: &InteractiveHandoff,
        next: &InteractiveHandoff,
    ) -> BenchResult<()> {
        let id = current.id.as_str().as_bytes().to_vec();
        let (old, new) = (record(current)?, record(next)?);
        let (created, slot) = (created_key(current), parent_key(&current.parent));
        let raw = self;
        {
            (&raw.handoffs, &raw.active, &raw.slots)
                .transaction(|(handoffs, active, slots)| {
                    if handoffs.get(&id)?.as_deref() != Some(old.as_slice()) {
                        return Err(ConflictableTransactionError::Abort(
                            "the record changed".to_string(),
                        ));
                    }
                    handoffs.insert(id.as_slice(), new.as_slice())?;
                    active.remove(created.as_slice())?;
                    if slots.get(&slot)?.as_deref() == Some(id.as_slice()) {
                        slots.remove(slot.as_slice())?;
                    }
                    Ok(())
                })
                .map_err(|e| tx_failed("finish", e))?;
            raw.durable()
        }
    }

    async fn claim(
        &self,
        current: &InteractiveHandoff,
        next: &InteractiveHandoff,
    ) -> BenchResult<()> {
        self.swap("claim", current, next)
    }

    async fn bulk_load(
        &self,
        population: &Population,
        parents: Range<u64>,
        handoffs: Range<u64>,
    ) -> BenchResult<()> {
        let mut batch = Batch::default();
        for p in parents {
            let parent = population.wave(p);
            batch.insert(parent_key(&parent.reference()), encode(1, &parent)?);
        }
        self.parents
            .apply_batch(batch)
            .context("bulk load: parents")?;
        let mut start = handoffs.start;
        while start < handoffs.end {
            let end = (start + HANDOFFS_PER_BATCH).min(handoffs.end);
            let mut records = Batch::default();
            let mut by_created = Batch::default();
            let mut by_parent = Batch::default();
            let mut active = Batch::default();
            let mut slots = Batch::default();
            let mut by_status = Batch::default();
            let mut by_home = Batch::default();
            let mut prunable = Batch::default();
            for i in start..end {
                let handoff = population.handoff(i)?;
                let id = handoff.id.as_str().as_bytes().to_vec();
                records.insert(id.clone(), record(&handoff)?);
                by_created.insert(created_key(&handoff), Vec::new());
                by_parent.insert(by_parent_key(&handoff), Vec::new());
                by_status.insert(prefixed_key(handoff.status.as_str(), &handoff), Vec::new());
                by_home.insert(
                    prefixed_key(&handoff.home.to_string(), &handoff),
                    Vec::new(),
                );
                if let Some(key) = prunable_key(&handoff) {
                    prunable.insert(key, Vec::new());
                }
                if handoff.is_active() {
                    active.insert(created_key(&handoff), Vec::new());
                    slots.insert(parent_key(&handoff.parent), id);
                }
            }
            self.handoffs.apply_batch(records).context("bulk load")?;
            self.by_created
                .apply_batch(by_created)
                .context("bulk load")?;
            self.by_parent.apply_batch(by_parent).context("bulk load")?;
            self.active.apply_batch(active).context("bulk load")?;
            self.slots.apply_batch(slots).context("bulk load")?;
            self.by_status.apply_batch(by_status).context("bulk load")?;
            self.by_home.apply_batch(by_home).context("bulk load")?;
            self.prunable.apply_batch(prunable).context("bulk load")?;
            self.durable()?;
            start = end;
        }
        Ok(())
    }

    async fn close(self: Box<Self>) {
        let _ = self.durable();
        // sled releases its lock when its last thread lets go of the Db;
        // a store opened next waits for that.
        drop(self);
    }
}

impl RawSled {
    fn swap(
        &self,
        what: &str,
        current: &InteractiveHandoff,
        next: &InteractiveHandoff,
    ) -> BenchResult<()> {
        let id = current.id.as_str().as_bytes();
        let (old, new) = (record(current)?, record(next)?);
        match self
            .handoffs
            .compare_and_swap(id, Some(old), Some(new))
            .context(format!("raw sled {what}"))?
        {
            Ok(()) => self.durable(),
            Err(_) => fail(format!("raw sled {what}: the record changed")),
        }
    }
}
