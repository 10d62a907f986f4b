-- Golden SQL of pipeledger.state.guard_sql on PostgreSQL, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: forget_hash_function
CREATE OR REPLACE FUNCTION "pipeledger"."forget_row_hash"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW."_pipeledger_row_hash" := NULL; RETURN NEW; END $$;

-- case: fingerprint_guard_table
CREATE TABLE IF NOT EXISTS "pipeledger"."fingerprint_guards" (target text PRIMARY KEY, trigger_version text NOT NULL, since timestamptz NOT NULL);

-- case: renewed_guard_table
DROP TABLE IF EXISTS "pipeledger"."fingerprint_guards";
CREATE TABLE "pipeledger"."fingerprint_guards" (target text PRIMARY KEY, trigger_version text NOT NULL, since timestamptz NOT NULL);

-- case: forget_hash_trigger
CREATE TRIGGER "_pipeledger_forget_row_hash" BEFORE UPDATE ON "analytics"."orders" FOR EACH ROW WHEN (NEW."_pipeledger_row_hash" IS NOT NULL AND NEW."_pipeledger_row_hash" IS NOT DISTINCT FROM OLD."_pipeledger_row_hash") EXECUTE PROCEDURE "pipeledger"."forget_row_hash"(); ALTER TABLE "analytics"."orders" ENABLE ALWAYS TRIGGER "_pipeledger_forget_row_hash";

-- case: always_fire
ALTER TABLE "analytics"."orders" ENABLE ALWAYS TRIGGER "_pipeledger_forget_row_hash";

-- case: trigger_version
SELECT t.oid::text || ':' || t.xmin::text || ':' || p.xmin::text FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid WHERE t.tgrelid = to_regclass(%s) AND t.tgname = %s AND t.tgenabled = 'A';
-- params: ['"analytics"."orders"', '_pipeledger_forget_row_hash']

-- case: trigger_exists
SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass(%s) AND tgname = %s;

-- case: may_upgrade
SELECT coalesce((SELECT pg_has_role(relowner, 'USAGE') FROM pg_class WHERE oid = to_regclass(%s)), false) AND has_table_privilege(%s, 'INSERT') AND has_table_privilege(%s, 'UPDATE');

-- case: guard_key
SELECT to_regclass(%s)::oid::text;

-- case: read_guard_row
SELECT trigger_version, since FROM "pipeledger"."fingerprint_guards" WHERE target = %s;

-- case: record_guard
INSERT INTO "pipeledger"."fingerprint_guards" (target, trigger_version, since) VALUES (%s, %s, %s) ON CONFLICT (target) DO UPDATE SET trigger_version = excluded.trigger_version, since = excluded.since;

-- case: newest_load
SELECT max("_pipeledger_loaded_at") FROM "analytics"."orders";

-- case: lock_against_writers
LOCK TABLE "analytics"."orders" IN SHARE ROW EXCLUSIVE MODE;
