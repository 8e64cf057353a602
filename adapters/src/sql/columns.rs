//! The handoff's columns, in one table ([`HANDOFF_COLUMNS`]).
//!
//! Each entry names a column of `handoffs`, says what it is to a statement
//! (the key, the version, or part of the record) and where its value lives
//! in a [`HandoffRow`]. Everything that lists the columns derives from it:
//! the SELECT, INSERT and UPDATE column lists (`statements.rs`), the values
//! an INSERT or a transition's UPDATE binds ([`HandoffRow::values`],
//! [`HandoffRow::swap_values`]), and decoding a result row, which finds
//! each column by its name ([`Positions`]), so a statement may return them
//! in any order and beside other columns. Adding a column is one field of
//! [`HandoffRow`], one entry here, its conversion in `row.rs` and a
//! migration in `schema.rs`.

use std::borrow::Cow;

use crate::sql::driver::{Driver, Param};

/// One `handoffs` row in column form: text borrowed from the record it
/// encodes, or owned when decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[allow(missing_docs)] // Each field is the column of the same name.
pub struct HandoffRow<'a> {
    pub id: Cow<'a, str>,
    pub version: i64,
    pub parent_kind: Cow<'a, str>,
    pub parent_id: Cow<'a, str>,
    pub wave_id: Cow<'a, str>,
    pub home: Cow<'a, str>,
    pub cwd: Cow<'a, str>,
    pub provider: Cow<'a, str>,
    pub provider_session_id: Option<Cow<'a, str>>,
    pub body_generation: i64,
    pub reason: Cow<'a, str>,
    pub environment: Cow<'a, str>,
    pub attach_argv: Cow<'a, str>,
    pub status: Cow<'a, str>,
    pub outcome_text: Option<Cow<'a, str>>,
    pub created_at: i64,
    pub updated_at: i64,
    pub attached_at: Option<i64>,
    pub terminal_at: Option<i64>,
    pub wake_claimed_at: Option<i64>,
    pub wake_claimed_by_generation: Option<i64>,
    pub step: Option<Cow<'a, str>>,
    pub expires_at: Option<i64>,
    pub events: i64,
    pub choices: Option<Cow<'a, str>>,
    pub form: Option<Cow<'a, str>>,
    pub on_expiry: Option<Cow<'a, str>>,
    pub answer: Option<Cow<'a, str>>,
}

/// What a column is to the statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The primary key: a transition finds the row by it and never writes it.
    Id,
    /// The record's version: a transition compares it and increments it.
    Version,
    /// Part of the record: written by an insert and by every transition.
    Record,
    /// How many history events the handoff has (C15): an insert writes 1
    /// (its `opened` event), a transition increments it, and the event it
    /// appends takes the new value as its `seq`.
    Events,
}

/// One column of `handoffs`.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// The column's name, in the schema and in every result row.
    pub name: &'static str,
    /// What the column is to a statement.
    pub role: Role,
    field: Field,
}

