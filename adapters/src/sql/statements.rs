//! The SQL statements of the shared repository, in `$n` placeholder form,
//! which both SQLite and PostgreSQL accept.
//!
//! The handoff statements list the columns of
//! [`HANDOFF_COLUMNS`](crate::sql::columns::HANDOFF_COLUMNS); each is built
//! from it once, on first use.

use std::sync::LazyLock;

use crate::sql::columns::{
    column_list, placeholders, set_list, COLUMN_COUNT, ID_COLUMN, VERSION_COLUMN,
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

/// `SELECT <every handoff column> FROM handoffs <rest>`.
fn select_handoffs(rest: &str) -> String {
    format!("SELECT {} FROM handoffs {rest}", column_list())
}

/// One handoff, by id.
pub static HANDOFF_BY_ID: LazyLock<String> =
    LazyLock::new(|| select_handoffs(&format!("WHERE {ID_COLUMN} = $1")));

/// The parent's version and record, then the columns of its active handoff
/// or NULLs: the snapshot `open` decides from, in one round trip. The
/// handoff columns keep their names; the parent's are renamed so that no
/// name appears twice. The subquery's condition is the partial index's, so
/// the index serves it.
pub(crate) static PARENT_WITH_ACTIVE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT p.{VERSION} AS {PARENT_VERSION}, p.{RECORD} AS {PARENT_RECORD}, h.* \
         FROM parents p LEFT JOIN ({}) h ON TRUE WHERE p.id = $1",
        select_handoffs(&format!("WHERE parent_id = $1 AND {ACTIVE}"))
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
