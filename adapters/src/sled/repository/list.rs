//! [`HandoffRepository::list`](lf_handoff_application::ports::HandoffRepository::list)
//! on sled: one index walk (several, merged, for several statuses) between
//! the bounds of the page's start and `created_before`, forwards or (newest
//! first) backwards, reading the record each entry names (see the module
//! doc of `sled`). A deadline bound (`due_by`) walks the due handoffs'
//! index up to it instead and sorts what passes into list order.

use std::ops::Bound;

use ::sled::{IVec, Tree};
use lf_handoff_application::{ListQuery, StoreError, StoreResult};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffParent, InteractiveHandoffStatus,
};
use time::OffsetDateTime;

use super::reads::{active_of, named_record};
use crate::sled::handle::Shared;
use crate::sled::{keys, record};

/// Walks the index that serves `query`, from just after `query.after`,
/// and reads the record each entry names, keeping those that pass every
/// filter, up to `query.limit`.
pub(super) fn list(shared: &Shared, query: &ListQuery) -> StoreResult<Vec<InteractiveHandoff>> {
    let wanted = query.wanted_statuses();
    if query.limit == Some(0) || wanted.as_ref().is_some_and(Vec::is_empty) {
        return Ok(Vec::new());
    }
    // Where the page starts: just after `after`'s place in list order.
    let start = match &query.after {
        None => None,
        Some(after) => match page_start(shared, after)? {
            Some(start) => Some(start),
            None => return Ok(Vec::new()),
        },
    };
    match source(shared, query, wanted.as_deref()) {
        Source::Slot(parent) => {
            let active = active_of(shared, parent)?.map(|active| active.value);
            Ok(active
                .filter(|handoff| {
                    query.matches(handoff)
                        && start.as_ref().is_none_or(|start| {
                            let key = keys::created(handoff.created_at, &handoff.id);
                            match query.newest_first {
                                false => key > *start,
                                true => key < *start,
                            }
                        })
                })
                .into_iter()
                .collect())
        }
        Source::Due(by) => due_by(shared, query, by, start.as_deref()),
        Source::Index { tree, prefixes } => {
            let end = query.created_before.map(keys::before);
            let walks = prefixes
                .into_iter()
                .map(|prefix| {
                    Walk::new(
                        tree,
                        prefix,
                        start.as_deref(),
                        end.as_ref(),
                        query.newest_first,
                    )
                })
                .collect();
            merge(shared, tree, walks, query, wanted.is_none())
        }
    }
}

/// Where a list reads.
enum Source<'s> {
    /// The parent's active slot: at most one handoff.
    Slot(&'s InteractiveHandoffParent),
    /// The due handoffs' index, up to this deadline.
    Due(OffsetDateTime),
    /// An index tree, under each of the prefixes (several: merged).
    Index {
        tree: &'s Tree,
        prefixes: Vec<Vec<u8>>,
    },
}

/// The one source that serves `query`, whose statuses are `wanted`: the
/// parent, then the deadline, then the active filter, then statuses, then
/// the home, then creation; the other filters are checked on the records
/// it names.
fn source<'s>(
    shared: &'s Shared,
    query: &'s ListQuery,
    wanted: Option<&[InteractiveHandoffStatus]>,
) -> Source<'s> {
    let trees = &shared.trees;
    let only_active =
        wanted.is_some_and(|wanted| wanted.iter().all(|status| !status.is_terminal()));
    if let (None, Some(by)) = (&query.parent, query.due_by) {
        return Source::Due(by);
    }
    let (tree, prefixes) = match (&query.parent, wanted) {
        (Some(parent), _) if only_active => return Source::Slot(parent),
        (Some(parent), _) => (&trees.by_parent, vec![keys::by_parent_prefix(parent)]),
        (None, Some(wanted)) if wanted.len() == 2 && only_active => (&trees.active, vec![vec![]]),
        (None, Some(wanted)) => (
            &trees.by_status,
            wanted
                .iter()
                .map(|status| keys::by_status_prefix(*status))
                .collect(),
        ),
        (None, None) => match &query.home {
            Some(home) => (&trees.by_home, vec![keys::by_home_prefix(home)]),
            None => (&trees.by_created, vec![vec![]]),
        },
    };
    Source::Index { tree, prefixes }
}

