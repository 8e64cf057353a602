//! The synthetic registry the latency figures are measured on.
//!
//! Handoff `i` belongs to wave `i / 10`, so every wave holds ten handoffs.
//! Handoff `i` was created `i` seconds before the population's base instant:
//! history grows backwards, so the newest handoffs (the active ones) are in
//! the first thousand at every store size. The first handoff of each of the
//! first [`ACTIVE_PARENTS`] waves is active (waiting or attached); every
//! other handoff is terminal, its outcome cycling through completed, handed
//! back and failed, and nine in ten have had their wake claimed. So a
//! `list --parent` returns ten handoffs, `list --active` returns
//! [`ACTIVE_PARENTS`] and `list --status waiting` half of them (the even
//! waves' handoffs wait, the odd ones' are attached) at every size: the
//! figures compare the same answer over a growing history.
//!
//! Ids are UUID v7 built from the creation instant and the index, so they
//! are deterministic, unique and sort like real ones. Every record passes
//! `validate()` before it is written.

use std::collections::BTreeMap;
use std::path::PathBuf;

use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent,
    InteractiveHandoffStatus,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::timestamp::{from_unix_micros, to_unix_micros, truncate_to_micros};
use lf_handoff_domain::wave::Wave;
use lf_handoff_domain::wave_home::WaveHome;
use time::OffsetDateTime;
use uuid::Builder;

use crate::error::{fail, BenchResult, Context};

/// Handoffs per wave.
pub const PER_PARENT: u64 = 10;
/// Waves with an active handoff: the size of `list --active` at every size.
pub const ACTIVE_PARENTS: u64 = 100;

const SECOND_MICROS: i64 = 1_000_000;

/// The synthetic registry, anchored at one instant.
#[derive(Debug, Clone)]
pub struct Population {
    base_micros: i64,
    home: WaveHome,
}

impl Population {
    /// A population whose newest handoff was created at `now`.
    pub fn new(now: OffsetDateTime) -> BenchResult<Self> {
        Ok(Self {
            base_micros: to_unix_micros(truncate_to_micros(now)),
            home: WaveHome::parse("jack@local").context("home")?,
        })
    }

    /// The base instant, microseconds since the Unix epoch: `new` of it
    /// makes the same population (the memory phase's child does).
    pub fn base_micros(&self) -> i64 {
        self.base_micros
    }

    /// The population whose [`base_micros`](Self::base_micros) is
    /// `text`, as a child process is given it.
    ///
    /// # Errors
    /// A failure naming `text` if it is not such an instant.
    pub fn from_base_arg(text: &str) -> BenchResult<Self> {
        let base = text
            .parse::<i64>()
            .ok()
            .and_then(from_unix_micros)
            .ok_or_else(|| crate::error::Failure(format!("base instant {text:?}")))?;
        Self::new(base)
    }

    /// How many waves hold `handoffs` handoffs.
    pub fn parents_for(handoffs: u64) -> u64 {
        handoffs.div_ceil(PER_PARENT)
    }

    /// Wave `p`'s id.
    pub fn wave_id(&self, p: u64) -> WaveId {
        WaveId::from_uuid(v7(self.base_micros - p as i64 * 10 * SECOND_MICROS, p))
    }

    /// Wave `p`, as a parent.
    pub fn wave(&self, p: u64) -> Parent {
        Parent::Wave(Wave::new(
            self.wave_id(p),
            format!("bench wave {p}"),
            "/srv/repos/product".into(),
        ))
    }

    /// Wave `p` as a handoff parent reference.
    pub fn parent_ref(&self, p: u64) -> InteractiveHandoffParent {
        InteractiveHandoffParent::Wave(self.wave_id(p))
    }

    /// Handoff `i`'s id.
    pub fn handoff_id(&self, i: u64) -> InteractiveHandoffId {
        InteractiveHandoffId::from_uuid(v7(self.created_micros(i), i))
    }

    fn created_micros(&self, i: u64) -> i64 {
        self.base_micros - i as i64 * SECOND_MICROS
    }

