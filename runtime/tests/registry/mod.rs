//! Published agent releases, on every backend (spec/registry.md, "Store"):
//! a release is added once, the same release again changes nothing, another
//! release of a taken version is refused with nothing of it kept, and the
//! skills' text is kept once by hash.

use opcode_runtime::store::{AgentRelease, Published, SkillText, StoreError};

use super::{at, block_on, stores};

fn release(name: &str, version: &str, digest: &str, s: u32) -> AgentRelease {
    AgentRelease {
        name: name.into(),
        version: version.into(),
        definition: format!("{{\"name\":\"{name}\",\"version\":\"{version}\"}}"),
        digest: digest.into(),
        published_at: at(s),
        published_by: s.is_multiple_of(2).then(|| "alice".into()),
    }
}

fn skill(hash: &str, content: &str) -> Vec<SkillText> {
    vec![SkillText {
        hash: hash.into(),
        content: content.into(),
    }]
}

#[test]
fn a_release_is_kept_once_and_a_taken_version_refuses_other_content() {
    for (name, store, _dir) in stores() {
        block_on(async {
            let first = release("db", "1.0.0", "sha256:a", 1);
            let published = store
                .publish_agent(first.clone(), skill("sha256:s1", "one"))
                .await;
            assert_eq!(published.unwrap(), Published::Added, "{name}");
            let again = store
                .publish_agent(first.clone(), skill("sha256:s1", "one"))
                .await;
            assert_eq!(again.unwrap(), Published::Unchanged, "{name}");

            let changed = release("db", "1.0.0", "sha256:b", 2);
            let refused = store
                .publish_agent(changed, skill("sha256:s2", "two"))
                .await;
            assert_eq!(
                refused,
                Err(StoreError::Exists("db@1.0.0".into())),
                "{name}"
            );
            assert_eq!(
                store.agent_skill("sha256:s2").await.unwrap(),
                None,
                "{name}: half-written"
            );

            let next = release("db", "1.0.1", "sha256:b", 3);
            store
                .publish_agent(next.clone(), skill("sha256:s1", "one"))
                .await
                .unwrap();
            let other = release("api", "0.1.0-rc.1", "sha256:c", 4);
            store
                .publish_agent(other.clone(), Vec::new())
                .await
                .unwrap();

            assert_eq!(
                store.agent_releases(Some("db")).await.unwrap(),
                vec![first.clone(), next.clone()],
                "{name}"
            );
            assert_eq!(
                store.agent_releases(None).await.unwrap(),
                vec![other, first, next],
                "{name}"
            );
            assert_eq!(
                store.agent_releases(Some("none")).await.unwrap(),
                vec![],
                "{name}"
            );
            assert_eq!(
                store.agent_skill("sha256:s1").await.unwrap().as_deref(),
                Some("one"),
                "{name}"
            );
        });
    }
}

#[test]
fn a_release_keeps_its_last_eval_result() {
    use opcode_runtime::store::AgentEval;
    let eval = |version: &str, s: u32, failed: u32| AgentEval {
        name: "db".into(),
        version: version.into(),
        at: at(s),
        passed: 3,
        failed,
        report: format!("{{\"failed\":{failed}}}"),
    };
    for (name, store, _dir) in stores() {
        block_on(async {
            store.record_agent_eval(eval("1.0.0", 1, 1)).await.unwrap();
            store.record_agent_eval(eval("1.0.0", 2, 0)).await.unwrap();
            store.record_agent_eval(eval("1.1.0", 3, 2)).await.unwrap();
            let mut other = eval("1.0.0", 4, 0);
            other.name = "fixer".into();
            store.record_agent_eval(other).await.unwrap();
            let kept = store.agent_evals(Some("db")).await.unwrap();
            assert_eq!(
                kept,
                vec![eval("1.0.0", 2, 0), eval("1.1.0", 3, 2)],
                "{name}"
            );
            assert_eq!(store.agent_evals(None).await.unwrap().len(), 3, "{name}");
        });
    }
}
