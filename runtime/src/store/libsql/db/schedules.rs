//! Scheduled jobs on the libSQL connection.

use libsql::{Row, Value};

use super::{Db, backend, get};
use crate::store::{ScheduleAdvance, ScheduleRow, StoreResult};

const COLUMNS: &str = "id, template_name, template_version, cron_expression, timezone, params, \
     agent_id, enabled, missed, last_run_at, next_run_at, last_run_status, last_workflow_id, \
     origin, created_at";

impl Db {
    /// Creates or replaces a job.
    pub fn save_schedule(&self, job: &ScheduleRow) -> StoreResult<()> {
        let sql = format!(
            "INSERT OR REPLACE INTO scheduled_jobs ({COLUMNS}) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
        );
        let params: Vec<Value> = vec![
            job.id.as_str().into(),
            job.template_name.as_str().into(),
            job.template_version.into(),
            job.cron.as_str().into(),
            job.timezone.as_str().into(),
            job.params.as_str().into(),
            job.agent_id.clone().into(),
            i64::from(job.enabled).into(),
            job.missed.as_str().into(),
            job.last_run_at.clone().into(),
            job.next_run_at.clone().into(),
            job.last_run_status.clone().into(),
            job.last_workflow_id.clone().into(),
            job.origin.as_str().into(),
            job.created_at.as_str().into(),
        ];
        self.execute(&sql, params).map(|_| ())
    }

    /// Every job, oldest first.
    pub fn schedules(&self) -> StoreResult<Vec<ScheduleRow>> {
        let sql = format!("SELECT {COLUMNS} FROM scheduled_jobs ORDER BY created_at, id");
        self.block(self.query_all(&sql, Vec::new(), schedule_row))
    }

    /// Deletes a job.
    pub fn delete_schedule(&self, id: &str) -> StoreResult<bool> {
        self.execute("DELETE FROM scheduled_jobs WHERE id = ?1", vec![id.into()])
            .map(|n| n > 0)
    }

    /// Moves a job on if its `next_run_at` is still the expected one.
    pub fn advance_schedule(&self, a: &ScheduleAdvance) -> StoreResult<bool> {
        let sql = "UPDATE scheduled_jobs SET next_run_at = ?3, \
                   last_run_at = COALESCE(?4, last_run_at), \
                   last_workflow_id = COALESCE(?5, last_workflow_id), \
                   last_run_status = COALESCE(?6, last_run_status) \
                   WHERE id = ?1 AND next_run_at IS ?2";
        let params: Vec<Value> = vec![
            a.id.as_str().into(),
            a.expected_next.clone().into(),
            a.next_run_at.clone().into(),
            a.last_run_at.clone().into(),
            a.last_workflow_id.clone().into(),
            a.last_run_status.clone().into(),
        ];
        self.execute(sql, params).map(|n| n > 0)
    }

    /// Records a run's status if it is still the job's last run.
    pub fn set_schedule_status(
        &self,
        id: &str,
        workflow_id: &str,
        status: &str,
    ) -> StoreResult<()> {
        self.execute(
            "UPDATE scheduled_jobs SET last_run_status = ?3 WHERE id = ?1 AND last_workflow_id = ?2",
            vec![id.into(), workflow_id.into(), status.into()],
        )
        .map(|_| ())
    }

    /// Runs one statement; the number of rows changed.
    pub(super) fn execute(&self, sql: &str, params: Vec<Value>) -> StoreResult<u64> {
        self.block(async { self.conn.execute(sql, params).await.map_err(backend) })
    }
}

fn schedule_row(row: &Row) -> StoreResult<ScheduleRow> {
    Ok(ScheduleRow {
        id: get(row, 0)?,
        template_name: get(row, 1)?,
        template_version: get(row, 2)?,
        cron: get(row, 3)?,
        timezone: get(row, 4)?,
        params: get(row, 5)?,
        agent_id: get(row, 6)?,
        enabled: get::<i64>(row, 7)? != 0,
        missed: get(row, 8)?,
        last_run_at: get(row, 9)?,
        next_run_at: get(row, 10)?,
        last_run_status: get(row, 11)?,
        last_workflow_id: get(row, 12)?,
        origin: get(row, 13)?,
        created_at: get(row, 14)?,
    })
}
