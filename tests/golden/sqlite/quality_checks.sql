-- Golden SQL of pipeledger.quality.checks on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: count_failures of every kind of row check
SELECT count(*), coalesce(sum(CASE WHEN s."order_id" IS NULL THEN 1 ELSE 0 END), 0), coalesce(sum(CASE WHEN (s."status" IS NULL OR s."status" = '') THEN 1 ELSE 0 END), 0), coalesce(sum(CASE WHEN (CAST(s."amount" AS REAL) < ? OR CAST(s."amount" AS REAL) > ?) THEN 1 ELSE 0 END), 0), coalesce(sum(CASE WHEN (s."order_id" < ?) THEN 1 ELSE 0 END), 0), coalesce(sum(CASE WHEN s."status" NOT IN (?, ?) THEN 1 ELSE 0 END), 0), coalesce(sum(CASE WHEN NOT regexp(?, s."region") THEN 1 ELSE 0 END), 0) FROM "_pipeledger_stage" AS s;
-- params: [Decimal('0.0'), Decimal('1000.0'), 1, 'completed', 'shipped', '^[a-z]{2}$']

-- case: sample_keys failing key_not_null:order_id
SELECT s."order_id" FROM "_pipeledger_stage" AS s WHERE s."order_id" IS NULL LIMIT 5;
-- params: []

-- case: sample_keys failing not_null:status
SELECT s."order_id" FROM "_pipeledger_stage" AS s WHERE (s."status" IS NULL OR s."status" = '') LIMIT 5;
-- params: []

-- case: sample_keys failing range:amount
SELECT s."order_id" FROM "_pipeledger_stage" AS s WHERE (CAST(s."amount" AS REAL) < ? OR CAST(s."amount" AS REAL) > ?) LIMIT 5;
-- params: [Decimal('0.0'), Decimal('1000.0')]

-- case: sample_keys failing range:order_id
SELECT s."order_id" FROM "_pipeledger_stage" AS s WHERE (s."order_id" < ?) LIMIT 5;
-- params: [1]

-- case: sample_keys failing accepted_values:status
SELECT s."order_id" FROM "_pipeledger_stage" AS s WHERE s."status" NOT IN (?, ?) LIMIT 5;
-- params: ['completed', 'shipped']

-- case: sample_keys failing matches:region
SELECT s."order_id" FROM "_pipeledger_stage" AS s WHERE NOT regexp(?, s."region") LIMIT 5;
-- params: ['^[a-z]{2}$']

-- case: sample_keys of duplicated keys
SELECT s."order_id" FROM "_pipeledger_stage" AS s WHERE s."order_id" IN (SELECT "order_id" FROM "_pipeledger_stage" GROUP BY "order_id" HAVING count(*) > 1) LIMIT 5;

-- case: sample_keys of duplicated composite keys
SELECT s."order_id", s."region" FROM "_pipeledger_stage" AS s WHERE (s."order_id", s."region") IN (SELECT "order_id", "region" FROM "_pipeledger_stage" GROUP BY "order_id", "region" HAVING count(*) > 1) LIMIT 5;

-- case: create_quarantine
CREATE TABLE IF NOT EXISTS "analytics.orders_quarantine" (quarantine_id text PRIMARY KEY, run_id text NOT NULL, pipeline text NOT NULL, check_name text NOT NULL, reason text NOT NULL, key_values text, row_data text NOT NULL, quarantined_at timestamptz NOT NULL, resolved_at timestamptz, resolved_by_run text, last_checked_run text);

-- case: quarantine_rows failing accepted_values
INSERT INTO "analytics.orders_quarantine" (quarantine_id, run_id, pipeline, check_name, reason, key_values, row_data, quarantined_at, last_checked_run) SELECT f.id, ?, ?, ?, ?, f.key_values, f.row_data, ?, ? FROM (SELECT md5(? || CAST(json_object('order_id', s."order_id", 'region', s."region", 'amount', s."amount", 'status', s."status", 'updated_at', s."updated_at") AS text)) AS id, json_object('order_id', s."order_id") AS key_values, json_object('order_id', s."order_id", 'region', s."region", 'amount', s."amount", 'status', s."status", 'updated_at', s."updated_at") AS row_data FROM "_pipeledger_stage" AS s WHERE s."status" NOT IN (?, ?)) AS f WHERE true ON CONFLICT (quarantine_id) DO UPDATE SET resolved_at = NULL, resolved_by_run = NULL, run_id = excluded.run_id, last_checked_run = excluded.last_checked_run WHERE "analytics.orders_quarantine".resolved_at IS NOT NULL;
-- params: ['6f1c7f0e-3c55-4b7e-9a55-0c6f1b0d2a11', 'orders', 'accepted_values:status', 'accepted_values:status: expected one of completed, shipped', datetime.datetime(2024, 6, 15, 12, 0, tzinfo=datetime.timezone.utc), '6f1c7f0e-3c55-4b7e-9a55-0c6f1b0d2a11', 'accepted_values:status', 'completed', 'shipped']

-- case: delete_failing of two checks
DELETE FROM "_pipeledger_stage" WHERE rowid IN (SELECT rowid FROM "_pipeledger_stage" AS s WHERE ((CAST(s."amount" AS REAL) < ? OR CAST(s."amount" AS REAL) > ?)) OR (s."status" NOT IN (?, ?)));
-- params: [Decimal('0.0'), Decimal('1000.0'), 'completed', 'shipped']
