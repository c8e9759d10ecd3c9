//! The human report of a run, shared by `opcodec run` and `opcode`.
//!
//! It reads the run summary JSON: `{status, output, steps: {name: {status,
//! output, error}}, pending_decisions: [{id, step_id, context: {prompt},
//! options}], error}`.

use serde_json::Value;

/// The report: status, steps, output, pending decisions, error.
pub fn human(summary: &Value) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let status = summary["status"].as_str().unwrap_or("?");
    let _ = writeln!(out, "status: {status}");
    if let Some(steps) = summary["steps"].as_object() {
        for (name, step) in steps {
            let s = step["status"].as_str().unwrap_or("?");
            let detail = match &step["error"] {
                Value::Null => String::new(),
                e => format!("  {}", e["message"].as_str().unwrap_or_default()),
            };
            let _ = writeln!(out, "  {s:<10} {name}{detail}");
        }
    }
    if !summary["output"].is_null() {
        let _ = writeln!(
            out,
            "output: {}",
            serde_json::to_string_pretty(&summary["output"]).unwrap_or_default()
        );
    }
    if let Some(pending) = summary["pending_decisions"]
        .as_array()
        .filter(|p| !p.is_empty())
    {
        let _ = writeln!(out, "pending decisions (answer with --decide STEP=CHOICE):");
        for d in pending {
            let options: Vec<&str> = d["options"]
                .as_array()
                .map(|o| o.iter().filter_map(|x| x["id"].as_str()).collect())
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  {} — {} [{}]",
                d["id"]
                    .as_str()
                    .or(d["step_id"].as_str())
                    .unwrap_or_default(),
                d["context"]["prompt"]
                    .as_str()
                    .or(d["prompt"].as_str())
                    .unwrap_or_default(),
                if options.is_empty() {
                    "free-form".to_owned()
                } else {
                    options.join(", ")
                }
            );
        }
    }
    if !summary["error"].is_null() {
        let e = &summary["error"];
        let _ = writeln!(
            out,
            "error[{}]: {} (step {})",
            e["code"].as_str().unwrap_or_default(),
            e["message"].as_str().unwrap_or_default(),
            e["step"].as_str().unwrap_or_default()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pending_decision_shows_its_question_and_options() {
        let summary = json!({"status": "suspended", "pending_decisions": [{
            "id": "gate", "step_id": "gate", "context": {"prompt": "Ship build 7?", "data": {}},
            "options": [{"id": "yes"}, {"id": "no"}]}]});
        assert!(
            human(&summary).contains("  gate — Ship build 7? [yes, no]"),
            "{}",
            human(&summary)
        );
    }
}
