//! A read-only walk of sled's log, before sled opens it, that finds damage
//! sled's recovery would silently cut away.
//!
//! sled 0.34 cannot tell damage from a crash: its recovery reads the log
//! from the segment of the newest snapshot on, message by message, and
//! treats the first message it cannot read as the torn tail a crash
//! leaves. It zeroes the rest of that segment, zeroes the segments after
//! it and writes a new snapshot: a few bytes of garbage in the middle of
//! the log lose every write after them, for good (and when the tear lies
//! before the point the last open had recovered to, sled fails only after
//! it zeroed the rest). So this module walks what sled will walk and
//! judges every place where a segment stops being readable before its end:
//!
//! - **What a killed writer leaves** is let through, for sled to recover: a
//!   stretch never written (zeros: sled's files grow and are zeroed in
//!   whole segments), the leftovers of a segment's earlier use (sled reuses
//!   segments without zeroing them; their messages carry an older segment
//!   number), and a write cut short by the kill. The kernel copies a
//!   `pwrite` into the page cache page by page and stops only between
//!   pages, so a cut write is a written prefix ending on a 4 KiB boundary
//!   of the file, followed by what was there before.
//! - **Damage** is refused: a message of the segment whose header is
//!   intact but whose checksum fails, and which no cut at a page boundary
//!   explains; a stretch of bytes that is neither zeros nor older data,
//!   after which the segment's own messages go on; a tear before the
//!   point the last open recovered to; two segments claiming one sequence
//!   number; a large value's file (`blobs/`) whose checksum fails.
//!
//! What this cannot see: damage that makes the log look like it ends
//! (garbage over the last messages, or a cut file) is a crash's torn tail
//! to any reader, and sled recovers it as one. Data older than the newest
//! snapshot is not walked here (sled does not read it at open either); a
//! damaged record there is refused when it is read.
//!
//! The formats below are sled 0.34.7's (`pagecache/logger.rs`,
//! `pagecache/iterator.rs`, `serialization.rs`).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, ErrorKind, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// sled's log file inside the store directory.
pub(super) const LOG: &str = "db";

/// Length of the header that starts every log segment: a CRC32, the
/// segment's first sequence number and the highest stable one when it was
/// written (both xor `i64::MAX`).
pub(super) const SEGMENT_HEADER_LEN: u64 = 20;
/// sled reads no message that starts this close to a segment's end.
const MAX_MESSAGE_HEADER_LEN: u64 = 32;
/// The granularity at which the kernel stops copying a killed write.
const PAGE: u64 = 4096;
/// How many bytes sled reads for a message header.
const HEADER_READ: usize = 128;

/// Message kinds (`MessageKind` in sled): 0 is sled's "corrupted" filler,
/// bytes above the last are unknown.
const CAP: u8 = 2;
const LAST_KIND: u8 = 11;
const BLOB_KINDS: [u8; 3] = [7, 9, 11];

/// A segment header whose checksum holds.
#[derive(Debug, Clone, Copy)]
pub(super) struct SegmentHeader {
    pub lsn: i64,
    max_stable_lsn: i64,
}

/// Reads the header of the segment at `base`; `None` when its checksum
/// fails or the file ends before it (sled skips such a segment).
pub(super) fn segment_header(file: &File, base: u64) -> io::Result<Option<SegmentHeader>> {
    let mut bytes = [0u8; SEGMENT_HEADER_LEN as usize];
    match file.read_exact_at(&mut bytes, base) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let stored = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) ^ 0xFFFF_FFFF;
    if crc32fast::hash(&bytes[4..]) != stored {
        return Ok(None);
    }
    let number = |at: usize| {
        let mut word = [0u8; 8];
        word.copy_from_slice(&bytes[at..at + 8]);
        i64::from_le_bytes(word) ^ i64::MAX
    };
    Ok(Some(SegmentHeader {
        lsn: number(4),
        max_stable_lsn: number(12),
    }))
}

/// The number of segment slots sled scans in a log of `len` bytes: whole
/// segments, and a last partial one that holds at least a header.
pub(super) fn segment_slots(len: u64, segment_size: u64) -> u64 {
    len / segment_size + u64::from(len % segment_size >= SEGMENT_HEADER_LEN)
}

/// Damage found in the log: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Damage {
    pub offset: u64,
    pub what: String,
}

/// Walks the log `file` (of the store `dir`, with sled's `segment_size`)
/// as sled's recovery will, from the segment of `stable_lsn` (the newest
/// snapshot's, 0 without one), and returns the first damage it finds.
///
/// # Errors
/// An I/O error reading the log.
pub(super) fn audit(
    dir: &Path,
    file: &File,
    segment_size: u64,
    stable_lsn: i64,
) -> io::Result<Option<Damage>> {
    let log = Log {
        dir,
        file,
        len: file.metadata()?.len(),
        segment_size,
    };
    log.audit(stable_lsn)
}

