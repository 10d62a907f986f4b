-- Golden SQL of pipeledger.runs.reconcile.sql on PostgreSQL, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: current_source by day
CREATE TEMP TABLE "_pipeledger_reconcile_source" ON COMMIT DROP AS SELECT v."order_id", v."updated_at", v."region", v."_pipeledger_row_hash", to_char(v."updated_at", 'YYYY-MM-DD') AS "_pipeledger_window", CASE WHEN v.n = 1 THEN 1 ELSE 0 END AS "_pipeledger_pick" FROM (SELECT "order_id", "updated_at", "region", "_pipeledger_row_hash", rank() OVER (PARTITION BY "order_id" ORDER BY "updated_at" DESC) AS r, row_number() OVER (PARTITION BY "order_id" ORDER BY "updated_at" DESC, "_pipeledger_row_hash" DESC) AS n FROM "_pipeledger_stage" WHERE "_pipeledger_side" = 's') AS v WHERE v.r = 1;
CREATE INDEX "_pipeledger_reconcile_source_key" ON "_pipeledger_reconcile_source" ("order_id");

-- case: current_source of a whole snapshot (no cursor)
CREATE TEMP TABLE "_pipeledger_reconcile_source" ON COMMIT DROP AS SELECT v."order_id", v."_pipeledger_row_hash", CAST('all' AS TEXT) AS "_pipeledger_window", CASE WHEN v.n = 1 THEN 1 ELSE 0 END AS "_pipeledger_pick" FROM (SELECT "order_id", "_pipeledger_row_hash", rank() OVER (PARTITION BY "order_id") AS r, row_number() OVER (PARTITION BY "order_id" ORDER BY "_pipeledger_row_hash" DESC) AS n FROM "_pipeledger_stage" WHERE "_pipeledger_side" = 's') AS v WHERE v.r = 1;
CREATE INDEX "_pipeledger_reconcile_source_key" ON "_pipeledger_reconcile_source" ("order_id");

-- case: source_windows
SELECT "_pipeledger_window", count(*), sum("_pipeledger_row_hash" >> 32) AS high, sum("_pipeledger_row_hash" & 4294967295) AS low FROM "_pipeledger_reconcile_source" WHERE "_pipeledger_pick" = 1 GROUP BY "_pipeledger_window";

-- case: unique_source_keys
CREATE UNIQUE INDEX "_pipeledger_reconcile_source_unique" ON "_pipeledger_stage" ("order_id") WHERE "_pipeledger_side" = 's';

-- case: staged_source_windows
SELECT to_char(v."updated_at", 'YYYY-MM-DD'), count(*), sum(v."_pipeledger_row_hash" >> 32) AS high, sum(v."_pipeledger_row_hash" & 4294967295) AS low FROM "_pipeledger_stage" AS v WHERE v."_pipeledger_side" = 's' GROUP BY to_char(v."updated_at", 'YYYY-MM-DD');

-- case: staged_source_windows of a whole snapshot (no cursor)
SELECT CAST('all' AS TEXT), count(*), sum(v."_pipeledger_row_hash" >> 32) AS high, sum(v."_pipeledger_row_hash" & 4294967295) AS low FROM "_pipeledger_stage" AS v WHERE v."_pipeledger_side" = 's' GROUP BY CAST('all' AS TEXT);

-- case: target_rows with stored fingerprints, up to the watermark
SELECT t."order_id", t."updated_at", t."region", to_char(t."updated_at", 'YYYY-MM-DD') AS "_pipeledger_window", t."_pipeledger_row_hash" AS "_pipeledger_row_hash" FROM (SELECT * FROM "analytics"."orders" WHERE "updated_at" <= %s) AS t;

-- case: target_rows with fingerprints made for rows without
SELECT t."order_id", t."updated_at", t."region", to_char(t."updated_at", 'YYYY-MM-DD') AS "_pipeledger_window", coalesce(t."_pipeledger_row_hash", f."_pipeledger_row_hash") AS "_pipeledger_row_hash" FROM (SELECT * FROM "analytics"."orders" WHERE 1=1) AS t LEFT JOIN (SELECT "order_id", "_pipeledger_row_hash" FROM "_pipeledger_stage" WHERE "_pipeledger_side" = 't') AS f ON f."order_id" = t."order_id";

