use super::*;
use crate::diagnostics::apply_fixes;

/// The codes and pointers of what reading `src` reports.
fn found(src: &str) -> Vec<(String, String)> {
    let (_, diagnostics) = read(src);
    diagnostics
        .iter()
        .map(|d| (d.code.id.to_owned(), d.pointer.clone().unwrap_or_default()))
        .collect()
}

fn pair(code: &str, pointer: &str) -> (String, String) {
    (code.to_owned(), pointer.to_owned())
}

#[test]
fn a_whole_definition_reads_field_by_field() {
    let src = r#"{"name": "db-analyzer", "version": "1.2.0-rc.1", "description": "reads",
        "role": "worker", "runs_on": "opencode", "model": "m", "variant": "high",
        "skills": [{"name": "db", "path": "skills/db/SKILL.md"}, {"name": "style", "content": "Be brief."}],
        "mcp": {"pg": {"command": "npx", "args": ["-y", "pg-mcp"], "env": {"A": "1"}},
                "web": {"url": "https://mcp.example/sse"}},
        "budgets": {"max_steps": 24, "timeout": "8m"}, "permissions": "deny"}"#;
    let (definition, diagnostics) = read(src);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let definition = definition.expect("read");
    assert_eq!(definition.name, "db-analyzer");
    assert_eq!(definition.version.to_string(), "1.2.0-rc.1");
    assert_eq!(definition.role, "worker");
    assert_eq!(definition.runs_on.as_deref(), Some("opencode"));
    let skills: Vec<(&str, &SkillSource)> = definition
        .skills
        .iter()
        .map(|s| (s.name.as_str(), &s.source))
        .collect();
    assert_eq!(
        skills,
        vec![
            ("db", &SkillSource::Path("skills/db/SKILL.md".into())),
            ("style", &SkillSource::Content("Be brief.".into())),
        ]
    );
    assert_eq!(definition.mcp.len(), 2);
    assert_eq!(
        (definition.max_steps, definition.timeout.as_deref()),
        (Some(24), Some("8m"))
    );
    assert_eq!(definition.permissions.as_deref(), Some("deny"));
}