struct Log<'a> {
    dir: &'a Path,
    file: &'a File,
    len: u64,
    segment_size: u64,
}

/// The segments sled reads at open, by first sequence number (to their
/// offset in the log), and the highest stable sequence number their
/// headers record.
struct Segments {
    ordering: BTreeMap<i64, u64>,
    max_stable: i64,
}

/// Where a segment stops being readable before its end, and whether that
/// is damage.
struct Stop {
    lsn: i64,
    offset: u64,
    damage: Option<Damage>,
}

/// A message as sled reads it.
enum Message {
    /// Readable, of this segment: its kind and length with its header.
    Valid { kind: u8, total: u64 },
    /// A readable message of another use of the segment.
    Other,
    /// Not readable. `ours` when its header names this segment, a known
    /// kind and a length that fits, so only its checksum fails; `total` is
    /// then the length the header claims.
    Broken { ours: bool, total: u64 },
}

impl Log<'_> {
    fn audit(&self, stable_lsn: i64) -> io::Result<Option<Damage>> {
        let size = i64::try_from(self.segment_size).unwrap_or(i64::MAX);
        let min = stable_lsn.max(0) / size * size;
        let Segments {
            ordering,
            max_stable,
        } = match self.ordering(min)? {
            Ok(found) => found,
            Err(damage) => return Ok(Some(damage)),
        };
        // sled's tail: the segments from the one holding the highest
        // stable sequence number any header records, while they follow
        // each other. sled's walk ends for good at the tail's first
        // unreadable message (or missing segment) and discards the rest;
        // before the tail, it skips the rest of a segment it cannot read.
        let lowest = max_stable.max(0) / size * size;
        let mut expected = lowest;
        for (&lsn, &base) in &ordering {
            let in_tail = lsn >= lowest;
            if in_tail {
                if lsn != expected {
                    break;
                }
                expected = expected.saturating_add(size);
            }
            let Some(stop) = self.walk(lsn, base)? else {
                continue;
            };
            if stop.damage.is_some() {
                return Ok(stop.damage);
            }
            if in_tail {
                return Ok((stop.lsn < stable_lsn).then(|| Damage {
                    offset: stop.offset,
                    what: format!(
                        "its sled log {LOG} stops being readable at byte {}, before the point \
                         the last open recovered it to (sequence number {}, before {stable_lsn})",
                        stop.offset, stop.lsn
                    ),
                }));
            }
        }
        Ok(None)
    }

    /// The segments sled will read (a valid header, a sequence number of
    /// at least `min`), by sequence number, and the highest stable
    /// sequence number their headers record.
    fn ordering(&self, min: i64) -> io::Result<Result<Segments, Damage>> {
        let size = i64::try_from(self.segment_size).unwrap_or(i64::MAX);
        let mut ordering = BTreeMap::new();
        let mut max_stable = min;
        for index in 0..segment_slots(self.len, self.segment_size) {
            let base = index * self.segment_size;
            let Some(header) = segment_header(self.file, base)? else {
                continue;
            };
            if header.lsn < min {
                continue;
            }
            if header.lsn % size != 0 {
                return Ok(Err(Damage {
                    offset: base,
                    what: format!(
                        "the segment header at byte {base} names sequence number {}, which is \
                         not a segment's",
                        header.lsn
                    ),
                }));
            }
            if let Some(other) = ordering.insert(header.lsn, base) {
                return Ok(Err(Damage {
                    offset: base,
                    what: format!(
                        "the segments at bytes {other} and {base} both claim sequence number {}",
                        header.lsn
                    ),
                }));
            }
            max_stable = max_stable.max(header.max_stable_lsn);
        }
        Ok(Ok(Segments {
            ordering,
            max_stable,
        }))
    }

    /// Walks the segment at `base` (first sequence number `lsn`) message by
    /// message as sled does, up to a cap or its last readable slot, and
    /// judges where it stops being readable, if it does.
    fn walk(&self, lsn: i64, base: u64) -> io::Result<Option<Stop>> {
        let segment = self.read_segment(base)?;
        let number = u64::try_from(lsn).unwrap_or(0) / self.segment_size;
        let mut at = SEGMENT_HEADER_LEN;
        while at + MAX_MESSAGE_HEADER_LEN <= self.segment_size {
            match self.message(&segment, at, number) {
                Message::Valid { kind: CAP, .. } => return Ok(None),
                Message::Valid { kind, total } => {
                    if BLOB_KINDS.contains(&kind) {
                        if let Some(damage) = self.check_blob(&segment, base, at, total)? {
                            return Ok(Some(Stop {
                                lsn: lsn + offset_lsn(at),
                                offset: base + at,
                                damage: Some(damage),
                            }));
                        }
                    }
                    at += total;
                }
                broken => {
                    return Ok(Some(Stop {
                        lsn: lsn + offset_lsn(at),
                        offset: base + at,
                        damage: self.judge(&segment, base, at, number, &broken),
                    }))
                }
            }
        }
        Ok(None)
    }

    /// Decides whether the unreadable message at `at` is what a killed
    /// writer leaves (`None`) or damage.
    fn judge(
        &self,
        segment: &[u8],
        base: u64,
        at: u64,
        number: u64,
        broken: &Message,
    ) -> Option<Damage> {
        let what = match broken {
            Message::Broken { ours: true, total } => {
                if cut_by_a_kill(segment, at, at + total) || self.scan_after(segment, at, number).1
                {
                    return None;
                }
                format!("a message whose checksum fails ({total} bytes)")
            }
            _ => {
                let (next_ours, older_data) = self.scan_after(segment, at, number);
                // Nothing of the segment follows: the end of what was
                // written, as after any crash.
                let next = next_ours?;
                if older_data || cut_by_a_kill(segment, at, next) {
                    return None;
                }
                format!(
                    "{} bytes that are no message, followed by more of the segment's messages",
                    next - at
                )
            }
        };
        let offset = base + at;
        Some(Damage {
            offset,
            what: format!("its sled log {LOG} holds, at byte {offset}, {what}"),
        })
    }

    /// After the unreadable message at `at`: where the next readable
    /// message of this segment starts (if any), and whether a readable
    /// message of another use of the segment lies anywhere after it.
    fn scan_after(&self, segment: &[u8], at: u64, number: u64) -> (Option<u64>, bool) {
        let mut next_ours = None;
        let mut offset = at + 1;
        while offset + MAX_MESSAGE_HEADER_LEN <= self.segment_size {
            match self.message(segment, offset, number) {
                Message::Valid { .. } if next_ours.is_none() => next_ours = Some(offset),
                Message::Other => return (next_ours, true),
                _ => {}
            }
            offset += 1;
        }
        (next_ours, false)
    }

    /// Reads the message at in-segment offset `at` as sled's
    /// `read_message` does, for segment number `number`.
    fn message(&self, segment: &[u8], at: u64, number: u64) -> Message {
        let start = usize::try_from(at).unwrap_or(usize::MAX);
        // Most places a scan looks at are zeros: decide on the kind first.
        let kind = segment.get(start.saturating_add(4)).copied().unwrap_or(0);
        if kind == 0 || kind > LAST_KIND {
            return Message::Broken {
                ours: false,
                total: 0,
            };
        }
        // sled reads the header from 128 bytes, zeros past the file's end.
        let mut padded = [0u8; HEADER_READ];
        let header: &[u8] = match segment.get(start..start + HEADER_READ) {
            Some(bytes) => bytes,
            None => {
                let bytes = segment.get(start..).unwrap_or(&[]);
                padded[..bytes.len()].copy_from_slice(bytes);
                &padded
            }
        };
        let mut rest = &header[5..];
        let (Some(len), Some(segment_number), Some(_pid)) =
            (varint(&mut rest), varint(&mut rest), varint(&mut rest))
        else {
            return Message::Broken {
                ours: false,
                total: 0,
            };
        };
        let header_len = (HEADER_READ - rest.len()) as u64;
        let room = self.segment_size.saturating_sub(at + header_len);
        if len > room {
            return Message::Broken {
                ours: false,
                total: 0,
            };
        }
        let total = header_len + len;
        let body_start = start + HEADER_READ - rest.len();
        let body_end = body_start + usize::try_from(len).unwrap_or(usize::MAX);
        let mut hasher = crc32fast::Hasher::new();
        match segment.get(body_start..body_end) {
            Some(body) => hasher.update(body),
            None => {
                // The file ends inside the body: sled reads zeros there.
                let present = segment.get(body_start..).unwrap_or(&[]);
                hasher.update(present);
                hasher.update(&vec![0u8; body_end - body_start - present.len()]);
            }
        }
        hasher.update(&header[4..HEADER_READ - rest.len()]);
        let stored = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        match (
            hasher.finalize() ^ 0xFFFF_FFFF == stored,
            segment_number == number,
        ) {
            (true, true) => Message::Valid { kind, total },
            (true, false) => Message::Other,
            (false, ours) => Message::Broken { ours, total },
        }
    }

    /// A valid message that keeps a large value in `blobs/`: sled reads
    /// the file when it recovers, and stops its walk (cutting the log
    /// there) if the file is there but unreadable. A missing file is fine
    /// (sled skips the message).
    fn check_blob(
        &self,
        segment: &[u8],
        base: u64,
        at: u64,
        total: u64,
    ) -> io::Result<Option<Damage>> {
        let end = usize::try_from(at + total).unwrap_or(usize::MAX);
        let Some(id) = segment
            .get(end.saturating_sub(8)..end)
            .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
            .map(i64::from_le_bytes)
        else {
            return Ok(None);
        };
        let path = self.dir.join("blobs").join(id.to_string());
        let mut bytes = Vec::new();
        match File::open(&path) {
            Ok(mut blob) => blob.read_to_end(&mut bytes)?,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let whole = bytes.len() >= 5 && {
            let stored = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            crc32fast::hash(&bytes[4..]) == stored
        };
        Ok((!whole).then(|| Damage {
            offset: base + at,
            what: format!(
                "its sled value file blobs/{id}, named by the log at byte {}, is corrupt",
                base + at
            ),
        }))
    }

    /// The segment at `base`, as far as the file holds it.
    fn read_segment(&self, base: u64) -> io::Result<Vec<u8>> {
        let len = self.segment_size.min(self.len.saturating_sub(base));
        let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(0)];
        self.file.read_exact_at(&mut bytes, base)?;
        Ok(bytes)
    }
}

