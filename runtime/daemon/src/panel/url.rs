//! Text written into the panel's links.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// What [`encode`] escapes: all but RFC 3986's unreserved characters.
const ESCAPED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// `text` as one URL path segment or query value.
pub(crate) fn encode(text: &str) -> String {
    utf8_percent_encode(text, ESCAPED).to_string()
}
