-- Golden SQL of pipeledger.state.guard_sql on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: fingerprint_guard_table
CREATE TABLE IF NOT EXISTS "pipeledger.fingerprint_guards" (target text PRIMARY KEY, trigger_version text NOT NULL, since text NOT NULL);

-- case: renewed_guard_table
DROP TABLE IF EXISTS "pipeledger.fingerprint_guards";
CREATE TABLE "pipeledger.fingerprint_guards" (target text PRIMARY KEY, trigger_version text NOT NULL, since text NOT NULL);

-- case: forget_hash_trigger
CREATE TRIGGER IF NOT EXISTS "_pipeledger_forget_row_hash:analytics.orders" AFTER UPDATE ON "analytics.orders" FOR EACH ROW WHEN NEW."_pipeledger_row_hash" IS NOT NULL AND NEW."_pipeledger_row_hash" IS OLD."_pipeledger_row_hash" BEGIN UPDATE "analytics.orders" SET "_pipeledger_row_hash" = NULL WHERE rowid = NEW.rowid; END;

-- case: trigger_version
SELECT 'sqlite' FROM sqlite_master WHERE type = 'trigger' AND name = ? COLLATE NOCASE;
-- params: ['_pipeledger_forget_row_hash:analytics.orders']

-- case: without_rowid
SELECT 1 FROM pragma_table_list WHERE name = ? COLLATE NOCASE AND wr = 1;

-- case: guard_key
-- (no statement on this dialect)

-- case: read_guard_row
SELECT trigger_version, since FROM "pipeledger.fingerprint_guards" WHERE target = ?;

-- case: record_guard
INSERT INTO "pipeledger.fingerprint_guards" (target, trigger_version, since) VALUES (?, ?, ?) ON CONFLICT (target) DO UPDATE SET trigger_version = excluded.trigger_version, since = excluded.since;

-- case: newest_load
SELECT max("_pipeledger_loaded_at") FROM "analytics.orders";

-- case: lock_against_writers
-- (no statement on this dialect)
