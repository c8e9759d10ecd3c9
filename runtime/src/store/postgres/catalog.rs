//! What the tools, the scheduler and the panel keep beside the runs, on
//! PostgreSQL.

use tokio_postgres::Row;

use super::rows::{WORKFLOW_COLUMNS, log_entry};
use super::{PostgresStore, backend, commit};
use crate::store::listing::{self, Dialect, TEMPLATE_COLUMNS};
use crate::store::{
    AgentRow, BoxFuture, Catalog, DecisionFilter, DecisionRow, EventFilter, Expiry, FoundEntry,
    Listing, Prune, PrunedFilter, PrunedRow, ScheduleAdvance, ScheduleRow, SecretRow, StoreError,
    StoreHealth, StoreResult, TemplateDraft, TemplateFilter, TemplateRow, VaultHeader,
    WorkflowStatus,
};

const SCHEDULE_COLUMNS: &str = "id, template_name, template_version, cron_expression, timezone, \
     params, agent_id, enabled, missed, last_run_at, next_run_at, last_run_status, \
     last_workflow_id, origin, created_at";

/// How often a template definition is tried again when another daemon
/// took the same next version at the same moment.
const DEFINE_TRIES: usize = 5;

impl Catalog for PostgresStore {
    fn define_template(&self, draft: TemplateDraft) -> BoxFuture<'_, StoreResult<TemplateRow>> {
        Box::pin(async move {
            let sql = format!(
                "INSERT INTO workflow_templates (name, version, description, definition, \
                 input_schema, output_schema, triggers, agent_id, created_at) \
                 SELECT $1, COALESCE(MAX(version), 0) + 1, $2, $3, $4, $5, $6, $7, $8 \
                 FROM workflow_templates WHERE name = $1 RETURNING {TEMPLATE_COLUMNS}"
            );
            let d = &draft;
            let mut last = None;
            for _ in 0..DEFINE_TRIES {
                let defined = self
                    .query(
                        &sql,
                        &[
                            &d.name,
                            &d.description,
                            &d.definition,
                            &d.input_schema,
                            &d.output_schema,
                            &d.triggers,
                            &d.agent_id,
                            &d.at,
                        ],
                        template_row,
                    )
                    .await;
                match defined {
                    Ok(mut rows) => {
                        return rows.pop().ok_or_else(|| {
                            StoreError::Backend("the template insert returned no row".into())
                        });
                    }
                    // The same version taken by another writer: take the next.
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or(StoreError::Closed))
        })
    }

