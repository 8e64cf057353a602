//! The stored form of a record, and the strict reading of it.
//!
//! Every value in the `handoffs`, `parents` and `task_prs` trees is
//!
//! ```text
//! +--------+----------------------+------------------------------+
//! | format | version              | JSON of the domain record    |
//! | 1 byte | 8 bytes, big-endian  | (serde form of the domain)   |
//! +--------+----------------------+------------------------------+
//! ```
//!
//! `version` is the compare-and-swap version: 1 when inserted, one more
//! with every swap (task PRs, which never change, stay at 1).
//!
//! `format` says how to read the JSON. Records are always written in
//! [`FORMAT`]; every format from [`OLDEST_FORMAT`] up to it is read:
//!
//! | format | written by | JSON |
//! | --- | --- | --- |
//! | 1 | release 0.1.0 | a handoff has no `step` |
//! | 2 | builds with steps (C12), before deadlines | a handoff has `step` (`null` when it has none) |
//! | 3 | release 0.3.0 and the builds after it (C14, C15, C23, C29) | a handoff has `expires_at` (`null` when it has none) |
//! | 4 | this build (C26) | a handoff has `choices`, `form`, `on_expiry` and `answer` (`null` when it has none); an event has `answer` |
//!
//! A format-1 handoff reads with no step, a format-1 or format-2 one with
//! no deadline, a format 1 to 3 one with no answer spec and no answer (the
//! domain's serde defaults; such a record that names a deadline, or an
//! answer spec or answer, is refused as damage), and parents and task PRs have the same
//! JSON in every format. Old records are not rewritten when a store is
//! upgraded: each one moves to the current format when it is next written
//! (a transition, a new body), keeping its version. A format newer than
//! [`FORMAT`] is refused as a newer schema, any other unknown one as damage
//! (contract C11), never guessed at.
//!
//! Every value in the `handoff_events` tree (format 3 on) is one history
//! event (C15), with no version (an event never changes):
//!
//! ```text
//! +--------+----------------------------------------------+
//! | format | JSON of the domain's `HandoffEvent`          |
//! | 1 byte | (its position, handoff id, seq, actor, ...)  |
//! +--------+----------------------------------------------+
//! ```
//!
//! The counters of `handoff_counters` are 8-byte big-endian numbers.
//!
//! Reading is strict: a record that is truncated, does not parse, is stored
//! under another key than its own id, or fails `validate()` is refused with
//! `Unavailable`, never returned; so is an event that does not parse or
//! names another position, handoff or seq than its keys.

use std::fmt::Display;

use lf_handoff_application::ports::Versioned;
use lf_handoff_application::{StoreError, StoreResult, UnavailableKind};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    HandoffEvent, InteractiveHandoff, InteractiveHandoffParent,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::task::TaskPr;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The record format this build writes, and the newest it reads. The
/// store's marker file names the same number (see `files`).
pub(crate) const FORMAT: u8 = 4;

/// The oldest record format this build reads: release 0.1.0's.
pub(crate) const OLDEST_FORMAT: u8 = 1;

/// The first format with deadlines (`expires_at`) and history events.
const HISTORY_FORMAT: u8 = 3;

/// The first format with answer specs and answers (C26).
const ANSWER_FORMAT: u8 = 4;

/// Format byte plus version.
const HEADER_LEN: usize = 9;

/// The stored bytes of `value` at `version`.
///
/// # Errors
/// `InvalidInput` when the value cannot be encoded as JSON (a path that is
/// not UTF-8; the domain refuses those earlier).
pub(super) fn encode<T: Serialize>(version: u64, value: &T) -> StoreResult<Vec<u8>> {
    let mut bytes = Vec::with_capacity(256);
    bytes.push(FORMAT);
    bytes.extend_from_slice(&version.to_be_bytes());
    serde_json::to_writer(&mut bytes, value)
        .map_err(|e| StoreError::InvalidInput(format!("cannot encode record: {e}")))?;
    Ok(bytes)
}

/// The version a successful swap from `expected` stores.
///
/// # Errors
/// `Unavailable` when `expected` is the last representable version.
pub(super) fn next_version(what: &dyn Display, expected: u64) -> StoreResult<u64> {
    expected.checked_add(1).ok_or_else(|| {
        StoreError::unavailable(
            UnavailableKind::Other,
            format!("{what} is at its last version"),
        )
    })
}

/// Reads a stored handoff, refusing anything but a valid record of `id`.
///
/// # Errors
/// `Unavailable` naming the handoff and what is wrong.
pub(super) fn handoff(
    id: &InteractiveHandoffId,
    bytes: &[u8],
) -> StoreResult<Versioned<InteractiveHandoff>> {
    let what = format!("handoff {id}");
    let (format, record): (u8, Versioned<InteractiveHandoff>) = decode(&what, bytes)?;
    if format < HISTORY_FORMAT && record.value.expires_at.is_some() {
        return Err(damaged(
            &what,
            &format!("record format {format} has no deadline, yet the record names one"),
        ));
    }
    let handoff = &record.value;
    let shaped = handoff.choices.is_some()
        || handoff.form.is_some()
        || handoff.on_expiry.is_some()
        || handoff.answer.is_some();
    if format < ANSWER_FORMAT && shaped {
        return Err(damaged(
            &what,
            &format!("record format {format} has no answers, yet the record names one"),
        ));
    }
    if record.value.id != *id {
        return Err(damaged(
            &what,
            &format!("the record holds handoff {}", record.value.id),
        ));
    }
    record.value.validate().map_err(|violation| {
        StoreError::damaged(format!(
            "stored {violation}; the store may be damaged and was left unchanged"
        ))
    })?;
    Ok(record)
}