/// The column's type and the [`HandoffRow`] field that holds its value:
/// a function that reads the field (to bind) and one that lends it (to
/// decode into).
#[derive(Debug, Clone, Copy)]
enum Field {
    Text(
        for<'r, 'a> fn(&'r HandoffRow<'a>) -> &'r str,
        for<'r> fn(&'r mut HandoffRow<'static>) -> &'r mut Cow<'static, str>,
    ),
    OptText(
        for<'r, 'a> fn(&'r HandoffRow<'a>) -> Option<&'r str>,
        for<'r> fn(&'r mut HandoffRow<'static>) -> &'r mut Option<Cow<'static, str>>,
    ),
    Int(
        fn(&HandoffRow<'_>) -> i64,
        for<'r> fn(&'r mut HandoffRow<'static>) -> &'r mut i64,
    ),
    OptInt(
        fn(&HandoffRow<'_>) -> Option<i64>,
        for<'r> fn(&'r mut HandoffRow<'static>) -> &'r mut Option<i64>,
    ),
}

/// A record column.
const fn record(name: &'static str, field: Field) -> Column {
    Column {
        name,
        role: Role::Record,
        field,
    }
}

/// The columns of `handoffs`, in the order statements list them.
pub const HANDOFF_COLUMNS: &[Column] = &[
    Column {
        name: "id",
        role: Role::Id,
        field: Field::Text(|r| &r.id, |r| &mut r.id),
    },
    Column {
        name: "version",
        role: Role::Version,
        field: Field::Int(|r| r.version, |r| &mut r.version),
    },
    record(
        "parent_kind",
        Field::Text(|r| &r.parent_kind, |r| &mut r.parent_kind),
    ),
    record(
        "parent_id",
        Field::Text(|r| &r.parent_id, |r| &mut r.parent_id),
    ),
    record("wave_id", Field::Text(|r| &r.wave_id, |r| &mut r.wave_id)),
    record("home", Field::Text(|r| &r.home, |r| &mut r.home)),
    record("cwd", Field::Text(|r| &r.cwd, |r| &mut r.cwd)),
    record(
        "provider",
        Field::Text(|r| &r.provider, |r| &mut r.provider),
    ),
    record(
        "provider_session_id",
        Field::OptText(
            |r| r.provider_session_id.as_deref(),
            |r| &mut r.provider_session_id,
        ),
    ),
    record(
        "body_generation",
        Field::Int(|r| r.body_generation, |r| &mut r.body_generation),
    ),
    record("reason", Field::Text(|r| &r.reason, |r| &mut r.reason)),
    record(
        "environment",
        Field::Text(|r| &r.environment, |r| &mut r.environment),
    ),
    record(
        "attach_argv",
        Field::Text(|r| &r.attach_argv, |r| &mut r.attach_argv),
    ),
    record("status", Field::Text(|r| &r.status, |r| &mut r.status)),
    record(
        "outcome_text",
        Field::OptText(|r| r.outcome_text.as_deref(), |r| &mut r.outcome_text),
    ),
    record(
        "created_at",
        Field::Int(|r| r.created_at, |r| &mut r.created_at),
    ),
    record(
        "updated_at",
        Field::Int(|r| r.updated_at, |r| &mut r.updated_at),
    ),
    record(
        "attached_at",
        Field::OptInt(|r| r.attached_at, |r| &mut r.attached_at),
    ),
    record(
        "terminal_at",
        Field::OptInt(|r| r.terminal_at, |r| &mut r.terminal_at),
    ),
    record(
        "wake_claimed_at",
        Field::OptInt(|r| r.wake_claimed_at, |r| &mut r.wake_claimed_at),
    ),
    record(
        "wake_claimed_by_generation",
        Field::OptInt(
            |r| r.wake_claimed_by_generation,
            |r| &mut r.wake_claimed_by_generation,
        ),
    ),
    record(
        "step",
        Field::OptText(|r| r.step.as_deref(), |r| &mut r.step),
    ),
    record(
        "expires_at",
        Field::OptInt(|r| r.expires_at, |r| &mut r.expires_at),
    ),
    Column {
        name: "events",
        role: Role::Events,
        field: Field::Int(|r| r.events, |r| &mut r.events),
    },
    record(
        "choices",
        Field::OptText(|r| r.choices.as_deref(), |r| &mut r.choices),
    ),
    record(
        "form",
        Field::OptText(|r| r.form.as_deref(), |r| &mut r.form),
    ),
    record(
        "on_expiry",
        Field::OptText(|r| r.on_expiry.as_deref(), |r| &mut r.on_expiry),
    ),
    record(
        "answer",
        Field::OptText(|r| r.answer.as_deref(), |r| &mut r.answer),
    ),
];

/// How many columns `handoffs` has: the values an INSERT binds.
pub const COLUMN_COUNT: usize = HANDOFF_COLUMNS.len();

/// How many parameters a transition's UPDATE binds: the id, the expected
/// version, then every record column.
pub const SWAP_PARAMS: usize = 2 + count(Role::Record);

/// Where the key is in [`HANDOFF_COLUMNS`].
const ID_INDEX: usize = index_of(Role::Id);

/// The name of the key column.
pub(crate) const ID_COLUMN: &str = HANDOFF_COLUMNS[ID_INDEX].name;

/// The name of the version column.
pub(crate) const VERSION_COLUMN: &str = HANDOFF_COLUMNS[index_of(Role::Version)].name;

/// The name of the event counter column.
pub(crate) const EVENTS_COLUMN: &str = HANDOFF_COLUMNS[index_of(Role::Events)].name;

/// The table has exactly one key, one version and one event counter.
const _: () =
    assert!(count(Role::Id) == 1 && count(Role::Version) == 1 && count(Role::Events) == 1);

const fn count(role: Role) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < HANDOFF_COLUMNS.len() {
        if HANDOFF_COLUMNS[i].role as u8 == role as u8 {
            n += 1;
        }
        i += 1;
    }
    n
}

const fn index_of(role: Role) -> usize {
    let mut i = 0;
    while HANDOFF_COLUMNS[i].role as u8 != role as u8 {
        i += 1;
    }
    i
}

impl Column {
    /// This column's value in `row`, to bind.
    pub fn value<'r>(&self, row: &'r HandoffRow<'_>) -> Param<'r> {
        match self.field {
            Field::Text(get, _) => Param::Text(get(row)),
            Field::OptText(get, _) => Param::OptText(get(row)),
            Field::Int(get, _) => Param::Int(get(row)),
            Field::OptInt(get, _) => Param::OptInt(get(row)),
        }
    }
}

/// Every column's name, in table order, separated by commas: the column
/// list of a SELECT or an INSERT.
pub fn column_list() -> String {
    let names: Vec<&str> = HANDOFF_COLUMNS.iter().map(|column| column.name).collect();
    names.join(", ")
}

/// Every column of the handoff rows of `source` (a table or subquery
/// alias), each renamed `<prefix><name>`: the columns of a second handoff
/// in a row that holds one under the plain names ([`Positions::of`] finds
/// them by the same prefix).
pub(crate) fn renamed_column_list(source: &str, prefix: &str) -> String {
    let columns: Vec<String> = HANDOFF_COLUMNS
        .iter()
        .map(|column| format!("{source}.{name} AS {prefix}{name}", name = column.name))
        .collect();
    columns.join(", ")
}

/// `$1, ..., $n` for the [`COLUMN_COUNT`] values of [`HandoffRow::values`].
pub(crate) fn placeholders() -> String {
    let placeholders: Vec<String> = (1..=COLUMN_COUNT).map(|n| format!("${n}")).collect();
    placeholders.join(", ")
}

/// The SET list of a transition's UPDATE, for the parameters of
/// [`HandoffRow::swap_values`]: every record column `= $3, $4, ...`, and
/// the version and the event counter incremented. (`$1` is the id, `$2`
/// the expected version.)
pub(crate) fn set_list() -> String {
    let mut assignments: Vec<String> = (3..)
        .zip(record_columns())
        .map(|(n, column)| format!("{} = ${n}", column.name))
        .collect();
    assignments.push(format!("{VERSION_COLUMN} = {VERSION_COLUMN} + 1"));
    assignments.push(format!("{EVENTS_COLUMN} = {EVENTS_COLUMN} + 1"));
    assignments.join(", ")
}

/// The record columns, in table order: what a transition writes.
fn record_columns() -> impl Iterator<Item = &'static Column> {
    HANDOFF_COLUMNS
        .iter()
        .filter(|column| column.role == Role::Record)
}

