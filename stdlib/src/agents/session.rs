//! Session memory (spec/agents.md, "Sessions"): the turns of the
//! `agent.*` steps that named the same `session`, kept in one file per
//! session, given to the next turn as a bounded context prefix.

use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use opcode_vm::error::ActionError;
use serde_json::{Value, json};

/// Turns given in full unless the step says (`history`).
pub const DEFAULT_TURNS: i64 = 10;
/// The most turns a step may ask for.
pub const MAX_TURNS: i64 = 50;
/// The most bytes of a prefix, and of one turn's prompt or summary in it.
const MAX_PREFIX: usize = 32 << 10;
const MAX_FIELD: usize = 2 << 10;
/// The most turns a session file keeps (the oldest go first).
const MAX_KEPT: usize = 200;
/// The most bytes of the compacted summary of older turns.
const MAX_COMPACTED: usize = 4 << 10;

/// Is `id` a session name: 1 to 128 letters, digits, `-`, `_` or `.`, not
/// starting with a dot (it names a file)?
pub fn valid_name(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// A session a call belongs to.
#[derive(Debug, Clone)]
pub struct Session {
    id: String,
    file: PathBuf,
    turns: usize,
}

/// What a call was given of its session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prefix {
    /// The text before the task.
    pub text: String,
    /// Turns given in full.
    pub turns: usize,
    /// Were older turns given as a compacted summary?
    pub compacted: bool,
}

impl Session {
    /// The session a call belongs to (its `session` parameter, else its
    /// run's session) with its `history`, kept under `dir`.
    pub fn of(
        params: &Value,
        run_session: Option<&str>,
        dir: &Path,
    ) -> Result<Option<Session>, ActionError> {
        let id = match params.get("session").filter(|v| !v.is_null()) {
            Some(id) => id.as_str(),
            None if run_session.is_some() => run_session,
            None => return Ok(None),
        };
        let Some(id) = id.filter(|id| valid_name(id)) else {
            return Err(ActionError::validation(
                "`session` is a name of 1 to 128 letters, digits, `-`, `_` or `.`",
            ));
        };
        let turns = match params.get("history") {
            None | Some(Value::Null) => DEFAULT_TURNS,
            Some(v) => v
                .as_i64()
                .filter(|n| (0..=MAX_TURNS).contains(n))
                .ok_or_else(|| {
                    ActionError::validation(format!(
                        "`history` is a number of turns from 0 to {MAX_TURNS}, not {v}"
                    ))
                })?,
        };
        Ok(Some(Session {
            id: id.to_owned(),
            file: dir.join(format!("{id}.jsonl")),
            turns: usize::try_from(turns).unwrap_or(0),
        }))
    }

    /// Its name.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The prefix of the next turn: the last turns in full, the older
    /// ones compacted, within [`MAX_PREFIX`].
    pub fn prefix(&self) -> Prefix {
        let turns = self.read();
        if turns.is_empty() {
            return Prefix::default();
        }
        let split = turns.len().saturating_sub(self.turns);
        let (older, recent) = turns.split_at(split);
        let mut text = String::new();
        let theirs = turns
            .iter()
            .rev()
            .find_map(|t| t["compacted"].as_str().map(str::to_owned));
        let compacted = theirs.or_else(|| {
            (!older.is_empty()).then(|| {
                let lines: Vec<String> = older
                    .iter()
                    .map(|t| {
                        format!(
                            "- {}",
                            first_sentence(t["summary"].as_str().unwrap_or_default())
                        )
                    })
                    .collect();
                cut(&lines.join("\n"), MAX_COMPACTED)
            })
        });
        if let Some(summary) = &compacted {
            let _ = write!(text, "=== PREVIOUS SESSION SUMMARY ===\n{summary}\n\n");
        }
        if !recent.is_empty() {
            text.push_str("=== RECENT CONVERSATION HISTORY ===\n");
            for (n, turn) in recent.iter().enumerate() {
                let role = turn["role"].as_str().unwrap_or("agent");
                let prompt = cut(turn["prompt"].as_str().unwrap_or_default(), MAX_FIELD);
                let summary = cut(turn["summary"].as_str().unwrap_or_default(), MAX_FIELD);
                let turn = n + 1;
                let _ = writeln!(
                    text,
                    "[turn {turn}, {role}] task: {prompt}\nresult: {summary}"
                );
            }
            text.push('\n');
        }
        Prefix {
            text: cut(&text, MAX_PREFIX),
            turns: recent.len(),
            compacted: compacted.is_some(),
        }
    }

