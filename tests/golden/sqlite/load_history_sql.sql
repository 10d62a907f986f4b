-- Golden SQL of pipeledger.publish.scd2_sql on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: create_repeats
CREATE TABLE IF NOT EXISTS "pipeledger.repeats__analytics__orders" ("order_id" bigint, "updated_at" timestamptz, "_pipeledger_tombstone" integer NOT NULL, PRIMARY KEY ("order_id", "updated_at"));

-- case: clear_repeats
DELETE FROM "pipeledger.repeats__analytics__orders";

-- case: fill_affected
INSERT INTO temp."_pipeledger_affected" ("order_id", "_pipeledger_since") SELECT "order_id", min(n."updated_at") FROM (SELECT "order_id", "updated_at" FROM temp."_pipeledger_items" WHERE "_pipeledger_origin" = 1) AS n GROUP BY "order_id";

-- case: fill_affected with the keys a snapshot lacks
INSERT INTO temp."_pipeledger_affected" ("order_id", "_pipeledger_since") SELECT "order_id", min(n."updated_at") FROM (SELECT "order_id", "updated_at" FROM temp."_pipeledger_items" WHERE "_pipeledger_origin" = 1 UNION ALL SELECT "order_id", ? FROM temp."_pipeledger_vanished") AS n GROUP BY "order_id";

-- case: stored_versions
INSERT INTO temp."_pipeledger_items" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_tombstone", "_pipeledger_origin") SELECT t."order_id", t."region", t."amount", t."status", t."updated_at", t."_pipeledger_row_hash", 0, 0 FROM "analytics.orders" AS t WHERE t."order_id" IN (SELECT "order_id" FROM temp."_pipeledger_affected");

-- case: stored_deletions
INSERT INTO temp."_pipeledger_items" ("order_id", "updated_at", "_pipeledger_tombstone", "_pipeledger_origin") SELECT t."order_id", t."valid_to", 1, 0 FROM "analytics.orders" AS t WHERE t."valid_to" IS NOT NULL AND t."order_id" IN (SELECT "order_id" FROM temp."_pipeledger_affected") AND NOT EXISTS (SELECT 1 FROM "analytics.orders" AS n WHERE n."order_id" = t."order_id" AND n."valid_from" = t."valid_to");

-- case: stored_repeats
INSERT INTO temp."_pipeledger_items" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_tombstone", "_pipeledger_origin") SELECT r."order_id", t."region", t."amount", t."status", r."updated_at", r."_pipeledger_tombstone", 0 FROM "pipeledger.repeats__analytics__orders" AS r JOIN temp."_pipeledger_affected" AS a ON a."order_id" = r."order_id" AND r."updated_at" >= a."_pipeledger_since" LEFT JOIN "analytics.orders" AS t ON r."_pipeledger_tombstone" = 0 AND t."order_id" = r."order_id" AND t."valid_from" <= r."updated_at" AND (t."valid_to" IS NULL OR r."updated_at" < t."valid_to");

-- case: staged_items of a delete marker pipeline
INSERT INTO temp."_pipeledger_items" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_tombstone", "_pipeledger_origin") SELECT s."order_id", s."region", s."amount", s."status", s."updated_at", s."_pipeledger_row_hash", CASE WHEN s."_pipeledger_deleted" THEN 1 ELSE 0 END, 1 FROM "_pipeledger_stage" AS s WHERE s."_pipeledger_deleted" OR NOT EXISTS (SELECT 1 FROM "analytics.orders" AS t WHERE t."order_id" = s."order_id" AND t."valid_from" = s."updated_at" AND t."is_current" AND NOT ((t."region", t."amount", t."status", t."updated_at") IS NOT (s."region", s."amount", s."status", s."updated_at")));

-- case: staged_items without markers
INSERT INTO temp."_pipeledger_items" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_tombstone", "_pipeledger_origin") SELECT s."order_id", s."region", s."amount", s."status", s."updated_at", s."_pipeledger_row_hash", 0, 1 FROM "_pipeledger_stage" AS s WHERE NOT EXISTS (SELECT 1 FROM "analytics.orders" AS t WHERE t."order_id" = s."order_id" AND t."valid_from" = s."updated_at" AND t."is_current" AND NOT ((t."region", t."amount", t."status", t."updated_at") IS NOT (s."region", s."amount", s."status", s."updated_at")));

-- case: snapshot_deletions
INSERT INTO temp."_pipeledger_items" ("order_id", "updated_at", "_pipeledger_tombstone", "_pipeledger_origin") SELECT v."order_id", ?, 1, 2 FROM temp."_pipeledger_vanished" AS v;