impl HandoffRow<'_> {
    /// Every column's value, in table order (what an INSERT of the whole
    /// row binds as `$1, ..., $n`).
    pub fn values(&self) -> [Param<'_>; COLUMN_COUNT] {
        std::array::from_fn(|i| HANDOFF_COLUMNS[i].value(self))
    }

    /// What a transition's UPDATE binds: the id, `expected` (the version
    /// the row must still have), then every record column in table order.
    pub fn swap_values(&self, expected: i64) -> [Param<'_>; SWAP_PARAMS] {
        let mut params = [Param::Int(expected); SWAP_PARAMS];
        params[0] = HANDOFF_COLUMNS[ID_INDEX].value(self);
        for (param, column) in params[2..].iter_mut().zip(record_columns()) {
            *param = column.value(self);
        }
        params
    }
}

/// The cells of one result row, read by position: what decoding a
/// [`HandoffRow`] needs of a driver's row (sqlx's, or the `rusqlite` row of
/// SQLite's reads on the caller's thread, `sqlite/inline.rs`).
pub(crate) trait Cells {
    /// What a cell that cannot be read gives.
    type Error;
    /// The TEXT cell at `at`.
    fn text(&self, at: usize) -> Result<String, Self::Error>;
    /// The nullable TEXT cell at `at`.
    fn optional_text(&self, at: usize) -> Result<Option<String>, Self::Error>;
    /// The BIGINT cell at `at`.
    fn int(&self, at: usize) -> Result<i64, Self::Error>;
    /// The nullable BIGINT cell at `at`.
    fn optional_int(&self, at: usize) -> Result<Option<i64>, Self::Error>;
}