#[test]
fn missing_fields_and_wrong_types_are_coded_and_placed() {
    assert_eq!(
        found(r#"{"version": "1.0.0"}"#),
        vec![pair("E0011", ""), pair("E0011", "")]
    );
    assert_eq!(
        found(r#"{"name": 7, "version": "1.0.0", "role": "scout"}"#),
        vec![pair("E0010", "/name")]
    );
    assert_eq!(found("[1]"), vec![pair("E0010", "")]);
    assert_eq!(found(r#"{"name": "a", "name": "b"}"#)[0].0, "E0005");
}

#[test]
fn a_version_must_be_semantic_and_a_short_one_is_completed() {
    let src = r#"{"name": "a", "version": "v1.2", "role": "scout"}"#;
    assert_eq!(found(src), vec![pair("E0065", "/version")]);
    let (_, diagnostics) = read(src);
    let (fixed, applied) = apply_fixes(src, diagnostics.iter());
    assert_eq!(applied, 1);
    assert!(read(&fixed).0.is_some(), "{fixed}");
    assert_eq!(
        found(r#"{"name": "a", "version": "one", "role": "scout"}"#),
        vec![pair("E0065", "/version")]
    );
}

#[test]
fn names_roles_and_unknown_fields_get_fixes() {
    let src = r#"{"name": "DB Analyzer", "version": "1.0.0", "role": "scot", "skils": []}"#;
    assert_eq!(
        found(src),
        vec![
            pair("E0064", "/skils"),
            pair("E0064", "/name"),
            pair("E0014", "/role")
        ]
    );
    let (_, diagnostics) = read(src);
    let (fixed, applied) = apply_fixes(src, diagnostics.iter());
    assert_eq!(applied, 3);
    let definition = read(&fixed).0.expect("fixed");
    assert_eq!(
        (definition.name.as_str(), definition.role.as_str()),
        ("db-analyzer", "scout")
    );
}

#[test]
fn skills_are_plain_unique_and_stay_in_their_folder() {
    let skills = |list: &str| {
        found(&format!(
            r#"{{"name": "a", "version": "1.0.0", "role": "scout", "skills": {list}}}"#
        ))
    };
    for escape in [
        "../x.md",
        "/etc/passwd",
        "skills/../../x",
        "",
        "a\\\\..\\\\b",
    ] {
        assert_eq!(
            skills(&format!(r#"[{{"name": "x", "path": "{escape}"}}]"#)),
            vec![pair("E0066", "/skills/0/path")],
            "{escape}"
        );
    }
    assert_eq!(
        skills(r#"[{"name": "a b", "content": "x"}]"#),
        vec![pair("E0064", "/skills/0/name")]
    );
    assert_eq!(
        skills(r#"[{"name": "x"}]"#),
        vec![pair("E0064", "/skills/0")]
    );
    assert_eq!(
        skills(r#"[{"name": "x", "content": "a", "path": "b"}]"#),
        vec![pair("E0064", "/skills/0")]
    );
    assert_eq!(
        skills(r#"[{"name": "x", "content": "a"}, {"name": "x", "content": "b"}]"#),
        vec![pair("E0064", "/skills/1")]
    );
    assert_eq!(
        skills(r#"[{"content": "a"}]"#),
        vec![pair("E0064", "/skills/0")]
    );
    assert_eq!(skills(r#"{"x": "a"}"#), vec![pair("E0010", "/skills")]);
    assert!(skills(r#"[{"name": "x", "path": "./skills/x/SKILL.md"}]"#).is_empty());
}

#[test]
fn mcp_servers_and_budgets_are_checked() {
    let with = |field: &str| {
        found(&format!(
            r#"{{"name": "a", "version": "1.0.0", "role": "scout", {field}}}"#
        ))
    };
    for bad in [
        r#"{"command": "x", "url": "https://a"}"#,
        r"{}",
        r#"{"url": "file:///etc/passwd"}"#,
        r#"{"command": ""}"#,
        r#"{"command": "x", "args": "-y"}"#,
        r#"{"command": "x", "env": {"A": 1}}"#,
        r#"{"command": "x", "cwd": "/"}"#,
        r#""npx""#,
    ] {
        assert_eq!(
            with(&format!(r#""mcp": {{"s": {bad}}}"#)),
            vec![pair("E0064", "/mcp/s")],
            "{bad}"
        );
    }
    assert_eq!(
        with(r#""budgets": {"max_steps": 2, "timeout": "5s"}"#),
        vec![
            pair("E0057", "/budgets/max_steps"),
            pair("E0057", "/budgets/timeout")
        ]
    );
    assert_eq!(
        with(r#""budgets": {"steps": 8}"#),
        vec![pair("E0064", "/budgets/steps")]
    );
    assert_eq!(
        with(r#""permissions": "always""#),
        vec![pair("E0014", "/permissions")]
    );
}

#[test]
fn skills_are_bounded_in_number_and_size() {
    let with = |skills: &str| {
        found(&format!(
            r#"{{"name": "a", "version": "1.0.0", "role": "scout", "skills": {skills}}}"#
        ))
    };
    let big = "x".repeat(MAX_SKILL_BYTES + 1);
    assert_eq!(
        with(&format!(r#"[{{"name": "s", "content": "{big}"}}]"#)),
        vec![pair("E0064", "/skills/0/content")]
    );
    let fits = "x".repeat(MAX_SKILL_BYTES);
    assert!(with(&format!(r#"[{{"name": "s", "content": "{fits}"}}]"#)).is_empty());
    let many: Vec<String> = (0..=MAX_SKILLS)
        .map(|i| format!(r#"{{"name": "s{i}", "content": "x"}}"#))
        .collect();
    assert_eq!(
        with(&format!("[{}]", many.join(","))),
        vec![pair("E0064", "/skills")]
    );
}
