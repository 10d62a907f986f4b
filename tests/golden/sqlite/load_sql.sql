-- Golden SQL of pipeledger.load.sql on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: create_target with its primary key
CREATE TABLE "analytics.orders" (
  "order_id" bigint NOT NULL,
  "region" text,
  "amount" DECIMAL_TEXT(12,2),
  "status" text,
  "updated_at" timestamptz NOT NULL,
  "_pipeledger_row_hash" bigint,
  "_pipeledger_run_id" text NOT NULL,
  "_pipeledger_loaded_at" timestamptz NOT NULL,
  PRIMARY KEY ("order_id")
);

-- case: create_target with the primary key deferred
CREATE TABLE "analytics.orders" (
  "order_id" bigint NOT NULL,
  "region" text,
  "amount" DECIMAL_TEXT(12,2),
  "status" text,
  "updated_at" timestamptz NOT NULL,
  "_pipeledger_row_hash" bigint,
  "_pipeledger_run_id" text NOT NULL,
  "_pipeledger_loaded_at" timestamptz NOT NULL
);

-- case: add_column for schema drift
ALTER TABLE "analytics.orders" ADD COLUMN "discount" DECIMAL_TEXT(5,2);

-- case: add_column if missing
ALTER TABLE "analytics.orders" ADD COLUMN "note" text;

-- case: insert_new into a target this run created
INSERT INTO "analytics.orders" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", ?, ? FROM temp."_pipeledger_stage";

-- case: stored_hashes of a backfill window
SELECT "_pipeledger_row_hash" FROM "analytics.orders" WHERE "_pipeledger_row_hash" IS NOT NULL AND "updated_at" >= ? AND "_pipeledger_loaded_at" >= ? LIMIT ?;

-- case: staged_key_hashes
SELECT t."_pipeledger_row_hash" FROM "analytics.orders" AS t JOIN temp."_pipeledger_stage" AS s ON t."order_id" = s."order_id" WHERE t."_pipeledger_row_hash" IS NOT NULL;

-- case: restage_from_target of three fingerprints
INSERT INTO temp."_pipeledger_stage" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash") SELECT t."order_id", t."region", t."amount", t."status", t."updated_at", t."_pipeledger_row_hash" FROM (SELECT DISTINCT "order_id" FROM temp."_pipeledger_stage") AS s JOIN "analytics.orders" AS t ON t."order_id" = s."order_id" WHERE t."_pipeledger_row_hash" IN (?, ?, ?);

-- case: duplicate_keys
SELECT 1 FROM temp."_pipeledger_stage" GROUP BY "order_id" HAVING count(*) > 1 LIMIT 1;

-- case: duplicate_keys of a composite key
SELECT 1 FROM temp."_pipeledger_stage" GROUP BY "order_id", "region" HAVING count(*) > 1 LIMIT 1;

-- case: dedupe_stage
CREATE TEMP TABLE "_pipeledger_stage_unique" AS SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash" FROM (SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", row_number() OVER (PARTITION BY "order_id" ORDER BY "updated_at" DESC, (quote(s."region") || ',' || quote(s."amount") || ',' || quote(s."status") || ',' || quote(s."updated_at")) DESC) AS rn FROM temp."_pipeledger_stage" AS s) AS ranked WHERE rn = 1;

-- case: conflicting_rows under on_conflict=error
SELECT s."order_id", count(*) OVER () FROM temp."_pipeledger_stage" AS s JOIN "analytics.orders" AS t ON t."order_id" = s."order_id" WHERE (t."region", t."amount", t."status", t."updated_at") IS NOT (s."region", s."amount", s."status", s."updated_at") LIMIT 5;

-- case: conflicting_duplicates under on_conflict=error
SELECT "order_id", count(*) OVER () FROM temp."_pipeledger_stage" AS s GROUP BY "order_id" HAVING count(DISTINCT (quote(s."region") || ',' || quote(s."amount") || ',' || quote(s."status") || ',' || quote(s."updated_at"))) > 1 LIMIT 5;

-- case: count_new_keys
SELECT count(*) FROM temp."_pipeledger_stage" AS s WHERE NOT EXISTS (SELECT 1 FROM "analytics.orders" AS t WHERE t."order_id" = s."order_id");

-- case: merge under on_conflict=update
INSERT INTO "analytics.orders" AS t ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", ?, ? FROM temp."_pipeledger_stage" WHERE true ON CONFLICT ("order_id") DO UPDATE SET "region" = excluded."region", "amount" = excluded."amount", "status" = excluded."status", "updated_at" = excluded."updated_at", "_pipeledger_row_hash" = excluded."_pipeledger_row_hash", "_pipeledger_run_id" = excluded."_pipeledger_run_id", "_pipeledger_loaded_at" = excluded."_pipeledger_loaded_at" WHERE (t."region", t."amount", t."status", t."updated_at") IS NOT (excluded."region", excluded."amount", excluded."status", excluded."updated_at");

-- case: merge under on_conflict=newer_wins
INSERT INTO "analytics.orders" AS t ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", ?, ? FROM temp."_pipeledger_stage" WHERE true ON CONFLICT ("order_id") DO UPDATE SET "region" = excluded."region", "amount" = excluded."amount", "status" = excluded."status", "updated_at" = excluded."updated_at", "_pipeledger_row_hash" = excluded."_pipeledger_row_hash", "_pipeledger_run_id" = excluded."_pipeledger_run_id", "_pipeledger_loaded_at" = excluded."_pipeledger_loaded_at" WHERE excluded."updated_at" > t."updated_at" OR (excluded."updated_at" = t."updated_at" AND (t."region", t."amount", t."status", t."updated_at") IS NOT (excluded."region", excluded."amount", excluded."status", excluded."updated_at") AND (quote(excluded."region") || ',' || quote(excluded."amount") || ',' || quote(excluded."status") || ',' || quote(excluded."updated_at")) > (quote(t."region") || ',' || quote(t."amount") || ',' || quote(t."status") || ',' || quote(t."updated_at")));

-- case: merge under on_conflict=ignore
INSERT INTO "analytics.orders" AS t ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", ?, ? FROM temp."_pipeledger_stage" WHERE true ON CONFLICT ("order_id") DO NOTHING;

-- case: merge under on_conflict=error
INSERT INTO "analytics.orders" AS t ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", ?, ? FROM temp."_pipeledger_stage" WHERE true ON CONFLICT ("order_id") DO NOTHING;

-- case: merge of a composite key into a target without fingerprints
INSERT INTO "analytics.orders" AS t ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT "order_id", "region", "amount", "status", "updated_at", ?, ? FROM temp."_pipeledger_stage" WHERE true ON CONFLICT ("order_id", "region") DO UPDATE SET "amount" = excluded."amount", "status" = excluded."status", "updated_at" = excluded."updated_at", "_pipeledger_run_id" = excluded."_pipeledger_run_id", "_pipeledger_loaded_at" = excluded."_pipeledger_loaded_at" WHERE excluded."updated_at" > t."updated_at" OR (excluded."updated_at" = t."updated_at" AND (t."amount", t."status", t."updated_at") IS NOT (excluded."amount", excluded."status", excluded."updated_at") AND (quote(excluded."amount") || ',' || quote(excluded."status") || ',' || quote(excluded."updated_at")) > (quote(t."amount") || ',' || quote(t."status") || ',' || quote(t."updated_at")));
