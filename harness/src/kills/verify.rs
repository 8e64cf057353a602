//! The check after each kill of the loop: the store opens, and every write
//! acknowledged on it is there, as acknowledged or further along.

use lf_handoff_adapters::ListQuery;
use std::collections::BTreeMap;

use lf_handoff_adapters::{open_store, GenerateId, Store};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::id::WaveId;
use lf_handoff_domain::interactive_handoff::{InteractiveHandoff, InteractiveHandoffParent};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::wave::Wave;

use super::round::{CliAck, Killed};
use super::{KillFigures, KilledStore};
use crate::check::{handoff_same_or_later, parent_same_or_later};
use crate::crash::{parse_event, Event};
use crate::upgrade::{compare, Problem};

/// What the store must hold: every handoff acknowledged or found after a
/// kill (at the furthest state known), and every parent acknowledged (as
/// acknowledged, when its record is known).
#[derive(Debug, Default)]
pub(super) struct Ledger {
    handoffs: BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
    parents: BTreeMap<InteractiveHandoffParent, Option<Parent>>,
}

/// Opens the store after a kill and checks it; returns whether it opened.
pub(super) async fn after_kill(
    store: &mut KilledStore,
    killed: &Killed,
    kill: u64,
    figures: &mut KillFigures,
) -> bool {
    let phase = &killed.phase;
    let handle = match open_store(&store.config).await {
        Ok(handle) => handle,
        Err(e) => {
            figures.unopenable += 1;
            figures.problems.describe(format!(
                "unopenable: after kill {kill} ({phase}) the store does not open: {e}"
            ));
            return false;
        }
    };
    if !store.manifest.is_empty() {
        // The upgrade (whole, or to be finished by this open) kept every
        // record release 0.1.0 wrote.
        for problem in compare(&store.config, super::Release::V1, &store.manifest).await {
            match problem {
                Problem::Lost(message) => figures.lose(format!("kill {kill} ({phase}): {message}")),
                Problem::Error(message) => {
                    figures.fail(format!("kill {kill} ({phase}): {message}"))
                }
            }
        }
        store.manifest.clear();
    }
    let stored = match handle.list_interactive_handoffs(ListQuery::default()).await {
        Ok(all) => all.into_iter().map(|h| (h.id.clone(), h)).collect(),
        Err(e) => {
            figures.lose(format!(
                "kill {kill} ({phase}): listing the handoffs failed: {e}"
            ));
            return true;
        }
    };
    let ledger = &mut store.ledger;
    ledger.acknowledge(killed, figures);
    ledger.check(&handle, &stored, kill, phase, figures).await;
    // From now on the stored records are what must survive.
    ledger.handoffs = stored;
    // One write after this open, as any command that follows a killed one
    // would make: so the next open has log to walk past its snapshot, and
    // writes a new one (sled writes snapshots only when it opens, and only
    // then can a kill leave one unfinished).
    let wave = Wave::new(
        WaveId::new(),
        format!("after kill {kill}"),
        store.dir.path().display().to_string(),
    );
    match handle.create_wave(&wave).await {
        Ok(()) => {
            let parent = Parent::Wave(wave);
            ledger.acknowledge_parent(parent.reference(), Some(parent));
        }
        Err(e) => figures.fail(format!("kill {kill}: creating a wave after the check: {e}")),
    }
    true
}

impl Ledger {
    /// Adds this kill's acknowledgements: the child's `ack` lines and the
    /// command line's records.
    fn acknowledge(&mut self, killed: &Killed, figures: &mut KillFigures) {
        for line in &killed.lines {
            let Ok(Event::Ack { kind, json, .. }) = parse_event(line) else {
                continue;
            };
            let parsed = match kind.as_str() {
                "wave" | "parent" | "body" => serde_json::from_str::<Parent>(&json)
                    .map(|parent| self.acknowledge_parent(parent.reference(), Some(parent))),
                _ => serde_json::from_str::<InteractiveHandoff>(&json)
                    .map(|handoff| self.acknowledge_handoff(handoff)),
            };
            if let Err(e) = parsed {
                figures.fail(format!("an unreadable {kind} acknowledgement: {e}"));
            }
        }
        for ack in &killed.cli {
            match ack {
                CliAck::Wave(reference) => self.acknowledge_parent(reference.clone(), None),
                CliAck::Handoff(handoff) => self.acknowledge_handoff(handoff.as_ref().clone()),
            }
        }
    }

    fn acknowledge_parent(&mut self, reference: InteractiveHandoffParent, parent: Option<Parent>) {
        let known = self.parents.entry(reference).or_default();
        if parent.is_some() {
            *known = parent;
        }
    }

    /// Keeps the furthest of the known and the acknowledged record.
    fn acknowledge_handoff(&mut self, handoff: InteractiveHandoff) {
        let further = self
            .handoffs
            .get(&handoff.id)
            .is_some_and(|known| handoff_same_or_later(&handoff, known).is_ok());
        if !further {
            self.handoffs.insert(handoff.id.clone(), handoff);
        }
    }

    /// Every known handoff and parent is stored, as known or further along.
    async fn check(
        &self,
        handle: &Store,
        stored: &BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
        kill: u64,
        phase: &str,
        figures: &mut KillFigures,
    ) {
        for (id, known) in &self.handoffs {
            figures.checked += 1;
            match stored.get(id) {
                None => figures.lose(format!("kill {kill} ({phase}): handoff {id} is gone")),
                Some(now) => {
                    if let Err(message) = handoff_same_or_later(known, now) {
                        figures.lose(format!("kill {kill} ({phase}): {message}"));
                    }
                }
            }
        }
        for (reference, known) in &self.parents {
            figures.checked += 1;
            match handle.get_parent(reference).await {
                Ok(Some(now)) => {
                    if let Some(Err(message)) = known
                        .as_ref()
                        .map(|known| parent_same_or_later(known, &now))
                    {
                        figures.lose(format!("kill {kill} ({phase}): {message}"));
                    }
                }
                Ok(None) => {
                    figures.lose(format!("kill {kill} ({phase}): parent {reference} is gone"))
                }
                Err(e) => figures.lose(format!(
                    "kill {kill} ({phase}): reading parent {reference}: {e}"
                )),
            }
        }
    }
}
