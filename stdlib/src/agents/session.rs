//! Session memory (spec/agents.md, "Sessions"): the turns of the
//! `agent.*` steps that named the same `session`, kept in the store (the
//! embedding's [`Services`]) so that every daemon sharing it gives the
//! same memory, given to the next turn as a bounded context prefix. A
//! session file an earlier build kept on the host is read until the
//! session's next turn, which carries its turns into the store.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use opcode_vm::error::ActionError;
use serde_json::{Value, json};

use crate::call::{Call, Services};

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
    /// Where an earlier build kept its turns.
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
    /// run's session) with its `history`; `dir` is where an earlier build
    /// kept session files.
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
    /// ones compacted, within [`MAX_PREFIX`]. A session the store cannot
    /// read gives no prefix (the call goes on without its memory).
    pub async fn prefix(&self, services: &dyn Services) -> Prefix {
        let turns = self.turns(services).await.unwrap_or_default();
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

    /// Records `turn` as `call`'s (replacing the one its run and step
    /// recorded before, on a re-run). The first turn recorded of a session
    /// an earlier build kept in a file carries the file's turns over first.
    pub async fn record(
        &self,
        services: &dyn Services,
        call: &Call,
        turn: &Value,
    ) -> Result<(), String> {
        if services.session_turns(&self.id).await?.is_empty() {
            for old in self.filed() {
                let mut from = call.clone();
                from.run_id = old["run_id"].as_str().unwrap_or_default().to_owned();
                from.step = old["step"].as_str().unwrap_or_default().to_owned();
                services
                    .record_turn(&self.id, &from, &old, MAX_KEPT)
                    .await?;
            }
        }
        let mut turn = turn.clone();
        turn["run_id"] = json!(call.run_id);
        turn["step"] = json!(call.step);
        services.record_turn(&self.id, call, &turn, MAX_KEPT).await
    }

    /// The session's turns: the store's, else an earlier build's file's.
    async fn turns(&self, services: &dyn Services) -> Result<Vec<Value>, String> {
        let stored = services.session_turns(&self.id).await?;
        Ok(if stored.is_empty() {
            self.filed()
        } else {
            stored
        })
    }

    /// The turns an earlier build kept in the session's file, if it did.
    fn filed(&self) -> Vec<Value> {
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
    use crate::call::testing::Turns;

    fn call(run: &str) -> Call {
        Call {
            run_id: run.into(),
            step: "fix".into(),
            ..Call::default()
        }
    }

    #[tokio::test]
    async fn recent_turns_in_full_older_ones_compacted_a_rerun_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let services = Turns::default();
        let params = json!({"session": "s1", "history": 2});
        let session = Session::of(&params, None, dir.path()).unwrap().unwrap();
        assert_eq!(session.prefix(&services).await, Prefix::default());
        for n in 1..=3 {
            let turn = json!({"role": "worker", "prompt": format!("task {n}"), "summary": format!("did {n}. More words.")});
            session
                .record(&services, &call(&format!("r{n}")), &turn)
                .await
                .unwrap();
        }
        // The second run's step ran again: its turn is replaced.
        let again = json!({"role": "worker", "prompt": "task 2", "summary": "did 2 again"});
        session
            .record(&services, &call("r2"), &again)
            .await
            .unwrap();
        let prefix = session.prefix(&services).await;
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

    /// A session an earlier build kept in a file is read from it, and its
    /// turns go to the store with the session's next turn.
    #[tokio::test]
    async fn a_session_file_of_an_earlier_build_carries_over() {
        let dir = tempfile::tempdir().unwrap();
        let old = [
            json!({"role": "scout", "prompt": "look", "summary": "looked.", "run_id": "r0", "step": "scan"}),
            json!({"role": "worker", "prompt": "fix", "summary": "fixed.", "run_id": "r1", "step": "fix"}),
        ];
        let text = old.iter().fold(String::new(), |mut text, t| {
            let _ = writeln!(text, "{t}");
            text
        });
        std::fs::write(dir.path().join("kept.jsonl"), text).unwrap();
        let services = Turns::default();
        let session = Session::of(&json!({"session": "kept"}), None, dir.path())
            .unwrap()
            .unwrap();
        assert_eq!(session.prefix(&services).await.turns, 2);
        let turn = json!({"role": "worker", "prompt": "more", "summary": "more done."});
        session.record(&services, &call("r2"), &turn).await.unwrap();
        let stored = services.session_turns("kept").await.unwrap();
        let runs: Vec<&str> = stored.iter().filter_map(|t| t["run_id"].as_str()).collect();
        assert_eq!(runs, ["r0", "r1", "r2"]);
        // The store is the truth from now on: the file is not read again.
        std::fs::remove_file(dir.path().join("kept.jsonl")).unwrap();
        assert_eq!(session.prefix(&services).await.turns, 3);
    }
}