/// A row of an sqlx driver, as [`Cells`].
struct DriverRow<'r, DB: Driver>(&'r DB::Row);

impl<DB: Driver> Cells for DriverRow<'_, DB> {
    type Error = sqlx::Error;
    fn text(&self, at: usize) -> Result<String, sqlx::Error> {
        DB::text(self.0, at)
    }
    fn optional_text(&self, at: usize) -> Result<Option<String>, sqlx::Error> {
        DB::optional_text(self.0, at)
    }
    fn int(&self, at: usize) -> Result<i64, sqlx::Error> {
        DB::int(self.0, at)
    }
    fn optional_int(&self, at: usize) -> Result<Option<i64>, sqlx::Error> {
        DB::optional_int(self.0, at)
    }
}

impl HandoffRow<'static> {
    /// Decodes every column of `row`, each found at `positions`.
    pub(crate) fn decode<DB: Driver>(
        row: &DB::Row,
        positions: &Positions,
    ) -> Result<Self, sqlx::Error> {
        Self::decode_cells(&DriverRow::<DB>(row), positions)
    }

    /// Decodes every column of `cells`, each found at `positions`.
    pub(crate) fn decode_cells<C: Cells>(
        cells: &C,
        positions: &Positions,
    ) -> Result<Self, C::Error> {
        let mut decoded = Self::default();
        for (column, &at) in HANDOFF_COLUMNS.iter().zip(&positions.0) {
            match column.field {
                Field::Text(_, slot) => *slot(&mut decoded) = Cow::Owned(cells.text(at)?),
                Field::OptText(_, slot) => {
                    *slot(&mut decoded) = cells.optional_text(at)?.map(Cow::Owned)
                }
                Field::Int(_, slot) => *slot(&mut decoded) = cells.int(at)?,
                Field::OptInt(_, slot) => *slot(&mut decoded) = cells.optional_int(at)?,
            }
        }
        Ok(decoded)
    }
}

/// Where each column of [`HANDOFF_COLUMNS`] is in the rows of one result,
/// found by name once for all its rows.
#[derive(Debug)]
pub(crate) struct Positions([usize; COLUMN_COUNT]);

impl Positions {
    /// The positions of the handoff columns in rows shaped like `row`,
    /// each named `<prefix><name>` (an empty prefix: the plain names).
    ///
    /// # Errors
    /// `ColumnNotFound` when a column is missing.
    pub(crate) fn of<DB: Driver>(row: &DB::Row, prefix: &str) -> Result<Self, sqlx::Error> {
        let mut positions = [0; COLUMN_COUNT];
        let mut name = String::with_capacity(prefix.len() + 32);
        for (position, column) in positions.iter_mut().zip(HANDOFF_COLUMNS) {
            name.clear();
            name.push_str(prefix);
            name.push_str(column.name);
            *position = DB::ordinal(row, &name)?;
        }
        Ok(Self(positions))
    }

