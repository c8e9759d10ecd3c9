//! What a shared store announces to the other processes that use it.

use serde_json::{Value, json};

use super::WorkflowStatus;

/// A change made by some writer of a shared store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A message was left for a workflow's owner.
    Mail(String),
    /// A workflow was committed.
    Committed {
        /// The workflow.
        workflow_id: String,
        /// The writer, as its lease names it (none for a commit that held
        /// no lease).
        owner: Option<String>,
        /// The status the commit left, when it set one.
        status: Option<WorkflowStatus>,
    },
    /// Notices may have been missed (the store's listening connection was
    /// lost for a while): anything may have changed.
    Missed,
}

impl Notice {
    /// The notice as a payload (JSON text).
    pub fn encode(&self) -> String {
        match self {
            Notice::Mail(id) => json!({"mail": id}),
            Notice::Committed {
                workflow_id,
                owner,
                status,
            } => json!({
                "commit": workflow_id,
                "owner": owner,
                "status": status.map(WorkflowStatus::as_str),
            }),
            Notice::Missed => json!({"missed": true}),
        }
        .to_string()
    }

    /// The notice a payload holds, if it is one.
    pub fn decode(payload: &str) -> Option<Notice> {
        let value: Value = serde_json::from_str(payload).ok()?;
        if let Some(id) = value.get("mail").and_then(Value::as_str) {
            return Some(Notice::Mail(id.to_owned()));
        }
        if let Some(id) = value.get("commit").and_then(Value::as_str) {
            return Some(Notice::Committed {
                workflow_id: id.to_owned(),
                owner: value
                    .get("owner")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                status: value
                    .get("status")
                    .and_then(Value::as_str)
                    .and_then(WorkflowStatus::parse),
            });
        }
        value.get("missed").map(|_| Notice::Missed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_round_trip() {
        for notice in [
            Notice::Mail("w".into()),
            Notice::Committed {
                workflow_id: "w".into(),
                owner: Some("host:1:2".into()),
                status: Some(WorkflowStatus::Completed),
            },
            Notice::Committed {
                workflow_id: "w".into(),
                owner: None,
                status: None,
            },
            Notice::Missed,
        ] {
            assert_eq!(Notice::decode(&notice.encode()), Some(notice));
        }
        assert_eq!(Notice::decode("not json"), None);
        assert_eq!(Notice::decode("{}"), None);
    }
}
