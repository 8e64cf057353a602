//! Tree names and key encoding of the sled backend.
//!
//! Every key is built here, so the layout documented in the parent module
//! is the layout on disk. Keys are byte strings compared lexicographically
//! by sled, so every number in a key is big-endian and every variable part
//! sits last or ends at a separator: byte order is sort order.

use lf_handoff_application::{StoreError, StoreResult};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoffParent, InteractiveHandoffStatus, StepKey,
};
use lf_handoff_domain::timestamp::{micros_at_or_before, micros_before, to_unix_micros};
use lf_handoff_domain::wave_home::WaveHome;
use time::OffsetDateTime;

/// Handoff id -> handoff record.
pub(super) const HANDOFFS: &[u8] = b"handoffs";
/// `created_at ++ id` -> empty: every handoff, in list order.
pub(super) const BY_CREATED: &[u8] = b"handoffs_by_created";
/// `parent ++ 0x00 ++ created_at ++ id` -> empty: one parent's handoffs.
pub(super) const BY_PARENT: &[u8] = b"handoffs_by_parent";
/// `created_at ++ id` -> empty: only the non-terminal handoffs.
pub(super) const ACTIVE: &[u8] = b"handoffs_active";
/// Parent reference -> id of its non-terminal handoff (invariant I6).
pub(super) const ACTIVE_SLOTS: &[u8] = b"active_slots";
/// `parent ++ 0x00 ++ step` -> id of the parent's handoff for that step
/// (contract C12: one handoff per parent and step, ever).
pub(super) const STEPS: &[u8] = b"handoff_steps";
/// Parent reference -> parent record.
pub(super) const PARENTS: &[u8] = b"parents";
/// Task PR id -> task PR record.
pub(super) const TASK_PRS: &[u8] = b"task_prs";
/// `expires_at ++ id` -> empty: the deadlines of the non-terminal handoffs
/// that have one (contract C14).
pub(super) const DUE: &[u8] = b"handoffs_due";
/// Position -> event: every history event of the store, in commit order
/// (contract C15).
pub(super) const EVENTS: &[u8] = b"handoff_events";
/// `id ++ 0x00 ++ seq` -> position: one handoff's events, in order.
pub(super) const HISTORY: &[u8] = b"handoff_history";
/// The history's counters: [`POSITION`] -> the last position given, and
/// [`seq_counter`] of a handoff -> its last seq.
pub(super) const COUNTERS: &[u8] = b"handoff_counters";

/// `status ++ 0x00 ++ created_at ++ id` -> empty: the handoffs in each
/// status, in list order (C17).
pub(super) const BY_STATUS: &[u8] = b"handoffs_by_status";
/// `home ++ 0x00 ++ created_at ++ id` -> empty: the handoffs at each home,
/// in list order (C17).
pub(super) const BY_HOME: &[u8] = b"handoffs_by_home";
/// `terminal_at ++ id` -> empty: the handoffs whose wake is claimed (so
/// terminal, I3), by finish: what a prune may remove (C17).
pub(super) const PRUNABLE: &[u8] = b"handoffs_prunable";

/// The [`COUNTERS`] key of the last store-wide position given.
pub(super) const POSITION: &[u8] = b"position";

/// The [`COUNTERS`] key that says an import is loading the store (C17):
/// written before its first record, removed with its last. A store that
/// holds it is refused when opened.
pub(super) const IMPORTING: &[u8] = b"import";

/// Ends the parent part of a [`BY_PARENT`] or [`STEPS`] key. References are
/// ASCII, so they never hold it, and one parent's keys never prefix
/// another's.
const PARENT_END: u8 = 0x00;

/// The key of a handoff record: its id text (`ih_<uuid v7>`).
pub(super) fn handoff(id: &InteractiveHandoffId) -> Vec<u8> {
    id.as_str().as_bytes().to_vec()
}

/// The key of a parent record and of its active slot: the reference text
/// (`wave:wv_...`, `project:ps_...`, `task:ts_...`).
pub(super) fn parent(reference: &InteractiveHandoffParent) -> Vec<u8> {
    reference.to_string().into_bytes()
}

