use super::*;

fn codes(src: &str) -> Vec<(&'static str, String)> {
    read(src)
        .1
        .into_sorted()
        .into_iter()
        .map(|d| (d.code.id, d.pointer.unwrap_or_default()))
        .collect()
}

#[test]
fn a_suite_reads_whole() {
    let (suite, diagnostics) = read(
        r#"{"agent": "db", "cases": [{
            "name": "finds it", "prompt": "look",
            "workspace": {"files": {"src/a.sql": "CREATE"}, "git": true},
            "budgets": {"max_steps": 8, "timeout": "1m"},
            "expect": {"status": "completed", "exit_code": 0, "output_contains": ["index"],
                       "tools_called": ["read"], "files_exist": ["report.md"],
                       "file_contains": {"report.md": "orders"},
                       "files_changed": [{"path": "report.md", "change": "added"}]}}]}"#,
    );
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let suite = suite.unwrap();
    let case = &suite.cases[0];
    assert_eq!(suite.agent, "db");
    assert_eq!(case.files["src/a.sql"], "CREATE");
    assert!(case.git);
    assert_eq!(
        (case.max_steps, case.timeout.as_deref()),
        (Some(8), Some("1m"))
    );
    assert_eq!(case.expect.status.as_deref(), Some("completed"));
    assert_eq!(
        case.expect.files_changed,
        Some(vec![("report.md".into(), "added".into())])
    );
}

#[test]
fn each_problem_is_coded_at_its_place() {
    assert_eq!(
        codes(r#"{"cases": []}"#),
        [("E0011", String::new()), ("E0071", "/cases".into())]
    );
    assert_eq!(
        codes(r#"{"agent": "a", "cases": [{"name": "x", "promt": "p"}]}"#),
        [
            ("E0011", "/cases/0".into()),
            ("E0071", "/cases/0/promt".into())
        ]
    );
    assert_eq!(
        codes(
            r#"{"agent": "a", "cases": [{"name": "x", "prompt": "p", "workspace": {"files": {"../etc/passwd": "x"}}}]}"#
        ),
        [("E0071", "/cases/0/workspace/files/..~1etc~1passwd".into())]
    );
    assert_eq!(
        codes(
            r#"{"agent": "a", "cases": [{"name": "x", "prompt": "p", "expect": {"status": "done", "files_exist": ["/etc/passwd"], "exit_code": "0"}}]}"#
        ),
        [
            ("E0014", "/cases/0/expect/status".into()),
            ("E0071", "/cases/0/expect/files_exist/0".into()),
            ("E0010", "/cases/0/expect/exit_code".into()),
        ]
    );
    assert_eq!(
        codes(
            r#"{"agent": "a", "cases": [{"name": "x", "prompt": "p"}, {"name": "x", "prompt": "q"}]}"#
        ),
        [("E0071", "/cases/1/name".into())]
    );
    assert_eq!(
        codes(
            r#"{"agent": "a", "cases": [{"name": "x", "prompt": "p", "budgets": {"max_steps": 2}}]}"#
        ),
        [("E0057", "/cases/0/budgets/max_steps".into())]
    );
}
