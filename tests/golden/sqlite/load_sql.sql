-- Golden SQL of pipeledger.publish.merge_sql on SQLite, for the inputs in
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

-- case: add_primary_key after a bulk insert
CREATE UNIQUE INDEX "analytics.orders_pkey" ON "analytics.orders" ("order_id");

-- case: add_column for schema drift
ALTER TABLE "analytics.orders" ADD COLUMN "discount" DECIMAL_TEXT(5,2);

-- case: add_column if missing
ALTER TABLE "analytics.orders" ADD COLUMN "note" text;

-- case: insert_new into a target this run created
INSERT INTO "analytics.orders" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", ?, ? FROM "_pipeledger_stage";

-- case: create_promotable_stage
DROP TABLE IF EXISTS temp."_pipeledger_stage_unique";
DROP TABLE IF EXISTS temp."_pipeledger_stage";
CREATE TABLE main."_pipeledger_stage" ("order_id" bigint, "region" text, "amount" DECIMAL_TEXT(12,2), "status" text, "updated_at" timestamptz NOT NULL, "_pipeledger_run_id" text NOT NULL DEFAULT '6f1c7f0e-3c55-4b7e-9a55-0c6f1b0d2a11', "_pipeledger_loaded_at" timestamptz NOT NULL DEFAULT '2024-06-15T12:00:00.000000+00:00');

-- case: create_promotable_stage of a policy that updates rows
DROP TABLE IF EXISTS temp."_pipeledger_stage_unique";
DROP TABLE IF EXISTS temp."_pipeledger_stage";
CREATE TABLE main."_pipeledger_stage" ("order_id" bigint, "region" text, "amount" DECIMAL_TEXT(12,2), "status" text, "updated_at" timestamptz NOT NULL, "_pipeledger_run_id" text NOT NULL DEFAULT '6f1c7f0e-3c55-4b7e-9a55-0c6f1b0d2a11', "_pipeledger_loaded_at" timestamptz NOT NULL DEFAULT '2024-06-15T12:00:00.000000+00:00');

-- case: promote_stage into the target
DROP INDEX IF EXISTS main."_pipeledger_stage_key_ca13a6b2";
ALTER TABLE main."_pipeledger_stage" RENAME TO "analytics.orders";
PRAGMA writable_schema = ON;
UPDATE sqlite_master SET sql = replace(replace(sql, ' DEFAULT ''6f1c7f0e-3c55-4b7e-9a55-0c6f1b0d2a11''', ''), ' DEFAULT ''2024-06-15T12:00:00.000000+00:00''', '') WHERE type = 'table' AND name = 'analytics.orders';
PRAGMA writable_schema = RESET;
CREATE UNIQUE INDEX "analytics.orders_pkey" ON "analytics.orders" ("order_id");

-- case: drop_promotable_stage
DROP TABLE main."_pipeledger_stage";

-- case: table_extent of a target
SELECT coalesce(min(rowid), 0), coalesce(max(rowid), -1) + 1, 1 FROM "analytics.orders";

-- case: stored_hashes_within a range of the target's storage
SELECT "_pipeledger_row_hash" FROM "analytics.orders" WHERE "updated_at" >= ? AND "_pipeledger_row_hash" IS NOT NULL AND "_pipeledger_loaded_at" >= ? AND rowid >= ? AND rowid < ?;

-- case: staged_key_hashes
SELECT t."_pipeledger_row_hash" FROM (SELECT * FROM "analytics.orders" WHERE "updated_at" >= ? AND "_pipeledger_row_hash" IS NOT NULL AND "_pipeledger_loaded_at" >= ?) AS t JOIN "_pipeledger_stage" AS s ON t."order_id" = s."order_id";

-- case: restage_from_target of three fingerprints
INSERT INTO "_pipeledger_stage" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash") SELECT t."order_id", t."region", t."amount", t."status", t."updated_at", t."_pipeledger_row_hash" FROM (SELECT DISTINCT "order_id" FROM "_pipeledger_stage") AS s JOIN "analytics.orders" AS t ON t."order_id" = s."order_id" WHERE t."_pipeledger_row_hash" IN (?, ?, ?);