/// True if the unreadable stretch `[at, end)` of `segment` is what a
/// killed write leaves: all zeros (never written), or written up to a page
/// boundary inside it and zeros from there on.
fn cut_by_a_kill(segment: &[u8], at: u64, end: u64) -> bool {
    let bytes = |from: u64, to: u64| {
        let from = usize::try_from(from).unwrap_or(usize::MAX);
        let to = usize::try_from(to).unwrap_or(usize::MAX);
        segment
            .get(from.min(segment.len())..to.min(segment.len()))
            .unwrap_or(&[])
    };
    let stretch = bytes(at, end);
    let Some(last) = stretch.iter().rposition(|&byte| byte != 0) else {
        return true;
    };
    // Offsets here are within the segment, and segments start on page
    // boundaries of the file, so page boundaries are multiples of PAGE.
    let first_zero = at + last as u64 + 1;
    let boundary = first_zero.div_ceil(PAGE) * PAGE;
    boundary > at && boundary < end
}

/// A sequence number offset for an in-segment offset.
fn offset_lsn(at: u64) -> i64 {
    i64::try_from(at).unwrap_or(i64::MAX)
}

/// sled's variable-length `u64` (`serialization.rs`).
fn varint(bytes: &mut &[u8]) -> Option<u64> {
    let (&first, rest) = bytes.split_first()?;
    let (value, used) = match first {
        0..=240 => (u64::from(first), 0),
        241..=248 => (
            240 + 256 * (u64::from(first) - 241) + u64::from(*rest.first()?),
            1,
        ),
        249 => (
            2288 + 256 * u64::from(*rest.first()?) + u64::from(*rest.get(1)?),
            2,
        ),
        _ => {
            let width = usize::from(first) - 247;
            let mut word = [0u8; 8];
            word[..width].copy_from_slice(rest.get(..width)?);
            (u64::from_le_bytes(word), width)
        }
    };
    *bytes = rest.get(used..)?;
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_read_every_width_sled_writes() {
        let cases: &[(&[u8], u64)] = &[
            (&[0], 0),
            (&[240], 240),
            (&[241, 0], 240),
            (&[248, 255], 2287),
            (&[249, 0, 0], 2288),
            (&[249, 255, 255], 67823),
            (&[250, 1, 2, 3], 0x0003_0201),
            (&[255, 1, 0, 0, 0, 0, 0, 0, 0x80], 0x8000_0000_0000_0001),
        ];
        for (bytes, value) in cases {
            let mut rest = *bytes;
            assert_eq!(varint(&mut rest), Some(*value), "{bytes:?}");
            assert!(rest.is_empty());
        }
        assert_eq!(varint(&mut &[249, 1][..]), None);
    }

    #[test]
    fn a_kill_leaves_zeros_or_a_prefix_cut_at_a_page_boundary() {
        let mut segment = vec![0u8; 3 * PAGE as usize];
        // Never written.
        assert!(cut_by_a_kill(&segment, 100, 300));
        // Written up to the page boundary at 4096, zeros after it.
        segment[4000..4096].fill(7);
        assert!(cut_by_a_kill(&segment, 4000, 4200));
        // A stretch inside one page cannot be cut by a kill.
        segment[5000..5010].fill(7);
        assert!(!cut_by_a_kill(&segment, 4990, 5100));
        // Non-zero bytes up to the stretch's end: no cut explains them.
        segment[8000..8200].fill(9);
        assert!(!cut_by_a_kill(&segment, 8000, 8200));
    }
}
