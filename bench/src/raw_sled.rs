//! The raw-engine side for sled: the lifecycle as plain sled operations,
//! and the bulk loader, on the store's own directory.
//!
//! The trees, keys and bytes are the adapter's (`adapters/src/sled/mod.rs`
//! documents the layout, `keys.rs` and `record.rs` the encodings): a record
//! is the format byte ([`FORMAT`], 4), an 8-byte big-endian version and the
//! domain record's JSON; the index trees hold `created_at ++ id` keys (and
//! `handoffs_due` holds `expires_at ++ id` for an active handoff with a
//! deadline); a history event is the format byte and the domain event's
//! JSON. The durability is the adapter's too: after every write,
//! `Db::flush` and an `fdatasync` of sled's log. The bench's tests check
//! that the store reads what this module writes, history included.
//!
//! The bulk loader also fills the list trees of C17 (`handoffs_by_status`,
//! `handoffs_by_home`, `handoffs_prunable`: status or home name ++ `0x00`
//! ++ `created_at ++ id`, and `terminal_at ++ id` of the claimed ones); the
//! raw lifecycle does not keep those three (the store does), so on sled the
//! raw side does a little less work than the store.
//!
//! Every raw write (`open`, `attach`, `finish`, `claim`) is one multi-tree
//! transaction, as in the store: it checks the stored record bytes (absent
//! for an insert, whose parent slot must be free too; the bytes of
//! `current` for a transition), writes the new record, moves the index
//! entries that change (none for `attach` and `claim`, whose transactions
//! hold only the record and history trees) and appends the change's event
//! (C15): it reads and raises the store-wide `position` counter and the
//! handoff's `seq` counter in `handoff_counters`, and writes
//! `handoff_events[position]` and `handoff_history[id ++ 0x00 ++ seq]`. The
//! event is the one the store writes, `recorded_change` of the two records,
//! by [`raw_actor`]. A transaction holds only the trees its write touches
//! (nine for `open`, seven for `finish`, four for `attach` and `claim`;
//! the store's hold all nine of a transition, eleven for `open`). Left out,
//! as a direct user who knows these records would leave them out: the
//! store's check that the parent record is still at the version it read,
//! its damage checks that the event's keys are still free, and
//! `handoff_steps` (these handoffs have no step).
//!
//! The bulk loader writes records and index entries only, no events:
//! bulk-loaded handoffs have no history, the state of a store upgraded from
//! a release without history (their first change would be their event 1).

use std::fs::{File, OpenOptions};
use std::ops::Range;
use std::path::{Path, PathBuf};

use std::time::{Duration, Instant};

use async_trait::async_trait;
use lf_handoff_adapters::ports::recorded_change;
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    Actor, HandoffChange, HandoffEvent, InteractiveHandoff, InteractiveHandoffParent,
};
use lf_handoff_domain::timestamp::to_unix_micros;
use serde::Serialize;
use sled::transaction::{
    ConflictableTransactionError, TransactionError, Transactional as _, TransactionalTree,
};
use sled::{Batch, Db, Tree};
use time::OffsetDateTime;

use crate::backends::{raw_actor, RawEngine};
use crate::error::{fail, BenchResult, Context, Failure};
use crate::population::{version_of, Population};

/// The record (and event) format the adapter writes: format 4, with
/// deadlines, history and answers (C26). The store's marker file names
/// the same number.
pub const FORMAT: u8 = 4;
/// The `handoff_counters` key of the last position given.
const POSITION: &[u8] = b"position";
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
    due: Tree,
    events: Tree,
    history: Tree,
    counters: Tree,
    parents: Tree,
    by_status: Tree,
    by_home: Tree,
    prunable: Tree,
    log: File,
    actor: &'static Actor,
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
            due: tree("handoffs_due")?,
            events: tree("handoff_events")?,
            history: tree("handoff_history")?,
            counters: tree("handoff_counters")?,
            parents: tree("parents")?,
            by_status: tree("handoffs_by_status")?,
            by_home: tree("handoffs_by_home")?,
            prunable: tree("handoffs_prunable")?,
            log,
            actor: raw_actor()?,
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

fn time_id_key(instant: OffsetDateTime, id: &InteractiveHandoffId) -> Vec<u8> {
    let mut key = micros_key(instant).to_vec();
    key.extend_from_slice(id.as_str().as_bytes());
    key
}