    fn template<'a>(
        &'a self,
        name: &'a str,
        version: Option<i64>,
    ) -> BoxFuture<'a, StoreResult<Option<TemplateRow>>> {
        Box::pin(async move {
            let sql = format!(
                "SELECT {TEMPLATE_COLUMNS} FROM workflow_templates WHERE name = $1 \
                 AND ($2::bigint IS NULL OR version = $2) ORDER BY version DESC LIMIT 1"
            );
            Ok(self
                .query(&sql, &[&name, &version], template_row)
                .await?
                .pop())
        })
    }

    fn templates(&self, filter: TemplateFilter) -> BoxFuture<'_, StoreResult<Vec<TemplateRow>>> {
        Box::pin(async move {
            let query = listing::templates(Dialect::Postgres, &filter);
            self.listed(query.paged(filter.limit, filter.offset), template_row)
                .await
        })
    }

    fn find_entries(&self, filter: EventFilter) -> BoxFuture<'_, StoreResult<Vec<FoundEntry>>> {
        Box::pin(async move {
            let query = listing::entries_page(Dialect::Postgres, &filter);
            self.listed(query, |row| {
                Ok(FoundEntry {
                    workflow_id: row.try_get(0).map_err(backend)?,
                    entry: log_entry(row, 1)?,
                })
            })
            .await
        })
    }

    fn count(&self, listing: Listing) -> BoxFuture<'_, StoreResult<u64>> {
        Box::pin(async move {
            let query = listing::count(Dialect::Postgres, WORKFLOW_COLUMNS, &listing);
            let counted = self
                .listed(query, |row| row.try_get::<_, i64>(0).map_err(backend))
                .await?;
            Ok(counted.first().copied().unwrap_or(0) as u64)
        })
    }

    fn touch_agent<'a>(&'a self, id: &'a str, at: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            self.execute(commit::SEE_AGENT, &[&id, &at, &commit::seen_before(at)])
                .await
                .map(|_| ())
        })
    }

    fn agents(&self) -> BoxFuture<'_, StoreResult<Vec<AgentRow>>> {
        Box::pin(async move {
            let sql =
                "SELECT id, created_at, last_seen_at FROM agents ORDER BY last_seen_at DESC, id";
            self.query(sql, &[], |row| {
                Ok(AgentRow {
                    id: row.try_get(0).map_err(backend)?,
                    created_at: row.try_get(1).map_err(backend)?,
                    last_seen_at: row.try_get(2).map_err(backend)?,
                })
            })
            .await
        })
    }

    fn workflow_counts(&self) -> BoxFuture<'_, StoreResult<Vec<(WorkflowStatus, u64)>>> {
        Box::pin(async move {
            let sql = "SELECT status, COUNT(*) FROM workflows GROUP BY status ORDER BY status";
            let rows = self
                .query(sql, &[], |row| {
                    let status: String = row.try_get(0).map_err(backend)?;
                    let count: i64 = row.try_get(1).map_err(backend)?;
                    Ok((WorkflowStatus::parse(&status), count as u64))
                })
                .await?;
            Ok(rows
                .into_iter()
                .filter_map(|(status, count)| Some((status?, count)))
                .collect())
        })
    }

    fn save_schedule(&self, job: ScheduleRow) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(async move {
            let sql = format!(
                "INSERT INTO scheduled_jobs ({SCHEDULE_COLUMNS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) \
                 ON CONFLICT (id) DO UPDATE SET template_name = excluded.template_name, \
                 template_version = excluded.template_version, \
                 cron_expression = excluded.cron_expression, timezone = excluded.timezone, \
                 params = excluded.params, agent_id = excluded.agent_id, \
                 enabled = excluded.enabled, missed = excluded.missed, \
                 last_run_at = excluded.last_run_at, next_run_at = excluded.next_run_at, \
                 last_run_status = excluded.last_run_status, \
                 last_workflow_id = excluded.last_workflow_id, origin = excluded.origin, \
                 created_at = excluded.created_at"
            );
            let j = &job;
            self.execute(
                &sql,
                &[
                    &j.id,
                    &j.template_name,
                    &j.template_version,
                    &j.cron,
                    &j.timezone,
                    &j.params,
                    &j.agent_id,
                    &j.enabled,
                    &j.missed,
                    &j.last_run_at,
                    &j.next_run_at,
                    &j.last_run_status,
                    &j.last_workflow_id,
                    &j.origin,
                    &j.created_at,
                ],
            )
            .await
            .map(|_| ())
        })
    }

    fn schedules(&self) -> BoxFuture<'_, StoreResult<Vec<ScheduleRow>>> {
        Box::pin(async move {
            let sql =
                format!("SELECT {SCHEDULE_COLUMNS} FROM scheduled_jobs ORDER BY created_at, id");
            self.query(&sql, &[], schedule_row).await
        })
    }

    fn delete_schedule<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let deleted = self
                .execute("DELETE FROM scheduled_jobs WHERE id = $1", &[&id])
                .await?;
            Ok(deleted > 0)
        })
    }

    fn advance_schedule(&self, a: ScheduleAdvance) -> BoxFuture<'_, StoreResult<bool>> {
        Box::pin(async move {
            let moved = self
                .execute(
                    "UPDATE scheduled_jobs SET next_run_at = $3, \
                     last_run_at = COALESCE($4, last_run_at), \
                     last_workflow_id = COALESCE($5, last_workflow_id), \
                     last_run_status = COALESCE($6, last_run_status) \
                     WHERE id = $1 AND next_run_at IS NOT DISTINCT FROM $2",
                    &[
                        &a.id,
                        &a.expected_next,
                        &a.next_run_at,
                        &a.last_run_at,
                        &a.last_workflow_id,
                        &a.last_run_status,
                    ],
                )
                .await?;
            Ok(moved > 0)
        })
    }

    fn set_schedule_status<'a>(
        &'a self,
        id: &'a str,
        workflow_id: &'a str,
        status: &'a str,
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            self.execute(
                "UPDATE scheduled_jobs SET last_run_status = $3 \
                 WHERE id = $1 AND last_workflow_id = $2",
                &[&id, &workflow_id, &status],
            )
            .await
            .map(|_| ())
        })
    }

    fn vault_header(&self) -> BoxFuture<'_, StoreResult<Option<VaultHeader>>> {
        Box::pin(async move {
            let sql = "SELECT salt, iterations, check_value, created_at FROM vault WHERE id = 1";
            Ok(self.query(sql, &[], header_row).await?.pop())
        })
    }

    fn create_vault(&self, header: VaultHeader) -> BoxFuture<'_, StoreResult<VaultHeader>> {
        Box::pin(async move {
            let iterations = i64::from(header.iterations);
            self.execute(
                "INSERT INTO vault (id, salt, iterations, check_value, created_at) \
                 VALUES (1, $1, $2, $3, $4) ON CONFLICT (id) DO NOTHING",
                &[&header.salt, &iterations, &header.check, &header.created_at],
            )
            .await?;
            Ok(self.vault_header().await?.unwrap_or(header))
        })
    }

    fn put_secret(&self, secret: SecretRow) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(async move {
            self.execute(
                "INSERT INTO secrets (key, value, created_at, updated_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, \
                 updated_at = excluded.updated_at",
                &[
                    &secret.name,
                    &secret.sealed,
                    &secret.created_at,
                    &secret.updated_at,
                ],
            )
            .await
            .map(|_| ())
        })
    }

    fn secrets(&self) -> BoxFuture<'_, StoreResult<Vec<SecretRow>>> {
        Box::pin(async move {
            let sql = "SELECT key, value, created_at, updated_at FROM secrets ORDER BY key";
            self.query(sql, &[], |row| {
                Ok(SecretRow {
                    name: row.try_get(0).map_err(backend)?,
                    sealed: row.try_get(1).map_err(backend)?,
                    created_at: row.try_get(2).map_err(backend)?,
                    updated_at: row.try_get(3).map_err(backend)?,
                })
            })
            .await
        })
    }

    fn delete_secret<'a>(&'a self, name: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let deleted = self
                .execute("DELETE FROM secrets WHERE key = $1", &[&name])
                .await?;
            Ok(deleted > 0)
        })
    }

    fn expired(&self, expiry: Expiry) -> BoxFuture<'_, StoreResult<Vec<String>>> {
        Box::pin(async move { self.expired_runs(&expiry).await })
    }

    fn prune(&self, runs: Vec<Prune>, at: String) -> BoxFuture<'_, StoreResult<Vec<String>>> {
        Box::pin(async move { self.prune_runs(&runs, &at).await })
    }

    fn decision_page(
        &self,
        filter: DecisionFilter,
    ) -> BoxFuture<'_, StoreResult<Vec<DecisionRow>>> {
        Box::pin(async move {
            let query = listing::decisions(Dialect::Postgres, &filter);
            self.listed(
                query.paged(filter.limit, filter.offset),
                super::rows::decision_row,
            )
            .await
        })
    }

    fn forget_pruned(&self, before: String) -> BoxFuture<'_, StoreResult<u64>> {
        Box::pin(async move { self.forget_pruned_runs(&before).await })
    }

    fn pruned(&self, filter: PrunedFilter) -> BoxFuture<'_, StoreResult<Vec<PrunedRow>>> {
        Box::pin(async move { self.pruned_runs(&filter).await })
    }

    fn health(&self) -> BoxFuture<'_, StoreResult<StoreHealth>> {
        Box::pin(async move {
            let sql = "SELECT (SELECT COALESCE(MAX(version), 0) FROM schema_version), \
                       (SELECT MAX(created_at) FROM workflows), \
                       to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')";
            let rows = self
                .query(sql, &[], |row| {
                    Ok(StoreHealth {
                        schema_version: row.try_get(0).map_err(backend)?,
                        journal_mode: None,
                        synchronous: None,
                        newest_run_at: row.try_get(1).map_err(backend)?,
                        clock: row.try_get(2).map_err(backend)?,
                    })
                })
                .await?;
            rows.into_iter()
                .next()
                .ok_or_else(|| StoreError::Backend("the health query answered nothing".into()))
        })
    }
}

