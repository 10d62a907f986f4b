-- Golden SQL of pipeledger.runs.model.sql on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: stage_model with a condition
INSERT INTO "_pipeledger_stage" ("order_id", "region", "amount", "status", "updated_at") SELECT CAST(q."order_id" AS INTEGER), CAST(q."region" AS TEXT), CASE WHEN q."amount" IS NULL THEN NULL ELSE printf('%.2f', q."amount") END, CAST(q."status" AS TEXT), q."updated_at" FROM (SELECT * FROM "analytics.orders") AS q WHERE q."region" = 'eu';

-- case: touched partitions
SELECT DISTINCT q."region" FROM (SELECT * FROM "analytics.orders") AS q;

-- case: create_touched keys
CREATE TEMP TABLE "_pipeledger_touched" AS SELECT DISTINCT q."order_id", q."region" FROM (SELECT * FROM "analytics.orders") AS q;

-- case: in_touched
SELECT 1 FROM "analytics.orders" AS q WHERE (q."order_id", q."region") IN (SELECT "order_id", "region" FROM temp."_pipeledger_touched");

-- case: in_values of three
SELECT 1 FROM "analytics.orders" AS q WHERE q."region" IN (?, ?, ?);

-- case: in_range of a date-only end
SELECT 1 FROM "analytics.orders" AS q WHERE q."updated_at" >= ? AND q."updated_at" < ?;
-- params: [datetime.datetime(2024, 1, 1, 10, 0, tzinfo=datetime.timezone.utc), datetime.date(2024, 1, 8)]

-- case: insert_staged where the target lacks the row
INSERT INTO "analytics.orders" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT s."order_id", s."region", s."amount", s."status", s."updated_at", ?, ? FROM "_pipeledger_stage" AS s WHERE NOT EXISTS (SELECT 1 FROM "analytics.orders" AS t WHERE (quote(t."order_id") || ',' || quote(t."region") || ',' || quote(t."amount") || ',' || quote(t."status") || ',' || quote(t."updated_at")) = (quote(s."order_id") || ',' || quote(s."region") || ',' || quote(s."amount") || ',' || quote(s."status") || ',' || quote(s."updated_at")));

-- case: create_model_target keyed by its partition
CREATE TABLE "analytics.orders" ("day" date, "revenue" DECIMAL_TEXT(38,2), "_pipeledger_row_hash" bigint, "_pipeledger_run_id" text NOT NULL, "_pipeledger_loaded_at" timestamptz NOT NULL, PRIMARY KEY ("day"));

-- case: run_index
CREATE INDEX IF NOT EXISTS "pipeledger_run_99eebed3a19d" ON "analytics.orders" ("_pipeledger_run_id");