/// The handoffs due by `by` that pass `query`, in list order from just
/// after `start` (a `created_at ++ id`), up to its limit: the due index
/// holds them in deadline order, so every entry up to `by` is read, and
/// what passes is sorted, keeping at most twice the limit in memory.
fn due_by(
    shared: &Shared,
    query: &ListQuery,
    by: OffsetDateTime,
    start: Option<&[u8]>,
) -> StoreResult<Vec<InteractiveHandoff>> {
    let tree = &shared.trees.due;
    let limit = query.limit.unwrap_or(usize::MAX);
    let mut found: Vec<(Vec<u8>, InteractiveHandoff)> = Vec::new();
    let keep_first = |found: &mut Vec<(Vec<u8>, InteractiveHandoff)>| {
        found.sort_by(|a, b| match query.newest_first {
            false => a.0.cmp(&b.0),
            true => b.0.cmp(&a.0),
        });
        found.truncate(limit);
    };
    for entry in tree.range(..=keys::due_until(by)) {
        let (key, _) = entry.map_err(|e| shared.engine(e))?;
        let id = keys::id_in_index(keys::DUE, &key, 0)?;
        let Some(bytes) = named_record(shared, tree, &key, &id)? else {
            // Finished, claimed and pruned since its entry was read.
            continue;
        };
        let handoff = record::handoff(&id, &bytes)?.value;
        // Listed at the entry of its deadline as the record now has it, so
        // once: a deadline moved while the walk read leaves an old entry
        // behind (or ahead), which names a record filed elsewhere now.
        let current = handoff
            .expires_at
            .is_some_and(|deadline| keys::due(deadline, &id) == key.as_ref());
        let place = keys::created(handoff.created_at, &handoff.id);
        let past = start.is_none_or(|start| match query.newest_first {
            false => place.as_slice() > start,
            true => place.as_slice() < start,
        });
        if current && past && query.matches(&handoff) {
            found.push((place, handoff));
            if found.len() >= limit.saturating_mul(2) {
                keep_first(&mut found);
            }
        }
    }
    keep_first(&mut found);
    Ok(found.into_iter().map(|(_, handoff)| handoff).collect())
}

/// The `created_at ++ id` of handoff `after`, which a page starts just
/// after; `None` when it is not stored (the page is empty).
fn page_start(shared: &Shared, after: &InteractiveHandoffId) -> StoreResult<Option<Vec<u8>>> {
    let found = shared
        .trees
        .handoffs
        .get(keys::handoff(after))
        .map_err(|e| shared.engine(e))?;
    let Some(bytes) = found else {
        return Ok(None);
    };
    let after = record::handoff(after, &bytes)?.value;
    Ok(Some(keys::created(after.created_at, &after.id)))
}

/// Reads the records `walks` of `tree` name, in list order (least key
/// first, or greatest when newest first; each walk is in that order, and
/// several, one per status, are merged), keeping those
/// that pass `query`, up to its limit. `any_status`: the query has no
/// status filter (so a home filter was served by the home's index).
fn merge(
    shared: &Shared,
    tree: &Tree,
    mut walks: Vec<Walk>,
    query: &ListQuery,
    any_status: bool,
) -> StoreResult<Vec<InteractiveHandoff>> {
    let name = tree.name();
    let limit = query.limit.unwrap_or(usize::MAX);
    let mut handoffs: Vec<InteractiveHandoff> = Vec::new();
    let mut heads = walks
        .iter_mut()
        .map(|walk| walk.next(shared))
        .collect::<StoreResult<Vec<_>>>()?;
    while handoffs.len() < limit {
        let heads_at = heads
            .iter()
            .enumerate()
            .filter_map(|(at, head)| head.as_ref().map(|key| (at, &key[walks[at].skip..])));
        let next = match query.newest_first {
            false => heads_at.min_by(|a, b| a.1.cmp(b.1)),
            true => heads_at.max_by(|a, b| a.1.cmp(b.1)),
        }
        .map(|(at, _)| at);
        let Some(at) = next else {
            break;
        };
        let (Some(key), Some(walk)) = (heads[at].take(), walks.get_mut(at)) else {
            break;
        };
        heads[at] = walk.next(shared)?;
        let id = keys::id_in_index(&name, &key, walk.skip)?;
        // A handoff met again in another status's walk (it changed status
        // while the list read) is listed once.
        if handoffs.last().is_some_and(|last| last.id == id) {
            continue;
        }
        let Some(bytes) = named_record(shared, tree, &key, &id)? else {
            continue;
        };
        let handoff = record::handoff(&id, &bytes)?.value;
        check_filed(&name, query, any_status, &id, &handoff)?;
        if query.matches(&handoff) {
            handoffs.push(handoff);
        }
    }
    Ok(handoffs)
}

