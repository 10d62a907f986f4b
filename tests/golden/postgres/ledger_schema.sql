-- Golden SQL of pipeledger.ledger.tables (migrations) on PostgreSQL, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: ledger_migrations
-- migration 1: run ledger: pipelines, runs, tasks, audit, snapshots, dependencies
CREATE SCHEMA IF NOT EXISTS pipeledger;
CREATE TABLE IF NOT EXISTS "pipeledger"."pipelines" (name text PRIMARY KEY, version text NOT NULL, description text, owner text, source_system text, target_system text, freshness_sla_s bigint, created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL);
CREATE TABLE IF NOT EXISTS "pipeledger"."pipeline_runs" (run_id text PRIMARY KEY, logical_run_id text NOT NULL, attempt integer NOT NULL, parent_run_id text, correlation_id text, pipeline text NOT NULL, trigger_type text NOT NULL, triggered_by text, environment text, status text NOT NULL, started_at timestamptz NOT NULL, ended_at timestamptz, duration_ms bigint, rows_read bigint, rows_inserted bigint, rows_updated bigint, rows_unchanged bigint, rows_rejected bigint, bytes_read bigint, watermark_before text, watermark_after text, data_interval_start timestamptz, data_interval_end timestamptz, error_code text, error_message text, code_version text, host text, pid integer, heartbeat_at timestamptz, lease_expires_at timestamptz, extra jsonb, UNIQUE (logical_run_id, attempt));
CREATE INDEX IF NOT EXISTS "pipeline_runs_pipeline_started" ON "pipeledger"."pipeline_runs" (pipeline, started_at DESC);
CREATE INDEX IF NOT EXISTS "pipeline_runs_status" ON "pipeledger"."pipeline_runs" (status);
CREATE INDEX IF NOT EXISTS "pipeline_runs_started" ON "pipeledger"."pipeline_runs" (started_at);
CREATE TABLE IF NOT EXISTS "pipeledger"."task_runs" (task_run_id text PRIMARY KEY, run_id text NOT NULL, name text NOT NULL, seq integer NOT NULL, status text NOT NULL, started_at timestamptz NOT NULL, ended_at timestamptz, duration_ms bigint, rows_in bigint, rows_out bigint, rows_rejected bigint, bytes bigint, error_message text);
CREATE INDEX IF NOT EXISTS "task_runs_run" ON "pipeledger"."task_runs" (run_id);
CREATE TABLE IF NOT EXISTS "pipeledger"."audit_events" (event_id text PRIMARY KEY, run_id text, pipeline text, event_type text NOT NULL, target_table text, record_count bigint, old_values jsonb, new_values jsonb, metadata jsonb, created_at timestamptz NOT NULL);
CREATE INDEX IF NOT EXISTS "audit_events_target" ON "pipeledger"."audit_events" (target_table, created_at);
CREATE INDEX IF NOT EXISTS "audit_events_run" ON "pipeledger"."audit_events" (run_id);
CREATE TABLE IF NOT EXISTS "pipeledger"."dataset_snapshots" (run_id text NOT NULL, target_table text NOT NULL, row_count bigint NOT NULL, max_cursor text, schema_fingerprint text NOT NULL, columns jsonb NOT NULL, created_at timestamptz NOT NULL, PRIMARY KEY (run_id, target_table));
CREATE INDEX IF NOT EXISTS "dataset_snapshots_target" ON "pipeledger"."dataset_snapshots" (target_table, created_at);
CREATE TABLE IF NOT EXISTS "pipeledger"."pipeline_dependencies" (upstream text NOT NULL, downstream text NOT NULL, created_at timestamptz NOT NULL, PRIMARY KEY (upstream, downstream));
-- migration 2: quality gate results per run and check
CREATE TABLE IF NOT EXISTS "pipeledger"."quality_results" (result_id text PRIMARY KEY, run_id text NOT NULL, pipeline text NOT NULL, target_table text, check_name text NOT NULL, kind text NOT NULL, level text NOT NULL, status text NOT NULL, observed text, expected text, failing_rows bigint, sample_keys jsonb, created_at timestamptz NOT NULL);
CREATE INDEX IF NOT EXISTS "quality_results_run" ON "pipeledger"."quality_results" (run_id);
CREATE INDEX IF NOT EXISTS "quality_results_pipeline" ON "pipeledger"."quality_results" (pipeline, created_at);
-- migration 3: task trends by time
CREATE INDEX IF NOT EXISTS "task_runs_started" ON "pipeledger"."task_runs" (started_at);
-- migration 4: foreign keys: runs to pipelines; tasks, events, snapshots and results to runs
INSERT INTO "pipeledger"."pipelines" (name, version, created_at, updated_at) SELECT pipeline, 'unregistered', min(started_at), min(started_at) FROM "pipeledger"."pipeline_runs" WHERE pipeline NOT IN (SELECT name FROM "pipeledger"."pipelines") GROUP BY pipeline;
DELETE FROM "pipeledger"."task_runs" WHERE run_id NOT IN (SELECT run_id FROM "pipeledger"."pipeline_runs");
DELETE FROM "pipeledger"."audit_events" WHERE run_id IS NOT NULL AND run_id NOT IN (SELECT run_id FROM "pipeledger"."pipeline_runs");
DELETE FROM "pipeledger"."dataset_snapshots" WHERE run_id NOT IN (SELECT run_id FROM "pipeledger"."pipeline_runs");
DELETE FROM "pipeledger"."quality_results" WHERE run_id NOT IN (SELECT run_id FROM "pipeledger"."pipeline_runs");
ALTER TABLE "pipeledger"."pipeline_runs" ADD CONSTRAINT "pipeline_runs_pipeline_fkey" FOREIGN KEY (pipeline) REFERENCES "pipeledger"."pipelines" (name) NOT VALID;
ALTER TABLE "pipeledger"."pipeline_runs" VALIDATE CONSTRAINT "pipeline_runs_pipeline_fkey";
ALTER TABLE "pipeledger"."task_runs" ADD CONSTRAINT "task_runs_run_id_fkey" FOREIGN KEY (run_id) REFERENCES "pipeledger"."pipeline_runs" (run_id) NOT VALID;
ALTER TABLE "pipeledger"."task_runs" VALIDATE CONSTRAINT "task_runs_run_id_fkey";
ALTER TABLE "pipeledger"."audit_events" ADD CONSTRAINT "audit_events_run_id_fkey" FOREIGN KEY (run_id) REFERENCES "pipeledger"."pipeline_runs" (run_id) NOT VALID;
ALTER TABLE "pipeledger"."audit_events" VALIDATE CONSTRAINT "audit_events_run_id_fkey";
ALTER TABLE "pipeledger"."dataset_snapshots" ADD CONSTRAINT "dataset_snapshots_run_id_fkey" FOREIGN KEY (run_id) REFERENCES "pipeledger"."pipeline_runs" (run_id) NOT VALID;
ALTER TABLE "pipeledger"."dataset_snapshots" VALIDATE CONSTRAINT "dataset_snapshots_run_id_fkey";
ALTER TABLE "pipeledger"."quality_results" ADD CONSTRAINT "quality_results_run_id_fkey" FOREIGN KEY (run_id) REFERENCES "pipeledger"."pipeline_runs" (run_id) NOT VALID;
ALTER TABLE "pipeledger"."quality_results" VALIDATE CONSTRAINT "quality_results_run_id_fkey";
-- migration 5: idempotency keys of runs; cancel requests
ALTER TABLE "pipeledger"."pipeline_runs" ADD COLUMN idempotency_key text;
CREATE UNIQUE INDEX IF NOT EXISTS pipeline_runs_idempotency ON "pipeledger"."pipeline_runs" (pipeline, idempotency_key) WHERE idempotency_key IS NOT NULL AND status IN ('running', 'success', 'partial');
CREATE TABLE IF NOT EXISTS "pipeledger"."run_cancellations" (run_id text PRIMARY KEY, requested_at timestamptz NOT NULL, requested_by text, reason text, FOREIGN KEY (run_id) REFERENCES "pipeledger"."pipeline_runs" (run_id) ON DELETE CASCADE);
-- migration 6: daily rollups of the runs (kept by triggers), alerts, SLA breaches, max_duration
CREATE TABLE IF NOT EXISTS "pipeledger"."pipeline_days" (pipeline text NOT NULL, day text NOT NULL, finished bigint NOT NULL, succeeded bigint NOT NULL, success_rows bigint NOT NULL, samples bigint NOT NULL, sample_rows bigint NOT NULL, sample_squares numeric NOT NULL, PRIMARY KEY (pipeline, day));
INSERT INTO "pipeledger"."pipeline_days" (pipeline, day, finished, succeeded, success_rows, samples, sample_rows, sample_squares) SELECT r.pipeline, to_char(r.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), sum(1), sum(CASE WHEN r.status = 'success' THEN 1 ELSE 0 END), sum(CASE WHEN r.status = 'success' THEN (COALESCE(r.rows_inserted, 0) + COALESCE(r.rows_updated, 0)) ELSE 0 END), sum(CASE WHEN (r.status IN ('success', 'partial') AND r.trigger_type NOT IN ('backfill', 'replay', 'reconcile') AND NOT ((COALESCE(r.rows_inserted, 0) + COALESCE(r.rows_updated, 0)) = 0 AND NOT (r.watermark_after IS DISTINCT FROM r.watermark_before))) THEN 1 ELSE 0 END), sum(CASE WHEN (r.status IN ('success', 'partial') AND r.trigger_type NOT IN ('backfill', 'replay', 'reconcile') AND NOT ((COALESCE(r.rows_inserted, 0) + COALESCE(r.rows_updated, 0)) = 0 AND NOT (r.watermark_after IS DISTINCT FROM r.watermark_before))) THEN (COALESCE(r.rows_inserted, 0) + COALESCE(r.rows_updated, 0)) ELSE 0 END), sum(CASE WHEN (r.status IN ('success', 'partial') AND r.trigger_type NOT IN ('backfill', 'replay', 'reconcile') AND NOT ((COALESCE(r.rows_inserted, 0) + COALESCE(r.rows_updated, 0)) = 0 AND NOT (r.watermark_after IS DISTINCT FROM r.watermark_before))) THEN CAST((COALESCE(r.rows_inserted, 0) + COALESCE(r.rows_updated, 0)) AS numeric) * (COALESCE(r.rows_inserted, 0) + COALESCE(r.rows_updated, 0)) ELSE 0 END) FROM "pipeledger"."pipeline_runs" r WHERE r.status NOT IN ('running', 'skipped') AND r.trigger_type <> 'reconcile' GROUP BY r.pipeline, to_char(r.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD');
CREATE OR REPLACE FUNCTION "pipeledger"."roll_up_run"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO "pipeledger"."pipeline_days" AS t (pipeline, day, finished, succeeded, success_rows, samples, sample_rows, sample_squares) VALUES (NEW.pipeline, to_char(NEW.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), 1, CASE WHEN NEW.status = 'success' THEN 1 ELSE 0 END, CASE WHEN NEW.status = 'success' THEN (COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) ELSE 0 END, CASE WHEN (NEW.status IN ('success', 'partial') AND NEW.trigger_type NOT IN ('backfill', 'replay', 'reconcile') AND NOT ((COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) = 0 AND NOT (NEW.watermark_after IS DISTINCT FROM NEW.watermark_before))) THEN 1 ELSE 0 END, CASE WHEN (NEW.status IN ('success', 'partial') AND NEW.trigger_type NOT IN ('backfill', 'replay', 'reconcile') AND NOT ((COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) = 0 AND NOT (NEW.watermark_after IS DISTINCT FROM NEW.watermark_before))) THEN (COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) ELSE 0 END, CASE WHEN (NEW.status IN ('success', 'partial') AND NEW.trigger_type NOT IN ('backfill', 'replay', 'reconcile') AND NOT ((COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) = 0 AND NOT (NEW.watermark_after IS DISTINCT FROM NEW.watermark_before))) THEN CAST((COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) AS numeric) * (COALESCE(NEW.rows_inserted, 0) + COALESCE(NEW.rows_updated, 0)) ELSE 0 END) ON CONFLICT (pipeline, day) DO UPDATE SET finished = t.finished + excluded.finished, succeeded = t.succeeded + excluded.succeeded, success_rows = t.success_rows + excluded.success_rows, samples = t.samples + excluded.samples, sample_rows = t.sample_rows + excluded.sample_rows, sample_squares = t.sample_squares + excluded.sample_squares; RETURN NULL; END $$;
CREATE TRIGGER "pipeline_runs_roll_up_insert" AFTER INSERT ON "pipeledger"."pipeline_runs" FOR EACH ROW WHEN ((NEW.status NOT IN ('running', 'skipped') AND NEW.trigger_type <> 'reconcile')) EXECUTE PROCEDURE "pipeledger"."roll_up_run"();
CREATE TRIGGER "pipeline_runs_roll_up_update" AFTER UPDATE OF status ON "pipeledger"."pipeline_runs" FOR EACH ROW WHEN (OLD.status = 'running' AND (NEW.status NOT IN ('running', 'skipped') AND NEW.trigger_type <> 'reconcile')) EXECUTE PROCEDURE "pipeledger"."roll_up_run"();
CREATE INDEX IF NOT EXISTS "pipeline_runs_ended" ON "pipeledger"."pipeline_runs" (ended_at);
CREATE TABLE IF NOT EXISTS "pipeledger"."alerts" (alert_key text NOT NULL, webhook text NOT NULL, event text NOT NULL, pipeline text, run_id text, reason text NOT NULL, payload jsonb NOT NULL, status text NOT NULL, attempts integer NOT NULL, created_at timestamptz NOT NULL, next_attempt_at timestamptz NOT NULL, last_attempt_at timestamptz, delivered_at timestamptz, last_error text, PRIMARY KEY (alert_key, webhook));
CREATE INDEX IF NOT EXISTS "alerts_due" ON "pipeledger"."alerts" (status, next_attempt_at);
CREATE INDEX IF NOT EXISTS "alerts_created" ON "pipeledger"."alerts" (created_at);
CREATE TABLE IF NOT EXISTS "pipeledger"."sla_breaches" (breach_id text PRIMARY KEY, pipeline text NOT NULL, kind text NOT NULL, run_id text, due_at timestamptz NOT NULL, detected_at timestamptz NOT NULL, ended_at timestamptz, sla_s bigint NOT NULL, reason text NOT NULL);
CREATE INDEX IF NOT EXISTS "sla_breaches_due" ON "pipeledger"."sla_breaches" (due_at);
CREATE UNIQUE INDEX IF NOT EXISTS "sla_breaches_open" ON "pipeledger"."sla_breaches" (pipeline, kind) WHERE ended_at IS NULL;
ALTER TABLE "pipeledger"."pipelines" ADD COLUMN max_duration_s bigint;
-- migration 7: rows deleted per run
ALTER TABLE "pipeledger"."pipeline_runs" ADD COLUMN rows_deleted bigint;
-- migration 8: reconciliations: what each reconcile run found
CREATE TABLE IF NOT EXISTS "pipeledger"."reconciliations" (run_id text PRIMARY KEY, pipeline text NOT NULL, target_table text NOT NULL, status text NOT NULL, range_start text, range_end text, window_by text NOT NULL, windows_compared bigint NOT NULL, windows_differing bigint NOT NULL, source_rows bigint NOT NULL, target_rows bigint NOT NULL, missing_rows bigint NOT NULL, extra_rows bigint NOT NULL, changed_rows bigint NOT NULL, windows jsonb NOT NULL, created_at timestamptz NOT NULL, FOREIGN KEY (run_id) REFERENCES "pipeledger"."pipeline_runs" (run_id));
CREATE INDEX IF NOT EXISTS "reconciliations_pipeline" ON "pipeledger"."reconciliations" (pipeline, created_at);
-- migration 9: indexes for reading: runs by DAG run, runs by time with what windows sum
CREATE INDEX IF NOT EXISTS "pipeline_runs_correlation" ON "pipeledger"."pipeline_runs" (correlation_id) WHERE correlation_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS "pipeline_runs_window" ON "pipeledger"."pipeline_runs" (started_at, pipeline, status, trigger_type, run_id, ended_at, duration_ms);
