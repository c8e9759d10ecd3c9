//! Byte spans and the positions derived from them.
//!
//! Every node the readers produce carries a [`Span`] of byte offsets into the
//! source text. Line/column (1-based, counted in characters, for people) and
//! UTF-16 positions (0-based, for the LSP) are derived on demand from a
//! [`LineIndex`], so the readers never pay for them.

use std::ops::Range;

/// A half-open byte range `start..end` into one source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// A span from byte offsets.
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    /// An empty span at `offset`.
    pub fn at(offset: usize) -> Span {
        Span::new(offset, offset)
    }

    /// The smallest span covering both.
    pub fn join(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// The span as a `usize` range, for slicing.
    pub fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }

    /// Length in bytes.
    pub fn len(self) -> usize {
        (self.end - self.start) as usize
    }

    /// Is the span empty?
    pub fn is_empty(self) -> bool {
        self.start == self.end
    }

    /// Does the span contain the byte offset (end inclusive, for cursors)?
    pub fn contains(self, offset: usize) -> bool {
        self.start as usize <= offset && offset <= self.end as usize
    }
}

impl From<Range<usize>> for Span {
    fn from(range: Range<usize>) -> Span {
        Span::new(range.start, range.end)
    }
}

/// A position for people: 1-based line and column, columns counted in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LineCol {
    /// 1-based line.
    pub line: u32,
    /// 1-based column in Unicode scalar values.
    pub column: u32,
}

/// A position for the LSP: 0-based line and UTF-16 code-unit offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Utf16Pos {
    /// 0-based line.
    pub line: u32,
    /// 0-based column in UTF-16 code units.
    pub character: u32,
}

/// Line starts of a text, to turn byte offsets into positions and back.
#[derive(Debug, Clone)]
pub struct LineIndex {
    starts: Vec<u32>,
    len: u32,
}

impl LineIndex {
    /// Indexes `text` (`\n`, `\r\n` and lone `\r` end lines).
    pub fn new(text: &str) -> LineIndex {
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\n' => starts.push(i as u32 + 1),
                b'\r' if bytes.get(i + 1) != Some(&b'\n') => starts.push(i as u32 + 1),
                _ => {}
            }
            i += 1;
        }
        LineIndex {
            starts,
            len: text.len() as u32,
        }
    }

    /// Number of lines.
    pub fn line_count(&self) -> usize {
        self.starts.len()
    }

    fn line_of(&self, offset: u32) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(line) => line,
            Err(next) => next - 1,
        }
    }

    /// Byte offset where the 0-based `line` starts.
    pub fn line_start(&self, line: usize) -> Option<usize> {
        self.starts.get(line).map(|s| *s as usize)
    }

    /// The 1-based line and character column of a byte offset.
    pub fn line_col(&self, text: &str, offset: usize) -> LineCol {
        let offset = offset.min(self.len as usize) as u32;
        let line = self.line_of(offset);
        let start = self.starts[line] as usize;
        let column = floor_char_slice(text, start, offset as usize)
            .chars()
            .count();
        LineCol {
            line: line as u32 + 1,
            column: column as u32 + 1,
        }
    }

    /// The LSP position of a byte offset.
    pub fn utf16(&self, text: &str, offset: usize) -> Utf16Pos {
        let offset = offset.min(self.len as usize) as u32;
        let line = self.line_of(offset);
        let start = self.starts[line] as usize;
        let character = floor_char_slice(text, start, offset as usize)
            .chars()
            .map(char::len_utf16)
            .sum::<usize>();
        Utf16Pos {
            line: line as u32,
            character: character as u32,
        }
    }

    /// The byte offset of an LSP position (clamped to the line's end).
    pub fn offset_of_utf16(&self, text: &str, pos: Utf16Pos) -> usize {
        let Some(start) = self.line_start(pos.line as usize) else {
            return text.len();
        };
        let end = self.line_start(pos.line as usize + 1).unwrap_or(text.len());
        let mut units = 0u32;
        for (i, ch) in text[start..end].char_indices() {
            if units >= pos.character || ch == '\n' || ch == '\r' {
                return start + i;
            }
            units += ch.len_utf16() as u32;
        }
        end
    }
}

/// `text[start..end]`, with `end` moved back to a character boundary.
fn floor_char_slice(text: &str, start: usize, mut end: usize) -> &str {
    while end > start && !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(start..end).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_columns_count_characters() {
        let text = "ab\né€x\r\ny";
        let index = LineIndex::new(text);
        assert_eq!(index.line_count(), 3);
        assert_eq!(index.line_col(text, 0), LineCol { line: 1, column: 1 });
        assert_eq!(index.line_col(text, 3), LineCol { line: 2, column: 1 });
        // 'x' comes after é (2 bytes) and € (3 bytes)
        assert_eq!(index.line_col(text, 8), LineCol { line: 2, column: 3 });
        assert_eq!(index.line_col(text, 11), LineCol { line: 3, column: 1 });
    }

    #[test]
    fn utf16_round_trip() {
        let text = "a😀b\nc";
        let index = LineIndex::new(text);
        let b = text.find('b').unwrap();
        let pos = index.utf16(text, b);
        assert_eq!(
            pos,
            Utf16Pos {
                line: 0,
                character: 3
            }
        );
        assert_eq!(index.offset_of_utf16(text, pos), b);
        let c = text.find('c').unwrap();
        assert_eq!(
            index.offset_of_utf16(
                text,
                Utf16Pos {
                    line: 1,
                    character: 0
                }
            ),
            c
        );
        assert_eq!(
            index.offset_of_utf16(
                text,
                Utf16Pos {
                    line: 0,
                    character: 99
                }
            ),
            6
        );
    }

    #[test]
    fn offsets_inside_characters_do_not_panic() {
        let text = "é";
        let index = LineIndex::new(text);
        assert_eq!(index.line_col(text, 1).column, 1);
        assert_eq!(index.utf16(text, 1).character, 0);
    }
}
