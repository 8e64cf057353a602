//! The relational schema shared by the SQL backends, as numbered migrations.
//!
//! The same DDL runs on SQLite and PostgreSQL. Timestamps are BIGINT
//! microseconds since the Unix epoch (UTC), the precision the domain keeps;
//! the environment and the attach argv are JSON text; a parent is its JSON
//! record beside the columns used to find it.
//!
//! Version rules (contract C11): a store records the number of migrations
//! applied. Opening one that records more than [`LATEST_VERSION`] (written by
//! a newer build) is refused and the store is not touched; one that records
//! fewer is migrated forward in a single transaction, which each backend
//! serialises between processes and hosts (SQLite: `BEGIN IMMEDIATE`, the
//! version read again inside; PostgreSQL: an advisory lock, the same), so a
//! store is migrated once however many open it at once, and a crash during
//! the migration leaves the version it had.
//!
//! Release 0.1.0 wrote version 1. Version 2 (release 0.2.0) adds the step
//! key (C12). Version 3 (release 0.3.0) adds deadlines (C14) and the history
//! (C15). Version 4 adds the service's delivery cursors (C23), version 5
//! its revocations (C29), version 6 answer specs and answers (C26).
//! Migrations only add: a column added to `handoffs` goes last, where
//! `ALTER TABLE ... ADD COLUMN` puts it, as in the column table.
//!
//! The DDL is the same on both engines but for one column: an event's
//! store-wide position is assigned by the engine, which each names its own
//! way ([`POSITION`] in a statement stands for the type each backend's
//! migrations give it); PostgreSQL adds a few statements of its own to
//! migration 3 (`postgres/mod.rs`).

/// A unique index a write can violate: invariant I6's or C12's. PostgreSQL
/// names it as the violated constraint; SQLite's result code does not say
/// which, so its dialect asks the table (see `sqlite/dialect.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UniqueIndex {
    /// The index's name in the schema.
    pub name: &'static str,
}

/// Invariant I6: one non-terminal handoff per parent (migration 1).
pub(crate) const ONE_ACTIVE_PER_PARENT: UniqueIndex = UniqueIndex {
    name: "handoffs_one_active_per_parent",
};

/// C12: one handoff per parent and step, ever (migration 2).
pub(crate) const ONE_PER_PARENT_STEP: UniqueIndex = UniqueIndex {
    name: "handoffs_one_per_parent_step",
};

/// The unique indexes of `handoffs` besides its primary key.
#[cfg(feature = "postgres")]
pub(crate) const UNIQUE_INDEXES: &[UniqueIndex] = &[ONE_ACTIVE_PER_PARENT, ONE_PER_PARENT_STEP];

impl UniqueIndex {
    /// The schema's unique index named `name` (PostgreSQL reports the
    /// index's name as the violated constraint).
    #[cfg(feature = "postgres")]
    pub(crate) fn named(name: &str) -> Option<Self> {
        UNIQUE_INDEXES
            .iter()
            .copied()
            .find(|index| index.name == name)
    }
}

/// Migration 1: the schema of release 0.1.0. A migration is never edited
/// once released: stores of that release ran it as it is.
const MIGRATION_1: &[&str] = &[
    "CREATE TABLE parents (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        wave_id TEXT NOT NULL,
        version BIGINT NOT NULL,
        record TEXT NOT NULL
    )",
    "CREATE TABLE task_prs (
        id TEXT PRIMARY KEY,
        task_session_id TEXT NOT NULL REFERENCES parents (id),
        record TEXT NOT NULL
    )",
    "CREATE TABLE handoffs (
        id TEXT PRIMARY KEY,
        version BIGINT NOT NULL,
        parent_kind TEXT NOT NULL,
        parent_id TEXT NOT NULL REFERENCES parents (id),
        wave_id TEXT NOT NULL,
        home TEXT NOT NULL,
        cwd TEXT NOT NULL,
        provider TEXT NOT NULL,
        provider_session_id TEXT,
        body_generation BIGINT NOT NULL,
        reason TEXT NOT NULL,
        environment TEXT NOT NULL,
        attach_argv TEXT NOT NULL,
        status TEXT NOT NULL,
        outcome_text TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        attached_at BIGINT,
        terminal_at BIGINT,
        wake_claimed_at BIGINT,
        wake_claimed_by_generation BIGINT
    )",
    // Invariant I6, enforced by the engine: one non-terminal handoff per parent.
    "CREATE UNIQUE INDEX handoffs_one_active_per_parent
        ON handoffs (parent_id) WHERE status IN ('waiting', 'attached')",
    "CREATE INDEX handoffs_by_parent ON handoffs (parent_id, created_at, id)",
    "CREATE INDEX handoffs_active ON handoffs (created_at, id)
        WHERE status IN ('waiting', 'attached')",
    "CREATE INDEX handoffs_by_created ON handoffs (created_at, id)",
    "CREATE INDEX task_prs_by_task ON task_prs (task_session_id)",
];

