//! Byte offsets ⇄ LSP positions (line, UTF-16 code unit), as LSP requires.

use opcode_compiler::source::Span;
use tower_lsp_server::ls_types::{Position, Range};

/// The start of every line of a text.
#[derive(Debug, Clone)]
pub struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    /// The lines of `text`.
    pub fn new(text: &str) -> Lines {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Lines { starts }
    }

    /// The position of byte `offset` (clamped to the text).
    pub fn position(&self, text: &str, offset: usize) -> Position {
        let offset = offset.min(text.len());
        let line = self.starts.partition_point(|s| *s <= offset) - 1;
        let start = self.starts[line];
        let column: usize = text
            .get(start..offset)
            .unwrap_or_default()
            .chars()
            .map(char::len_utf16)
            .sum();
        Position::new(line as u32, column as u32)
    }

    /// The byte offset of `position` (clamped to its line).
    pub fn offset(&self, text: &str, position: Position) -> usize {
        let Some(&start) = self.starts.get(position.line as usize) else {
            return text.len();
        };
        let end = self
            .starts
            .get(position.line as usize + 1)
            .map_or(text.len(), |next| next - 1);
        let mut units = 0;
        for (i, c) in text[start..end].char_indices() {
            if units >= position.character as usize {
                return start + i;
            }
            units += c.len_utf16();
        }
        end
    }

    /// The range of a span.
    pub fn range(&self, text: &str, span: Span) -> Range {
        Range::new(
            self.position(text, span.start as usize),
            self.position(text, span.end as usize),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_utf16_code_units() {
        let text = "ab\n\u{e9}\u{1f600}x\nlast";
        let lines = Lines::new(text);
        let x = text.find('x').unwrap();
        assert_eq!(lines.position(text, x), Position::new(1, 3));
        assert_eq!(lines.offset(text, Position::new(1, 3)), x);
        assert_eq!(lines.offset(text, Position::new(2, 99)), text.len());
        assert_eq!(lines.position(text, text.len()), Position::new(2, 4));
    }
}