    /// Handoff `i`, checked against every invariant.
    ///
    /// # Errors
    /// A failure if the generated record is invalid (a bug in this module).
    pub fn handoff(&self, i: u64) -> BenchResult<InteractiveHandoff> {
        let p = i / PER_PARENT;
        let slot = i % PER_PARENT;
        let created = self.created_micros(i);
        let at = |offset_ms: i64| {
            from_unix_micros(created + offset_ms * 1_000)
                .ok_or_else(|| crate::error::Failure(format!("instant of handoff {i}")))
        };
        let active = slot == 0 && p < ACTIVE_PARENTS;
        let attached = if active { p % 2 == 1 } else { i % 2 == 0 };
        let (status, outcome) = if active {
            let status = if attached {
                InteractiveHandoffStatus::Attached
            } else {
                InteractiveHandoffStatus::Waiting
            };
            (status, None)
        } else {
            let outcome = match i % 3 {
                0 => InteractiveHandoffOutcome::Completed {
                    summary: "logged in and re-ran the deploy".into(),
                },
                1 => InteractiveHandoffOutcome::HandedBack {
                    summary: "credential rotated; continue from step 4".into(),
                },
                _ => InteractiveHandoffOutcome::Failed {
                    reason: "the vendor portal is down".into(),
                },
            };
            (outcome.status(), Some(outcome))
        };
        let claimed = !active && slot != 1;
        let attached_at = attached.then(|| at(100)).transpose()?;
        let terminal_at = (!active).then(|| at(200)).transpose()?;
        let wake_claimed_at = claimed.then(|| at(300)).transpose()?;
        let created_at = at(0)?;
        let updated_at = wake_claimed_at
            .or(terminal_at)
            .or(attached_at)
            .unwrap_or(created_at);
        let handoff = InteractiveHandoff {
            id: self.handoff_id(i),
            parent: self.parent_ref(p),
            wave_id: self.wave_id(p),
            home: self.home.clone(),
            cwd: PathBuf::from("/srv/repos/product"),
            provider: "codex".into(),
            provider_session_id: None,
            body_generation: 1,
            reason: "OAuth login requires a human".into(),
            environment: BTreeMap::from([("LF_HOME".to_string(), "/srv/lf".to_string())]),
            attach_argv: vec![
                "tmux".into(),
                "attach-session".into(),
                "-t".into(),
                format!("lf-{p}"),
            ],
            status,
            outcome,
            created_at,
            updated_at,
            attached_at,
            terminal_at,
            wake_claimed_at,
            wake_claimed_by_generation: claimed.then_some(1),
            step: None,
            expires_at: None,
            choices: None,
            form: None,
            on_expiry: None,
            answer: None,
        };
        if let Err(violation) = handoff.validate() {
            return fail(format!("synthetic handoff {i} is invalid: {violation}"));
        }
        Ok(handoff)
    }

    /// How many of handoffs `0..n` are active.
    pub fn active_in(n: u64) -> u64 {
        Self::parents_for(n).min(ACTIVE_PARENTS)
    }

    /// How many of handoffs `0..n` are waiting: the active handoffs of the
    /// even waves, so [`ACTIVE_PARENTS`]` / 2` (50) at every size from
    /// 1,000 handoffs, the answer `list --status waiting` gives at each.
    pub fn waiting_in(n: u64) -> u64 {
        Self::active_in(n).div_ceil(2)
    }
}

/// A UUID v7 at `micros` whose random part holds `index`.
fn v7(micros: i64, index: u64) -> uuid::Uuid {
    let millis = u64::try_from(micros.div_euclid(1_000)).unwrap_or(0);
    let mut random = [0u8; 10];
    random[2..10].copy_from_slice(&index.to_be_bytes());
    // The variant bits overwrite the top of byte 2; indexes stay below 2^56.
    Builder::from_unix_timestamp_millis(millis, &random).into_uuid()
}

/// The number of writes that produced `handoff` (its stored version).
pub fn version_of(handoff: &InteractiveHandoff) -> i64 {
    1 + i64::from(handoff.attached_at.is_some())
        + i64::from(handoff.terminal_at.is_some())
        + i64::from(handoff.wake_claimed_at.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_handoff_is_valid_and_ids_are_unique_and_ordered() {
        let population = Population::new(OffsetDateTime::now_utc()).unwrap();
        let mut previous: Option<InteractiveHandoffId> = None;
        let mut active = 0;
        for i in 0..3_000 {
            let handoff = population.handoff(i).unwrap();
            assert_eq!(handoff.id, population.handoff_id(i));
            if let Some(newer) = &previous {
                assert!(handoff.id < *newer, "ids sort like creation times");
            }
            previous = Some(handoff.id.clone());
            active += u64::from(handoff.is_active());
        }
        assert_eq!(active, ACTIVE_PARENTS);
        assert_eq!(Population::active_in(3_000), ACTIVE_PARENTS);
        assert_eq!(Population::active_in(500), 50);
        let waiting = (0..3_000)
            .filter(|i| population.handoff(*i).unwrap().status == InteractiveHandoffStatus::Waiting)
            .count() as u64;
        assert_eq!(waiting, Population::waiting_in(3_000));
        assert_eq!(Population::waiting_in(1_000), ACTIVE_PARENTS / 2);
        assert_eq!(Population::waiting_in(1_000_000), ACTIVE_PARENTS / 2);
    }

    #[test]
    fn a_parent_has_at_most_one_active_handoff() {
        let population = Population::new(OffsetDateTime::now_utc()).unwrap();
        for p in 0..200 {
            let handoffs: Vec<_> = (p * PER_PARENT..(p + 1) * PER_PARENT)
                .map(|i| population.handoff(i).unwrap())
                .collect();
            let active = handoffs.iter().filter(|h| h.is_active()).count();
            assert_eq!(active, usize::from(p < ACTIVE_PARENTS));
            assert!(handoffs
                .iter()
                .all(|h| h.parent == population.parent_ref(p)));
        }
    }
}