/// Migration 2: step keys (C12). Rows of version 1 have no step; the
/// partial index leaves them out and refuses a second handoff for one
/// (parent, step), even from another process.
const MIGRATION_2: &[&str] = &[
    "ALTER TABLE handoffs ADD COLUMN step TEXT",
    "CREATE UNIQUE INDEX handoffs_one_per_parent_step
        ON handoffs (parent_id, step) WHERE step IS NOT NULL",
];

/// In a migration's statement, the type of an event's position column.
pub(crate) const POSITION: &str = "{position}";

/// Migration 3: deadlines (C14), history (C15), and the indexes of the
/// list filters and of prune (C17). Existing handoffs get no deadline and
/// no events (`events` 0: their first change after the upgrade is their
/// event 1). The due index holds only active handoffs with a deadline, so
/// a sweep reads what is due and nothing else. `handoffs_by_status` and
/// `handoffs_by_home` serve `list --status` and `list --home` in list
/// order; `handoffs_prunable` holds only handoffs whose wake is claimed
/// (so terminal, I3), by finish, so a prune reads what it removes.
const MIGRATION_3: &[&str] = &[
    "ALTER TABLE handoffs ADD COLUMN expires_at BIGINT",
    "ALTER TABLE handoffs ADD COLUMN events BIGINT NOT NULL DEFAULT 0",
    "CREATE INDEX handoffs_due ON handoffs (expires_at, id)
        WHERE status IN ('waiting', 'attached') AND expires_at IS NOT NULL",
    "CREATE INDEX handoffs_by_status ON handoffs (status, created_at, id)",
    "CREATE INDEX handoffs_by_home ON handoffs (home, created_at, id)",
    "CREATE INDEX handoffs_prunable ON handoffs (terminal_at, id)
        WHERE wake_claimed_at IS NOT NULL",
    "CREATE TABLE handoff_events (
        position {position},
        handoff_id TEXT NOT NULL REFERENCES handoffs (id),
        seq BIGINT NOT NULL,
        at BIGINT NOT NULL,
        kind TEXT NOT NULL,
        status_before TEXT,
        status_after TEXT NOT NULL,
        actor TEXT NOT NULL,
        detail TEXT,
        UNIQUE (handoff_id, seq)
    )",
];

/// Migration 4: the service's delivery cursors (C23), one row per
/// notification endpoint key: a JSON record and its version, swapped as
/// `parents` rows are. Not registry data: export, import and prune leave
/// it alone.
const MIGRATION_4: &[&str] = &["CREATE TABLE delivery_cursors (
        endpoint TEXT PRIMARY KEY,
        version BIGINT NOT NULL,
        record TEXT NOT NULL
    )"];

/// Migration 5: the service's revocations (C29), one row per revoked key
/// (a sign-in session whose person signed out) with the instant it would
/// have run out, after which it is forgotten. Not registry data: export,
/// import and prune leave it alone.
const MIGRATION_5: &[&str] = &["CREATE TABLE revocations (
        revoked_key TEXT PRIMARY KEY,
        until_at BIGINT NOT NULL
    )"];

/// Migration 6: a question with a shape (C26). A handoff's answer spec
/// (`choices` or `form`), its `on_expiry` answer and the answer it ended
/// with, each JSON text or NULL; and the answer a finish or expiry event
/// recorded. Handoffs and events of earlier versions have none (NULL).
const MIGRATION_6: &[&str] = &[
    "ALTER TABLE handoffs ADD COLUMN choices TEXT",
    "ALTER TABLE handoffs ADD COLUMN form TEXT",
    "ALTER TABLE handoffs ADD COLUMN on_expiry TEXT",
    "ALTER TABLE handoffs ADD COLUMN answer TEXT",
    "ALTER TABLE handoff_events ADD COLUMN answer TEXT",
];

/// Migration `n` (1-based) is `MIGRATIONS[n - 1]`: statements run in order.
pub(crate) const MIGRATIONS: &[&[&str]] = &[
    MIGRATION_1,
    MIGRATION_2,
    MIGRATION_3,
    MIGRATION_4,
    MIGRATION_5,
    MIGRATION_6,
];

/// The schema version this build writes and understands.
pub(crate) const LATEST_VERSION: i64 = MIGRATIONS.len() as i64;

/// The statements that bring a store at `version` to [`LATEST_VERSION`], in
/// order, with [`POSITION`] replaced by the engine's `position` type and,
/// after each migration's shared statements, the backend's `own` ones for
/// it (`own[n - 1]` for migration `n`; none when `own` is shorter). Each
/// backend runs them in one transaction.
pub(crate) fn statements_after(
    version: i64,
    position: &'static str,
    own: &'static [&'static [&'static str]],
) -> impl Iterator<Item = String> {
    MIGRATIONS
        .iter()
        .enumerate()
        .skip(usize::try_from(version).unwrap_or(0))
        .flat_map(move |(at, migration)| {
            let own: &[&str] = own.get(at).copied().unwrap_or(&[]);
            migration.iter().chain(own.iter())
        })
        .map(move |statement| statement.replace(POSITION, position))
}
