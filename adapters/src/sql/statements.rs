//! The SQL statements of the shared repository, in `$n` placeholder form,
//! which both SQLite and PostgreSQL accept.

macro_rules! handoff_columns {
    () => {
        "id, version, parent_kind, parent_id, wave_id, home, cwd, provider, \
         provider_session_id, body_generation, reason, environment, attach_argv, status, \
         outcome_text, created_at, updated_at, attached_at, terminal_at, wake_claimed_at, \
         wake_claimed_by_generation"
    };
}

macro_rules! active {
    () => {
        "status IN ('waiting', 'attached')"
    };
}

pub(crate) const HANDOFF_BY_ID: &str = concat!(
    "SELECT ",
    handoff_columns!(),
    " FROM handoffs WHERE id = $1"
);

/// The parent (version, record) and, in the columns after them, its
/// active handoff or NULLs: the snapshot `open` decides from, in one round
/// trip. The subquery's condition is the partial index's, so the index
/// serves it.
pub(crate) const PARENT_WITH_ACTIVE: &str = concat!(
    "SELECT p.version, p.record, h.* FROM parents p LEFT JOIN (SELECT ",
    handoff_columns!(),
    " FROM handoffs WHERE parent_id = $1 AND ",
    active!(),
    ") h ON TRUE WHERE p.id = $1"
);

pub(crate) const LIST_ALL: &str = concat!(
    "SELECT ",
    handoff_columns!(),
    " FROM handoffs ORDER BY created_at, id"
);

pub(crate) const LIST_PARENT: &str = concat!(
    "SELECT ",
    handoff_columns!(),
    " FROM handoffs WHERE parent_id = $1 ORDER BY created_at, id"
);

pub(crate) const LIST_ACTIVE: &str = concat!(
    "SELECT ",
    handoff_columns!(),
    " FROM handoffs WHERE ",
    active!(),
    " ORDER BY created_at, id"
);

pub(crate) const LIST_PARENT_ACTIVE: &str = concat!(
    "SELECT ",
    handoff_columns!(),
    " FROM handoffs WHERE parent_id = $1 AND ",
    active!(),
    " ORDER BY created_at, id"
);

/// Inserts only while the parent is still at the expected version ($21).
pub(crate) const INSERT_HANDOFF: &str = concat!(
    "INSERT INTO handoffs (",
    handoff_columns!(),
    ") SELECT $1, 1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, \
     $17, $18, $19, $20 WHERE EXISTS (SELECT 1 FROM parents WHERE id = $3 AND version = $21)"
);

/// Compare-and-swap of the mutable fields; the others never change after open.
pub(crate) const SWAP_HANDOFF: &str = "UPDATE handoffs SET version = version + 1, \
     status = $3, outcome_text = $4, updated_at = $5, attached_at = $6, terminal_at = $7, \
     wake_claimed_at = $8, wake_claimed_by_generation = $9 \
     WHERE id = $1 AND version = $2";

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
    "SELECT CAST(0 AS BIGINT), record FROM task_prs WHERE id = $1";