/// Refuses, as damage, a record the index `name` files under another
/// parent or home: those never change. A status or the activity may have
/// changed since the entry was read; such a record is skipped by the
/// filters instead.
fn check_filed(
    name: &[u8],
    query: &ListQuery,
    any_status: bool,
    id: &InteractiveHandoffId,
    handoff: &InteractiveHandoff,
) -> StoreResult<()> {
    let stray = match (&query.parent, &query.home) {
        (Some(parent), _) if handoff.parent != *parent => Some(parent.to_string()),
        (None, Some(home)) if any_status && handoff.home != *home => Some(home.to_string()),
        _ => None,
    };
    match stray {
        Some(filed_under) => Err(StoreError::damaged(format!(
            "index {} lists handoff {id} under {filed_under}, but it belongs to {} at {}; the \
             store may be damaged",
            String::from_utf8_lossy(name),
            handoff.parent,
            handoff.home
        ))),
        None => Ok(()),
    }
}

/// One index walk of a list: the entries under `prefix`, past `start` and
/// before `end` (the parts of a key after its prefix), in key order, or
/// backwards from `end` down to `start` when newest first.
struct Walk {
    entries: ::sled::Iter,
    /// The prefix's length: where an entry's `created_at ++ id` begins.
    skip: usize,
    /// Greatest key first.
    backwards: bool,
}

impl Walk {
    fn new(
        tree: &Tree,
        prefix: Vec<u8>,
        start: Option<&[u8]>,
        end: Option<&[u8; 8]>,
        backwards: bool,
    ) -> Self {
        let under = |suffix: &[u8]| [prefix.as_slice(), suffix].concat();
        let start = start.map(under);
        let end = end.map(|end| under(end));
        let bottom = Bound::Included(prefix.clone());
        // A page's start is the bound a walk moves away from: the lower
        // one forwards; backwards, the upper one, with `end` (whichever is
        // lower).
        let (lower, upper) = match (backwards, start, end) {
            (false, start, end) => (
                start.map_or(bottom, Bound::Excluded),
                end.map_or_else(|| prefix_end(&prefix), Bound::Excluded),
            ),
            (true, Some(start), Some(end)) => (bottom, Bound::Excluded(start.min(end))),
            (true, Some(bound), None) | (true, None, Some(bound)) => {
                (bottom, Bound::Excluded(bound))
            }
            (true, None, None) => (bottom, prefix_end(&prefix)),
        };
        Self {
            entries: tree.range::<Vec<u8>, _>((lower, upper)),
            skip: prefix.len(),
            backwards,
        }
    }

    /// The next entry's key.
    fn next(&mut self, shared: &Shared) -> StoreResult<Option<IVec>> {
        let entry = match self.backwards {
            false => self.entries.next(),
            true => self.entries.next_back(),
        };
        entry
            .transpose()
            .map(|entry| entry.map(|(key, _)| key))
            .map_err(|e| shared.engine(e))
    }
}

/// The first key after every key that starts with `prefix` (none for the
/// empty prefix).
fn prefix_end(prefix: &[u8]) -> Bound<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Bound::Excluded(end);
        }
    }
    Bound::Unbounded
}
