//! Published agent releases on PostgreSQL: a publish is one transaction;
//! two daemons publishing the same version meet at its key.

use super::{PostgresStore, backend};
use crate::store::registry::{
    DIGEST, EVALS, PUBLISH, PUT_SKILL, RECORD_EVAL, RELEASES, SKILL, outcome,
};
use crate::store::slots::numbered;
use crate::store::{
    AgentEval, AgentRelease, BoxFuture, Published, Registry, SkillText, StoreResult,
};

impl Registry for PostgresStore {
    fn publish_agent(
        &self,
        release: AgentRelease,
        skills: Vec<SkillText>,
    ) -> BoxFuture<'_, StoreResult<Published>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(backend)?;
            for skill in &skills {
                tx.execute(numbered(PUT_SKILL).as_str(), &[&skill.hash, &skill.content])
                    .await
                    .map_err(backend)?;
            }
            let added = tx
                .execute(
                    numbered(PUBLISH).as_str(),
                    &[
                        &release.name,
                        &release.version,
                        &release.definition,
                        &release.digest,
                        &release.published_at,
                        &release.published_by,
                    ],
                )
                .await
                .map_err(backend)?
                == 1;
            let existing: Option<String> = tx
                .query_opt(
                    numbered(DIGEST).as_str(),
                    &[&release.name, &release.version],
                )
                .await
                .map_err(backend)?
                .map(|row| row.try_get(0))
                .transpose()
                .map_err(backend)?;
            let answer = outcome(&release, added, existing.as_deref());
            if answer.is_ok() {
                tx.commit().await.map_err(backend)?;
            }
            answer
        })
    }

    fn agent_releases<'a>(
        &'a self,
        name: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<Vec<AgentRelease>>> {
        Box::pin(async move {
            self.query(&numbered(RELEASES), &[&name], |row| {
                Ok(AgentRelease {
                    name: row.try_get(0).map_err(backend)?,
                    version: row.try_get(1).map_err(backend)?,
                    definition: row.try_get(2).map_err(backend)?,
                    digest: row.try_get(3).map_err(backend)?,
                    published_at: row.try_get(4).map_err(backend)?,
                    published_by: row.try_get(5).map_err(backend)?,
                })
            })
            .await
        })
    }

    fn agent_skill<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, StoreResult<Option<String>>> {
        Box::pin(async move {
            let mut texts = self
                .query(&numbered(SKILL), &[&hash], |row| {
                    row.try_get(0).map_err(backend)
                })
                .await?;
            Ok(texts.pop())
        })
    }

    fn record_agent_eval(&self, eval: AgentEval) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(async move {
            let client = self.client().await?;
            let (passed, failed) = (i64::from(eval.passed), i64::from(eval.failed));
            client
                .execute(
                    numbered(RECORD_EVAL).as_str(),
                    &[
                        &eval.name,
                        &eval.version,
                        &eval.at,
                        &passed,
                        &failed,
                        &eval.report,
                    ],
                )
                .await
                .map_err(backend)
                .map(drop)
        })
    }

    fn agent_evals<'a>(
        &'a self,
        name: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<Vec<AgentEval>>> {
        Box::pin(async move {
            self.query(&numbered(EVALS), &[&name], |row| {
                let count = |i| {
                    row.try_get::<_, i64>(i)
                        .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
                        .map_err(backend)
                };
                Ok(AgentEval {
                    name: row.try_get(0).map_err(backend)?,
                    version: row.try_get(1).map_err(backend)?,
                    at: row.try_get(2).map_err(backend)?,
                    passed: count(3)?,
                    failed: count(4)?,
                    report: row.try_get(5).map_err(backend)?,
                })
            })
            .await
        })
    }
}