/// The key of a task PR record: its id text.
pub(super) fn task_pr(id: &str) -> Vec<u8> {
    id.as_bytes().to_vec()
}

/// `created_at ++ id`, the key of [`BY_CREATED`] and [`ACTIVE`].
pub(super) fn created(created_at: OffsetDateTime, id: &InteractiveHandoffId) -> Vec<u8> {
    let mut key = Vec::with_capacity(8 + id.as_str().len());
    key.extend_from_slice(&micros_key(created_at));
    key.extend_from_slice(id.as_str().as_bytes());
    key
}

/// The prefix every [`BY_PARENT`] key of `reference` starts with.
pub(super) fn by_parent_prefix(reference: &InteractiveHandoffParent) -> Vec<u8> {
    let mut key = parent(reference);
    key.push(PARENT_END);
    key
}

/// `parent ++ 0x00 ++ created_at ++ id`, the key of [`BY_PARENT`].
pub(super) fn by_parent(
    reference: &InteractiveHandoffParent,
    created_at: OffsetDateTime,
    id: &InteractiveHandoffId,
) -> Vec<u8> {
    let mut key = by_parent_prefix(reference);
    key.extend_from_slice(&created(created_at, id));
    key
}

/// The prefix every [`BY_STATUS`] key of `status` starts with: its name
/// (lowercase ASCII letters and `_`) and `0x00`.
pub(super) fn by_status_prefix(status: InteractiveHandoffStatus) -> Vec<u8> {
    let mut key = status.as_str().as_bytes().to_vec();
    key.push(PARENT_END);
    key
}

/// `status ++ 0x00 ++ created_at ++ id`, the key of [`BY_STATUS`].
pub(super) fn by_status(
    status: InteractiveHandoffStatus,
    created_at: OffsetDateTime,
    id: &InteractiveHandoffId,
) -> Vec<u8> {
    let mut key = by_status_prefix(status);
    key.extend_from_slice(&created(created_at, id));
    key
}

/// The prefix every [`BY_HOME`] key of `home` starts with: its canonical
/// text (ASCII without control characters, so never `0x00`) and `0x00`.
pub(super) fn by_home_prefix(home: &WaveHome) -> Vec<u8> {
    let mut key = home.to_string().into_bytes();
    key.push(PARENT_END);
    key
}

/// `home ++ 0x00 ++ created_at ++ id`, the key of [`BY_HOME`].
pub(super) fn by_home(
    home: &WaveHome,
    created_at: OffsetDateTime,
    id: &InteractiveHandoffId,
) -> Vec<u8> {
    let mut key = by_home_prefix(home);
    key.extend_from_slice(&created(created_at, id));
    key
}

/// `terminal_at ++ id`, the key of [`PRUNABLE`].
pub(super) fn prunable(terminal_at: OffsetDateTime, id: &InteractiveHandoffId) -> Vec<u8> {
    created(terminal_at, id)
}

/// The first 8 bytes of every key (after its prefix) of an instant at or
/// after `instant`: every key of an instant before it sorts before this
/// bound, and no other. Exclusive upper bounds for "created before" and
/// "finished before" use it; it rounds a bound finer than storage up.
pub(super) fn before(instant: OffsetDateTime) -> [u8; 8] {
    micros_bits(micros_before(instant))
}

/// `parent ++ 0x00 ++ step`, the key of [`STEPS`]. A step holds no control
/// character, so never `0x00`: the key names exactly one (parent, step).
pub(super) fn step(reference: &InteractiveHandoffParent, step: &StepKey) -> Vec<u8> {
    let mut key = by_parent_prefix(reference);
    key.extend_from_slice(step.as_str().as_bytes());
    key
}

/// `expires_at ++ id`, the key of [`DUE`].
pub(super) fn due(expires_at: OffsetDateTime, id: &InteractiveHandoffId) -> Vec<u8> {
    created(expires_at, id)
}