-- case: duplicate_keys
SELECT 1 FROM "_pipeledger_stage" GROUP BY "order_id" HAVING count(*) > 1 LIMIT 1;

-- case: duplicate_keys of a composite key
SELECT 1 FROM "_pipeledger_stage" GROUP BY "order_id", "region" HAVING count(*) > 1 LIMIT 1;

-- case: dedupe_stage
CREATE TEMP TABLE "_pipeledger_stage_unique" AS SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash" FROM (SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", row_number() OVER (PARTITION BY "order_id" ORDER BY "updated_at" DESC, (quote(s."region") || ',' || quote(s."amount") || ',' || quote(s."status") || ',' || quote(s."updated_at")) DESC) AS rn FROM "_pipeledger_stage" AS s) AS ranked WHERE rn = 1;

-- case: dedupe_stage of a snapshot without a cursor
CREATE TEMP TABLE "_pipeledger_stage_unique" AS SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash" FROM (SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", row_number() OVER (PARTITION BY "order_id" ORDER BY (quote(s."region") || ',' || quote(s."amount") || ',' || quote(s."status") || ',' || quote(s."updated_at")) DESC) AS rn FROM "_pipeledger_stage" AS s) AS ranked WHERE rn = 1;

-- case: create_target without a cursor
CREATE TABLE "analytics.orders" (
  "order_id" bigint NOT NULL,
  "region" text,
  "amount" DECIMAL_TEXT(12,2),
  "status" text,
  "updated_at" timestamptz,
  "_pipeledger_row_hash" bigint,
  "_pipeledger_run_id" text NOT NULL,
  "_pipeledger_loaded_at" timestamptz NOT NULL,
  PRIMARY KEY ("order_id")
);

-- case: conflicting_rows under on_conflict=error
SELECT s."order_id", count(*) OVER () FROM "_pipeledger_stage" AS s JOIN "analytics.orders" AS t ON t."order_id" = s."order_id" WHERE (t."region", t."amount", t."status", t."updated_at") IS NOT (s."region", s."amount", s."status", s."updated_at") LIMIT 5;

-- case: conflicting_duplicates under on_conflict=error
SELECT "order_id", count(*) OVER () FROM "_pipeledger_stage" AS s GROUP BY "order_id" HAVING count(DISTINCT (quote(s."region") || ',' || quote(s."amount") || ',' || quote(s."status") || ',' || quote(s."updated_at"))) > 1 LIMIT 5;

-- case: count_new_keys
SELECT count(*) FROM "_pipeledger_stage" AS s WHERE NOT EXISTS (SELECT 1 FROM "analytics.orders" AS t WHERE t."order_id" = s."order_id");

-- case: merge under on_conflict=update
INSERT INTO "analytics.orders" AS t ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", ?, ? FROM "_pipeledger_stage" AS s WHERE true ON CONFLICT ("order_id") DO UPDATE SET "region" = excluded."region", "amount" = excluded."amount", "status" = excluded."status", "updated_at" = excluded."updated_at", "_pipeledger_row_hash" = excluded."_pipeledger_row_hash", "_pipeledger_run_id" = excluded."_pipeledger_run_id", "_pipeledger_loaded_at" = excluded."_pipeledger_loaded_at" WHERE (t."region", t."amount", t."status", t."updated_at") IS NOT (excluded."region", excluded."amount", excluded."status", excluded."updated_at");

