//! The SQL statements both SQL backends run, in `$n` placeholder form,
//! which both SQLite and PostgreSQL accept. What one backend runs alone is
//! in its folder (`sqlite/dialect.rs`, `postgres/dialect.rs`).
//!
//! The handoff statements list the columns of
//! [`HANDOFF_COLUMNS`](crate::sql::columns::HANDOFF_COLUMNS); each is built
//! from it once, on first use.
//!
//! **The plan of [`PARENT_WITH_ACTIVE`]** (the read of every `open`), as
//! `EXPLAIN` shows it: three index probes, no scan.
//! - SQLite (`EXPLAIN QUERY PLAN`; a unit test in `sql/tests.rs` keeps
//!   it so): `SEARCH p USING INDEX sqlite_autoindex_parents_1 (id=?)`,
//!   then `SEARCH handoffs USING INDEX handoffs_one_active_per_parent
//!   (parent_id=?) LEFT-JOIN` and `SEARCH handoffs USING INDEX
//!   handoffs_one_per_parent_step (parent_id=? AND step=?) LEFT-JOIN`.
//! - PostgreSQL 15, 20,000 parents and 200,000 handoffs, analysed, with
//!   the custom plan and the generic plan alike: two nested-loop left
//!   joins over `Index Scan using parents_pkey` (`id = $1`), `Index Scan
//!   using handoffs_one_active_per_parent` (`parent_id = $1`) and `Index
//!   Scan using handoffs_one_per_parent_step` (`parent_id = $1 AND step =
//!   $2`); with a NULL step the last probe finds nothing at once.

use std::sync::LazyLock;

use lf_handoff_domain::interactive_handoff::InteractiveHandoff;

use crate::sql::columns::{
    column_list, placeholders, renamed_column_list, set_list, COLUMN_COUNT, EVENTS_COLUMN,
    ID_COLUMN, VERSION_COLUMN,
};
use crate::sql::driver::Param;

/// The condition of an active (non-terminal) handoff; the partial indexes'
/// condition in `schema.rs`.
pub(crate) const ACTIVE: &str = "status IN ('waiting', 'attached')";

/// The column of a `(version, record)` row that holds the version.
pub(crate) const VERSION: &str = "version";
/// The column of a `(version, record)` row that holds the JSON record.
pub(crate) const RECORD: &str = "record";
/// [`PARENT_WITH_ACTIVE`]'s name for the parent's version.
pub(crate) const PARENT_VERSION: &str = "parent_version";
/// [`PARENT_WITH_ACTIVE`]'s name for the parent's record.
pub(crate) const PARENT_RECORD: &str = "parent_record";
/// The prefix of [`PARENT_WITH_ACTIVE`]'s names for the columns of the
/// parent's handoff for the step asked for (`at_step_id`, ...).
pub(crate) const AT_STEP: &str = "at_step_";

/// `SELECT <every handoff column> FROM handoffs <rest>`.
pub(crate) fn select_handoffs(rest: &str) -> String {
    format!("SELECT {} FROM handoffs {rest}", column_list())
}

/// One handoff, by id.
pub static HANDOFF_BY_ID: LazyLock<String> =
    LazyLock::new(|| select_handoffs(&format!("WHERE {ID_COLUMN} = $1")));

/// The parent's version and record, the columns of its active handoff (or
/// NULLs) under their own names, and the columns of its handoff for the
/// step `$2` (or NULLs, always for a NULL `$2`), each renamed with the
/// prefix [`AT_STEP`]: the snapshot `open` decides from, in one statement,
/// so one round trip. The parent's columns are renamed so that no name
/// appears twice. Each subquery's condition implies an index's: the
/// active one is the partial index `handoffs_one_active_per_parent`'s,
/// `step = $2` implies `step IS NOT NULL`, the condition of the unique
/// index over parent and step (`handoffs_one_per_parent_step`), so each is
/// one index probe (the plans are in the module doc).
pub(crate) static PARENT_WITH_ACTIVE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT p.{VERSION} AS {PARENT_VERSION}, p.{RECORD} AS {PARENT_RECORD}, a.*, {} \
         FROM parents p \
         LEFT JOIN ({}) a ON TRUE \
         LEFT JOIN ({}) s ON TRUE \
         WHERE p.id = $1",
        renamed_column_list("s", AT_STEP),
        select_handoffs(&format!("WHERE parent_id = $1 AND {ACTIVE}")),
        select_handoffs("WHERE parent_id = $1 AND step = $2"),
    )
});

