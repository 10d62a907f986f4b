-- Golden SQL of pipeledger.publish.before on PostgreSQL, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: create_before_table
CREATE TABLE IF NOT EXISTS "pipeledger"."before__analytics__orders" ("order_id" bigint, "region" text, "amount" numeric(12,2), "status" text, "updated_at" timestamptz, "_pipeledger_run_id" text, "_pipeledger_loaded_at" timestamptz, "_pipeledger_row_hash" bigint, "_pipeledger_replaced_by" text NOT NULL);

-- case: keep_before_images of rows a newer staged row replaces
INSERT INTO "pipeledger"."before__analytics__orders" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_run_id", "_pipeledger_loaded_at", "_pipeledger_row_hash", "_pipeledger_replaced_by") SELECT t."order_id", t."region", t."amount", t."status", t."updated_at", t."_pipeledger_run_id", t."_pipeledger_loaded_at", t."_pipeledger_row_hash", %s FROM "analytics"."orders" AS t WHERE EXISTS (SELECT 1 FROM "_pipeledger_stage" AS s WHERE t."order_id" = s."order_id" AND (s."updated_at" > t."updated_at"));
-- params: ['6f1c7f0e-3c55-4b7e-9a55-0c6f1b0d2a11']

-- case: delete_keeping_before_images of the rows a staged key names, in one pass
WITH gone AS (DELETE FROM "analytics"."orders" AS t WHERE EXISTS (SELECT 1 FROM "_pipeledger_stage" AS s WHERE s."order_id" = t."order_id") RETURNING t."order_id", t."region", t."amount", t."status", t."updated_at", t."_pipeledger_run_id", t."_pipeledger_loaded_at", t."_pipeledger_row_hash") INSERT INTO "pipeledger"."before__analytics__orders" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_run_id", "_pipeledger_loaded_at", "_pipeledger_row_hash", "_pipeledger_replaced_by") SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_run_id", "_pipeledger_loaded_at", "_pipeledger_row_hash", %s FROM gone;
-- params: ['6f1c7f0e-3c55-4b7e-9a55-0c6f1b0d2a11']
