-- Golden SQL of pipeledger.ledger.schema (migrations) on PostgreSQL, for the inputs in
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
-- migration 7: rows deleted per run
ALTER TABLE "pipeledger"."pipeline_runs" ADD COLUMN rows_deleted bigint;
-- migration 8: reconciliations: what each reconcile run found
CREATE TABLE IF NOT EXISTS "pipeledger"."reconciliations" (run_id text PRIMARY KEY, pipeline text NOT NULL, target_table text NOT NULL, status text NOT NULL, range_start text, range_end text, window_by text NOT NULL, windows_compared bigint NOT NULL, windows_differing bigint NOT NULL, source_rows bigint NOT NULL, target_rows bigint NOT NULL, missing_rows bigint NOT NULL, extra_rows bigint NOT NULL, changed_rows bigint NOT NULL, windows jsonb NOT NULL, created_at timestamptz NOT NULL, FOREIGN KEY (run_id) REFERENCES "pipeledger"."pipeline_runs" (run_id));
CREATE INDEX IF NOT EXISTS "reconciliations_pipeline" ON "pipeledger"."reconciliations" (pipeline, created_at);
