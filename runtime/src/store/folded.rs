//! A commit's log entries as the rows that keep them (decision 0050).
//!
//! One entry is a row of its own, as it always was. Several entries of one
//! commit with the same time are folded into rows of up to [`FOLD`]
//! entries: each such row is keyed by its last entry's sequence, its `at`
//! is every entry's, its `event_type` is [`FOLDED`], its `version`
//! [`FOLDED_VERSION`], and its payload lists the entries. So a
//! log's last sequence is still its rows' greatest `seq`, and the rows past
//! a sequence still hold every entry after it. Backends write [`rows`] and
//! read back through [`unfold`]; SQL that filters entries reads the
//! `log_entries` view, which unfolds rows the same way.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{EntryKind, LogEntry, NewEntry, StoreError, StoreResult};

/// The `event_type` of a row that holds several entries.
pub const FOLDED: &str = "entries";

/// The `version` of such a row: the layout of its payload.
pub const FOLDED_VERSION: u16 = 2;

/// At most this many entries share a row, so that reading a few entries
/// never parses a whole large round.
const FOLD: usize = 64;

/// A row of `events` to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row<'a> {
    /// Its last entry's sequence.
    pub seq: u64,
    /// Its entries' time (one time a row).
    pub at: &'a str,
    /// `input` when it holds an input (replay reads only those rows),
    /// else its first entry's kind.
    pub kind: EntryKind,
    /// The entry's name, or [`FOLDED`].
    pub event_type: &'a str,
    /// The entry's step, none for a folded row.
    pub step_id: Option<&'a str>,
    /// The entry's payload version, or [`FOLDED_VERSION`].
    pub version: u16,
    /// The entry's payload, or the folded entries.
    pub payload: Cow<'a, str>,
}

/// The rows that keep `entries`, the first at sequence `first_seq`.
pub fn rows(first_seq: u64, entries: &[NewEntry]) -> Vec<Row<'_>> {
    let mut out = Vec::with_capacity(entries.len().div_ceil(FOLD));
    let mut start = 0;
    while start < entries.len() {
        let at = &entries[start].at;
        let foldable = entries[start..]
            .iter()
            .take(FOLD)
            .take_while(|e| may_fold(e) && e.at == *at)
            .count();
        let chunk = &entries[start..start + foldable.max(1)];
        let last = first_seq + (start + chunk.len()) as u64 - 1;
        out.push(match chunk {
            [e] => Row {
                seq: last,
                at: &e.at,
                kind: e.kind,
                event_type: e.event_type,
                step_id: e.step_id.as_deref(),
                version: e.version,
                payload: Cow::Borrowed(&e.payload),
            },
            _ => folded(last, chunk),
        });
        start += chunk.len();
    }
    out
}

/// Whether `e` may share a row. PostgreSQL's JSON functions refuse a
/// string holding NUL (`\u0000`) anywhere in a value they read, so an
/// entry whose JSON may hold one keeps a row of its own, which the
/// `log_entries` view reads without them.
fn may_fold(e: &NewEntry) -> bool {
    const NUL: &str = "\\u0000";
    !(e.payload.contains(NUL) || e.step_id.as_deref().is_some_and(|s| s.contains('\0')))
}

/// One row holding `entries` (two or more), the last at `seq`.
fn folded(seq: u64, entries: &[NewEntry]) -> Row<'_> {
    let at = entries[0].at.as_str();
    let size: usize = entries.iter().map(|e| e.payload.len() + 96).sum();
    let mut text = String::with_capacity(size + 2);
    text.push('[');
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push('{');
        text.push_str(&field("kind", e.kind.as_str()));
        text.push(',');
        text.push_str(&field("event_type", e.event_type));
        if let Some(step) = &e.step_id {
            text.push(',');
            text.push_str(&field("step_id", step));
        }
        text.push_str(",\"version\":");
        text.push_str(&e.version.to_string());
        text.push_str(",\"payload\":");
        text.push_str(&e.payload);
        text.push('}');
    }
    text.push(']');
    let holds_input = entries.iter().any(|e| e.kind == EntryKind::Input);
    Row {
        seq,
        at,
        kind: if holds_input {
            EntryKind::Input
        } else {
            entries[0].kind
        },
        event_type: FOLDED,
        step_id: None,
        version: FOLDED_VERSION,
        payload: Cow::Owned(text),
    }
}

