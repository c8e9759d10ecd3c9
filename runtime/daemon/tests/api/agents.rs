//! The agent registry as resources: the catalog lists each published agent,
//! a release reads back with its skills' text, and an unknown name is
//! E0068 with the closest as help.

use std::sync::Arc;

use opcode_daemon::api::Api;
use opcode_runtime::Executor;
use opcode_runtime::executor::Config;
use opcode_runtime::registry;
use opcode_runtime::store::EventStore;
use opcode_runtime::store::memory::MemoryStore;
use opcode_stdlib::exec::EnvSecrets;
use serde_json::Value;

async fn publish(store: &dyn EventStore, src: &str, skill: &str) {
    let (definition, diagnostics) = opcode_compiler::agent::read(src);
    let definition = definition.unwrap_or_else(|| panic!("{diagnostics:?}"));
    let (release, skills) = registry::release_of(
        &definition,
        &[skill.to_owned()],
        "2026-12-06T00:00:00.000Z".into(),
        None,
    );
    registry::publish(store, release, skills).await.unwrap();
}

fn read(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

#[tokio::test]
async fn published_agents_are_resources_with_their_skills() {
    let store: Arc<dyn EventStore> = Arc::new(MemoryStore::new());
    let skills = r#"[{"name": "db", "content": "x"}]"#;
    for version in ["1.0.0", "1.1.0", "2.0.0-rc.1"] {
        let src = format!(
            r#"{{"name": "db-analyzer", "version": "{version}", "role": "scout",
                "description": "Reads schemas.", "skills": {skills}}}"#
        );
        publish(store.as_ref(), &src, &format!("Skill of {version}")).await;
    }
    let api = Api::new(Executor::new(
        store,
        Arc::new(EnvSecrets),
        Config::default(),
    ));

    let listed: Vec<String> = api
        .resources()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri)
        .collect();
    assert!(listed.contains(&"opcode://agents".to_owned()), "{listed:?}");
    assert!(
        listed.contains(&"opcode://agents/db-analyzer".to_owned()),
        "{listed:?}"
    );

    let catalog = read(&api.read_resource("opcode://agents").await.unwrap().text);
    assert_eq!(catalog["agents"][0]["newest"], "1.1.0");
    assert_eq!(catalog["agents"][0]["releases"], 3);
    assert_eq!(catalog["agents"][0]["role"], "scout");

    let newest = read(
        &api.read_resource("opcode://agents/db-analyzer")
            .await
            .unwrap()
            .text,
    );
    assert_eq!(newest["version"], "1.1.0");
    assert_eq!(
        newest["definition"]["skills"][0]["content"],
        "Skill of 1.1.0"
    );
    assert_eq!(newest["versions"].as_array().unwrap().len(), 3);
    let pre = read(
        &api.read_resource("opcode://agents/db-analyzer/2.0.0-rc.1")
            .await
            .unwrap()
            .text,
    );
    assert_eq!(
        pre["definition"]["skills"][0]["content"],
        "Skill of 2.0.0-rc.1"
    );

    let unknown = api
        .read_resource("opcode://agents/db-analyser")
        .await
        .unwrap_err();
    assert_eq!(unknown.code.id, "E0068");
    assert_eq!(
        unknown.details.unwrap()["help"],
        "did you mean `db-analyzer`?"
    );
    let version = api
        .read_resource("opcode://agents/db-analyzer/3.0.0")
        .await
        .unwrap_err();
    assert_eq!(version.code.id, "E0068");
}
