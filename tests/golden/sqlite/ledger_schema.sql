-- Golden SQL of pipeledger.ledger.tables (migrations) on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: ledger_migrations
-- migration 1: run ledger: pipelines, runs, tasks, audit, snapshots, dependencies
CREATE TABLE IF NOT EXISTS "pipeledger.pipelines" (name text PRIMARY KEY, version text NOT NULL, description text, owner text, source_system text, target_system text, freshness_sla_s bigint, created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL);
CREATE TABLE IF NOT EXISTS "pipeledger.pipeline_runs" (run_id text PRIMARY KEY, logical_run_id text NOT NULL, attempt integer NOT NULL, parent_run_id text, correlation_id text, pipeline text NOT NULL, trigger_type text NOT NULL, triggered_by text, environment text, status text NOT NULL, started_at timestamptz NOT NULL, ended_at timestamptz, duration_ms integer, rows_read integer, rows_inserted integer, rows_updated integer, rows_unchanged integer, rows_rejected integer, bytes_read integer, watermark_before text, watermark_after text, data_interval_start timestamptz, data_interval_end timestamptz, error_code text, error_message text, code_version text, host text, pid integer, heartbeat_at timestamptz, lease_expires_at timestamptz, extra text, UNIQUE (logical_run_id, attempt));
CREATE INDEX IF NOT EXISTS "pipeline_runs_pipeline_started" ON "pipeledger.pipeline_runs" (pipeline, started_at DESC);
CREATE INDEX IF NOT EXISTS "pipeline_runs_status" ON "pipeledger.pipeline_runs" (status);
CREATE INDEX IF NOT EXISTS "pipeline_runs_started" ON "pipeledger.pipeline_runs" (started_at);
CREATE TABLE IF NOT EXISTS "pipeledger.task_runs" (task_run_id text PRIMARY KEY, run_id text NOT NULL, name text NOT NULL, seq integer NOT NULL, status text NOT NULL, started_at timestamptz NOT NULL, ended_at timestamptz, duration_ms integer, rows_in integer, rows_out integer, rows_rejected integer, bytes integer, error_message text);
CREATE INDEX IF NOT EXISTS "task_runs_run" ON "pipeledger.task_runs" (run_id);
CREATE TABLE IF NOT EXISTS "pipeledger.audit_events" (event_id text PRIMARY KEY, run_id text, pipeline text, event_type text NOT NULL, target_table text, record_count integer, old_values text, new_values text, metadata text, created_at timestamptz NOT NULL);
CREATE INDEX IF NOT EXISTS "audit_events_target" ON "pipeledger.audit_events" (target_table, created_at);
CREATE INDEX IF NOT EXISTS "audit_events_run" ON "pipeledger.audit_events" (run_id);
CREATE TABLE IF NOT EXISTS "pipeledger.dataset_snapshots" (run_id text NOT NULL, target_table text NOT NULL, row_count integer NOT NULL, max_cursor text, schema_fingerprint text NOT NULL, columns text NOT NULL, created_at timestamptz NOT NULL, PRIMARY KEY (run_id, target_table));
CREATE INDEX IF NOT EXISTS "dataset_snapshots_target" ON "pipeledger.dataset_snapshots" (target_table, created_at);
CREATE TABLE IF NOT EXISTS "pipeledger.pipeline_dependencies" (upstream text NOT NULL, downstream text NOT NULL, created_at timestamptz NOT NULL, PRIMARY KEY (upstream, downstream));
-- migration 2: quality gate results per run and check
CREATE TABLE IF NOT EXISTS "pipeledger.quality_results" (result_id text PRIMARY KEY, run_id text NOT NULL, pipeline text NOT NULL, target_table text, check_name text NOT NULL, kind text NOT NULL, level text NOT NULL, status text NOT NULL, observed text, expected text, failing_rows integer, sample_keys text, created_at timestamptz NOT NULL);
CREATE INDEX IF NOT EXISTS "quality_results_run" ON "pipeledger.quality_results" (run_id);
CREATE INDEX IF NOT EXISTS "quality_results_pipeline" ON "pipeledger.quality_results" (pipeline, created_at);
-- migration 3: task trends by time
CREATE INDEX IF NOT EXISTS "task_runs_started" ON "pipeledger.task_runs" (started_at);
-- migration 4: foreign keys: runs to pipelines; tasks, events, snapshots and results to runs
INSERT INTO "pipeledger.pipelines" (name, version, created_at, updated_at) SELECT pipeline, 'unregistered', min(started_at), min(started_at) FROM "pipeledger.pipeline_runs" WHERE pipeline NOT IN (SELECT name FROM "pipeledger.pipelines") GROUP BY pipeline;
DELETE FROM "pipeledger.task_runs" WHERE run_id NOT IN (SELECT run_id FROM "pipeledger.pipeline_runs");
DELETE FROM "pipeledger.audit_events" WHERE run_id IS NOT NULL AND run_id NOT IN (SELECT run_id FROM "pipeledger.pipeline_runs");
DELETE FROM "pipeledger.dataset_snapshots" WHERE run_id NOT IN (SELECT run_id FROM "pipeledger.pipeline_runs");
DELETE FROM "pipeledger.quality_results" WHERE run_id NOT IN (SELECT run_id FROM "pipeledger.pipeline_runs");
CREATE TABLE "pipeledger.pipeline_runs_rebuilt" (run_id text PRIMARY KEY, logical_run_id text NOT NULL, attempt integer NOT NULL, parent_run_id text, correlation_id text, pipeline text NOT NULL, trigger_type text NOT NULL, triggered_by text, environment text, status text NOT NULL, started_at timestamptz NOT NULL, ended_at timestamptz, duration_ms integer, rows_read integer, rows_inserted integer, rows_updated integer, rows_unchanged integer, rows_rejected integer, bytes_read integer, watermark_before text, watermark_after text, data_interval_start timestamptz, data_interval_end timestamptz, error_code text, error_message text, code_version text, host text, pid integer, heartbeat_at timestamptz, lease_expires_at timestamptz, extra text, UNIQUE (logical_run_id, attempt), FOREIGN KEY (pipeline) REFERENCES "pipeledger.pipelines" (name));
INSERT INTO "pipeledger.pipeline_runs_rebuilt" (run_id, logical_run_id, attempt, parent_run_id, correlation_id, pipeline, trigger_type, triggered_by, environment, status, started_at, ended_at, duration_ms, rows_read, rows_inserted, rows_updated, rows_unchanged, rows_rejected, bytes_read, watermark_before, watermark_after, data_interval_start, data_interval_end, error_code, error_message, code_version, host, pid, heartbeat_at, lease_expires_at, extra) SELECT run_id, logical_run_id, attempt, parent_run_id, correlation_id, pipeline, trigger_type, triggered_by, environment, status, started_at, ended_at, duration_ms, rows_read, rows_inserted, rows_updated, rows_unchanged, rows_rejected, bytes_read, watermark_before, watermark_after, data_interval_start, data_interval_end, error_code, error_message, code_version, host, pid, heartbeat_at, lease_expires_at, extra FROM "pipeledger.pipeline_runs";
DROP TABLE "pipeledger.pipeline_runs";
ALTER TABLE "pipeledger.pipeline_runs_rebuilt" RENAME TO "pipeledger.pipeline_runs";
CREATE INDEX IF NOT EXISTS "pipeline_runs_pipeline_started" ON "pipeledger.pipeline_runs" (pipeline, started_at DESC);
CREATE INDEX IF NOT EXISTS "pipeline_runs_status" ON "pipeledger.pipeline_runs" (status);
CREATE INDEX IF NOT EXISTS "pipeline_runs_started" ON "pipeledger.pipeline_runs" (started_at);
CREATE TABLE "pipeledger.task_runs_rebuilt" (task_run_id text PRIMARY KEY, run_id text NOT NULL, name text NOT NULL, seq integer NOT NULL, status text NOT NULL, started_at timestamptz NOT NULL, ended_at timestamptz, duration_ms integer, rows_in integer, rows_out integer, rows_rejected integer, bytes integer, error_message text, FOREIGN KEY (run_id) REFERENCES "pipeledger.pipeline_runs" (run_id));
INSERT INTO "pipeledger.task_runs_rebuilt" (task_run_id, run_id, name, seq, status, started_at, ended_at, duration_ms, rows_in, rows_out, rows_rejected, bytes, error_message) SELECT task_run_id, run_id, name, seq, status, started_at, ended_at, duration_ms, rows_in, rows_out, rows_rejected, bytes, error_message FROM "pipeledger.task_runs";
DROP TABLE "pipeledger.task_runs";
ALTER TABLE "pipeledger.task_runs_rebuilt" RENAME TO "pipeledger.task_runs";
CREATE INDEX IF NOT EXISTS "task_runs_run" ON "pipeledger.task_runs" (run_id);
CREATE INDEX IF NOT EXISTS "task_runs_started" ON "pipeledger.task_runs" (started_at);
CREATE TABLE "pipeledger.audit_events_rebuilt" (event_id text PRIMARY KEY, run_id text, pipeline text, event_type text NOT NULL, target_table text, record_count integer, old_values text, new_values text, metadata text, created_at timestamptz NOT NULL, FOREIGN KEY (run_id) REFERENCES "pipeledger.pipeline_runs" (run_id));
INSERT INTO "pipeledger.audit_events_rebuilt" (event_id, run_id, pipeline, event_type, target_table, record_count, old_values, new_values, metadata, created_at) SELECT event_id, run_id, pipeline, event_type, target_table, record_count, old_values, new_values, metadata, created_at FROM "pipeledger.audit_events";
DROP TABLE "pipeledger.audit_events";
ALTER TABLE "pipeledger.audit_events_rebuilt" RENAME TO "pipeledger.audit_events";
CREATE INDEX IF NOT EXISTS "audit_events_target" ON "pipeledger.audit_events" (target_table, created_at);
CREATE INDEX IF NOT EXISTS "audit_events_run" ON "pipeledger.audit_events" (run_id);
CREATE TABLE "pipeledger.dataset_snapshots_rebuilt" (run_id text NOT NULL, target_table text NOT NULL, row_count integer NOT NULL, max_cursor text, schema_fingerprint text NOT NULL, columns text NOT NULL, created_at timestamptz NOT NULL, PRIMARY KEY (run_id, target_table), FOREIGN KEY (run_id) REFERENCES "pipeledger.pipeline_runs" (run_id));
INSERT INTO "pipeledger.dataset_snapshots_rebuilt" (run_id, target_table, row_count, max_cursor, schema_fingerprint, columns, created_at) SELECT run_id, target_table, row_count, max_cursor, schema_fingerprint, columns, created_at FROM "pipeledger.dataset_snapshots";
DROP TABLE "pipeledger.dataset_snapshots";
ALTER TABLE "pipeledger.dataset_snapshots_rebuilt" RENAME TO "pipeledger.dataset_snapshots";
CREATE INDEX IF NOT EXISTS "dataset_snapshots_target" ON "pipeledger.dataset_snapshots" (target_table, created_at);
CREATE TABLE "pipeledger.quality_results_rebuilt" (result_id text PRIMARY KEY, run_id text NOT NULL, pipeline text NOT NULL, target_table text, check_name text NOT NULL, kind text NOT NULL, level text NOT NULL, status text NOT NULL, observed text, expected text, failing_rows integer, sample_keys text, created_at timestamptz NOT NULL, FOREIGN KEY (run_id) REFERENCES "pipeledger.pipeline_runs" (run_id));
INSERT INTO "pipeledger.quality_results_rebuilt" (result_id, run_id, pipeline, target_table, check_name, kind, level, status, observed, expected, failing_rows, sample_keys, created_at) SELECT result_id, run_id, pipeline, target_table, check_name, kind, level, status, observed, expected, failing_rows, sample_keys, created_at FROM "pipeledger.quality_results";
DROP TABLE "pipeledger.quality_results";
ALTER TABLE "pipeledger.quality_results_rebuilt" RENAME TO "pipeledger.quality_results";
CREATE INDEX IF NOT EXISTS "quality_results_run" ON "pipeledger.quality_results" (run_id);
CREATE INDEX IF NOT EXISTS "quality_results_pipeline" ON "pipeledger.quality_results" (pipeline, created_at);
-- migration 5: idempotency keys of runs; cancel requests
ALTER TABLE "pipeledger.pipeline_runs" ADD COLUMN idempotency_key text;
CREATE UNIQUE INDEX IF NOT EXISTS pipeline_runs_idempotency ON "pipeledger.pipeline_runs" (pipeline, idempotency_key) WHERE idempotency_key IS NOT NULL AND status IN ('running', 'success', 'partial');
CREATE TABLE IF NOT EXISTS "pipeledger.run_cancellations" (run_id text PRIMARY KEY, requested_at timestamptz NOT NULL, requested_by text, reason text, FOREIGN KEY (run_id) REFERENCES "pipeledger.pipeline_runs" (run_id) ON DELETE CASCADE);
-- migration 6: daily rollups of the runs (kept by triggers), alerts, SLA breaches, max_duration
CREATE TABLE IF NOT EXISTS "pipeledger.pipeline_days" (pipeline text NOT NULL, day text NOT NULL, finished integer NOT NULL, succeeded integer NOT NULL, success_rows integer NOT NULL, samples integer NOT NULL, sample_rows integer NOT NULL, sample_squares numeric NOT NULL, PRIMARY KEY (pipeline, day));
INSERT INTO "pipeledger.pipeline_days" (pipeline, day, finished, succeeded, success_rows, samples, sample_rows, sample_squares) SELECT r.pipeline, substr(r.started_at, 1, 10), sum(1), sum(CASE WHEN r.status = 'success' THEN 1 ELSE 0 END), sum(CASE WHEN r.status = 'success' THEN (COALESCE(r.rows_inserted, 0) + COALESCE(r.rows_updated, 0)) ELSE 0 END), sum(CASE WHEN (r.status IN ('success', 'partial') AND r.trigger_type NOT IN ('backfill', 'replay', 'reconcile') AND NOT ((COALESCE(r.rows_inserted, 0) + COALESCE(r.rows_updated, 0)) = 0 AND NOT (r.watermark_after IS NOT r.watermark_before))) THEN 1 ELSE 0 END), sum(CASE WHEN (r.status IN ('success', 'partial') AND r.trigger_type NOT IN ('backfill', 'replay', 'reconcile') AND NOT ((COALESCE(r.rows_inserted, 0) + COALESCE(r.rows_updated, 0)) = 0 AND NOT (r.watermark_after IS NOT r.watermark_before))) THEN (COALESCE(r.rows_inserted, 0) + COALESCE(r.rows_updated, 0)) ELSE 0 END), sum(CASE WHEN (r.status IN ('success', 'partial') AND r.trigger_type NOT IN ('backfill', 'replay', 'reconcile') AND NOT ((COALESCE(r.rows_inserted, 0) + COALESCE(r.rows_updated, 0)) = 0 AND NOT (r.watermark_after IS NOT r.watermark_before))) THEN (COALESCE(r.rows_inserted, 0) + COALESCE(r.rows_updated, 0)) * (COALESCE(r.rows_inserted, 0) + COALESCE(r.rows_updated, 0)) ELSE 0 END) FROM "pipeledger.pipeline_runs" r WHERE r.status NOT IN ('running', 'skipped') AND r.trigger_type <> 'reconcile' GROUP BY r.pipeline, substr(r.started_at, 1, 10);
CREATE TRIGGER IF NOT EXISTS "pipeline_runs_roll_up_insert" AFTER INSERT ON "pipeledger.pipeline_runs" FOR EACH ROW WHEN (NEW.status NOT IN ('running', 'skipped') AND NEW.trigger_type <> 'reconcile') BEGIN INSERT INTO "pipeledger.pipeline_days" (pipeline, day, finished, succeeded, success_rows, samples, sample_rows, sample_squares) VALUES (NEW.pipeline, substr(NEW.started_at, 1, 10), 1, CASE WHEN NEW.status = 'success' THEN 1 ELSE 0 END, CASE WHEN NEW.status = 'success' THEN (COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) ELSE 0 END, CASE WHEN (NEW.status IN ('success', 'partial') AND NEW.trigger_type NOT IN ('backfill', 'replay', 'reconcile') AND NOT ((COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) = 0 AND NOT (NEW.watermark_after IS NOT NEW.watermark_before))) THEN 1 ELSE 0 END, CASE WHEN (NEW.status IN ('success', 'partial') AND NEW.trigger_type NOT IN ('backfill', 'replay', 'reconcile') AND NOT ((COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) = 0 AND NOT (NEW.watermark_after IS NOT NEW.watermark_before))) THEN (COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) ELSE 0 END, CASE WHEN (NEW.status IN ('success', 'partial') AND NEW.trigger_type NOT IN ('backfill', 'replay', 'reconcile') AND NOT ((COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) = 0 AND NOT (NEW.watermark_after IS NOT NEW.watermark_before))) THEN (COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) * (COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) ELSE 0 END) ON CONFLICT (pipeline, day) DO UPDATE SET finished = finished + excluded.finished, succeeded = succeeded + excluded.succeeded, success_rows = success_rows + excluded.success_rows, samples = samples + excluded.samples, sample_rows = sample_rows + excluded.sample_rows, sample_squares = sample_squares + excluded.sample_squares; END;
CREATE TRIGGER IF NOT EXISTS "pipeline_runs_roll_up_update" AFTER UPDATE OF status ON "pipeledger.pipeline_runs" FOR EACH ROW WHEN OLD.status = 'running' AND (NEW.status NOT IN ('running', 'skipped') AND NEW.trigger_type <> 'reconcile') BEGIN INSERT INTO "pipeledger.pipeline_days" (pipeline, day, finished, succeeded, success_rows, samples, sample_rows, sample_squares) VALUES (NEW.pipeline, substr(NEW.started_at, 1, 10), 1, CASE WHEN NEW.status = 'success' THEN 1 ELSE 0 END, CASE WHEN NEW.status = 'success' THEN (COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) ELSE 0 END, CASE WHEN (NEW.status IN ('success', 'partial') AND NEW.trigger_type NOT IN ('backfill', 'replay', 'reconcile') AND NOT ((COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) = 0 AND NOT (NEW.watermark_after IS NOT NEW.watermark_before))) THEN 1 ELSE 0 END, CASE WHEN (NEW.status IN ('success', 'partial') AND NEW.trigger_type NOT IN ('backfill', 'replay', 'reconcile') AND NOT ((COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) = 0 AND NOT (NEW.watermark_after IS NOT NEW.watermark_before))) THEN (COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) ELSE 0 END, CASE WHEN (NEW.status IN ('success', 'partial') AND NEW.trigger_type NOT IN ('backfill', 'replay', 'reconcile') AND NOT ((COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) = 0 AND NOT (NEW.watermark_after IS NOT NEW.watermark_before))) THEN (COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) * (COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) ELSE 0 END) ON CONFLICT (pipeline, day) DO UPDATE SET finished = finished + excluded.finished, succeeded = succeeded + excluded.succeeded, success_rows = success_rows + excluded.success_rows, samples = samples + excluded.samples, sample_rows = sample_rows + excluded.sample_rows, sample_squares = sample_squares + excluded.sample_squares; END;
CREATE INDEX IF NOT EXISTS "pipeline_runs_ended" ON "pipeledger.pipeline_runs" (ended_at);
CREATE TABLE IF NOT EXISTS "pipeledger.alerts" (alert_key text NOT NULL, webhook text NOT NULL, event text NOT NULL, pipeline text, run_id text, reason text NOT NULL, payload text NOT NULL, status text NOT NULL, attempts integer NOT NULL, created_at timestamptz NOT NULL, next_attempt_at timestamptz NOT NULL, last_attempt_at timestamptz, delivered_at timestamptz, last_error text, PRIMARY KEY (alert_key, webhook));
CREATE INDEX IF NOT EXISTS "alerts_due" ON "pipeledger.alerts" (status, next_attempt_at);
CREATE INDEX IF NOT EXISTS "alerts_created" ON "pipeledger.alerts" (created_at);
CREATE TABLE IF NOT EXISTS "pipeledger.sla_breaches" (breach_id text PRIMARY KEY, pipeline text NOT NULL, kind text NOT NULL, run_id text, due_at timestamptz NOT NULL, detected_at timestamptz NOT NULL, ended_at timestamptz, sla_s integer NOT NULL, reason text NOT NULL);
CREATE INDEX IF NOT EXISTS "sla_breaches_due" ON "pipeledger.sla_breaches" (due_at);
CREATE UNIQUE INDEX IF NOT EXISTS "sla_breaches_open" ON "pipeledger.sla_breaches" (pipeline, kind) WHERE ended_at IS NULL;
ALTER TABLE "pipeledger.pipelines" ADD COLUMN max_duration_s integer;
-- migration 7: rows deleted per run
ALTER TABLE "pipeledger.pipeline_runs" ADD COLUMN rows_deleted integer;
-- migration 8: reconciliations: what each reconcile run found
CREATE TABLE IF NOT EXISTS "pipeledger.reconciliations" (run_id text PRIMARY KEY, pipeline text NOT NULL, target_table text NOT NULL, status text NOT NULL, range_start text, range_end text, window_by text NOT NULL, windows_compared integer NOT NULL, windows_differing integer NOT NULL, source_rows integer NOT NULL, target_rows integer NOT NULL, missing_rows integer NOT NULL, extra_rows integer NOT NULL, changed_rows integer NOT NULL, windows text NOT NULL, created_at timestamptz NOT NULL, FOREIGN KEY (run_id) REFERENCES "pipeledger.pipeline_runs" (run_id));
CREATE INDEX IF NOT EXISTS "reconciliations_pipeline" ON "pipeledger.reconciliations" (pipeline, created_at);
-- migration 9: indexes for reading: runs by DAG run, runs by time with what windows sum
CREATE INDEX IF NOT EXISTS "pipeline_runs_correlation" ON "pipeledger.pipeline_runs" (correlation_id) WHERE correlation_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS "pipeline_runs_window" ON "pipeledger.pipeline_runs" (started_at, pipeline, status, trigger_type, run_id, ended_at, duration_ms);
-- migration 10: tenants: a tenant on every row and first in its indexes; row security
ALTER TABLE "pipeledger.pipelines" ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE "pipeledger.pipeline_runs" ADD COLUMN tenant text NOT NULL DEFAULT 'default';
DROP INDEX IF EXISTS "pipeline_runs_pipeline_started";
CREATE INDEX "pipeline_runs_pipeline_started" ON "pipeledger.pipeline_runs" (tenant, pipeline, started_at DESC);
DROP INDEX IF EXISTS "pipeline_runs_status";
CREATE INDEX "pipeline_runs_status" ON "pipeledger.pipeline_runs" (tenant, status);
DROP INDEX IF EXISTS "pipeline_runs_started";
CREATE INDEX "pipeline_runs_started" ON "pipeledger.pipeline_runs" (tenant, started_at);
ALTER TABLE "pipeledger.task_runs" ADD COLUMN tenant text NOT NULL DEFAULT 'default';
DROP INDEX IF EXISTS "task_runs_run";
CREATE INDEX "task_runs_run" ON "pipeledger.task_runs" (tenant, run_id);
DROP INDEX IF EXISTS "task_runs_started";
CREATE INDEX "task_runs_started" ON "pipeledger.task_runs" (tenant, started_at);
ALTER TABLE "pipeledger.audit_events" ADD COLUMN tenant text NOT NULL DEFAULT 'default';
DROP INDEX IF EXISTS "audit_events_target";
CREATE INDEX "audit_events_target" ON "pipeledger.audit_events" (tenant, target_table, created_at);
DROP INDEX IF EXISTS "audit_events_run";
CREATE INDEX "audit_events_run" ON "pipeledger.audit_events" (tenant, run_id);
ALTER TABLE "pipeledger.dataset_snapshots" ADD COLUMN tenant text NOT NULL DEFAULT 'default';
DROP INDEX IF EXISTS "dataset_snapshots_target";
CREATE INDEX "dataset_snapshots_target" ON "pipeledger.dataset_snapshots" (tenant, target_table, created_at);
ALTER TABLE "pipeledger.pipeline_dependencies" ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE "pipeledger.quality_results" ADD COLUMN tenant text NOT NULL DEFAULT 'default';
DROP INDEX IF EXISTS "quality_results_run";
CREATE INDEX "quality_results_run" ON "pipeledger.quality_results" (tenant, run_id);
DROP INDEX IF EXISTS "quality_results_pipeline";
CREATE INDEX "quality_results_pipeline" ON "pipeledger.quality_results" (tenant, pipeline, created_at);
ALTER TABLE "pipeledger.pipeline_days" ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE "pipeledger.alerts" ADD COLUMN tenant text NOT NULL DEFAULT 'default';
DROP INDEX IF EXISTS "alerts_due";
CREATE INDEX "alerts_due" ON "pipeledger.alerts" (tenant, status, next_attempt_at);
DROP INDEX IF EXISTS "alerts_created";
CREATE INDEX "alerts_created" ON "pipeledger.alerts" (tenant, created_at);
ALTER TABLE "pipeledger.sla_breaches" ADD COLUMN tenant text NOT NULL DEFAULT 'default';
DROP INDEX IF EXISTS "sla_breaches_due";
CREATE INDEX "sla_breaches_due" ON "pipeledger.sla_breaches" (tenant, due_at);
ALTER TABLE "pipeledger.reconciliations" ADD COLUMN tenant text NOT NULL DEFAULT 'default';
DROP INDEX IF EXISTS "reconciliations_pipeline";
CREATE INDEX "reconciliations_pipeline" ON "pipeledger.reconciliations" (tenant, pipeline, created_at);
ALTER TABLE "pipeledger.run_cancellations" ADD COLUMN tenant text NOT NULL DEFAULT 'default';
DROP INDEX IF EXISTS "pipeline_runs_idempotency";
CREATE UNIQUE INDEX "pipeline_runs_idempotency" ON "pipeledger.pipeline_runs" (tenant, pipeline, idempotency_key) WHERE idempotency_key IS NOT NULL AND status IN ('running', 'success', 'partial');
DROP INDEX IF EXISTS "pipeline_runs_ended";
CREATE INDEX "pipeline_runs_ended" ON "pipeledger.pipeline_runs" (tenant, ended_at);
DROP INDEX IF EXISTS "sla_breaches_open";
CREATE UNIQUE INDEX "sla_breaches_open" ON "pipeledger.sla_breaches" (tenant, pipeline, kind) WHERE ended_at IS NULL;
DROP INDEX IF EXISTS "pipeline_runs_correlation";
CREATE INDEX "pipeline_runs_correlation" ON "pipeledger.pipeline_runs" (tenant, correlation_id) WHERE correlation_id IS NOT NULL;
DROP INDEX IF EXISTS "pipeline_runs_window";
CREATE INDEX "pipeline_runs_window" ON "pipeledger.pipeline_runs" (tenant, started_at, pipeline, status, trigger_type, run_id, ended_at, duration_ms);