/// `"name":"value"` as a folded row's payload writes a field of an entry,
/// the value JSON-escaped: what a query across runs looks for in payloads
/// to skip the rows that cannot hold the entries it wants.
pub fn field(name: &str, value: &str) -> String {
    // Serializing a `str` cannot fail; an empty string keeps the row valid.
    let value = serde_json::to_string(value).unwrap_or_else(|_| "\"\"".into());
    format!("\"{name}\":{value}")
}

/// One entry of a folded row, as stored.
#[derive(Deserialize)]
struct Stored<'a> {
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    event_type: Cow<'a, str>,
    #[serde(default, borrow)]
    step_id: Option<Cow<'a, str>>,
    version: u16,
    #[serde(borrow)]
    payload: &'a RawValue,
}

/// Adds the entries `row` keeps that come after `after_seq` (only inputs
/// when `inputs_only`) to `out`, in order. A row of one entry is that
/// entry.
fn unfold(
    row: LogEntry,
    after_seq: u64,
    inputs_only: bool,
    out: &mut Vec<LogEntry>,
) -> StoreResult<()> {
    let wanted =
        |seq: u64, kind: EntryKind| seq > after_seq && (!inputs_only || kind == EntryKind::Input);
    if row.event_type != FOLDED {
        if wanted(row.seq, row.kind) {
            out.push(row);
        }
        return Ok(());
    }
    let unreadable = |reason: String| {
        StoreError::Backend(format!(
            "log row {} (folded entries) cannot be read: {reason}",
            row.seq
        ))
    };
    if row.version != FOLDED_VERSION {
        return Err(unreadable(format!(
            "layout version {}; this build reads version {FOLDED_VERSION}",
            row.version
        )));
    }
    let stored: Vec<Stored<'_>> =
        serde_json::from_str(&row.payload).map_err(|e| unreadable(e.to_string()))?;
    let first = (row.seq + 1)
        .checked_sub(stored.len() as u64)
        .filter(|&first| first >= 1 && first <= row.seq)
        .ok_or_else(|| unreadable(format!("{} entries end at {}", stored.len(), row.seq)))?;
    for (i, entry) in stored.into_iter().enumerate() {
        let seq = first + i as u64;
        let kind = EntryKind::parse(&entry.kind)
            .ok_or_else(|| unreadable(format!("unknown entry kind `{}`", entry.kind)))?;
        if !wanted(seq, kind) {
            continue;
        }
        out.push(LogEntry {
            seq,
            at: row.at.clone(),
            kind,
            event_type: entry.event_type.into_owned(),
            step_id: entry.step_id.map(Cow::into_owned),
            version: entry.version,
            payload: entry.payload.get().to_owned(),
        });
    }
    Ok(())
}

