//! The SQL statements of the shared repository, in `$n` placeholder form,
//! which both SQLite and PostgreSQL accept.
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

use crate::sql::columns::{
    column_list, placeholders, renamed_column_list, set_list, COLUMN_COUNT, EVENTS_COLUMN,
    ID_COLUMN, SWAP_PARAMS, VERSION_COLUMN,
};

/// The condition of an active (non-terminal) handoff; the partial indexes'
/// condition in `schema.rs`.
const ACTIVE: &str = "status IN ('waiting', 'attached')";

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
fn select_handoffs(rest: &str) -> String {
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

pub(crate) static LIST_ALL: LazyLock<String> =
    LazyLock::new(|| select_handoffs("ORDER BY created_at, id"));

pub(crate) static LIST_PARENT: LazyLock<String> =
    LazyLock::new(|| select_handoffs("WHERE parent_id = $1 ORDER BY created_at, id"));

pub(crate) static LIST_ACTIVE: LazyLock<String> =
    LazyLock::new(|| select_handoffs(&format!("WHERE {ACTIVE} ORDER BY created_at, id")));

pub(crate) static LIST_PARENT_ACTIVE: LazyLock<String> = LazyLock::new(|| {
    select_handoffs(&format!(
        "WHERE parent_id = $1 AND {ACTIVE} ORDER BY created_at, id"
    ))
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
const EVENT_COLUMNS: &str = "handoff_id, seq, at, kind, status_before, status_after, actor, detail";

/// The values an event binds after the handoff's: `at`, `kind`,
/// `status_before`, `status_after`, `actor`, `detail`.
pub const EVENT_PARAMS: usize = 6;

/// `$from, ..., $(from + EVENT_PARAMS - 1)`: an event's own values.
fn event_placeholders(from: usize) -> String {
    let placeholders: Vec<String> = (from..from + EVENT_PARAMS)
        .map(|n| format!("${n}"))
        .collect();
    placeholders.join(", ")
}

/// The event row of handoff `$1` as it now stands: its id and event count
/// (just written) as `handoff_id` and `seq`, then the event's own values
/// (`$2` ...). The second statement of a write on SQLite, in the same
/// transaction as the handoff's row.
pub static INSERT_EVENT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO handoff_events ({EVENT_COLUMNS})          SELECT {ID_COLUMN}, {EVENTS_COLUMN}, {} FROM handoffs WHERE {ID_COLUMN} = $1",
        event_placeholders(2)
    )
});

/// `statement` (an INSERT or UPDATE of one handoff whose own parameters
/// are `$1 ... $own`) with its event, in one statement: a data-modifying
/// CTE whose row feeds the event's INSERT, so the event costs no round
/// trip and no transaction of its own (PostgreSQL). It affects one row if
/// and only if `statement` did.
pub fn with_event(statement: &str, own: usize) -> String {
    format!(
        "WITH h AS ({statement} RETURNING {ID_COLUMN}, {EVENTS_COLUMN})          INSERT INTO handoff_events ({EVENT_COLUMNS})          SELECT {ID_COLUMN}, {EVENTS_COLUMN}, {} FROM h",
        event_placeholders(own + 1)
    )
}

/// [`INSERT_HANDOFF`] and its `opened` event in one statement.
pub(crate) static INSERT_HANDOFF_WITH_EVENT: LazyLock<String> =
    LazyLock::new(|| with_event(&INSERT_HANDOFF, COLUMN_COUNT + 2));

/// [`SWAP_HANDOFF`] and its event in one statement.
pub static SWAP_HANDOFF_WITH_EVENT: LazyLock<String> =
    LazyLock::new(|| with_event(&SWAP_HANDOFF, SWAP_PARAMS));

/// The condition of a due handoff at `$1`: the due index's condition
/// (`schema.rs`) and the deadline passed.
const DUE: &str =
    "status IN ('waiting', 'attached') AND expires_at IS NOT NULL      AND expires_at <= $1";

/// At most `$2` handoffs due at `$1`, earliest deadline first: a range of
/// the partial index `handoffs_due`.
pub(crate) static DUE_HANDOFFS: LazyLock<String> =
    LazyLock::new(|| select_handoffs(&format!("WHERE {DUE} ORDER BY expires_at, id LIMIT $2")));

/// The columns of an event row, as [`HISTORY`] returns them.
pub(crate) const EVENT_ROW: &str =
    "position, handoff_id, seq, at, kind, status_before, status_after, actor, detail";

/// Handoff `$1`'s events, in order (the unique index over handoff and seq).
pub(crate) static HISTORY: LazyLock<String> = LazyLock::new(|| {
    format!("SELECT {EVENT_ROW} FROM handoff_events WHERE handoff_id = $1 ORDER BY seq")
});

pub(crate) const INSERT_PARENT: &str = "INSERT INTO parents (id, kind, wave_id, version, record) \
     VALUES ($1, $2, $3, 1, $4) ON CONFLICT (id) DO NOTHING";

pub(crate) const INSERT_TASK_PR: &str = "INSERT INTO task_prs (id, task_session_id, record) \
     VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING";

pub(crate) const PARENT_BY_ID: &str = "SELECT version, record FROM parents WHERE id = $1";

pub(crate) const SWAP_PARENT: &str = "UPDATE parents SET version = version + 1, record = $3 \
     WHERE id = $1 AND version = $2";

/// The version column is a constant; it is BIGINT so PostgreSQL decodes it
/// as the same type as the real version columns.
pub(crate) const TASK_PR_BY_ID: &str =
    "SELECT CAST(0 AS BIGINT) AS version, record FROM task_prs WHERE id = $1";