    /// The positions of the handoff columns in a row that holds them in
    /// table order from its first column, as every statement built on
    /// [`column_list`] does (SQLite's reads on the caller's thread).
    #[cfg(feature = "sqlite")]
    pub(crate) fn in_table_order() -> Self {
        Self(std::array::from_fn(|at| at))
    }

    /// Whether `row` holds no handoff (its key is NULL, as after a LEFT
    /// JOIN that found none).
    pub(crate) fn is_null<DB: Driver>(&self, row: &DB::Row) -> Result<bool, sqlx::Error> {
        Ok(DB::optional_text(row, self.0[ID_INDEX])?.is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row whose every field differs from its default.
    fn sample() -> HandoffRow<'static> {
        HandoffRow {
            id: "ih_1".into(),
            version: 7,
            parent_kind: "wave".into(),
            parent_id: "wv_1".into(),
            wave_id: "wv_1".into(),
            home: "me@local".into(),
            cwd: "/w".into(),
            provider: "p".into(),
            provider_session_id: Some("s".into()),
            body_generation: 2,
            reason: "r".into(),
            environment: "{}".into(),
            attach_argv: "[]".into(),
            status: "completed".into(),
            outcome_text: Some("done".into()),
            created_at: 1,
            updated_at: 2,
            attached_at: Some(3),
            terminal_at: Some(4),
            wake_claimed_at: Some(5),
            wake_claimed_by_generation: Some(6),
            step: Some("login@turn-3".into()),
            expires_at: Some(8),
            events: 9,
            choices: Some("[\"a\",\"b\"]".into()),
            form: Some("{}".into()),
            on_expiry: Some("\"a\"".into()),
            answer: Some("\"b\"".into()),
        }
    }

    /// Copies each column's field into an empty row, through the table.
    fn through_the_table(row: &HandoffRow<'_>) -> HandoffRow<'static> {
        let mut copy = HandoffRow::default();
        for column in HANDOFF_COLUMNS {
            match column.field {
                Field::Text(get, slot) => *slot(&mut copy) = get(row).to_string().into(),
                Field::OptText(get, slot) => {
                    *slot(&mut copy) = get(row).map(|v| v.to_string().into())
                }
                Field::Int(get, slot) => *slot(&mut copy) = get(row),
                Field::OptInt(get, slot) => *slot(&mut copy) = get(row),
            }
        }
        copy
    }

    #[test]
    fn every_field_has_one_column() {
        assert_eq!(through_the_table(&sample()), sample());
        let mut names: Vec<&str> = HANDOFF_COLUMNS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), COLUMN_COUNT, "column names are unique");
    }

    #[test]
    fn a_transition_binds_the_key_the_version_then_every_record_column() {
        let row = sample();
        let params = row.swap_values(41);
        assert_eq!(params[0], Param::Text("ih_1"));
        assert_eq!(params[1], Param::Int(41));
        let set = set_list();
        assert!(!set.split(", ").any(|a| a.starts_with("id ")), "{set}");
        assert!(
            set.ends_with("version = version + 1, events = events + 1"),
            "{set}"
        );
        for (n, assignment) in set.split(", ").filter(|a| a.contains('$')).enumerate() {
            let (name, placeholder) = assignment.split_once(" = ").unwrap();
            assert_eq!(placeholder, format!("${}", n + 3));
            let column = HANDOFF_COLUMNS.iter().find(|c| c.name == name).unwrap();
            assert_eq!(column.value(&row), params[n + 2], "{name}");
        }
        assert_eq!(set.matches('$').count() + 2, SWAP_PARAMS);
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn the_table_is_the_migrated_schema() {
        use sqlx::Connection as _;
        let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
            .await
            .unwrap();
        for statement in crate::sqlite::migrations_after(0) {
            sqlx::query(&statement).execute(&mut conn).await.unwrap();
        }
        let schema: Vec<String> =
            sqlx::query_scalar("SELECT name FROM pragma_table_info('handoffs')")
                .fetch_all(&mut conn)
                .await
                .unwrap();
        let table: Vec<&str> = HANDOFF_COLUMNS.iter().map(|c| c.name).collect();
        assert_eq!(schema, table);
    }
}