-- case: withdraw_deletions
DELETE FROM temp."_pipeledger_items" AS i WHERE i."_pipeledger_tombstone" = 1 AND i."_pipeledger_origin" = 0 AND EXISTS (SELECT 1 FROM temp."_pipeledger_items" AS s WHERE s."_pipeledger_origin" = 1 AND s."_pipeledger_tombstone" = 0 AND s."order_id" = i."order_id" AND s."updated_at" <= i."updated_at");

-- case: order_items under on_conflict=update
INSERT INTO temp."_pipeledger_ordered" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_tombstone", "_pipeledger_origin", "_pipeledger_kept") SELECT m."order_id", m."region", m."amount", m."status", m."updated_at", m."_pipeledger_row_hash", m."_pipeledger_tombstone", m."_pipeledger_origin", CASE WHEN (m."_pipeledger_tombstone" = 1 AND m.prev_tomb = 0) OR (m."_pipeledger_tombstone" = 0 AND (m.prev_tomb IS NULL OR m.prev_tomb = 1 OR m.prev_text <> m.this_text)) THEN 1 ELSE 0 END FROM (SELECT c."order_id", c."region", c."amount", c."status", c."updated_at", c."_pipeledger_row_hash", c."_pipeledger_tombstone", c."_pipeledger_origin", (quote(c."region") || ',' || quote(c."amount") || ',' || quote(c."status")) AS this_text, lag(c."_pipeledger_tombstone") OVER w AS prev_tomb, lag((quote(c."region") || ',' || quote(c."amount") || ',' || quote(c."status"))) OVER w AS prev_text FROM (SELECT i.*, row_number() OVER (PARTITION BY "order_id", "updated_at" ORDER BY "_pipeledger_tombstone" DESC, "_pipeledger_tombstone" * "_pipeledger_origin", "_pipeledger_origin" DESC) AS pick FROM temp."_pipeledger_items" AS i) AS c WHERE c.pick = 1 WINDOW w AS (PARTITION BY c."order_id" ORDER BY c."updated_at")) AS m;

-- case: order_items under on_conflict=newer_wins
INSERT INTO temp."_pipeledger_ordered" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_tombstone", "_pipeledger_origin", "_pipeledger_kept") SELECT m."order_id", m."region", m."amount", m."status", m."updated_at", m."_pipeledger_row_hash", m."_pipeledger_tombstone", m."_pipeledger_origin", CASE WHEN (m."_pipeledger_tombstone" = 1 AND m.prev_tomb = 0) OR (m."_pipeledger_tombstone" = 0 AND (m.prev_tomb IS NULL OR m.prev_tomb = 1 OR m.prev_text <> m.this_text)) THEN 1 ELSE 0 END FROM (SELECT c."order_id", c."region", c."amount", c."status", c."updated_at", c."_pipeledger_row_hash", c."_pipeledger_tombstone", c."_pipeledger_origin", (quote(c."region") || ',' || quote(c."amount") || ',' || quote(c."status")) AS this_text, lag(c."_pipeledger_tombstone") OVER w AS prev_tomb, lag((quote(c."region") || ',' || quote(c."amount") || ',' || quote(c."status"))) OVER w AS prev_text FROM (SELECT i.*, row_number() OVER (PARTITION BY "order_id", "updated_at" ORDER BY "_pipeledger_tombstone" DESC, "_pipeledger_tombstone" * "_pipeledger_origin", (quote(i."region") || ',' || quote(i."amount") || ',' || quote(i."status") || ',' || quote(i."updated_at")) DESC, "_pipeledger_origin") AS pick FROM temp."_pipeledger_items" AS i) AS c WHERE c.pick = 1 WINDOW w AS (PARTITION BY c."order_id" ORDER BY c."updated_at")) AS m;

-- case: order_items under on_conflict=ignore
INSERT INTO temp."_pipeledger_ordered" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_tombstone", "_pipeledger_origin", "_pipeledger_kept") SELECT m."order_id", m."region", m."amount", m."status", m."updated_at", m."_pipeledger_row_hash", m."_pipeledger_tombstone", m."_pipeledger_origin", CASE WHEN (m."_pipeledger_tombstone" = 1 AND m.prev_tomb = 0) OR (m."_pipeledger_tombstone" = 0 AND (m.prev_tomb IS NULL OR m.prev_tomb = 1 OR m.prev_text <> m.this_text)) THEN 1 ELSE 0 END FROM (SELECT c."order_id", c."region", c."amount", c."status", c."updated_at", c."_pipeledger_row_hash", c."_pipeledger_tombstone", c."_pipeledger_origin", (quote(c."region") || ',' || quote(c."amount") || ',' || quote(c."status")) AS this_text, lag(c."_pipeledger_tombstone") OVER w AS prev_tomb, lag((quote(c."region") || ',' || quote(c."amount") || ',' || quote(c."status"))) OVER w AS prev_text FROM (SELECT i.*, row_number() OVER (PARTITION BY "order_id", "updated_at" ORDER BY "_pipeledger_tombstone" DESC, "_pipeledger_tombstone" * "_pipeledger_origin", "_pipeledger_origin") AS pick FROM temp."_pipeledger_items" AS i) AS c WHERE c.pick = 1 WINDOW w AS (PARTITION BY c."order_id" ORDER BY c."updated_at")) AS m;