/// Inserts the whole row (the values of `HandoffRow::values`), only while
/// the parent (the parameter after them) is still at the expected version
/// (the last parameter).
pub(crate) static INSERT_HANDOFF: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO handoffs ({}) SELECT {} WHERE EXISTS \
         (SELECT 1 FROM parents WHERE id = ${} AND version = ${})",
        column_list(),
        placeholders(),
        COLUMN_COUNT + 1,
        COLUMN_COUNT + 2
    )
});

/// A transition: compare-and-swap of the whole record (the parameters of
/// `HandoffRow::swap_values`), so no field the domain changed is left
/// behind.
pub static SWAP_HANDOFF: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE handoffs SET {} WHERE {ID_COLUMN} = $1 AND {VERSION_COLUMN} = $2",
        set_list()
    )
});

/// The columns of `handoff_events` a write fills; `position` is the
/// engine's.
const EVENT_COLUMNS: &str =
    "handoff_id, seq, at, kind, status_before, status_after, actor, detail, answer";

/// The values an event binds after the handoff's: `at`, `kind`,
/// `status_before`, `status_after`, `actor`, `detail`, `answer`.
pub const EVENT_PARAMS: usize = 7;

/// The insert of the event of the handoff row `source` yields: its id and
/// event count (just written) as `handoff_id` and `seq`, then the event's
/// own values from `$from` on. Each backend's write of a handoff with its
/// event ends with it.
pub(crate) fn insert_event_from(source: &str, from: usize) -> String {
    let values: Vec<String> = (from..from + EVENT_PARAMS)
        .map(|n| format!("${n}"))
        .collect();
    format!(
        "INSERT INTO handoff_events ({EVENT_COLUMNS}) SELECT {ID_COLUMN}, {EVENTS_COLUMN}, {} \
         FROM {source}",
        values.join(", ")
    )
}

/// The condition of a handoff a prune at cutoff `$1` may remove (C17): its
/// wake is claimed, so it is terminal (I3), and it finished before `$1`.
/// The partial index `handoffs_prunable`'s condition and a range of it.
pub(crate) const PRUNABLE: &str = "wake_claimed_at IS NOT NULL AND terminal_at < $1";

/// How many handoffs a prune at `$1` may remove (`handoffs`) and how many
/// events they hold (`events`).
pub(crate) static COUNT_PRUNABLE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT COUNT(*) AS handoffs, (SELECT COUNT(*) FROM handoff_events WHERE handoff_id IN \
         (SELECT {ID_COLUMN} FROM handoffs WHERE {PRUNABLE})) AS events \
         FROM handoffs WHERE {PRUNABLE}"
    )
});

/// The columns of an event row, as [`HISTORY`] returns them.
pub(crate) const EVENT_ROW: &str =
    "position, handoff_id, seq, at, kind, status_before, status_after, actor, detail, answer";

/// Handoff `$1`'s events, in order (the unique index over handoff and seq).
pub(crate) static HISTORY: LazyLock<String> = LazyLock::new(|| {
    format!("SELECT {EVENT_ROW} FROM handoff_events WHERE handoff_id = $1 ORDER BY seq")
});

