//! The export file's codec and checks, without any store: what the writer
//! writes, what the reader accepts, and every refusal, named by line.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_domain::interactive_handoff::{attach, open, Actor, HandoffChange};
use lf_handoff_domain::wave::Wave;
use uuid::Uuid;

use super::*;
use crate::local::tests::Mocks;
use crate::testing::{OpenRequest, T0};
use crate::{ConflictKind, Store, UnavailableKind};

fn wave(n: u128) -> Wave {
    Wave::new(
        WaveId::from_uuid(Uuid::from_u128(n)),
        format!("wave {n} «ü»"),
        "/src/product".into(),
    )
}

/// A wave and its handoff, opened then attached: the records in file
/// order, with the last position given.
fn registry() -> (Vec<ArchiveRecord>, u64) {
    let wave = wave(1);
    let request = OpenRequest::on_wave(&wave)
        .reason("line one\nline \"two\" 🦀")
        .environment(BTreeMap::from([("K".to_string(), "v=1".to_string())]))
        .build();
    let id = InteractiveHandoffId::from_uuid(Uuid::from_u128(2));
    let opened = open(&request, wave.id().clone(), id.clone(), T0).unwrap();
    let attached = attach(&opened, T0 + time::Duration::seconds(1))
        .unwrap()
        .into_handoff();
    let actor = Actor::parse("alice@build-1").unwrap();
    let first =
        HandoffChange::between(None, &opened)
            .unwrap()
            .into_event(id.clone(), 1, 7, actor.clone());
    let second = HandoffChange::between(Some(&opened), &attached)
        .unwrap()
        .into_event(id, 2, 9, actor);
    let records = vec![
        ArchiveRecord::Parent(Versioned {
            value: lf_handoff_domain::parent::Parent::Wave(wave),
            version: 1,
        }),
        ArchiveRecord::Handoff {
            handoff: Versioned {
                value: attached,
                version: 2,
            },
            events: 2,
        },
        ArchiveRecord::Event(first),
        ArchiveRecord::Event(second),
    ];
    (records, 12)
}

fn written(records: &[ArchiveRecord], last_position: u64) -> String {
    let mut out = Vec::new();
    let mut writer = ArchiveWriter::new(&mut out, None).unwrap();
    for record in records {
        writer.record(record).unwrap();
    }
    writer.end(last_position).unwrap();
    String::from_utf8(out).unwrap()
}

/// Every item of `text`, or the first error.
fn read(text: &str) -> StoreResult<Vec<ArchiveItem>> {
    let mut reader = ArchiveReader::new(text.as_bytes(), None);
    let mut items = Vec::new();
    loop {
        let item = reader.next_item()?;
        let end = matches!(item, ArchiveItem::End(_));
        items.push(item);
        if end {
            return Ok(items);
        }
    }
}

#[track_caller]
fn refused(text: &str, names: &str) -> String {
    match read(text) {
        Err(StoreError::InvalidInput(message)) => {
            assert!(message.contains(names), "{message:?} names {names:?}");
            message
        }
        other => panic!("expected InvalidInput naming {names:?}, got {other:?}"),
    }
}

/// `text` with line `n` (1-based) replaced by `with`, or left out.
fn with_line(text: &str, n: usize, with: Option<&str>) -> String {
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        match (i + 1 == n, with) {
            (true, Some(with)) => out.push_str(&format!("{with}\n")),
            (true, None) => {}
            (false, _) => out.push_str(&format!("{line}\n")),
        }
    }
    out
}

