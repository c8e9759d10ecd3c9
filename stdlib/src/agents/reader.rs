//! Lines of a child's output, each cut at a bound so no line can take the
//! daemon's memory.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The longest line kept whole (longer ones are cut, the rest dropped).
pub const MAX_LINE: usize = 1 << 20;

/// The next line of `reader` (without its newline) and whether it was
/// cut; `None` at the end.
pub async fn next_line(reader: &mut (impl AsyncBufRead + Unpin)) -> Option<(String, bool)> {
    let mut line = Vec::new();
    let mut cut = false;
    loop {
        let buf = match reader.fill_buf().await {
            Ok([]) | Err(_) => {
                return (!line.is_empty() || cut)
                    .then(|| (String::from_utf8_lossy(&line).into_owned(), cut));
            }
            Ok(buf) => buf,
        };
        let (chunk, found) = match buf.iter().position(|b| *b == b'\n') {
            Some(at) => (&buf[..at], Some(at + 1)),
            None => (buf, None),
        };
        let room = MAX_LINE.saturating_sub(line.len());
        cut |= chunk.len() > room;
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = found.unwrap_or(buf.len());
        reader.consume(used);
        if found.is_some() {
            return Some((String::from_utf8_lossy(&line).into_owned(), cut));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_and_a_cut_one() {
        let long = "x".repeat(MAX_LINE + 10);
        let text = format!("one\n{long}\nlast");
        let mut reader = tokio::io::BufReader::new(text.as_bytes());
        assert_eq!(next_line(&mut reader).await, Some(("one".into(), false)));
        let (cut, was_cut) = next_line(&mut reader).await.unwrap();
        assert!(was_cut && cut.len() == MAX_LINE);
        assert_eq!(next_line(&mut reader).await, Some(("last".into(), false)));
        assert_eq!(next_line(&mut reader).await, None);
    }
}