/// Reads a stored parent, refusing anything but a record of `reference`.
///
/// # Errors
/// `Unavailable` naming the parent and what is wrong.
pub(super) fn parent(
    reference: &InteractiveHandoffParent,
    bytes: &[u8],
) -> StoreResult<Versioned<Parent>> {
    let what = format!("parent {reference}");
    let (_, record): (u8, Versioned<Parent>) = decode(&what, bytes)?;
    if record.value.reference() != *reference {
        return Err(damaged(
            &what,
            &format!("the record holds {}", record.value.reference()),
        ));
    }
    Ok(record)
}

/// Reads a stored task PR, refusing anything but a record of `id`.
///
/// # Errors
/// `Unavailable` naming the PR and what is wrong.
pub(super) fn task_pr(id: &str, bytes: &[u8]) -> StoreResult<TaskPr> {
    let what = format!("task PR {id}");
    let (_, record): (u8, Versioned<TaskPr>) = decode(&what, bytes)?;
    if record.value.id.as_str() != id {
        return Err(damaged(
            &what,
            &format!("the record holds task PR {}", record.value.id),
        ));
    }
    Ok(record.value)
}

/// Only the version of a stored record, for a compare-and-swap that does
/// not need the rest.
///
/// # Errors
/// `Unavailable` for a truncated record or an unknown format.
pub(super) fn version(what: &dyn Display, bytes: &[u8]) -> StoreResult<u64> {
    header(what, bytes).map(|(_, version, _)| version)
}

/// The stored bytes of a history event: [`FORMAT`], then its JSON.
///
/// # Errors
/// `Unavailable` when the event cannot be encoded (it always can: its
/// fields are plain text, numbers and instants).
pub(super) fn encode_event(event: &HandoffEvent) -> StoreResult<Vec<u8>> {
    let mut bytes = Vec::with_capacity(256);
    bytes.push(FORMAT);
    serde_json::to_writer(&mut bytes, event).map_err(|e| {
        StoreError::unavailable(
            UnavailableKind::Other,
            format!(
                "cannot encode event {} of handoff {}: {e}",
                event.seq, event.handoff_id
            ),
        )
    })?;
    Ok(bytes)
}

/// Reads the stored event at `position`, refusing anything but a readable
/// event of that position.
///
/// # Errors
/// `Unavailable` naming the position and what is wrong.
pub(super) fn event(position: u64, bytes: &[u8]) -> StoreResult<HandoffEvent> {
    let what = format!("history event at position {position}");
    let Some((&format, body)) = bytes.split_first() else {
        return Err(damaged(&what, "the event is empty"));
    };
    check_format(&what, format)?;
    if format < HISTORY_FORMAT {
        return Err(damaged(
            &what,
            &format!("record format {format} has no history events"),
        ));
    }
    let event: HandoffEvent =
        serde_json::from_slice(body).map_err(|e| damaged(&what, &e.to_string()))?;
    if format < ANSWER_FORMAT && event.answer.is_some() {
        return Err(damaged(
            &what,
            &format!("record format {format} has no answers, yet the event names one"),
        ));
    }
    if event.position != position {
        return Err(damaged(
            &what,
            &format!("the event holds position {}", event.position),
        ));
    }
    if event.seq == 0 {
        return Err(damaged(&what, "seq 0"));
    }
    Ok(event)
}

/// Reads a stored counter (a position or a seq): eight big-endian bytes,
/// never 0.
///
/// # Errors
/// `Unavailable` naming the counter.
pub(super) fn counter(what: &dyn Display, bytes: &[u8]) -> StoreResult<u64> {
    match <[u8; 8]>::try_from(bytes).map(u64::from_be_bytes) {
        Ok(value) if value > 0 => Ok(value),
        _ => Err(damaged(
            what,
            &format!("{} bytes that are not a counter", bytes.len()),
        )),
    }
}

fn decode<T: DeserializeOwned>(what: &str, bytes: &[u8]) -> StoreResult<(u8, Versioned<T>)> {
    let (format, version, body) = header(&what, bytes)?;
    let value = serde_json::from_slice(body).map_err(|e| damaged(&what, &e.to_string()))?;
    Ok((format, Versioned { value, version }))
}

/// Accepts a format this build reads.
fn check_format(what: &dyn Display, format: u8) -> StoreResult<()> {
    if format > FORMAT {
        return Err(StoreError::unavailable(
            UnavailableKind::NewerSchema,
            format!(
                "stored {what} has record format {format}, newer than this build understands \
                 ({FORMAT}); upgrade lf-handoff to read this store. Nothing was changed"
            ),
        ));
    }
    if format < OLDEST_FORMAT {
        return Err(damaged(what, &format!("unknown record format {format}")));
    }
    Ok(())
}

fn header<'b>(what: &dyn Display, bytes: &'b [u8]) -> StoreResult<(u8, u64, &'b [u8])> {
    let Some((&format, rest)) = bytes.split_first() else {
        return Err(damaged(what, "the record is empty"));
    };
    check_format(what, format)?;
    let Some((version, body)) = rest.split_first_chunk::<8>() else {
        return Err(damaged(
            what,
            &format!("{} bytes, shorter than a record header", bytes.len()),
        ));
    };
    let version = u64::from_be_bytes(*version);
    if version == 0 {
        return Err(damaged(what, "version 0"));
    }
    debug_assert_eq!(bytes.len() - body.len(), HEADER_LEN);
    Ok((format, version, body))
}

fn damaged(what: &dyn Display, detail: &str) -> StoreError {
    StoreError::damaged(format!(
        "stored {what} is unreadable ({detail}); the store may be damaged or written by \
         another program, and was left unchanged"
    ))
}
