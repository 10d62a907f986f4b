-- Golden SQL of pipeledger.state.tables on PostgreSQL, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: state_migrations
-- migration 1: watermark state per pipeline and partition
CREATE SCHEMA IF NOT EXISTS pipeledger;
CREATE TABLE IF NOT EXISTS "pipeledger"."pipeline_state" (pipeline text NOT NULL, partition_key text NOT NULL, cursor_column text NOT NULL, cursor_type text NOT NULL, watermark text NOT NULL, run_id text NOT NULL, updated_at timestamptz NOT NULL, PRIMARY KEY (pipeline, partition_key));
-- migration 2: trigger function: an outside UPDATE clears the row's fingerprint
CREATE OR REPLACE FUNCTION "pipeledger"."forget_row_hash"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW."_pipeledger_row_hash" := NULL; RETURN NEW; END $$;
-- migration 3: fingerprint guards: which trigger guards a target, and since when
CREATE TABLE IF NOT EXISTS "pipeledger"."fingerprint_guards" (target text PRIMARY KEY, trigger_version text NOT NULL, since timestamptz NOT NULL);
CREATE OR REPLACE FUNCTION "pipeledger"."forget_row_hash"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW."_pipeledger_row_hash" := NULL; RETURN NEW; END $$;
-- migration 4: fingerprint guards replace a guards table of an earlier shape
DROP TABLE IF EXISTS "pipeledger"."fingerprint_guards";
CREATE TABLE "pipeledger"."fingerprint_guards" (target text PRIMARY KEY, trigger_version text NOT NULL, since timestamptz NOT NULL);
-- migration 5: commit log: one row per run that committed, in the run's transaction
CREATE TABLE IF NOT EXISTS "pipeledger"."run_commits" (run_id text PRIMARY KEY, pipeline text NOT NULL, target text, committed_at timestamptz NOT NULL, ledger_ops text);
CREATE INDEX IF NOT EXISTS "run_commits_pipeline" ON "pipeledger"."run_commits" (pipeline, committed_at);
-- migration 6: models: which upstream runs each model consumed
CREATE TABLE IF NOT EXISTS "pipeledger"."model_inputs" (model text NOT NULL, run_id text NOT NULL, upstream text NOT NULL, consumed_by text NOT NULL, consumed_at timestamptz NOT NULL, PRIMARY KEY (model, run_id));
CREATE INDEX IF NOT EXISTS "run_commits_target" ON "pipeledger"."run_commits" (target, committed_at);
-- migration 7: lateness: files each pipeline has read, late rows already counted
CREATE TABLE IF NOT EXISTS "pipeledger"."files_read" (pipeline text NOT NULL, path text NOT NULL, size bigint NOT NULL, mtime_ns bigint NOT NULL, first_run_id text NOT NULL, read_at timestamptz NOT NULL, PRIMARY KEY (pipeline, path, size, mtime_ns));
CREATE TABLE IF NOT EXISTS "pipeledger"."late_rows" (pipeline text NOT NULL, row_hash bigint NOT NULL, lateness_s bigint NOT NULL, run_id text NOT NULL, found_at timestamptz NOT NULL, PRIMARY KEY (pipeline, row_hash));

-- case: read_state
SELECT partition_key, watermark, cursor_type FROM "pipeledger"."pipeline_state" WHERE pipeline = %s;

-- case: read_all_state
SELECT pipeline, partition_key, cursor_column, cursor_type, watermark, run_id, updated_at FROM "pipeledger"."pipeline_state" ORDER BY pipeline, partition_key;

-- case: watermark_moved_at
SELECT max(updated_at) FROM "pipeledger"."pipeline_state" WHERE pipeline = %s;

-- case: write_state
INSERT INTO "pipeledger"."pipeline_state" (pipeline, partition_key, cursor_column, cursor_type, watermark, run_id, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (pipeline, partition_key) DO UPDATE SET cursor_column = excluded.cursor_column, cursor_type = excluded.cursor_type, watermark = excluded.watermark, run_id = excluded.run_id, updated_at = excluded.updated_at;

-- case: insert_commit
INSERT INTO "pipeledger"."run_commits" (run_id, pipeline, target, committed_at, ledger_ops) VALUES (%s, %s, %s, %s, %s);

-- case: select_commits of two runs
SELECT run_id, ledger_ops FROM "pipeledger"."run_commits" WHERE run_id IN (%s, %s);

-- case: pending_runs of one upstream
SELECT c.run_id, c.target FROM "pipeledger"."run_commits" AS c WHERE c.target IN (%s) AND NOT EXISTS (SELECT 1 FROM "pipeledger"."model_inputs" AS m WHERE m.model = %s AND m.run_id = c.run_id) ORDER BY c.committed_at, c.run_id;

-- case: record_input
INSERT INTO "pipeledger"."model_inputs" (model, run_id, upstream, consumed_by, consumed_at) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (model, run_id) DO NOTHING;