-- case: merge under on_conflict=newer_wins
INSERT INTO "analytics.orders" AS t ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", ?, ? FROM "_pipeledger_stage" AS s WHERE true ON CONFLICT ("order_id") DO UPDATE SET "region" = excluded."region", "amount" = excluded."amount", "status" = excluded."status", "updated_at" = excluded."updated_at", "_pipeledger_row_hash" = excluded."_pipeledger_row_hash", "_pipeledger_run_id" = excluded."_pipeledger_run_id", "_pipeledger_loaded_at" = excluded."_pipeledger_loaded_at" WHERE excluded."updated_at" > t."updated_at" OR (excluded."updated_at" = t."updated_at" AND (t."region", t."amount", t."status", t."updated_at") IS NOT (excluded."region", excluded."amount", excluded."status", excluded."updated_at") AND (quote(excluded."region") || ',' || quote(excluded."amount") || ',' || quote(excluded."status") || ',' || quote(excluded."updated_at")) > (quote(t."region") || ',' || quote(t."amount") || ',' || quote(t."status") || ',' || quote(t."updated_at")));

-- case: merge under on_conflict=ignore
INSERT INTO "analytics.orders" AS t ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", ?, ? FROM "_pipeledger_stage" AS s WHERE true ON CONFLICT ("order_id") DO NOTHING;

-- case: merge under on_conflict=error
INSERT INTO "analytics.orders" AS t ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", ?, ? FROM "_pipeledger_stage" AS s WHERE true ON CONFLICT ("order_id") DO NOTHING;

-- case: merge of a composite key into a target without fingerprints
INSERT INTO "analytics.orders" AS t ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT "order_id", "region", "amount", "status", "updated_at", ?, ? FROM "_pipeledger_stage" AS s WHERE true ON CONFLICT ("order_id", "region") DO UPDATE SET "amount" = excluded."amount", "status" = excluded."status", "updated_at" = excluded."updated_at", "_pipeledger_run_id" = excluded."_pipeledger_run_id", "_pipeledger_loaded_at" = excluded."_pipeledger_loaded_at" WHERE excluded."updated_at" > t."updated_at" OR (excluded."updated_at" = t."updated_at" AND (t."amount", t."status", t."updated_at") IS NOT (excluded."amount", excluded."status", excluded."updated_at") AND (quote(excluded."amount") || ',' || quote(excluded."status") || ',' || quote(excluded."updated_at")) > (quote(t."amount") || ',' || quote(t."status") || ',' || quote(t."updated_at")));

-- case: merge unfiltered (an incremental batch) under on_conflict=newer_wins
INSERT INTO "analytics.orders" AS t ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", ?, ? FROM "_pipeledger_stage" AS s WHERE true ON CONFLICT ("order_id") DO UPDATE SET "region" = excluded."region", "amount" = excluded."amount", "status" = excluded."status", "updated_at" = excluded."updated_at", "_pipeledger_row_hash" = excluded."_pipeledger_row_hash", "_pipeledger_run_id" = excluded."_pipeledger_run_id", "_pipeledger_loaded_at" = excluded."_pipeledger_loaded_at" WHERE excluded."updated_at" > t."updated_at" OR (excluded."updated_at" = t."updated_at" AND (t."region", t."amount", t."status", t."updated_at") IS NOT (excluded."region", excluded."amount", excluded."status", excluded."updated_at") AND (quote(excluded."region") || ',' || quote(excluded."amount") || ',' || quote(excluded."status") || ',' || quote(excluded."updated_at")) > (quote(t."region") || ',' || quote(t."amount") || ',' || quote(t."status") || ',' || quote(t."updated_at")));

-- case: create_target of an SCD2 history
CREATE TABLE "analytics.orders" (
  "order_id" bigint NOT NULL,
  "region" text,
  "amount" DECIMAL_TEXT(12,2),
  "status" text,
  "updated_at" timestamptz NOT NULL,
  "valid_from" timestamptz NOT NULL,
  "valid_to" timestamptz,
  "is_current" boolean NOT NULL,
  "_pipeledger_row_hash" bigint,
  "_pipeledger_run_id" text NOT NULL,
  "_pipeledger_loaded_at" timestamptz NOT NULL,
  PRIMARY KEY ("order_id", "valid_from")
);

