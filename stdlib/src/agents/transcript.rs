//! The whole transcript of a call, kept in a file: every line the agent
//! wrote and every line written to it, as `{"at_ms", "stream", "line"}`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::actions::crypto::hex;

/// The most bytes a transcript keeps.
pub const MAX_BYTES: u64 = 128 << 20;

/// A transcript being written.
pub struct Transcript {
    path: PathBuf,
    file: Option<tokio::io::BufWriter<tokio::fs::File>>,
    hash: Sha256,
    bytes: u64,
    lines: u64,
    cut: bool,
    started: Instant,
}

impl Transcript {
    /// Creates `path` (and its directory, private to the daemon).
    pub async fn create(path: PathBuf) -> Transcript {
        let file = async {
            if let Some(dir) = path.parent() {
                tokio::fs::create_dir_all(dir).await?;
            }
            let mut options = tokio::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true).mode(0o600);
            options.open(&path).await
        };
        let file = match file.await {
            Ok(file) => Some(tokio::io::BufWriter::new(file)),
            // The reference says `stored: false`; the call goes on.
            Err(_) => None,
        };
        Transcript {
            path,
            file,
            hash: Sha256::new(),
            bytes: 0,
            lines: 0,
            cut: false,
            started: Instant::now(),
        }
    }

    /// Appends one line of `stream`.
    pub async fn line(&mut self, stream: &str, line: &str) {
        if self.cut {
            return;
        }
        let record = json!({
            "at_ms": self.started.elapsed().as_millis() as u64,
            "stream": stream,
            "line": line,
        });
        let mut text = record.to_string();
        text.push('\n');
        if self.bytes + text.len() as u64 > MAX_BYTES {
            self.cut = true;
            text = json!({"at_ms": self.started.elapsed().as_millis() as u64, "stream": "opcode",
                          "line": format!("transcript cut at {MAX_BYTES} bytes")})
            .to_string();
            text.push('\n');
        }
        self.hash.update(text.as_bytes());
        self.bytes += text.len() as u64;
        self.lines += 1;
        if let Some(file) = &mut self.file
            && file.write_all(text.as_bytes()).await.is_err()
        {
            self.file = None;
        }
    }

    /// Flushes the file; the reference the result carries.
    pub async fn finish(mut self) -> Value {
        let stored = match &mut self.file {
            Some(file) => file.flush().await.is_ok(),
            None => false,
        };
        json!({
            "path": self.path.to_string_lossy(),
            "bytes": self.bytes,
            "lines": self.lines,
            "sha256": hex(&self.hash.finalize()),
            "cut": self.cut,
            "stored": stored,
        })
    }
}

/// Where the transcript of `attempt` of `step` in `run` goes under `dir`.
pub fn path(dir: &Path, run: &str, step: &str, attempt: &str) -> PathBuf {
    dir.join(file_name(run))
        .join(format!("{}.{}.jsonl", file_name(step), file_name(attempt)))
}

/// `text` as one file name: other characters than letters, digits and
/// `-_.[]` as `_`, no leading dot.
pub fn file_name(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.[]".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_start_matches('.')
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_kept_with_their_stream_and_hashed() {
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path(), "run/../x", "fix[0]", "1");
        assert_eq!(file.parent().and_then(Path::parent), Some(dir.path()));
        let mut transcript = Transcript::create(file.clone()).await;
        transcript.line("stdin", "{\"task\":1}").await;
        transcript.line("stdout", "hello").await;
        let reference = transcript.finish().await;
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert_eq!(reference["lines"], 2);
        assert_eq!(reference["bytes"], text.len());
        assert_eq!(reference["sha256"], hex(&Sha256::digest(text.as_bytes())));
        assert!(text.contains("\"stream\":\"stdout\""));
    }
}