/// The events after position `$1` and below `$2`, in position order, at
/// most `$3` (C16; the primary key).
pub(crate) static EVENTS_AFTER: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {EVENT_ROW} FROM handoff_events WHERE position > $1 AND position < $2 \
         ORDER BY position LIMIT $3"
    )
});

/// The largest position held below `$1` (0 for none): the last final
/// event's (C16).
pub(crate) const LAST_POSITION_BELOW: &str =
    "SELECT COALESCE(MAX(position), 0) AS n FROM handoff_events WHERE position < $1";

pub(crate) const INSERT_PARENT: &str = "INSERT INTO parents (id, kind, wave_id, version, record) \
     VALUES ($1, $2, $3, 1, $4) ON CONFLICT (id) DO NOTHING";

pub(crate) const INSERT_TASK_PR: &str = "INSERT INTO task_prs (id, task_session_id, record) \
     VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING";

pub(crate) const DELIVERY_CURSOR: &str =
    "SELECT version, record FROM delivery_cursors WHERE endpoint = $1";

pub(crate) const INSERT_DELIVERY_CURSOR: &str = "INSERT INTO delivery_cursors \
     (endpoint, version, record) VALUES ($1, 1, $2) ON CONFLICT (endpoint) DO NOTHING";

pub(crate) const SWAP_DELIVERY_CURSOR: &str = "UPDATE delivery_cursors \
     SET version = version + 1, record = $3 WHERE endpoint = $1 AND version = $2";

/// Stores a revocation, keeping the later of two instants for one key.
pub(crate) const REVOKE: &str = "INSERT INTO revocations AS r (revoked_key, until_at) \
     VALUES ($1, $2) ON CONFLICT (revoked_key) DO UPDATE SET until_at = CASE \
     WHEN r.until_at > excluded.until_at THEN r.until_at ELSE excluded.until_at END";

/// Forgets the revocations that ran out before an instant.
pub(crate) const FORGET_REVOCATIONS: &str = "DELETE FROM revocations WHERE until_at < $1";

/// Whether a key is revoked at an instant (1) or not (0).
pub(crate) const IS_REVOKED: &str =
    "SELECT count(*) AS n FROM revocations WHERE revoked_key = $1 AND until_at >= $2";

pub(crate) const PARENT_BY_ID: &str = "SELECT version, record FROM parents WHERE id = $1";

pub(crate) const SWAP_PARENT: &str = "UPDATE parents SET version = version + 1, record = $3 \
     WHERE id = $1 AND version = $2";

/// The version column is a constant; it is BIGINT so PostgreSQL decodes it
/// as the same type as the real version columns.
pub(crate) const TASK_PR_BY_ID: &str =
    "SELECT CAST(0 AS BIGINT) AS version, record FROM task_prs WHERE id = $1";

/// Which row a [`HandoffWrite`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteKind {
    /// A new handoff ([`INSERT_HANDOFF`]: every column, then the parent's
    /// id and version).
    Insert,
    /// A compare-and-swap of a stored one ([`SWAP_HANDOFF`]).
    Swap,
}

impl WriteKind {
    /// The statement that writes the row alone.
    // PostgreSQL writes the row and its event in one statement of its own.
    #[cfg(feature = "sqlite")]
    pub(crate) fn statement(self) -> &'static str {
        match self {
            Self::Insert => &INSERT_HANDOFF,
            Self::Swap => &SWAP_HANDOFF,
        }
    }
}

/// A write of one handoff's row with its history event (C15).
#[derive(Debug)]
pub(crate) struct HandoffWrite<'a> {
    /// Which row the write is.
    pub kind: WriteKind,
    /// The handoff as written.
    // Read by SQLite's dialect, which writes the event after the row.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub handoff: &'a InteractiveHandoff,
    /// The parameters of [`WriteKind::statement`].
    pub params: &'a [Param<'a>],
    /// The event's own values, after the row's
    /// ([`event_values`](crate::sql::events::event_values)).
    pub event: [Param<'a>; EVENT_PARAMS],
}