-- case: resolve_history
INSERT INTO temp."_pipeledger_history" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "_pipeledger_tombstone", "_pipeledger_origin", "valid_to") SELECT o."order_id", o."region", o."amount", o."status", o."updated_at", o."_pipeledger_row_hash", o."_pipeledger_tombstone", o."_pipeledger_origin", lead(o."updated_at") OVER (PARTITION BY o."order_id" ORDER BY o."updated_at") FROM temp."_pipeledger_ordered" AS o WHERE o."_pipeledger_kept" = 1;

-- case: history_index
CREATE INDEX temp."_pipeledger_history_key" ON "_pipeledger_history" ("order_id", "updated_at");

-- case: count_changes
SELECT coalesce(sum(CASE WHEN h."_pipeledger_tombstone" = 0 AND NOT EXISTS (SELECT 1 FROM "analytics.orders" AS t WHERE t."order_id" = h."order_id" AND t."valid_from" = h."updated_at") THEN 1 ELSE 0 END), 0), coalesce(sum(CASE WHEN h."_pipeledger_origin" = 1 AND (h."_pipeledger_tombstone" = 1 OR NOT EXISTS (SELECT 1 FROM "analytics.orders" AS t WHERE t."order_id" = h."order_id" AND t."valid_from" = h."updated_at" AND NOT ((t."region", t."amount", t."status", t."updated_at") IS NOT (h."region", h."amount", h."status", h."updated_at")))) THEN 1 ELSE 0 END), 0), coalesce(sum(CASE WHEN h."_pipeledger_tombstone" = 1 AND h."_pipeledger_origin" <> 0 THEN 1 ELSE 0 END), 0) FROM temp."_pipeledger_history" AS h;

-- case: delete_where of the rewritten versions
DELETE FROM "analytics.orders" WHERE rowid IN (SELECT rowid FROM "analytics.orders" AS t WHERE t."order_id" IN (SELECT "order_id" FROM temp."_pipeledger_affected") AND NOT EXISTS (SELECT 1 FROM temp."_pipeledger_history" AS h WHERE h."_pipeledger_tombstone" = 0 AND t."order_id" = h."order_id" AND t."valid_from" = h."updated_at" AND NOT (h."valid_to" IS NOT t."valid_to") AND NOT ((h."region", h."amount", h."status", h."updated_at") IS NOT (t."region", t."amount", t."status", t."updated_at"))));

-- case: insert_versions
INSERT INTO "analytics.orders" ("order_id", "region", "amount", "status", "updated_at", "_pipeledger_row_hash", "valid_from", "valid_to", "is_current", "_pipeledger_run_id", "_pipeledger_loaded_at") SELECT h."order_id", h."region", h."amount", h."status", h."updated_at", h."_pipeledger_row_hash", h."updated_at", h."valid_to", h."valid_to" IS NULL, ?, ? FROM temp."_pipeledger_history" AS h WHERE h."_pipeledger_tombstone" = 0 AND NOT EXISTS (SELECT 1 FROM "analytics.orders" AS t WHERE t."order_id" = h."order_id" AND t."valid_from" = h."updated_at");

-- case: forget_repeats
DELETE FROM "pipeledger.repeats__analytics__orders" AS x WHERE EXISTS (SELECT 1 FROM temp."_pipeledger_affected" AS a WHERE a."order_id" = x."order_id" AND x."updated_at" >= a."_pipeledger_since");

-- case: keep_repeats
INSERT INTO "pipeledger.repeats__analytics__orders" ("order_id", "updated_at", "_pipeledger_tombstone") SELECT o."order_id", o."updated_at", o."_pipeledger_tombstone" FROM temp."_pipeledger_ordered" AS o WHERE o."_pipeledger_kept" = 0;

-- case: broken_history
SELECT v."order_id", count(*) OVER () FROM (SELECT t."order_id", t."updated_at" AS cursor_value, t."valid_from", t."valid_to", t."is_current", lead(t."valid_from") OVER (PARTITION BY t."order_id" ORDER BY t."valid_from") AS next_from FROM "analytics.orders" AS t WHERE t."order_id" IN (SELECT "order_id" FROM temp."_pipeledger_affected")) AS v WHERE v."valid_from" <> v.cursor_value OR (v."valid_to" IS NULL) <> v."is_current" OR v."valid_to" <= v."valid_from" OR (v.next_from IS NOT NULL AND (v."valid_to" IS NULL OR v."valid_to" > v.next_from)) LIMIT 5;
