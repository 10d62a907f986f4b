-- Golden SQL of pipeledger.publish.indexes on PostgreSQL, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: create_index of two columns
CREATE INDEX IF NOT EXISTS "pipeledger_ix_007fc2767f6f97fa" ON "analytics"."orders" ("region", "updated_at");

-- case: index_exists
SELECT 1 WHERE to_regclass(%s) IS NOT NULL;
-- params: ['"analytics"."pipeledger_ix_3c28c06c16aba3f5"']
