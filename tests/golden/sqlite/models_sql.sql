-- Golden SQL of pipeledger.runs.model.sql on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: stage_model with a condition
INSERT INTO "_pipeledger_stage" ("order_id", "region", "amount", "status", "updated_at") SELECT CAST(q."order_id" AS INTEGER), CAST(q."region" AS TEXT), CASE WHEN q."amount" IS NULL THEN NULL ELSE printf('%.2f', q."amount") END, CAST(q."status" AS TEXT), q."updated_at" FROM (SELECT * FROM "analytics.orders") AS q WHERE q."region" = 'eu';

-- case: stage_model binding a parameter: the query's % is passed on as it is
INSERT INTO "_pipeledger_stage" ("order_id", "region", "amount", "status", "updated_at") SELECT CAST(q."order_id" AS INTEGER), CAST(q."region" AS TEXT), CASE WHEN q."amount" IS NULL THEN NULL ELSE printf('%.2f', q."amount") END, CAST(q."status" AS TEXT), q."updated_at" FROM (SELECT * FROM "analytics.orders" WHERE "status" LIKE 'ship%' /* 5% */) AS q WHERE q."region" = ?;

-- case: touched partitions
SELECT DISTINCT q."region" FROM (SELECT * FROM "analytics.orders") AS q;

-- case: create_touched keys
CREATE TEMP TABLE "_pipeledger_touched" AS SELECT DISTINCT q."order_id", q."region" FROM (SELECT * FROM "analytics.orders") AS q;

-- case: in_touched
SELECT 1 FROM "analytics.orders" AS q WHERE (q."order_id", q."region") IN (SELECT "order_id", "region" FROM temp."_pipeledger_touched");

-- case: in_touched_unstaged
SELECT 1 FROM "analytics.orders" AS t WHERE (t."order_id", t."region") IN (SELECT k."order_id", k."region" FROM temp."_pipeledger_touched" AS k WHERE NOT EXISTS (SELECT 1 FROM "_pipeledger_stage" AS s WHERE s."order_id" = k."order_id" AND s."region" = k."region"));

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

-- case: create_dropped: target keys in scope that no staged row repeats
CREATE TEMP TABLE "_pipeledger_dropped" AS SELECT t."order_id", CASE WHEN EXISTS (SELECT 1 FROM "_pipeledger_stage" AS s WHERE s."order_id" = t."order_id") THEN 1 ELSE 0 END AS kept FROM "analytics.orders" AS t WHERE (t."region" = 'eu') AND NOT EXISTS (SELECT 1 FROM "_pipeledger_stage" AS s WHERE s."order_id" = t."order_id" AND NOT ((s."region", s."amount", s."status", s."updated_at") IS NOT (t."region", t."amount", t."status", t."updated_at")));

-- case: delete the dropped keys
DELETE FROM "analytics.orders" WHERE rowid IN (SELECT rowid FROM "analytics.orders" AS t WHERE t."order_id" IN (SELECT "order_id" FROM temp."_pipeledger_dropped"));

-- case: count_dropped
SELECT coalesce(sum(CASE WHEN kept = 1 THEN 1 ELSE 0 END), 0), coalesce(sum(CASE WHEN kept = 0 THEN 1 ELSE 0 END), 0) FROM temp."_pipeledger_dropped";

-- case: insert_staged whose key the target lacks in scope
INSERT INTO "analytics.orders" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT s."order_id", s."region", s."amount", s."status", s."updated_at", ?, ? FROM "_pipeledger_stage" AS s WHERE NOT EXISTS (SELECT 1 FROM "analytics.orders" AS t WHERE t."order_id" = s."order_id" AND (1 = 1));

-- case: repeated_keys
SELECT "order_id", count(*) FROM "_pipeledger_stage" GROUP BY "order_id" HAVING count(*) > 1 LIMIT 1;

-- case: null_cursor
SELECT "order_id", count(*) OVER () FROM "_pipeledger_stage" WHERE "updated_at" IS NULL LIMIT 1;

-- case: pair_rows_setup
CREATE INDEX IF NOT EXISTS temp."_pipeledger_stage_rows" ON "_pipeledger_stage" ("order_id", "region", "amount", "status", "updated_at");
DROP TABLE IF EXISTS temp."_pipeledger_pairs";

-- case: pair_rows: each target row in scope with an equal staged row
CREATE TEMP TABLE "_pipeledger_pairs" AS SELECT t.rowid AS target_row, (SELECT s.rowid FROM "_pipeledger_stage" AS s WHERE s."order_id" IS t."order_id" AND s."region" IS t."region" AND s."amount" IS t."amount" AND s."status" IS t."status" AND s."updated_at" IS t."updated_at" LIMIT 1) AS stage_row FROM "analytics.orders" AS t WHERE 1 = 1;

-- case: delete the unpaired target rows
DELETE FROM "analytics.orders" WHERE rowid IN (SELECT rowid FROM "analytics.orders" AS t WHERE t.rowid IN (SELECT target_row FROM temp."_pipeledger_pairs" WHERE stage_row IS NULL));

-- case: count_restaged: unpaired target rows whose key is staged
SELECT count(*) FROM "analytics.orders" AS t WHERE t.rowid IN (SELECT target_row FROM temp."_pipeledger_pairs" WHERE stage_row IS NULL) AND EXISTS (SELECT 1 FROM "_pipeledger_stage" AS s WHERE s."order_id" = t."order_id");

-- case: insert the unpaired staged rows
INSERT INTO "analytics.orders" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT s."order_id", s."region", s."amount", s."status", s."updated_at", ?, ? FROM "_pipeledger_stage" AS s WHERE s.rowid NOT IN (SELECT stage_row FROM temp."_pipeledger_pairs" WHERE stage_row IS NOT NULL);

-- case: prune_before_images that two models consumed
DELETE FROM "pipeledger.before__analytics__orders" WHERE "_pipeledger_replaced_by" IN (SELECT m.run_id FROM "pipeledger.model_inputs" AS m WHERE m.model IN (?, ?) GROUP BY m.run_id HAVING count(*) = 2);
-- params: ['silver', 'gold']

-- case: relation_kind of a target
SELECT type FROM sqlite_master WHERE name = ? AND type IN ('table', 'view');
-- params: ['analytics.orders']

-- case: create_view
DROP VIEW IF EXISTS "analytics.orders_view";
CREATE VIEW "analytics.orders_view" AS SELECT * FROM "analytics.orders";