/// Every entry `rows` keep after `after_seq`, in order (see [`unfold`]).
pub fn unfold_all(
    rows: Vec<LogEntry>,
    after_seq: u64,
    inputs_only: bool,
) -> StoreResult<Vec<LogEntry>> {
    let mut out = Vec::with_capacity(rows.len() * 2);
    for row in rows {
        unfold(row, after_seq, inputs_only, &mut out)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: usize, kind: EntryKind) -> NewEntry {
        NewEntry {
            at: if i < 2 {
                "2026-12-06T10:00:00.000Z".into()
            } else {
                "2026-12-06T10:00:00.001Z".into()
            },
            kind,
            event_type: if kind == EntryKind::Input {
                "action_completed"
            } else {
                "step_started"
            },
            step_id: i.is_multiple_of(2).then(|| format!("s\"{i}\"")),
            version: 1,
            payload: format!(r#"{{"n": {i}, "text": "é \" ]}}\n"}}"#),
        }
    }

    /// What reading the rows back as they would be stored gives.
    fn read(rows: &[Row<'_>], after_seq: u64, inputs_only: bool) -> Vec<LogEntry> {
        let stored = rows
            .iter()
            .map(|r| LogEntry {
                seq: r.seq,
                at: r.at.to_owned(),
                kind: r.kind,
                event_type: r.event_type.to_owned(),
                step_id: r.step_id.map(str::to_owned),
                version: r.version,
                payload: r.payload.clone().into_owned(),
            })
            .collect();
        unfold_all(stored, after_seq, inputs_only).unwrap()
    }

    #[test]
    fn one_entry_is_a_row_of_its_own() {
        let entries = [entry(0, EntryKind::Input)];
        let rows = rows(7, &entries);
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].seq, rows[0].event_type), (7, "action_completed"));
        assert_eq!(read(&rows, 6, false), vec![entries[0].stored(7)]);
    }

    #[test]
    fn several_entries_fold_into_rows_that_read_back_exactly() {
        let entries: Vec<NewEntry> = (0..150)
            .map(|i| {
                let kind = if i % 3 == 0 {
                    EntryKind::Input
                } else {
                    EntryKind::Record
                };
                entry(i, kind)
            })
            .collect();
        let rows = rows(11, &entries);
        let keys: Vec<u64> = rows.iter().map(|r| r.seq).collect();
        // The first two share a time, the others another: rows never mix times.
        assert_eq!(keys, [12, 76, 140, 160]);
        assert!(rows.iter().all(|r| r.event_type == FOLDED));
        let all: Vec<LogEntry> = (0..150).map(|i| entries[i].stored(11 + i as u64)).collect();
        assert_eq!(read(&rows, 10, false), all);
        // From inside a row, and inputs only.
        assert_eq!(read(&rows, 100, false), all[90..]);
        let inputs: Vec<LogEntry> = all
            .iter()
            .filter(|e| e.kind == EntryKind::Input)
            .cloned()
            .collect();
        assert_eq!(read(&rows, 0, true), inputs);
    }

    #[test]
    fn an_entry_that_may_hold_nul_keeps_a_row_of_its_own() {
        let mut entries: Vec<NewEntry> = (0..5).map(|i| entry(i, EntryKind::Record)).collect();
        entries[2].payload = r#"{"text": "a\u0000b"}"#.into();
        // The same for NUL in a step's name, which the row's JSON escapes.
        entries[4].step_id = Some("x\0y".into());
        let rows = rows(1, &entries);
        let shape: Vec<(u64, &str)> = rows.iter().map(|r| (r.seq, r.event_type)).collect();
        assert_eq!(
            shape,
            [
                (2, FOLDED),
                (3, "step_started"),
                (4, "step_started"),
                (5, "step_started")
            ]
        );
        let all: Vec<LogEntry> = (0..5).map(|i| entries[i].stored(1 + i as u64)).collect();
        assert_eq!(read(&rows, 0, false), all);
    }

    #[test]
    fn a_row_of_records_only_is_not_an_input_row() {
        let entries = [entry(0, EntryKind::Record), entry(1, EntryKind::Note)];
        let rows = rows(1, &entries);
        assert_eq!((rows.len(), rows[0].kind), (1, EntryKind::Record));
        assert!(read(&rows, 0, true).is_empty());
    }

    #[test]
    fn an_unknown_layout_or_a_damaged_row_is_an_error_not_a_guess() {
        let entries = [entry(0, EntryKind::Input), entry(1, EntryKind::Record)];
        let row = rows(2, &entries).remove(0);
        let stored = |version: u16, payload: &str, seq: u64| LogEntry {
            seq,
            at: row.at.to_owned(),
            kind: row.kind,
            event_type: FOLDED.into(),
            step_id: None,
            version,
            payload: payload.into(),
        };
        for bad in [
            stored(3, &row.payload, 2),
            stored(2, "[{", 2),
            stored(2, &row.payload, 1),
            stored(2, "[]", 2),
        ] {
            let err = unfold_all(vec![bad], 0, false).unwrap_err();
            assert!(err.to_string().contains("cannot be read"), "{err}");
        }
    }
}
