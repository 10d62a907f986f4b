-- Golden SQL of pipeledger.runs.replay (quarantine replay) on PostgreSQL, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: failing_ids
SELECT s."_pipeledger_quarantine_id" FROM "_pipeledger_stage" AS s WHERE s."status" NOT IN (%s, %s);
-- params: ['completed', 'shipped']

-- case: keep_entries of two entries
UPDATE "analytics"."orders_quarantine" SET reason = %s, last_checked_run = %s WHERE quarantine_id IN (%s, %s);

-- case: resolve_entries of two entries
UPDATE "analytics"."orders_quarantine" SET resolved_at = %s, resolved_by_run = %s, last_checked_run = %s WHERE quarantine_id IN (%s, %s) AND resolved_at IS NULL;
