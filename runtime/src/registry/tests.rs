use super::*;
use crate::store::memory::MemoryStore;

fn definition(src: &str) -> AgentDefinition {
    let (definition, diagnostics) = opcode_compiler::agent::read(src);
    definition.unwrap_or_else(|| panic!("{diagnostics:?}"))
}

fn release(name: &str, version: &str) -> AgentRelease {
    AgentRelease {
        name: name.into(),
        version: version.into(),
        ..AgentRelease::default()
    }
}

fn block_on<T>(f: impl Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn a_release_has_one_text_whatever_order_its_fields_were_written_in() {
    let a = definition(
        r#"{"name": "db", "version": "1.0.0", "role": "scout",
            "mcp": {"pg": {"env": {"B": "2", "A": "1"}, "command": "npx"}, "a": {"url": "https://x"}},
            "skills": [{"name": "s", "path": "s.md"}]}"#,
    );
    let b = definition(
        r#"{"skills": [{"name": "s", "content": "ignored: the text is given"}], "role": "scout",
            "mcp": {"a": {"url": "https://x"}, "pg": {"command": "npx", "env": {"A": "1", "B": "2"}}},
            "version": "1.0.0", "name": "db"}"#,
    );
    let text = vec!["Read indexes.".to_owned()];
    let (ra, skills) = release_of(&a, &text, "t1".into(), None);
    let (rb, _) = release_of(&b, &text, "t2".into(), Some("bo".into()));
    assert_eq!((&ra.definition, &ra.digest), (&rb.definition, &rb.digest));
    assert_eq!(skills[0].hash, hash_of("Read indexes."));
    assert!(ra.definition.contains(&skills[0].hash), "{}", ra.definition);
    let (changed, _) = release_of(&a, &["Read tables.".to_owned()], "t1".into(), None);
    assert_ne!(changed.digest, ra.digest);
}

#[test]
fn a_bare_name_finds_the_newest_release_and_pre_releases_only_alone() {
    let releases = vec![
        release("db", "1.2.0"),
        release("db", "1.10.0"),
        release("db", "2.0.0-rc.1"),
        release("web", "0.1.0-alpha"),
    ];
    assert_eq!(find(&releases, "db").unwrap().version, "1.10.0");
    assert_eq!(
        find(&releases, "db@2.0.0-rc.1").unwrap().version,
        "2.0.0-rc.1"
    );
    assert_eq!(find(&releases, "web").unwrap().version, "0.1.0-alpha");
    let unknown = find(&releases, "dbb").unwrap_err();
    assert_eq!(unknown.code.id, "E0068");
    assert_eq!(unknown.help.as_deref(), Some("did you mean `db`?"));
    let version = find(&releases, "db@1.2").unwrap_err();
    assert_eq!(version.code.id, "E0068");
    assert!(version.help.unwrap().contains("db@1.2.0"));
    assert!(
        find(&[], "db")
            .unwrap_err()
            .help
            .unwrap()
            .contains("opcode agent publish")
    );
}

#[test]
fn publishing_over_a_taken_version_names_the_next_free_patch() {
    let store = MemoryStore::new();
    let def = definition(r#"{"name": "db", "version": "1.0.0-rc.2", "role": "scout"}"#);
    let (first, _) = release_of(&def, &[], "t".into(), None);
    block_on(async {
        assert_eq!(
            publish(&store, first.clone(), vec![]).await,
            Ok(Published::Added)
        );
        assert_eq!(
            publish(&store, first.clone(), vec![]).await,
            Ok(Published::Unchanged)
        );
        store
            .publish_agent(release("db", "1.0.1"), vec![])
            .await
            .unwrap();
        let other = AgentRelease {
            digest: "sha256:other".into(),
            ..first.clone()
        };
        let Err(Failure::Refused(refused)) = publish(&store, other, vec![]).await else {
            panic!("published over a taken version");
        };
        assert_eq!(refused.code.id, "E0067");
        assert!(refused.help.unwrap().contains("db@1.0.2"));
    });
}

#[test]
fn a_shown_release_has_its_skills_text_back() {
    let store = MemoryStore::new();
    let def = definition(
        r#"{"name": "db", "version": "1.0.0", "role": "worker", "skills": [{"name": "s", "content": "x"}]}"#,
    );
    let (release, skills) = release_of(&def, &["Be brief.".to_owned()], "t".into(), None);
    block_on(async {
        publish(&store, release.clone(), skills).await.unwrap();
        let shown = expanded(&store, &release).await.unwrap();
        assert_eq!(
            shown["skills"],
            json!([{"name": "s", "content": "Be brief."}])
        );
        assert_eq!(shown["role"], "worker");
    });
}