#[test]
fn an_export_is_a_header_the_records_and_an_end_line() {
    let (records, last) = registry();
    let text = written(&records, last);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6);
    assert_eq!(lines[0], r#"{"format":"lf-handoff-export","version":2}"#);
    assert!(lines[1].starts_with(r#"{"parent":{"version":1,"record":{"kind":"wave","#));
    assert!(lines[2].starts_with(r#"{"handoff":{"version":2,"events":2,"record":{"id":"ih_"#));
    assert!(lines[3].starts_with(r#"{"event":{"position":7,"#));
    assert_eq!(
        lines[5],
        r#"{"end":{"parents":1,"task_prs":0,"handoffs":1,"events":2,"last_position":12}}"#
    );
    assert!(text.ends_with("}\n"));
    // Read back, record for record; written again, byte for byte.
    let items = read(&text).unwrap();
    let mut expected: Vec<ArchiveItem> = records.iter().cloned().map(ArchiveItem::Record).collect();
    expected.push(ArchiveItem::End(ArchiveSummary {
        parents: 1,
        task_prs: 0,
        handoffs: 1,
        events: 2,
        last_position: 12,
    }));
    assert_eq!(items, expected);
    assert_eq!(written(&records, last), text);
    // Lines ending in \r\n read the same.
    assert_eq!(read(&text.replace('\n', "\r\n")).unwrap(), expected);
}

#[test]
fn a_damaged_line_is_invalid_input_naming_its_number() {
    let (records, last) = registry();
    let text = written(&records, last);
    refused(
        &with_line(&text, 3, Some("{\"handoff\": {")),
        "line 3 of the export",
    );
    refused(&with_line(&text, 2, Some("")), "line 2 of the export");
    refused(&with_line(&text, 4, Some("{\"comment\":\"hi\"}")), "line 4");
    refused(
        &with_line(
            &text,
            2,
            Some(
                &text
                    .lines()
                    .nth(1)
                    .unwrap()
                    .replace("\"version\":1", "\"version\":1,\"extra\":true"),
            ),
        ),
        "line 2",
    );
    refused(
        &text.replace("\"status\":\"attached\"", "\"status\":\"bogus\""),
        "line 3",
    );
}

#[test]
fn a_version_1_file_of_a_build_before_answers_is_read_without_them() {
    let (records, last) = registry();
    let text = written(&records, last);
    // As a build before C26 wrote it: version 1, no answer fields.
    let mut old = String::new();
    for (n, line) in text.lines().enumerate() {
        let mut value: serde_json::Value = serde_json::from_str(line).unwrap();
        if n == 0 {
            value["version"] = 1.into();
        }
        for path in ["/handoff/record", "/event"] {
            if let Some(fields) = value.pointer_mut(path).and_then(|v| v.as_object_mut()) {
                for field in ["choices", "form", "on_expiry", "answer"] {
                    fields.remove(field);
                }
            }
        }
        old.push_str(&format!("{value}\n"));
    }
    assert!(!old.contains("answer"), "{old}");
    assert_eq!(read(&old).unwrap(), read(&text).unwrap());
}

#[test]
fn a_newer_format_version_is_refused_saying_to_upgrade() {
    let (records, last) = registry();
    let text = written(&records, last);
    let newer = with_line(
        &text,
        1,
        Some(r#"{"format":"lf-handoff-export","version":3}"#),
    );
    let message = refused(&newer, "newer");
    assert!(message.contains("Upgrade lf-handoff"), "{message}");
    refused(
        &with_line(&text, 1, Some(r#"{"format":"something-else","version":1}"#)),
        "not an lf-handoff export",
    );
    refused("", "empty");
}

#[test]
fn a_file_cut_short_or_with_lines_after_its_end_is_refused() {
    let (records, last) = registry();
    let text = written(&records, last);
    refused(&with_line(&text, 6, None), "cut short");
    refused(&with_line(&text, 5, None), "line 5");
    refused(&format!("{text}\n"), "line 7");
    refused(
        &format!("{text}{}\n", text.lines().nth(2).unwrap()),
        "line 7",
    );
}

#[test]
fn records_out_of_order_alone_or_miscounted_are_refused() {
    let (records, last) = registry();
    let text = written(&records, last);
    let lines: Vec<&str> = text.lines().collect();
    // The handoff before its parent, the events swapped, an event alone.
    let swap = |a: usize, b: usize| {
        let mut lines = lines.clone();
        lines.swap(a, b);
        lines.join("\n") + "\n"
    };
    refused(&swap(1, 2), "line 2");
    refused(&swap(3, 4), "line 4");
    refused(&with_line(&text, 3, None), "line 3");
    // Counts that disagree with the end line; a last position behind the
    // last event's; an event counter the events do not reach.
    refused(
        &text.replace("\"events\":2,\"last", "\"events\":3,\"last"),
        "line 6",
    );
    refused(
        &text.replace("\"last_position\":12", "\"last_position\":8"),
        "line 6",
    );
    refused(
        &text.replace("\"events\":2,\"record\"", "\"events\":3,\"record\""),
        "line 6",
    );
    // A second active handoff of the parent (I6), a handoff of a parent
    // not in the file.
    let mut twice = records.clone();
    let ArchiveRecord::Handoff { handoff, .. } = &records[1] else {
        unreachable!()
    };
    let mut other = handoff.clone();
    other.value.id = InteractiveHandoffId::from_uuid(Uuid::from_u128(3));
    twice.insert(
        2,
        ArchiveRecord::Handoff {
            handoff: other,
            events: 0,
        },
    );
    let mut writer = ArchiveWriter::new(Vec::new(), None).unwrap();
    writer.record(&twice[0]).unwrap();
    writer.record(&twice[1]).unwrap();
    let refusal = writer.record(&twice[2]).unwrap_err();
    assert_eq!(refusal.unavailable_kind(), Some(UnavailableKind::Damaged));
    assert!(refusal.message().contains("I6"), "{refusal}");
    let moved = lines[2].replace(
        wave(1).id().as_str(),
        WaveId::from_uuid(Uuid::from_u128(9)).as_str(),
    );
    let orphan = with_line(&text, 3, Some(&moved));
    refused(&orphan, "line 3");
}

/// An in-memory backend: what it holds, as records and a last position.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    held: Mutex<Option<(Vec<ArchiveRecord>, u64)>>,
}

#[async_trait]
impl Archive for Memory {
    async fn export(&self, sink: &mut dyn ArchiveSink) -> StoreResult<ArchiveSummary> {
        let held = self.held.lock().unwrap().clone().unwrap_or_default();
        for record in &held.0 {
            sink.record(record)?;
        }
        sink.end(held.1)
    }

    async fn import(&self, source: &mut dyn ArchiveSource) -> StoreResult<ArchiveSummary> {
        if self.held.lock().unwrap().is_some() {
            return Err(not_empty(&"memory"));
        }
        let mut records = Vec::new();
        loop {
            match source.next_item()? {
                ArchiveItem::Record(record) => records.push(record),
                ArchiveItem::End(summary) => {
                    *self.held.lock().unwrap() = Some((records, summary.last_position));
                    return Ok(summary);
                }
            }
        }
    }
}

fn store(archive: Arc<Memory>) -> Store {
    let mut mocks = Mocks::untouched();
    mocks.archive = archive;
    mocks.store()
}

#[tokio::test]
async fn the_store_exports_and_imports_through_its_archive() {
    let (records, last) = registry();
    let source = Arc::new(Memory::default());
    *source.held.lock().unwrap() = Some((records.clone(), last));
    let exporting = store(source);
    let mut out = Vec::new();
    let mut progress = Vec::new();
    let summary = exporting
        .export(
            &mut out,
            Some(Box::new(|s: &ArchiveSummary| progress.push(s.records()))),
        )
        .await
        .unwrap();
    assert_eq!(progress, vec![1, 2, 3, 4]);
    assert_eq!((summary.records(), summary.last_position), (4, 12));
    assert_eq!(
        String::from_utf8(out.clone()).unwrap(),
        written(&records, last)
    );

    let target = Arc::new(Memory::default());
    let importing = store(target.clone());
    assert_eq!(
        importing.import(&mut out.as_slice(), None).await.unwrap(),
        summary
    );
    assert_eq!(*target.held.lock().unwrap(), Some((records, last)));
    let again = importing
        .import(&mut out.as_slice(), None)
        .await
        .unwrap_err();
    assert_eq!(again.conflict_kind(), Some(ConflictKind::NotEmpty));
}