/// The last [`DUE`] key of a deadline at or before `now`: every key of an
/// instant up to `now` (in storage precision) sorts at or before it, since
/// ids are ASCII and so never hold `0xff`.
pub(super) fn due_until(now: OffsetDateTime) -> Vec<u8> {
    let mut key = micros_bits(micros_at_or_before(now)).to_vec();
    key.push(0xff);
    key
}

/// The key of an event in [`EVENTS`]: its position, big-endian.
pub(super) fn event(position: u64) -> [u8; 8] {
    position.to_be_bytes()
}

/// The prefix every [`HISTORY`] key of handoff `id` starts with. Ids are
/// fixed-length ASCII, so one handoff's keys never prefix another's.
pub(super) fn history_prefix(id: &InteractiveHandoffId) -> Vec<u8> {
    let mut key = handoff(id);
    key.push(PARENT_END);
    key
}

/// `id ++ 0x00 ++ seq`, the key of an event of `id` in [`HISTORY`].
pub(super) fn history(id: &InteractiveHandoffId, seq: u64) -> Vec<u8> {
    let mut key = history_prefix(id);
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// The seq at the end of a [`HISTORY`] key of the handoff whose prefix is
/// `prefix`.
///
/// # Errors
/// `Unavailable` when the key is not the prefix and eight bytes.
pub(super) fn seq_in_history(prefix: &[u8], key: &[u8]) -> StoreResult<u64> {
    key.strip_prefix(prefix)
        .and_then(|seq| <[u8; 8]>::try_from(seq).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| {
            StoreError::damaged(format!(
                "index {} holds a malformed key {}; the store may be damaged",
                String::from_utf8_lossy(HISTORY),
                String::from_utf8_lossy(key)
            ))
        })
}

/// The [`COUNTERS`] key of the last seq of handoff `id`: `seq ++ 0x00 ++
/// id`, which no other counter key equals.
pub(super) fn seq_counter(id: &InteractiveHandoffId) -> Vec<u8> {
    let mut key = b"seq\x00".to_vec();
    key.extend_from_slice(id.as_str().as_bytes());
    key
}

/// The handoff id at the end of an index key whose first `skip` bytes are
/// the parent prefix (0 for [`BY_CREATED`], [`ACTIVE`] and [`DUE`]).
///
/// # Errors
/// `Unavailable` when the key is too short or its id does not parse: the
/// index was not written by this backend.
pub(super) fn id_in_index(
    tree: &[u8],
    key: &[u8],
    skip: usize,
) -> StoreResult<InteractiveHandoffId> {
    let damaged = || {
        StoreError::damaged(format!(
            "index {} holds a malformed key {}; the store may be damaged",
            String::from_utf8_lossy(tree),
            String::from_utf8_lossy(key)
        ))
    };
    let id = key.get(skip + 8..).ok_or_else(damaged)?;
    let id = std::str::from_utf8(id).map_err(|_| damaged())?;
    InteractiveHandoffId::parse(id).map_err(|_| damaged())
}

/// The handoff id an active slot of `parent` holds.
///
/// # Errors
/// `Unavailable` when the slot does not hold a handoff id.
pub(super) fn id_in_slot(
    parent: &InteractiveHandoffParent,
    holder: &[u8],
) -> StoreResult<InteractiveHandoffId> {
    parse_id(holder).ok_or_else(|| {
        StoreError::damaged(format!(
            "the active slot of {parent} holds {}, not a handoff id; the store may be damaged",
            String::from_utf8_lossy(holder)
        ))
    })
}

/// The handoff id an index value holds, if it holds one.
fn parse_id(holder: &[u8]) -> Option<InteractiveHandoffId> {
    std::str::from_utf8(holder)
        .ok()
        .and_then(|id| InteractiveHandoffId::parse(id).ok())
}

/// The handoff id the [`STEPS`] entry of `parent` and `step` holds.
///
/// # Errors
/// `Unavailable` when the entry does not hold a handoff id.
pub(super) fn id_in_step(
    parent: &InteractiveHandoffParent,
    step: &StepKey,
    holder: &[u8],
) -> StoreResult<InteractiveHandoffId> {
    parse_id(holder).ok_or_else(|| {
        StoreError::damaged(format!(
            "index {} holds {} for step {:?} of {parent}, not a handoff id; the store \
             may be damaged",
            String::from_utf8_lossy(STEPS),
            String::from_utf8_lossy(holder),
            step.as_str()
        ))
    })
}

/// An instant as 8 big-endian bytes that sort in time order: microseconds
/// since the epoch with the sign bit flipped, so negative (pre-1970)
/// instants sort before positive ones.
fn micros_key(instant: OffsetDateTime) -> [u8; 8] {
    micros_bits(to_unix_micros(instant))
}

/// [`micros_key`] of a count of microseconds.
fn micros_bits(micros: i64) -> [u8; 8] {
    // Reinterpreting the two's-complement bits is the point here.
    #[allow(clippy::cast_sign_loss)]
    let bits = micros as u64;
    (bits ^ (1 << 63)).to_be_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lf_handoff_domain::id::TaskSessionId;
    use time::macros::datetime;

    fn handoff_id(n: u8) -> InteractiveHandoffId {
        InteractiveHandoffId::parse(&format!("ih_0190a000-0000-7000-8000-0000000000{n:02x}"))
            .unwrap()
    }

    #[test]
    fn created_keys_sort_by_time_then_id() {
        let early = handoff_id(1);
        let late = handoff_id(2);
        let mut keys = [
            created(datetime!(2026-01-01 00:00:00.000_002 UTC), &early),
            created(datetime!(1960-01-01 00:00:00 UTC), &late),
            created(datetime!(2026-01-01 00:00:00.000_001 UTC), &late),
            created(datetime!(2026-01-01 00:00:00.000_001 UTC), &early),
            created(datetime!(1970-01-01 00:00:00 UTC), &early),
        ];
        keys.sort();
        let order: Vec<(i64, InteractiveHandoffId)> = keys
            .iter()
            .map(|key| {
                let bits = u64::from_be_bytes(key[..8].try_into().unwrap()) ^ (1 << 63);
                (bits as i64, id_in_index(ACTIVE, key, 0).unwrap())
            })
            .collect();
        assert_eq!(
            order,
            vec![
                (-315_619_200_000_000, late.clone()),
                (0, early.clone()),
                (1_767_225_600_000_001, early.clone()),
                (1_767_225_600_000_001, late),
                (1_767_225_600_000_002, early),
            ]
        );
    }

    #[test]
    fn parent_keys_never_prefix_another_parents() {
        let parent = InteractiveHandoffParent::Task(
            TaskSessionId::parse("ts_0190a000-0000-7000-8000-000000000007").unwrap(),
        );
        let id = handoff_id(3);
        let key = by_parent(&parent, datetime!(2026-01-01 0:00 UTC), &id);
        let prefix = by_parent_prefix(&parent);
        assert!(key.starts_with(&prefix));
        assert_eq!(id_in_index(BY_PARENT, &key, prefix.len()).unwrap(), id);
        assert!(id_in_index(BY_PARENT, &prefix, prefix.len()).is_err());
    }

    #[test]
    fn step_keys_name_one_parent_and_step() {
        let parent = InteractiveHandoffParent::Task(
            TaskSessionId::parse("ts_0190a000-0000-7000-8000-000000000007").unwrap(),
        );
        let login = StepKey::parse("oauth-login@turn-17").unwrap();
        let key = step(&parent, &login);
        assert_eq!(
            key,
            b"task:ts_0190a000-0000-7000-8000-000000000007\x00oauth-login@turn-17".to_vec()
        );
        // A longer step that starts with another is another key, and no
        // step of one parent starts another parent's keys.
        let longer = StepKey::parse("oauth-login@turn-170").unwrap();
        assert_ne!(step(&parent, &longer), key);
        assert!(key.starts_with(&by_parent_prefix(&parent)));
        let id = handoff_id(4);
        assert_eq!(
            id_in_step(&parent, &login, id.as_str().as_bytes()).unwrap(),
            id
        );
        assert!(id_in_step(&parent, &login, b"garbage").is_err());
    }
}