-- case: create_target of a soft-deleting pipeline
CREATE TABLE "analytics.orders" (
  "order_id" bigint NOT NULL,
  "region" text,
  "amount" DECIMAL_TEXT(12,2),
  "status" text,
  "updated_at" timestamptz NOT NULL,
  "_pipeledger_deleted_at" timestamptz,
  "_pipeledger_row_hash" bigint,
  "_pipeledger_run_id" text NOT NULL,
  "_pipeledger_loaded_at" timestamptz NOT NULL,
  PRIMARY KEY ("order_id")
);

-- case: create_temp of the keys a snapshot lacks
DROP TABLE IF EXISTS temp."_pipeledger_vanished";
CREATE TEMP TABLE "_pipeledger_vanished" ("order_id" bigint);

-- case: dedupe_stage of a delete marker pipeline
CREATE TEMP TABLE "_pipeledger_stage_unique" AS SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_deleted" FROM (SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_deleted", row_number() OVER (PARTITION BY "order_id" ORDER BY "updated_at" DESC, "_pipeledger_deleted" DESC, (quote(s."region") || ',' || quote(s."amount") || ',' || quote(s."status") || ',' || quote(s."updated_at")) DESC) AS rn FROM "_pipeledger_stage" AS s) AS ranked WHERE rn = 1;

-- case: dedupe_stage of an SCD2 history (one row per key and cursor)
CREATE TEMP TABLE "_pipeledger_stage_unique" AS SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash" FROM (SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", row_number() OVER (PARTITION BY "order_id", "updated_at" ORDER BY "updated_at" DESC, (quote(s."region") || ',' || quote(s."amount") || ',' || quote(s."status") || ',' || quote(s."updated_at")) DESC) AS rn FROM "_pipeledger_stage" AS s) AS ranked WHERE rn = 1;

-- case: merge of a delete marker pipeline that soft-deletes
INSERT INTO "analytics.orders" AS t ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", ?, ? FROM "_pipeledger_stage" AS s WHERE NOT s."_pipeledger_deleted" ON CONFLICT ("order_id") DO UPDATE SET "region" = excluded."region", "amount" = excluded."amount", "status" = excluded."status", "updated_at" = excluded."updated_at", "_pipeledger_row_hash" = excluded."_pipeledger_row_hash", "_pipeledger_deleted_at" = NULL, "_pipeledger_run_id" = excluded."_pipeledger_run_id", "_pipeledger_loaded_at" = excluded."_pipeledger_loaded_at" WHERE excluded."updated_at" > t."updated_at" OR (excluded."updated_at" = t."updated_at" AND (t."region", t."amount", t."status", t."updated_at") IS NOT (excluded."region", excluded."amount", excluded."status", excluded."updated_at") AND (quote(excluded."region") || ',' || quote(excluded."amount") || ',' || quote(excluded."status") || ',' || quote(excluded."updated_at")) > (quote(t."region") || ',' || quote(t."amount") || ',' || quote(t."status") || ',' || quote(t."updated_at"))) OR t."_pipeledger_deleted_at" IS NOT NULL;

-- case: merge under on_conflict=ignore of a soft-deleting pipeline
INSERT INTO "analytics.orders" AS t ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT "order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", ?, ? FROM "_pipeledger_stage" AS s WHERE NOT s."_pipeledger_deleted" ON CONFLICT ("order_id") DO UPDATE SET "region" = excluded."region", "amount" = excluded."amount", "status" = excluded."status", "updated_at" = excluded."updated_at", "_pipeledger_row_hash" = excluded."_pipeledger_row_hash", "_pipeledger_deleted_at" = NULL, "_pipeledger_run_id" = excluded."_pipeledger_run_id", "_pipeledger_loaded_at" = excluded."_pipeledger_loaded_at" WHERE t."_pipeledger_deleted_at" IS NOT NULL;

-- case: count_new_keys of a delete marker pipeline
SELECT count(*) FROM "_pipeledger_stage" AS s WHERE NOT s."_pipeledger_deleted" AND NOT EXISTS (SELECT 1 FROM "analytics.orders" AS t WHERE t."order_id" = s."order_id");

