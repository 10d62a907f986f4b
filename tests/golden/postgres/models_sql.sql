-- Golden SQL of pipeledger.runs.model.sql on PostgreSQL, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: written_by two runs (PostgreSQL text, rewritten into the model's query)
SELECT "order_id", "region", "amount", "status", "updated_at" FROM "analytics"."orders" WHERE "_pipeledger_run_id" IN ('6f1c7f0e-3c55-4b7e-9a55-0c6f1b0d2a11', '0b8e6a2c-1d5f-4c3a-8e7d-2f4a6b8c0d1e');

-- case: written_by one run, its rows whose key is not NULL
SELECT "order_id", "region", "amount", "status", "updated_at" FROM "analytics"."orders" WHERE "_pipeledger_run_id" IN ('6f1c7f0e-3c55-4b7e-9a55-0c6f1b0d2a11') AND "order_id" IS NOT NULL;

-- case: unique_columns of the target (its unique indexes' columns)
SELECT i.indexrelid::bigint, a.attname::text FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(%s) AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL;

-- case: replaced_by two runs, one column not kept
SELECT "order_id", "region", "amount", "status", NULL AS "updated_at" FROM "pipeledger"."before__analytics__orders" WHERE "_pipeledger_replaced_by" IN ('6f1c7f0e-3c55-4b7e-9a55-0c6f1b0d2a11');

-- case: stage_model with a condition
INSERT INTO "_pipeledger_stage" ("order_id", "region", "amount", "status", "updated_at") SELECT CAST(q."order_id" AS bigint), CAST(q."region" AS text), CAST(q."amount" AS numeric(12,2)), CAST(q."status" AS text), CAST(q."updated_at" AS timestamptz) FROM (SELECT * FROM "analytics"."orders") AS q WHERE q."region" = 'eu';

-- case: stage_model binding a parameter: the query's % is passed on as it is
INSERT INTO "_pipeledger_stage" ("order_id", "region", "amount", "status", "updated_at") SELECT CAST(q."order_id" AS bigint), CAST(q."region" AS text), CAST(q."amount" AS numeric(12,2)), CAST(q."status" AS text), CAST(q."updated_at" AS timestamptz) FROM (SELECT * FROM "analytics"."orders" WHERE "status" LIKE 'ship%%' /* 5%% */) AS q WHERE q."region" = %s;

-- case: touched partitions
SELECT DISTINCT q."region" FROM (SELECT * FROM "analytics"."orders") AS q;

-- case: create_touched keys
CREATE TEMP TABLE "_pipeledger_touched" ON COMMIT DROP AS SELECT DISTINCT q."order_id", q."region" FROM (SELECT * FROM "analytics"."orders") AS q;

-- case: in_touched
SELECT 1 FROM "analytics"."orders" AS q WHERE (q."order_id", q."region") IN (SELECT "order_id", "region" FROM "_pipeledger_touched");

-- case: in_touched_unstaged
SELECT 1 FROM "analytics"."orders" AS t WHERE (t."order_id", t."region") IN (SELECT k."order_id", k."region" FROM "_pipeledger_touched" AS k WHERE NOT EXISTS (SELECT 1 FROM "_pipeledger_stage" AS s WHERE s."order_id" = k."order_id" AND s."region" = k."region"));

-- case: in_values of three
SELECT 1 FROM "analytics"."orders" AS q WHERE q."region" = ANY(%s);

-- case: in_range of a date-only end
SELECT 1 FROM "analytics"."orders" AS q WHERE q."updated_at" >= %s AND q."updated_at" < %s;
-- params: [datetime.datetime(2024, 1, 1, 10, 0, tzinfo=datetime.timezone.utc), datetime.date(2024, 1, 8)]

-- case: insert_staged where the target lacks the row
INSERT INTO "analytics"."orders" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT s."order_id", s."region", s."amount", s."status", s."updated_at", %s, %s FROM "_pipeledger_stage" AS s WHERE NOT EXISTS (SELECT 1 FROM "analytics"."orders" AS t WHERE (ROW(t."order_id", t."region", t."amount", t."status", t."updated_at")::text COLLATE "C") = (ROW(s."order_id", s."region", s."amount", s."status", s."updated_at")::text COLLATE "C"));

-- case: create_model_target keyed by its partition
CREATE TABLE "analytics"."orders" ("day" date, "revenue" numeric(38,2), "_pipeledger_row_hash" bigint, "_pipeledger_run_id" text NOT NULL, "_pipeledger_loaded_at" timestamptz NOT NULL, PRIMARY KEY ("day"));

-- case: run_index
CREATE INDEX IF NOT EXISTS "pipeledger_run_99eebed3a19d" ON "analytics"."orders" ("_pipeledger_run_id");

-- case: create_dropped: target keys in scope that no staged row repeats
CREATE TEMP TABLE "_pipeledger_dropped" ON COMMIT DROP AS SELECT t."order_id", CASE WHEN EXISTS (SELECT 1 FROM "_pipeledger_stage" AS s WHERE s."order_id" = t."order_id") THEN 1 ELSE 0 END AS kept FROM "analytics"."orders" AS t WHERE (t."region" = 'eu') AND NOT EXISTS (SELECT 1 FROM "_pipeledger_stage" AS s WHERE s."order_id" = t."order_id" AND NOT ((s."region", s."amount", s."status", s."updated_at") IS DISTINCT FROM (t."region", t."amount", t."status", t."updated_at")));

-- case: delete the dropped keys
DELETE FROM "analytics"."orders" AS t WHERE t."order_id" IN (SELECT "order_id" FROM "_pipeledger_dropped");

-- case: count_dropped
SELECT count(*) FILTER (WHERE kept = 1), count(*) FILTER (WHERE kept = 0) FROM "_pipeledger_dropped";

-- case: insert_staged whose key the target lacks in scope
INSERT INTO "analytics"."orders" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT s."order_id", s."region", s."amount", s."status", s."updated_at", %s, %s FROM "_pipeledger_stage" AS s WHERE NOT EXISTS (SELECT 1 FROM "analytics"."orders" AS t WHERE t."order_id" = s."order_id" AND (1 = 1));

-- case: repeated_keys
SELECT "order_id", count(*) FROM "_pipeledger_stage" GROUP BY "order_id" HAVING count(*) > 1 LIMIT 1;

-- case: null_cursor
SELECT "order_id", count(*) OVER () FROM "_pipeledger_stage" WHERE "updated_at" IS NULL LIMIT 1;

-- case: prune_before_images that two models consumed
DELETE FROM "pipeledger"."before__analytics__orders" WHERE "_pipeledger_replaced_by" IN (SELECT m.run_id FROM "pipeledger"."model_inputs" AS m WHERE m.model IN (%s, %s) GROUP BY m.run_id HAVING count(*) = 2);
-- params: ['silver', 'gold']

-- case: relation_kind of a target
SELECT c.relkind FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s;
-- params: ['analytics', 'orders']

-- case: create_view
CREATE OR REPLACE VIEW "analytics"."orders_view" AS SELECT * FROM "analytics"."orders";
