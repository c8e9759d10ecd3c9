//! Published agent releases, in memory.

use super::{MemoryStore, ready};
use crate::store::registry::outcome;
use crate::store::{
    AgentEval, AgentRelease, BoxFuture, Published, Registry, SkillText, StoreResult,
};

impl Registry for MemoryStore {
    fn publish_agent(
        &self,
        release: AgentRelease,
        skills: Vec<SkillText>,
    ) -> BoxFuture<'_, StoreResult<Published>> {
        if let Err(e) = self.refused() {
            return ready(Err(e));
        }
        let mut state = self.lock();
        let key = (release.name.clone(), release.version.clone());
        let existing = state.agent_releases.get(&key).map(|r| r.digest.clone());
        let answer = outcome(&release, existing.is_none(), existing.as_deref());
        if answer == Ok(Published::Added) {
            for skill in skills {
                state
                    .agent_skills
                    .entry(skill.hash)
                    .or_insert(skill.content);
            }
            state.agent_releases.insert(key, release);
        }
        ready(answer)
    }

    fn agent_releases<'a>(
        &'a self,
        name: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<Vec<AgentRelease>>> {
        let mut releases: Vec<AgentRelease> = self
            .lock()
            .agent_releases
            .values()
            .filter(|r| name.is_none_or(|name| r.name == name))
            .cloned()
            .collect();
        releases.sort_by(|a, b| {
            (&a.name, &a.published_at, &a.version).cmp(&(&b.name, &b.published_at, &b.version))
        });
        ready(Ok(releases))
    }

    fn agent_skill<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, StoreResult<Option<String>>> {
        ready(Ok(self.lock().agent_skills.get(hash).cloned()))
    }

    fn record_agent_eval(&self, eval: AgentEval) -> BoxFuture<'_, StoreResult<()>> {
        if let Err(e) = self.refused() {
            return ready(Err(e));
        }
        let key = (eval.name.clone(), eval.version.clone());
        self.lock().agent_evals.insert(key, eval);
        ready(Ok(()))
    }

    fn agent_evals<'a>(
        &'a self,
        name: Option<&'a str>,
    ) -> BoxFuture<'a, StoreResult<Vec<AgentEval>>> {
        let evals = self
            .lock()
            .agent_evals
            .values()
            .filter(|e| name.is_none_or(|name| e.name == name))
            .cloned()
            .collect();
        ready(Ok(evals))
    }
}