-- case: target_windows
SELECT to_char(b.b, 'YYYY-MM-DD'), b.b, b.n, b.high, b.low FROM (SELECT v."_pipeledger_window" AS b, count(*) AS n, sum(v."_pipeledger_row_hash" >> 32) AS high, sum(v."_pipeledger_row_hash" & 4294967295) AS low FROM (SELECT t."order_id", t."updated_at", t."region", date_trunc('day', t."updated_at") AS "_pipeledger_window", t."_pipeledger_row_hash" AS "_pipeledger_row_hash" FROM (SELECT * FROM "analytics"."orders" WHERE 1=1) AS t) AS v GROUP BY v."_pipeledger_window") AS b;

-- case: create_fine_buckets of hours
CREATE TEMP TABLE "_pipeledger_reconcile_fine" ON COMMIT DROP AS SELECT date_trunc('hour', t."updated_at") AS b FROM "analytics"."orders" AS t WHERE 1 = 0;

-- case: insert_fine_buckets of two
INSERT INTO "_pipeledger_reconcile_fine" (b) VALUES (%s), (%s);

-- case: in_fine_buckets
SELECT 1 FROM "analytics"."orders" WHERE date_trunc('hour', "updated_at") IN (SELECT b FROM "_pipeledger_reconcile_fine");

-- case: missing_held_elsewhere
SELECT 1 FROM (SELECT "order_id" FROM "analytics"."orders" WHERE "updated_at" <= %s AND NOT (date_trunc('hour', "updated_at") IN (SELECT b FROM "_pipeledger_reconcile_fine"))) AS t JOIN "_pipeledger_reconcile_differences" AS x ON x."order_id" = t."order_id" WHERE x.kind = 'missing' LIMIT 1;

-- case: create_windows
CREATE TEMP TABLE "_pipeledger_reconcile_windows" ("_pipeledger_window" text) ON COMMIT DROP;

-- case: insert_windows of two
INSERT INTO "_pipeledger_reconcile_windows" ("_pipeledger_window") VALUES (%s), (%s);

-- case: keep_target_rows of the windows that differ
CREATE TEMP TABLE "_pipeledger_reconcile_target" ON COMMIT DROP AS SELECT * FROM (SELECT t."order_id", t."updated_at", t."region", to_char(t."updated_at", 'YYYY-MM-DD') AS "_pipeledger_window", t."_pipeledger_row_hash" AS "_pipeledger_row_hash" FROM (SELECT * FROM "analytics"."orders" WHERE 1=1) AS t) AS v WHERE v."_pipeledger_window" IN (SELECT "_pipeledger_window" FROM "_pipeledger_reconcile_windows");
CREATE INDEX "_pipeledger_reconcile_target_key" ON "_pipeledger_reconcile_target" ("order_id");

-- case: differences
CREATE TEMP TABLE "_pipeledger_reconcile_differences" ON COMMIT DROP AS SELECT 'missing' AS kind, s."_pipeledger_window" AS "_pipeledger_window", s."order_id", s."updated_at", s."region", s."_pipeledger_row_hash" FROM "_pipeledger_reconcile_source" AS s WHERE s."_pipeledger_pick" = 1 AND s."_pipeledger_window" IN (SELECT "_pipeledger_window" FROM "_pipeledger_reconcile_windows") AND NOT EXISTS (SELECT 1 FROM "_pipeledger_reconcile_target" AS t WHERE t."order_id" = s."order_id" AND t."_pipeledger_window" = s."_pipeledger_window") UNION ALL SELECT 'extra', t."_pipeledger_window", t."order_id", t."updated_at", t."region", t."_pipeledger_row_hash" FROM "_pipeledger_reconcile_target" AS t WHERE NOT EXISTS (SELECT 1 FROM "_pipeledger_reconcile_source" AS s WHERE t."order_id" = s."order_id" AND t."_pipeledger_window" = s."_pipeledger_window") UNION ALL SELECT 'changed', t."_pipeledger_window", s."order_id", s."updated_at", s."region", s."_pipeledger_row_hash" FROM "_pipeledger_reconcile_target" AS t JOIN "_pipeledger_reconcile_source" AS s ON t."order_id" = s."order_id" AND t."_pipeledger_window" = s."_pipeledger_window" AND s."_pipeledger_pick" = 1 WHERE NOT EXISTS (SELECT 1 FROM "_pipeledger_reconcile_source" AS o WHERE o."order_id" = t."order_id" AND o."_pipeledger_row_hash" = t."_pipeledger_row_hash");

