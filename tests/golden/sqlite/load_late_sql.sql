-- Golden SQL of pipeledger.runs.load.late_sql on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: files_read_table
CREATE TABLE IF NOT EXISTS "pipeledger.files_read" (pipeline text NOT NULL, path text NOT NULL, size integer NOT NULL, mtime_ns integer NOT NULL, first_run_id text NOT NULL, read_at text NOT NULL, PRIMARY KEY (pipeline, path, size, mtime_ns));

-- case: late_rows_table
CREATE TABLE IF NOT EXISTS "pipeledger.late_rows" (pipeline text NOT NULL, row_hash integer NOT NULL, lateness_s integer NOT NULL, run_id text NOT NULL, found_at text NOT NULL, PRIMARY KEY (pipeline, row_hash));

-- case: read_files
SELECT path, size, mtime_ns FROM "pipeledger.files_read" WHERE pipeline = ?;

-- case: record_file
INSERT INTO "pipeledger.files_read" (pipeline, path, size, mtime_ns, first_run_id, read_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (pipeline, path, size, mtime_ns) DO NOTHING;

-- case: counted_late of two fingerprints
SELECT row_hash FROM "pipeledger.late_rows" WHERE pipeline = ? AND row_hash IN (?, ?);

-- case: count_late of two rows
INSERT INTO "pipeledger.late_rows" (pipeline, row_hash, lateness_s, run_id, found_at) VALUES (?, ?, ?, ?, ?), (?, ?, ?, ?, ?) ON CONFLICT (pipeline, row_hash) DO NOTHING;

-- case: held_fingerprints below a cursor
SELECT s."_pipeledger_row_hash" FROM "_pipeledger_stage" AS s JOIN "analytics.orders" AS t ON t."order_id" = s."order_id" WHERE t."_pipeledger_row_hash" = s."_pipeledger_row_hash" AND s."updated_at" < ?;

-- case: unheld_rows of the stage below a cursor
SELECT c."_pipeledger_row_hash", c."updated_at" FROM "_pipeledger_stage" AS c WHERE "updated_at" < ? AND NOT EXISTS (SELECT 1 FROM "analytics.orders" AS t WHERE t."order_id" = c."order_id" AND (t."_pipeledger_row_hash" IS NULL OR t."_pipeledger_row_hash" = c."_pipeledger_row_hash" OR t."updated_at" > c."updated_at"));

-- case: keep_stage_as
ALTER TABLE "_pipeledger_stage" RENAME TO "_pipeledger_late";

-- case: drop_stage_table
DROP TABLE IF EXISTS "_pipeledger_stage";

-- case: restore_stage set aside
ALTER TABLE temp."_pipeledger_stage_aside" RENAME TO "_pipeledger_stage";
