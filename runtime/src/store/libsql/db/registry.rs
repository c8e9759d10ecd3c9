//! Published agent releases on the libSQL connection: a publish is one
//! transaction, which the single writer orders.

use libsql::Value;

use super::super::LibsqlStore;
use super::{Db, backend, get};
use crate::store::registry::{
    DIGEST, EVALS, PUBLISH, PUT_SKILL, RECORD_EVAL, RELEASES, SKILL, outcome,
};
use crate::store::{
    AgentEval, AgentRelease, BoxFuture, Published, Registry, SkillText, StoreResult,
};

impl Registry for LibsqlStore {
    fn publish_agent(
        &self,
        release: AgentRelease,
        skills: Vec<SkillText>,
    ) -> BoxFuture<'_, StoreResult<Published>> {
        self.ask(move |db| db.publish_agent(&release, &skills))
    }

    fn agent_releases<'a>(
        &'a self,
        name: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<Vec<AgentRelease>>> {
        let name = name.map(str::to_owned);
        self.ask(move |db| db.agent_releases(name.as_deref()))
    }

    fn agent_skill<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, StoreResult<Option<String>>> {
        let hash = hash.to_owned();
        self.ask(move |db| db.block(db.query_one(SKILL, vec![hash.into()], |row| get(row, 0))))
    }

    fn record_agent_eval(&self, eval: AgentEval) -> BoxFuture<'_, StoreResult<()>> {
        self.ask(move |db| {
            let params: Vec<Value> = vec![
                eval.name.into(),
                eval.version.into(),
                eval.at.into(),
                i64::from(eval.passed).into(),
                i64::from(eval.failed).into(),
                eval.report.into(),
            ];
            db.block(async { db.conn.execute(RECORD_EVAL, params).await.map_err(backend) })
                .map(drop)
        })
    }

    fn agent_evals<'a>(
        &'a self,
        name: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<Vec<AgentEval>>> {
        let name = name.map(str::to_owned);
        self.ask(move |db| {
            db.block(db.query_all(EVALS, vec![name.into()], |row| {
                let count = |i| get::<i64>(row, i).map(|n| u32::try_from(n).unwrap_or(u32::MAX));
                Ok(AgentEval {
                    name: get(row, 0)?,
                    version: get(row, 1)?,
                    at: get(row, 2)?,
                    passed: count(3)?,
                    failed: count(4)?,
                    report: get(row, 5)?,
                })
            }))
        })
    }
}

impl Db {
    fn publish_agent(
        &self,
        release: &AgentRelease,
        skills: &[SkillText],
    ) -> StoreResult<Published> {
        self.block(self.in_transaction(async {
            for skill in skills {
                let params: Vec<Value> =
                    vec![skill.hash.as_str().into(), skill.content.as_str().into()];
                self.conn
                    .execute(PUT_SKILL, params)
                    .await
                    .map_err(backend)?;
            }
            let params: Vec<Value> = vec![
                release.name.as_str().into(),
                release.version.as_str().into(),
                release.definition.as_str().into(),
                release.digest.as_str().into(),
                release.published_at.as_str().into(),
                release.published_by.as_deref().into(),
            ];
            let added = self.conn.execute(PUBLISH, params).await.map_err(backend)? == 1;
            let key: Vec<Value> = vec![
                release.name.as_str().into(),
                release.version.as_str().into(),
            ];
            let existing: Option<String> = self.query_one(DIGEST, key, |row| get(row, 0)).await?;
            // A refusal rolls the transaction back: no skill of it stays.
            outcome(release, added, existing.as_deref())
        }))
    }

    fn agent_releases(&self, name: Option<&str>) -> StoreResult<Vec<AgentRelease>> {
        self.block(self.query_all(RELEASES, vec![name.into()], |row| {
            Ok(AgentRelease {
                name: get(row, 0)?,
                version: get(row, 1)?,
                definition: get(row, 2)?,
                digest: get(row, 3)?,
                published_at: get(row, 4)?,
                published_by: get(row, 5)?,
            })
        }))
    }
}
