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

use lf_handoff_application::{ListQuery, ParentQuery};
use lf_handoff_domain::interactive_handoff::InteractiveHandoffStatus;
use lf_handoff_domain::timestamp::{micros_at_or_before, micros_before};

use crate::sql::columns::{
    column_list, placeholders, renamed_column_list, set_list, COLUMN_COUNT, EVENTS_COLUMN,
    ID_COLUMN, VERSION_COLUMN,
};
use crate::sql::dialect::Dialect;
use crate::sql::engine::Param;

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

/// The index that serves a list (C4, C17): one per list, chosen by the
/// filters given, in this order of precedence: a parent (its few
/// handoffs; only its active one when only active statuses are asked
/// for), a deadline (the due handoffs, sorted into list order), exactly
/// the active statuses, other statuses, a home, and the creation order
/// itself (which also serves `created_before` and the
/// page's start as ranges). The other filters are checked on the rows the
/// index names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListIndex {
    /// `handoffs_by_created (created_at, id)`.
    ByCreated,
    /// `handoffs_by_parent (parent_id, created_at, id)`.
    ByParent,
    /// `handoffs_one_active_per_parent (parent_id) WHERE active`: at most
    /// one row.
    ParentActive,
    /// `handoffs_active (created_at, id) WHERE active`.
    Active,
    /// `handoffs_by_status (status, created_at, id)`.
    ByStatus,
    /// `handoffs_by_home (home, created_at, id)`.
    ByHome,
    /// `handoffs_due (expires_at, id) WHERE active AND expires_at IS NOT
    /// NULL`: a range up to the deadline bound, then a sort.
    Due,
}

impl ListIndex {
    /// The index's name in the schema.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::ByCreated => "handoffs_by_created",
            Self::ByParent => "handoffs_by_parent",
            Self::ParentActive => "handoffs_one_active_per_parent",
            Self::Active => "handoffs_active",
            Self::ByStatus => "handoffs_by_status",
            Self::ByHome => "handoffs_by_home",
            Self::Due => "handoffs_due",
        }
    }
}

/// A list query as one statement: its text, its parameters and the index
/// that serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListStatement<'a> {
    /// `SELECT <every handoff column> FROM handoffs ... ORDER BY created_at,
    /// id [LIMIT $n]` (`created_at DESC, id DESC` newest first).
    pub sql: String,
    /// Its parameters, in `$n` order.
    pub params: Vec<Param<'a>>,
    /// The index that serves it.
    pub index: ListIndex,
}

/// The statement of `query`, whose home (if any) is `home` in its stored
/// form; `None` when no handoff can pass its filters (only terminal
/// statuses with the active filter) or it asks for none (`limit` 0).
///
/// The text depends on which filters are given, never on their values
/// (statuses excepted: they are the domain's fixed names, written into the
/// text so that the partial indexes, whose conditions name them, can
/// serve), so each shape is prepared once per connection. The dialect's
/// [`index_hint`](Dialect::index_hint) names the index where its planner
/// needs it (SQLite, whose planner has no statistics and may prefer
/// another index that needs a sort); PostgreSQL's planner chooses by its
/// statistics. Each shape of the first version (all, a parent, active, a
/// parent's active) keeps its text and its plan, but for the hint.
pub(crate) fn list_statement<'a, D: Dialect>(
    query: &'a ListQuery,
    home: Option<&'a str>,
) -> Option<ListStatement<'a>> {
    if query.limit == Some(0) {
        return None;
    }
    let wanted = query.wanted_statuses();
    let only_active = wanted
        .as_ref()
        .is_some_and(|wanted| wanted.iter().all(|status| !status.is_terminal()));
    let exactly_active = wanted.as_deref() == Some(&ACTIVE_STATUSES[..]);
    let index = match (&query.parent, &wanted) {
        (_, Some(wanted)) if wanted.is_empty() => return None,
        (Some(_), _) if only_active => ListIndex::ParentActive,
        (Some(_), _) => ListIndex::ByParent,
        (None, _) if query.due_by.is_some() => ListIndex::Due,
        (None, Some(_)) if exactly_active => ListIndex::Active,
        (None, Some(_)) => ListIndex::ByStatus,
        (None, None) if home.is_some() => ListIndex::ByHome,
        (None, None) => ListIndex::ByCreated,
    };
    let mut params = Vec::new();
    let mut next = |param: Param<'a>| {
        params.push(param);
        params.len()
    };
    let mut conditions = Vec::new();
    if let Some(parent) = &query.parent {
        conditions.push(format!(
            "parent_id = ${}",
            next(Param::Text(parent.id_str()))
        ));
    }
    if let Some(wanted) = &wanted {
        // A partial index over the active handoffs serves only a query
        // that states its condition as it is written.
        let partial = matches!(
            index,
            ListIndex::ParentActive | ListIndex::Active | ListIndex::Due
        );
        if exactly_active || partial {
            conditions.push(ACTIVE.to_string());
        }
        if !exactly_active {
            conditions.push(status_condition(wanted));
        }
    }
    if let Some(by) = query.due_by {
        // The due index's condition as it is written, then its range.
        conditions.push("expires_at IS NOT NULL".to_string());
        conditions.push(format!(
            "expires_at <= ${}",
            next(Param::Int(micros_at_or_before(by)))
        ));
    }
    if let Some(home) = home {
        conditions.push(format!("home = ${}", next(Param::Text(home))));
    }
    let before = query
        .created_before
        .map(|before| Param::Int(micros_before(before)));
    // Newest first reads the same index backwards.
    let (past, order) = match query.newest_first {
        false => (">", "ORDER BY created_at, id"),
        true => ("<", "ORDER BY created_at DESC, id DESC"),
    };
    match (&query.after, before) {
        // Newest first, the page's start and the creation bound are both
        // upper bounds, and an engine ranges over one: the lower of the
        // two, `created_at < b` being `(created_at, id) < (b, '')`. None
        // when the start does not exist (the comparison with NULL fails).
        (Some(after), Some(before)) if query.newest_first => {
            let n = next(Param::Text(after.as_str()));
            let b = next(before);
            let lower = |then: &str| {
                format!(
                    "(SELECT CASE WHEN created_at < ${b} THEN {then} END \
                     FROM handoffs WHERE {ID_COLUMN} = ${n})"
                )
            };
            conditions.push(format!(
                "(created_at, {ID_COLUMN}) < ({}, {})",
                lower(&format!("created_at ELSE ${b}")),
                lower(&format!("{ID_COLUMN} ELSE ''"))
            ));
        }
        (after, before) => {
            if let Some(before) = before {
                conditions.push(format!("created_at < ${}", next(before)));
            }
            if let Some(after) = after {
                // Rows after that one in list order; none when it does not
                // exist (the comparison with NULL fails). A range of the
                // index's (created_at, id) columns on both engines.
                let n = next(Param::Text(after.as_str()));
                conditions.push(format!(
                    "(created_at, {ID_COLUMN}) {past} \
                     ((SELECT created_at FROM handoffs WHERE {ID_COLUMN} = ${n}), ${n})"
                ));
            }
        }
    }
    let mut rest = D::index_hint(index.name());
    if !conditions.is_empty() {
        rest.push_str(&format!("WHERE {} ", conditions.join(" AND ")));
    }
    rest.push_str(order);
    if let Some(limit) = query.limit {
        let limit = Param::Int(i64::try_from(limit).unwrap_or(i64::MAX));
        rest.push_str(&format!(" LIMIT ${}", next(limit)));
    }
    Some(ListStatement {
        sql: select_handoffs(&rest),
        params,
        index,
    })
}