fn template_row(row: &Row) -> StoreResult<TemplateRow> {
    Ok(TemplateRow {
        name: row.try_get(0).map_err(backend)?,
        version: row.try_get(1).map_err(backend)?,
        description: row.try_get(2).map_err(backend)?,
        definition: row.try_get(3).map_err(backend)?,
        input_schema: row.try_get(4).map_err(backend)?,
        output_schema: row.try_get(5).map_err(backend)?,
        triggers: row.try_get(6).map_err(backend)?,
        agent_id: row.try_get(7).map_err(backend)?,
        created_at: row.try_get(8).map_err(backend)?,
    })
}

fn schedule_row(row: &Row) -> StoreResult<ScheduleRow> {
    Ok(ScheduleRow {
        id: row.try_get(0).map_err(backend)?,
        template_name: row.try_get(1).map_err(backend)?,
        template_version: row.try_get(2).map_err(backend)?,
        cron: row.try_get(3).map_err(backend)?,
        timezone: row.try_get(4).map_err(backend)?,
        params: row.try_get(5).map_err(backend)?,
        agent_id: row.try_get(6).map_err(backend)?,
        enabled: row.try_get(7).map_err(backend)?,
        missed: row.try_get(8).map_err(backend)?,
        last_run_at: row.try_get(9).map_err(backend)?,
        next_run_at: row.try_get(10).map_err(backend)?,
        last_run_status: row.try_get(11).map_err(backend)?,
        last_workflow_id: row.try_get(12).map_err(backend)?,
        origin: row.try_get(13).map_err(backend)?,
        created_at: row.try_get(14).map_err(backend)?,
    })
}

fn header_row(row: &Row) -> StoreResult<VaultHeader> {
    let iterations: i64 = row.try_get(1).map_err(backend)?;
    Ok(VaultHeader {
        salt: row.try_get(0).map_err(backend)?,
        iterations: u32::try_from(iterations).unwrap_or(0),
        check: row.try_get(2).map_err(backend)?,
        created_at: row.try_get(3).map_err(backend)?,
    })
}