fn created_key(handoff: &InteractiveHandoff) -> Vec<u8> {
    time_id_key(handoff.created_at, &handoff.id)
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

/// The `handoffs_due` key, for an active handoff with a deadline.
fn due_key(handoff: &InteractiveHandoff) -> Option<Vec<u8>> {
    handoff
        .expires_at
        .filter(|_| handoff.is_active())
        .map(|deadline| time_id_key(deadline, &handoff.id))
}

/// The `handoff_counters` key of handoff `id`'s last seq: `seq ++ 0x00 ++ id`.
fn seq_counter_key(id: &InteractiveHandoffId) -> Vec<u8> {
    let mut key = b"seq\x00".to_vec();
    key.extend_from_slice(id.as_str().as_bytes());
    key
}

/// The `handoff_history` key of event `seq` of `id`: `id ++ 0x00 ++ seq`.
fn history_key(id: &InteractiveHandoffId, seq: u64) -> Vec<u8> {
    let mut key = id.as_str().as_bytes().to_vec();
    key.push(0);
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// The adapter's record bytes.
pub fn encode<T: Serialize>(version: u64, value: &T) -> BenchResult<Vec<u8>> {
    let mut bytes = Vec::with_capacity(512);
    bytes.push(FORMAT);
    bytes.extend_from_slice(&version.to_be_bytes());
    serde_json::to_writer(&mut bytes, value).context("encode record")?;
    Ok(bytes)
}

/// The adapter's event bytes: the format byte, then the event's JSON.
fn encode_event(event: &HandoffEvent) -> Result<Vec<u8>, serde_json::Error> {
    let mut bytes = Vec::with_capacity(256);
    bytes.push(FORMAT);
    serde_json::to_writer(&mut bytes, event)?;
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

type Tx<T> = Result<T, ConflictableTransactionError<String>>;

fn abort<T>(reason: impl Into<String>) -> Tx<T> {
    Err(ConflictableTransactionError::Abort(reason.into()))
}

/// The history trees, as one transaction sees them.
struct Log<'t> {
    events: &'t TransactionalTree,
    history: &'t TransactionalTree,
    counters: &'t TransactionalTree,
}

impl Log<'_> {
    /// Appends `change` of handoff `id` by `actor` at the next position and
    /// the handoff's next seq, raising both counters.
    fn append(&self, id: &InteractiveHandoffId, change: &HandoffChange, actor: &Actor) -> Tx<()> {
        let position = self.next(POSITION)?;
        let seq_key = seq_counter_key(id);
        let seq = self.next(&seq_key)?;
        let event = change
            .clone()
            .into_event(id.clone(), seq, position, actor.clone());
        let bytes = match encode_event(&event) {
            Ok(bytes) => bytes,
            Err(error) => return abort(format!("encode event: {error}")),
        };
        let position_bytes = position.to_be_bytes();
        self.events.insert(&position_bytes[..], bytes)?;
        self.history
            .insert(history_key(id, seq), &position_bytes[..])?;
        self.counters.insert(POSITION, &position_bytes[..])?;
        self.counters.insert(seq_key, &seq.to_be_bytes()[..])?;
        Ok(())
    }

    /// One more than the counter at `key` (absent: 0).
    fn next(&self, key: &[u8]) -> Tx<u64> {
        let last = match self.counters.get(key)? {
            None => 0,
            Some(bytes) => match <[u8; 8]>::try_from(bytes.as_ref()) {
                Ok(bytes) => u64::from_be_bytes(bytes),
                Err(_) => {
                    return abort(format!(
                        "counter {} is not 8 bytes",
                        String::from_utf8_lossy(key)
                    ))
                }
            },
        };
        match last.checked_add(1) {
            Some(next) => Ok(next),
            None => abort(format!("counter {} is full", String::from_utf8_lossy(key))),
        }
    }
}

#[async_trait]
impl RawEngine for RawSled {
    async fn insert(&self, handoff: &InteractiveHandoff) -> BenchResult<()> {
        let id = handoff.id.as_str().as_bytes().to_vec();
        let stored = record(handoff)?;
        let change = recorded_change(None, handoff).context("raw sled insert: the event")?;
        let (created, by_parent, slot, due) = (
            created_key(handoff),
            by_parent_key(handoff),
            parent_key(&handoff.parent),
            due_key(handoff),
        );
        // sled calls block; the benchmark makes one call at a time, so the
        // raw side runs them inline, free of the thread hop the adapter
        // pays (one spawn_blocking per call).
        (
            &self.handoffs,
            &self.by_created,
            &self.by_parent,
            &self.active,
            &self.slots,
            &self.due,
            &self.events,
            &self.history,
            &self.counters,
        )
            .transaction(
                |(
                    handoffs,
                    by_created,
                    by_parent_tree,
                    active,
                    slots,
                    due_tree,
                    events,
                    history,
                    counters,
                )| {
                    if slots.get(&slot)?.is_some() {
                        return abort("the parent already has an active handoff");
                    }
                    if handoffs.get(&id)?.is_some() {
                        return abort("the handoff id is already stored");
                    }
                    handoffs.insert(id.as_slice(), stored.as_slice())?;
                    by_created.insert(created.as_slice(), &[][..])?;
                    by_parent_tree.insert(by_parent.as_slice(), &[][..])?;
                    active.insert(created.as_slice(), &[][..])?;
                    slots.insert(slot.as_slice(), id.as_slice())?;
                    if let Some(due) = &due {
                        due_tree.insert(due.as_slice(), &[][..])?;
                    }
                    let log = Log {
                        events,
                        history,
                        counters,
                    };
                    log.append(&handoff.id, &change, self.actor)
                },
            )
            .map_err(|e| tx_failed("insert", e))?;
        self.durable()
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
        self.swap_in_place("attach", current, next)
    }

    async fn finish(
        &self,
        current: &InteractiveHandoff,
        next: &InteractiveHandoff,
    ) -> BenchResult<()> {
        let id = current.id.as_str().as_bytes().to_vec();
        let (old, new) = (record(current)?, record(next)?);
        let change = recorded_change(Some(current), next).context("raw sled finish: the event")?;
        let (created, slot, due) = (
            created_key(current),
            parent_key(&current.parent),
            due_key(current),
        );
        (
            &self.handoffs,
            &self.active,
            &self.slots,
            &self.due,
            &self.events,
            &self.history,
            &self.counters,
        )
            .transaction(
                |(handoffs, active, slots, due_tree, events, history, counters)| {
                    if handoffs.get(&id)?.as_deref() != Some(old.as_slice()) {
                        return abort("the record changed");
                    }
                    handoffs.insert(id.as_slice(), new.as_slice())?;
                    active.remove(created.as_slice())?;
                    if slots.get(&slot)?.as_deref() == Some(id.as_slice()) {
                        slots.remove(slot.as_slice())?;
                    }
                    if let Some(due) = &due {
                        due_tree.remove(due.as_slice())?;
                    }
                    let log = Log {
                        events,
                        history,
                        counters,
                    };
                    log.append(&next.id, &change, self.actor)
                },
            )
            .map_err(|e| tx_failed("finish", e))?;
        self.durable()
    }

    async fn claim(
        &self,
        current: &InteractiveHandoff,
        next: &InteractiveHandoff,
    ) -> BenchResult<()> {
        self.swap_in_place("claim", current, next)
    }

    /// Records and index entries in batches, no history events (see the
    /// module doc).
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
            let mut due = Batch::default();
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
                if let Some(key) = due_key(&handoff) {
                    due.insert(key, Vec::new());
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
            self.due.apply_batch(due).context("bulk load")?;
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
    /// Writes `next` over `current` when no index entry moves (`attach`,
    /// `claim`): one transaction of the record and history trees that
    /// checks the stored bytes are `current`'s and appends the event.
    fn swap_in_place(
        &self,
        what: &str,
        current: &InteractiveHandoff,
        next: &InteractiveHandoff,
    ) -> BenchResult<()> {
        if current.is_active() != next.is_active() || due_key(current) != due_key(next) {
            return fail(format!("raw sled {what}: index entries would move"));
        }
        let id = current.id.as_str().as_bytes();
        let (old, new) = (record(current)?, record(next)?);
        let change =
            recorded_change(Some(current), next).context(format!("raw sled {what}: the event"))?;
        (&self.handoffs, &self.events, &self.history, &self.counters)
            .transaction(|(handoffs, events, history, counters)| {
                if handoffs.get(id)?.as_deref() != Some(old.as_slice()) {
                    return abort("the record changed");
                }
                handoffs.insert(id, new.as_slice())?;
                let log = Log {
                    events,
                    history,
                    counters,
                };
                log.append(&next.id, &change, self.actor)
            })
            .map_err(|e| tx_failed(what, e))?;
        self.durable()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::{BenchBackend as _, SledBench};

    /// The bulk loader writes records of the format the store's marker
    /// names, which the store reads (the round trip in `backends::tests`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bulk_loaded_records_have_the_stores_format() {
        let dir = tempfile::tempdir().unwrap();
        let backend = SledBench::new(dir.path().to_path_buf());
        let config = backend.new_store("format").await.unwrap();
        let store_dir = dir.path().join("format");
        let marker = std::fs::read_to_string(store_dir.join("lf-handoff-store")).unwrap();
        assert!(
            marker
                .lines()
                .any(|line| line == format!("format {FORMAT}")),
            "{marker:?}"
        );
        let raw = RawSled::open(&store_dir).await.unwrap();
        let population = Population::new(OffsetDateTime::now_utc()).unwrap();
        raw.bulk_load(&population, 0..3, 0..30).await.unwrap();
        let formats: Vec<u8> = raw
            .handoffs
            .iter()
            .chain(raw.parents.iter())
            .map(|entry| entry.unwrap().1[0])
            .collect();
        assert_eq!(formats, vec![FORMAT; 33]);
        Box::new(raw).close().await;
        backend.remove(&config).await;
    }
}
