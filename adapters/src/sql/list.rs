//! The statements that read a set of handoffs through one index, whose
//! text the [`Dialect`] shapes where its planner needs the index named: a
//! list query ([`list_statement`], C4, C17) and the due handoffs
//! ([`due_handoffs`], C14).

use lf_handoff_application::ListQuery;
use lf_handoff_domain::interactive_handoff::InteractiveHandoffStatus;
use lf_handoff_domain::timestamp::{micros_at_or_before, micros_before};

use crate::sql::columns::ID_COLUMN;
use crate::sql::driver::Param;
use crate::sql::engine::Dialect;
use crate::sql::statements::{select_handoffs, ACTIVE};

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
/// statistics. The simplest shapes (all, a parent, active, a parent's
/// active) are as plain as a statement written by hand.
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
