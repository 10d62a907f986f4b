-- Golden SQL of pipeledger.warehouse.stage on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: create_schema of the target
-- (no statement on this dialect)

-- case: create_stage
CREATE TEMP TABLE "_pipeledger_stage" ("order_id" bigint, "region" text, "amount" DECIMAL_TEXT(12,2), "status" text, "updated_at" timestamptz, "_pipeledger_row_hash" bigint);

-- case: drop_stage
DROP TABLE IF EXISTS temp."_pipeledger_stage_unique";
DROP TABLE IF EXISTS temp."_pipeledger_stage";

-- case: insert_stage
INSERT INTO "_pipeledger_stage" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash") VALUES (?, ?, ?, ?, ?, ?);

-- case: unique_key_index on the stage
CREATE UNIQUE INDEX IF NOT EXISTS "_pipeledger_stage_key_ca13a6b2" ON "_pipeledger_stage" ("order_id");