-- case: conflicting_rows of a soft-deleting marker pipeline
SELECT s."order_id", count(*) OVER () FROM "_pipeledger_stage" AS s JOIN "analytics.orders" AS t ON t."order_id" = s."order_id" WHERE (t."region", t."amount", t."status", t."updated_at") IS NOT (s."region", s."amount", s."status", s."updated_at") AND NOT s."_pipeledger_deleted" AND t."_pipeledger_deleted_at" IS NULL LIMIT 5;

-- case: conflicting_duplicates of a delete marker pipeline
SELECT "order_id", count(*) OVER () FROM "_pipeledger_stage" AS s WHERE NOT s."_pipeledger_deleted" GROUP BY "order_id" HAVING count(DISTINCT (quote(s."region") || ',' || quote(s."amount") || ',' || quote(s."status") || ',' || quote(s."updated_at"))) > 1 LIMIT 5;

-- case: delete_where of the rows staged deletes mark
DELETE FROM "analytics.orders" WHERE rowid IN (SELECT rowid FROM "analytics.orders" AS t WHERE t."order_id" IN (SELECT "order_id" FROM "_pipeledger_stage" WHERE "_pipeledger_deleted") AND EXISTS (SELECT 1 FROM "_pipeledger_stage" AS s WHERE t."order_id" = s."order_id" AND s."_pipeledger_deleted" AND s."updated_at" >= t."updated_at"));

-- case: delete_where under on_conflict=update
DELETE FROM "analytics.orders" WHERE rowid IN (SELECT rowid FROM "analytics.orders" AS t WHERE t."order_id" IN (SELECT "order_id" FROM "_pipeledger_stage" WHERE "_pipeledger_deleted"));

-- case: soft_delete_where of the keys a snapshot lacks
UPDATE "analytics.orders" AS t SET "_pipeledger_run_id" = ?, "_pipeledger_loaded_at" = ?, "_pipeledger_deleted_at" = ? WHERE t."_pipeledger_deleted_at" IS NULL AND t."order_id" IN (SELECT "order_id" FROM temp."_pipeledger_vanished");

-- case: find_vanished in a backfill's range
INSERT INTO temp."_pipeledger_vanished" ("order_id") SELECT t."order_id" FROM "analytics.orders" AS t WHERE "updated_at" >= ? AND NOT EXISTS (SELECT 1 FROM "_pipeledger_stage" AS s WHERE t."order_id" = s."order_id");

-- case: find_vanished of an SCD2 history
INSERT INTO temp."_pipeledger_vanished" ("order_id") SELECT t."order_id" FROM "analytics.orders" AS t WHERE 1=1 AND t."is_current" AND NOT EXISTS (SELECT 1 FROM "_pipeledger_stage" AS s WHERE t."order_id" = s."order_id");

-- case: unstaged_keys of a table of candidate keys
INSERT INTO temp."_pipeledger_unstaged" ("order_id") SELECT k."order_id" FROM candidate_keys AS k WHERE NOT EXISTS (SELECT 1 FROM "_pipeledger_stage" AS s WHERE s."order_id" = k."order_id");

-- case: find_vanished_among the unstaged keys, looked up in the target
INSERT INTO temp."_pipeledger_vanished" ("order_id") SELECT u."order_id" FROM temp."_pipeledger_unstaged" AS u WHERE EXISTS (SELECT 1 FROM "analytics.orders" AS t WHERE t."order_id" = u."order_id");

-- case: count_in_scope of a soft-deleting pipeline
SELECT (SELECT count(*) FROM "analytics.orders" AS t WHERE 1=1 AND t."_pipeledger_deleted_at" IS NULL), (SELECT count(*) FROM temp."_pipeledger_vanished");

-- case: count_vanished
SELECT count(*) FROM temp."_pipeledger_vanished";

-- case: sample_vanished
SELECT "order_id" FROM temp."_pipeledger_vanished" ORDER BY "order_id" LIMIT 5;
