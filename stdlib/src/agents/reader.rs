//! Lines of a child's output, each cut at a bound so no line can take the
//! daemon's memory; safe to cancel between lines and within one (the part
//! read so far is kept), as a `select!` does.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The longest line kept whole (longer ones are cut, the rest dropped).
pub const MAX_LINE: usize = 1 << 20;

/// A reader of lines.
pub struct Lines<R> {
    reader: R,
    partial: Vec<u8>,
    cut: bool,
}

impl<R: AsyncBufRead + Unpin> Lines<R> {
    /// Lines of `reader`.
    pub fn new(reader: R) -> Lines<R> {
        Lines {
            reader,
            partial: Vec::new(),
            cut: false,
        }
    }

    /// The next line (without its newline) and whether it was cut; `None`
    /// at the end.
    pub async fn next(&mut self) -> Option<(String, bool)> {
        loop {
            let buf = match self.reader.fill_buf().await {
                Ok([]) | Err(_) => {
                    let rest = !self.partial.is_empty() || self.cut;
                    return rest.then(|| self.take());
                }
                Ok(buf) => buf,
            };
            // From here to `consume` nothing awaits: what is consumed is kept.
            let (chunk, found) = match buf.iter().position(|b| *b == b'\n') {
                Some(at) => (&buf[..at], Some(at + 1)),
                None => (buf, None),
            };
            let room = MAX_LINE.saturating_sub(self.partial.len());
            self.cut |= chunk.len() > room;
            self.partial
                .extend_from_slice(&chunk[..chunk.len().min(room)]);
            let used = found.unwrap_or(buf.len());
            self.reader.consume(used);
            if found.is_some() {
                return Some(self.take());
            }
        }
    }

    fn take(&mut self) -> (String, bool) {
        let line = String::from_utf8_lossy(&std::mem::take(&mut self.partial)).into_owned();
        (line, std::mem::take(&mut self.cut))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_and_a_cut_one() {
        let long = "x".repeat(MAX_LINE + 10);
        let text = format!("one\n{long}\nlast");
        let mut lines = Lines::new(tokio::io::BufReader::new(text.as_bytes()));
        assert_eq!(lines.next().await, Some(("one".into(), false)));
        let (cut, was_cut) = lines.next().await.unwrap();
        assert!(was_cut && cut.len() == MAX_LINE);
        assert_eq!(lines.next().await, Some(("last".into(), false)));
        assert_eq!(lines.next().await, None);
    }

    #[tokio::test]
    async fn a_line_read_in_parts_survives_a_cancelled_read() {
        let (mut tx, rx) = tokio::io::duplex(64);
        let mut lines = Lines::new(tokio::io::BufReader::with_capacity(8, rx));
        tokio::io::AsyncWriteExt::write_all(&mut tx, b"first half ")
            .await
            .unwrap();
        // Cancelled after reading part of the line, as a select! would.
        let cancelled =
            tokio::time::timeout(std::time::Duration::from_millis(50), lines.next()).await;
        assert!(cancelled.is_err());
        tokio::io::AsyncWriteExt::write_all(&mut tx, b"second half\n")
            .await
            .unwrap();
        assert_eq!(
            lines.next().await,
            Some(("first half second half".into(), false))
        );
    }
}