-- case: differences_once: one join of the stage with the target
CREATE TEMP TABLE "_pipeledger_reconcile_differences" ON COMMIT DROP AS WITH j AS MATERIALIZED (SELECT s."order_id" AS "s_order_id", s."updated_at" AS "s_updated_at", s."region" AS "s_region", t."order_id" AS "t_order_id", t."updated_at" AS "t_updated_at", t."region" AS "t_region", to_char(s."updated_at", 'YYYY-MM-DD') AS sw, to_char(t."updated_at", 'YYYY-MM-DD') AS tw, s."_pipeledger_row_hash" AS sh, t."_pipeledger_row_hash" AS th FROM (SELECT "order_id", "updated_at", "region", "_pipeledger_row_hash" FROM "_pipeledger_stage" WHERE "_pipeledger_side" = 's') AS s FULL JOIN (SELECT t."order_id", t."updated_at", t."region", t."_pipeledger_row_hash" AS "_pipeledger_row_hash" FROM (SELECT * FROM "analytics"."orders" WHERE 1=1) AS t) AS t ON s."order_id" = t."order_id" WHERE s."order_id" IS NULL OR t."order_id" IS NULL OR s."_pipeledger_row_hash" <> t."_pipeledger_row_hash") SELECT 'missing' AS kind, j.sw AS "_pipeledger_window", j."s_order_id" AS "order_id", j."s_updated_at" AS "updated_at", j."s_region" AS "region", j.sh AS "_pipeledger_row_hash" FROM j WHERE j."s_order_id" IS NOT NULL AND (NOT j."t_order_id" IS NOT NULL OR j.sw <> j.tw) AND j.sw IN (SELECT "_pipeledger_window" FROM "_pipeledger_reconcile_windows") UNION ALL SELECT 'extra', j.tw, j."t_order_id", j."t_updated_at", j."t_region", j.th FROM j WHERE j."t_order_id" IS NOT NULL AND (NOT j."s_order_id" IS NOT NULL OR j.sw <> j.tw) AND j.tw IN (SELECT "_pipeledger_window" FROM "_pipeledger_reconcile_windows") UNION ALL SELECT 'changed', j.sw, j."s_order_id", j."s_updated_at", j."s_region", j.sh FROM j WHERE j."s_order_id" IS NOT NULL AND j."t_order_id" IS NOT NULL AND j.sw = j.tw AND j.sh <> j.th AND j.sw IN (SELECT "_pipeledger_window" FROM "_pipeledger_reconcile_windows");

-- case: count_differences
SELECT "_pipeledger_window", kind, count(*) FROM "_pipeledger_reconcile_differences" GROUP BY "_pipeledger_window", kind;

-- case: sample_keys, ten a window
SELECT v."_pipeledger_window", v."order_id" FROM (SELECT "_pipeledger_window", "order_id", row_number() OVER (PARTITION BY "_pipeledger_window" ORDER BY CASE kind WHEN 'missing' THEN 0 WHEN 'changed' THEN 1 ELSE 2 END, "order_id") AS n FROM "_pipeledger_reconcile_differences") AS v WHERE v.n <= 10 ORDER BY v."_pipeledger_window", v.n;

-- case: unhashed_count up to the watermark
SELECT count(*) FROM "analytics"."orders" WHERE "_pipeledger_row_hash" IS NULL AND "updated_at" <= %s;

-- case: unhashed_rows, the first page
SELECT "order_id", "region", "amount", "status", "updated_at" FROM "analytics"."orders" WHERE "_pipeledger_row_hash" IS NULL AND 1=1 ORDER BY "order_id" LIMIT 50000;

-- case: unhashed_rows, the page after a composite key
SELECT "order_id", "region", "amount", "status", "updated_at" FROM "analytics"."orders" WHERE "_pipeledger_row_hash" IS NULL AND 1=1 AND ("order_id", "region") > (%s, %s) ORDER BY "order_id", "region" LIMIT 50000;

-- case: cap_predicate of an unpartitioned pipeline
SELECT 1 FROM "analytics"."orders" WHERE "updated_at" <= %s;

-- case: cap_predicate of two partitions
SELECT 1 FROM "analytics"."orders" WHERE ((CAST("region" AS TEXT) = %s AND "updated_at" <= %s) OR (CAST("region" AS TEXT) = %s AND "updated_at" <= %s));
