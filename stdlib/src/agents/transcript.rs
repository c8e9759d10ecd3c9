//! The whole transcript of a call, kept in a file: every line the agent
//! wrote and every line written to it, as `{"at_ms", "stream", "line"}`,
//! written through as it comes (a reader sees a call in progress). A call
//! made again (its run recovered after a crash) keeps the earlier file
//! and writes `NAME.rN.jsonl` beside it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::actions::crypto::hex;
use crate::call::{Call, Services};

/// The most bytes a transcript keeps.
pub const MAX_BYTES: u64 = 128 << 20;

/// A transcript being written.
pub struct Transcript {
    path: PathBuf,
    file: Option<tokio::fs::File>,
    hash: Sha256,
    bytes: u64,
    lines: u64,
    cut: bool,
    started: Instant,
}

impl Transcript {
    /// Creates `path` (and its directory, private to the daemon); when it
    /// exists (an earlier try of the same call), the first of
    /// `NAME.r2.jsonl`, `NAME.r3.jsonl`… that does not.
    pub async fn create(path: PathBuf) -> Transcript {
        if let Some(dir) = path.parent() {
            let _ = tokio::fs::create_dir_all(dir).await;
        }
        let mut chosen = path.clone();
        let mut file = None;
        for again in 1..=MAX_TRIES {
            if again > 1 {
                chosen = retry_path(&path, again);
            }
            let mut options = tokio::fs::OpenOptions::new();
            options.write(true).create_new(true).mode(0o600);
            match options.open(&chosen).await {
                Ok(opened) => {
                    file = Some(opened);
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                // The reference says `stored: false`; the call goes on.
                Err(_) => break,
            }
        }
        Transcript {
            path: chosen,
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
        // Flushed at once: tokio's file hands writes to a thread of its own
        // and says they are done before they are.
        if let Some(file) = &mut self.file
            && (file.write_all(text.as_bytes()).await.is_err() || file.flush().await.is_err())
        {
            self.file = None;
        }
    }

    /// The reference the result carries (every line is written already).
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

/// Keeps the transcript `reference` names (what [`Transcript::finish`]
/// gave) in the store through `services`, so that any daemon sharing it
/// serves it; says so in the reference (`kept`). A transcript that cannot
/// be kept stays in its file on this host.
pub async fn keep(reference: &mut Value, services: &dyn Services, call: &Call, attempt: u32) {
    let text = match reference["path"].as_str() {
        Some(path) if reference["stored"] == true => tokio::fs::read_to_string(path).await,
        _ => return,
    };
    let kept = match text {
        Ok(text) => services.keep_transcript(call, attempt, text).await,
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = &kept {
        services.log(
            call,
            "warn",
            "the agent's transcript was not kept in the store",
            &json!({"error": e}),
        );
    }
    reference["kept"] = json!(kept.is_ok());
}

/// Tries of one call whose transcripts are kept apart.
const MAX_TRIES: u32 = 100;

/// `NAME.rN.jsonl` beside `path` (`NAME.jsonl`).
fn retry_path(path: &Path, again: u32) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let stem = name.strip_suffix(".jsonl").unwrap_or(&name);
    path.with_file_name(format!("{stem}.r{again}.jsonl"))
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

    /// Lines reach the file as they come; a call made again keeps the
    /// first try's transcript and writes its own beside it.
    #[tokio::test]
    async fn lines_are_written_through_and_tries_kept_apart() {
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path(), "run", "fix", "1");
        let mut first = Transcript::create(file.clone()).await;
        first.line("stdout", "working").await;
        assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 1);
        let mut again = Transcript::create(file.clone()).await;
        again.line("stdout", "again").await;
        let reference = again.finish().await;
        assert_eq!(
            reference["path"],
            dir.path()
                .join("run/fix.1.r2.jsonl")
                .to_string_lossy()
                .as_ref()
        );
        assert!(std::fs::read_to_string(&file).unwrap().contains("working"));
    }
}
