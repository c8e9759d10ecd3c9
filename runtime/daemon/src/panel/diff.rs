//! Two texts' differences as a unified diff, one coloured line each.

use maud::{Markup, html};
use similar::{ChangeTag, TextDiff};

/// Lines of context around each change.
const CONTEXT: usize = 4;

/// The unified diff from `old` (named `old_name`) to `new`, or a sentence
/// saying they are the same.
pub fn unified(old: &str, new: &str, old_name: &str, new_name: &str) -> Markup {
    let diff = TextDiff::from_lines(old, new);
    if diff.ratio() >= 1.0 {
        return html! { p.empty { (old_name) " and " (new_name) " are the same." } };
    }
    html! {
        pre.diff {
            span.hunk { "--- " (old_name) "\n+++ " (new_name) "\n" }
            @for group in diff.grouped_ops(CONTEXT) {
                @let first = &group[0];
                span.hunk { "@@ -" (first.old_range().start + 1) " +" (first.new_range().start + 1) " @@\n" }
                @for op in &group {
                    @for change in diff.iter_changes(op) {
                        @let (class, sign) = match change.tag() {
                            ChangeTag::Delete => ("del", "-"),
                            ChangeTag::Insert => ("add", "+"),
                            ChangeTag::Equal => ("same", " "),
                        };
                        span class=(class) { (sign) (change.value()) @if change.missing_newline() { "\n" } }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_lines_are_marked_and_equal_texts_say_so() {
        let html = unified("a\nb\nc\n", "a\nB\nc\n", "v1", "v2").into_string();
        assert!(
            html.contains(r#"<span class="del">-b"#) && html.contains(r#"<span class="add">+B"#),
            "{html}"
        );
        assert!(
            unified("x\n", "x\n", "v1", "v2")
                .into_string()
                .contains("are the same")
        );
    }
}