    /// Records the turn of `run`'s `step` (replacing one it recorded
    /// before, on a re-run), under the session file's lock.
    pub fn record(&self, run: &str, step: &str, turn: Value) -> Result<(), String> {
        let dir = self.file.parent().unwrap_or(Path::new("."));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| e.to_string())?;
        let lock =
            File::create(dir.join(format!(".{}.lock", self.id))).map_err(|e| e.to_string())?;
        let _held = Flock::lock(lock, FlockArg::LockExclusive).map_err(|(_, e)| e.to_string())?;
        let mut turns: Vec<Value> = self
            .read()
            .into_iter()
            .filter(|t| !(t["run_id"] == run && t["step"] == step))
            .collect();
        let mut turn = turn;
        turn["run_id"] = json!(run);
        turn["step"] = json!(step);
        turns.push(turn);
        let kept = turns.len().saturating_sub(MAX_KEPT);
        let text = turns[kept..].iter().fold(String::new(), |mut text, t| {
            let _ = writeln!(text, "{t}");
            text
        });
        let temporary = self.file.with_extension("jsonl.new");
        let mut out = File::create(&temporary).map_err(|e| e.to_string())?;
        out.write_all(text.as_bytes())
            .and_then(|()| out.sync_all())
            .map_err(|e| e.to_string())?;
        std::fs::rename(&temporary, &self.file).map_err(|e| e.to_string())
    }

    fn read(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.file)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }
}

fn first_sentence(text: &str) -> String {
    let end = text.find(". ").map_or(text.len(), |at| at + 1);
    cut(text[..end].trim(), 200)
}

fn cut(text: &str, most: usize) -> String {
    if text.len() <= most {
        return text.to_owned();
    }
    let mut end = most.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_turns_in_full_older_ones_compacted_a_rerun_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let params = json!({"session": "s1", "history": 2});
        let session = Session::of(&params, None, dir.path()).unwrap().unwrap();
        assert_eq!(session.prefix(), Prefix::default());
        for n in 1..=3 {
            let turn = json!({"role": "worker", "prompt": format!("task {n}"), "summary": format!("did {n}. More words.")});
            session.record(&format!("r{n}"), "fix", turn).unwrap();
        }
        // The second run's step ran again: its turn is replaced.
        session
            .record(
                "r2",
                "fix",
                json!({"role": "worker", "prompt": "task 2", "summary": "did 2 again"}),
            )
            .unwrap();
        let prefix = session.prefix();
        assert_eq!((prefix.turns, prefix.compacted), (2, true));
        assert!(
            prefix
                .text
                .starts_with("=== PREVIOUS SESSION SUMMARY ===\n- did 1.\n"),
            "{}",
            prefix.text
        );
        assert!(
            prefix
                .text
                .contains("[turn 1, worker] task: task 3\nresult: did 3. More words."),
            "{}",
            prefix.text
        );
        assert!(
            prefix
                .text
                .contains("[turn 2, worker] task: task 2\nresult: did 2 again"),
            "{}",
            prefix.text
        );
        assert!(Session::of(&json!({"session": "../x"}), None, dir.path()).is_err());
        assert!(Session::of(&json!({"session": "s", "history": 99}), None, dir.path()).is_err());
        let run = Session::of(&json!({}), Some("chat-1"), dir.path()).unwrap();
        assert_eq!(
            run.unwrap().id(),
            "chat-1",
            "the run's session when the step names none"
        );
        let step = Session::of(&json!({"session": "mine"}), Some("chat-1"), dir.path()).unwrap();
        assert_eq!(step.unwrap().id(), "mine", "the step's own session first");
        assert!(Session::of(&json!({}), None, dir.path()).unwrap().is_none());
    }
}
