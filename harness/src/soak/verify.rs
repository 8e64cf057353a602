//! The store after the soak, read directly (the service stopped): every
//! record keeps its invariants, everything the legitimate client had
//! acknowledged is there, and the histories read are well formed and
//! match their records.

use lf_handoff_adapters::ListQuery;
use std::collections::BTreeMap;

use lf_handoff_adapters::{open_store, StorageConfig};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{check_one_active_per_parent, InteractiveHandoff};

use super::legit::Acked;
use crate::check::{history_matches_record, history_well_formed, KnownChanges};
use crate::problems::Problems;
use crate::rng::Rng;

/// Histories read after a run, at most (a seeded sample beyond).
const HISTORIES: usize = 2_000;

/// What the store check found.
#[derive(Debug, Clone, Default)]
pub struct StoreFigures {
    /// Handoffs stored.
    pub handoffs: u64,
    /// Records failing `validate()`, or I6 broken.
    pub violations: u64,
    /// Acknowledged opens, finishes and claims the store does not show.
    pub lost: u64,
    /// Histories read.
    pub histories: u64,
    /// Histories not well formed or not matching their record.
    pub history_findings: u64,
    /// The first problems, described.
    pub problems: Problems,
    /// The store could not be read.
    pub unreadable: Option<String>,
}

impl StoreFigures {
    /// Whether nothing was found.
    pub fn sound(&self) -> bool {
        self.violations == 0
            && self.lost == 0
            && self.history_findings == 0
            && self.unreadable.is_none()
    }
}

/// Opens the store of `config` and checks it against `acked`.
pub async fn verify(config: &StorageConfig, acked: &Acked, seed: u64) -> StoreFigures {
    let mut figures = StoreFigures::default();
    let store = match open_store(config).await {
        Ok(store) => store,
        Err(e) => {
            figures.unreadable = Some(format!("cannot open the store: {e}"));
            return figures;
        }
    };
    let all = match store.list_interactive_handoffs(ListQuery::default()).await {
        Ok(all) => all,
        Err(e) => {
            figures.unreadable = Some(format!("cannot list the handoffs: {e}"));
            return figures;
        }
    };
    figures.handoffs = all.len() as u64;
    for handoff in &all {
        if let Err(violation) = handoff.validate() {
            figures
                .problems
                .count(&mut figures.violations, violation.to_string());
        }
    }
    if let Err(violation) = check_one_active_per_parent(&all) {
        figures
            .problems
            .count(&mut figures.violations, violation.to_string());
    }
    let stored: BTreeMap<&str, &InteractiveHandoff> =
        all.iter().map(|h| (h.id.as_str(), h)).collect();
    check_acked(&stored, acked, &mut figures);

    let mut ids: Vec<&InteractiveHandoff> = all.iter().collect();
    Rng::new(seed).shuffle(&mut ids);
    ids.truncate(HISTORIES);
    for record in ids {
        histories(&store, record, &mut figures).await;
    }
    figures
}

fn check_acked(
    stored: &BTreeMap<&str, &InteractiveHandoff>,
    acked: &Acked,
    figures: &mut StoreFigures,
) {
    for id in &acked.opened {
        if !stored.contains_key(id.as_str()) {
            figures.problems.count(
                &mut figures.lost,
                format!("the open of {id} was acknowledged; it is not stored"),
            );
        }
    }
    for (id, status) in &acked.finished {
        let now = stored.get(id.as_str()).map(|h| h.status.as_str());
        if now != Some(*status) {
            figures.problems.count(
                &mut figures.lost,
                format!("{id} was acknowledged {status}; it is stored {now:?}"),
            );
        }
    }
    for id in &acked.claimed {
        let holder = stored
            .get(id.as_str())
            .and_then(|h| h.wake_claimed_by_generation);
        if holder != Some(1) {
            figures.problems.count(
                &mut figures.lost,
                format!(
                    "the claim of {id} by generation 1 was acknowledged; the store has {holder:?}"
                ),
            );
        }
    }
}

async fn histories(
    store: &lf_handoff_adapters::Store,
    record: &InteractiveHandoff,
    figures: &mut StoreFigures,
) {
    let id: &InteractiveHandoffId = &record.id;
    let events = match store.history(id).await {
        Ok(events) => events,
        Err(e) => {
            figures.problems.count(
                &mut figures.history_findings,
                format!("cannot read the history of {id}: {e}"),
            );
            return;
        }
    };
    figures.histories += 1;
    let mut known = KnownChanges::default();
    known.saw(record);
    let mut found = history_matches_record(record, &events, &known);
    found.malformed.extend(history_well_formed(id, &events));
    if !found.is_empty() {
        let first = found
            .missing
            .iter()
            .chain(&found.extra)
            .chain(&found.malformed)
            .next()
            .cloned()
            .unwrap_or_default();
        figures.problems.count(
            &mut figures.history_findings,
            format!("history of {id}: {first}"),
        );
    }
}
