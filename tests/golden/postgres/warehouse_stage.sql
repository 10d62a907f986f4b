-- Golden SQL of pipeledger.warehouse.stage on PostgreSQL, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: create_schema of the target
CREATE SCHEMA IF NOT EXISTS "analytics";

-- case: create_stage
CREATE TEMP TABLE "_pipeledger_stage" ("order_id" bigint, "region" text, "amount" numeric(12,2), "status" text, "updated_at" timestamptz, "_pipeledger_row_hash" bigint) ON COMMIT DROP;

-- case: drop_stage
-- (no statement on this dialect)

-- case: copy_stage as CSV
COPY "_pipeledger_stage" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash") FROM STDIN (FORMAT csv);

-- case: copy_stage as binary
COPY "_pipeledger_stage" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash") FROM STDIN (FORMAT binary);

-- case: insert_stage
INSERT INTO "_pipeledger_stage" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash") VALUES (%s, %s, %s, %s, %s, %s);

-- case: unique_key_index on the stage
CREATE UNIQUE INDEX IF NOT EXISTS "_pipeledger_stage_key_ca13a6b2" ON "_pipeledger_stage" ("order_id");

-- case: unique_key_index on the deduplicated stage
CREATE UNIQUE INDEX IF NOT EXISTS "_pipeledger_stage_key_ca13a6b2_unique" ON "_pipeledger_stage_unique" ("order_id");