/// The statuses a handoff is active in, as [`ACTIVE`] names them.
const ACTIVE_STATUSES: [InteractiveHandoffStatus; 2] = [
    InteractiveHandoffStatus::Waiting,
    InteractiveHandoffStatus::Attached,
];

/// `status = '<name>'`, or `status IN ('<name>', ...)` for several.
fn status_condition(statuses: &[InteractiveHandoffStatus]) -> String {
    let names: Vec<String> = statuses
        .iter()
        .map(|status| format!("'{}'", status.as_str()))
        .collect();
    match names.as_slice() {
        [one] => format!("status = {one}"),
        many => format!("status IN ({})", many.join(", ")),
    }
}

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

/// The condition of a due handoff at `$1`: the due index's condition
/// (`schema.rs`) and the deadline passed.
const DUE: &str =
    "status IN ('waiting', 'attached') AND expires_at IS NOT NULL      AND expires_at <= $1";

/// At most `$2` handoffs due at `$1`, earliest deadline first: a range of
/// the partial index `handoffs_due` (which SQLite's planner, without
/// statistics, would pass over for `handoffs_by_status`, whose first
/// column the condition's `status IN` matches, and a sort).
pub(crate) fn due_handoffs<D: Dialect>() -> String {
    select_handoffs(&format!(
        "{}WHERE {DUE} ORDER BY expires_at, id LIMIT $2",
        D::index_hint("handoffs_due")
    ))
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
    "position, handoff_id, seq, at, kind, status_before, status_after, actor, detail";

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

/// The statement of a batch of [`ParentQuery`]'s scan: at most `batch`
/// parents of `query`'s kind and wave (the stored columns), after `after`
/// in id order, byte by byte on every engine (the dialect's
/// [`text_order`](crate::sql::archive::ArchiveDialect::text_order)), as
/// `(version, record)` rows. The project is not a column: the caller
/// checks it on the records. No index serves the kind or the wave; the
/// primary key orders the scan where the engine's order is byte order.
pub(crate) fn list_parents_statement<'a, D: Dialect>(
    query: &'a ParentQuery,
    after: Option<&'a str>,
    batch: usize,
) -> (String, Vec<Param<'a>>) {
    let order = D::ARCHIVE.text_order;
    let mut params = Vec::new();
    let mut conditions = Vec::new();
    if let Some(kind) = query.kind {
        params.push(Param::Text(kind.as_str()));
        conditions.push(format!("kind = ${}", params.len()));
    }
    if let Some(wave) = &query.wave {
        params.push(Param::Text(wave.as_str()));
        conditions.push(format!("wave_id = ${}", params.len()));
    }
    if let Some(after) = after {
        params.push(Param::Text(after));
        conditions.push(format!("id{order} > ${}", params.len()));
    }
    params.push(Param::Int(i64::try_from(batch).unwrap_or(i64::MAX)));
    let filter = match conditions.is_empty() {
        true => String::new(),
        false => format!("WHERE {} ", conditions.join(" AND ")),
    };
    let sql = format!(
        "SELECT version, record FROM parents {filter}ORDER BY id{order} LIMIT ${}",
        params.len()
    );
    (sql, params)
}

pub(crate) const SWAP_PARENT: &str = "UPDATE parents SET version = version + 1, record = $3 \
     WHERE id = $1 AND version = $2";

/// The version column is a constant; it is BIGINT so PostgreSQL decodes it
/// as the same type as the real version columns.
pub(crate) const TASK_PR_BY_ID: &str =
    "SELECT CAST(0 AS BIGINT) AS version, record FROM task_prs WHERE id = $1";
