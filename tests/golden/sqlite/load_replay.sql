-- Golden SQL of pipeledger.runs.replay (quarantine replay) on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: failing_ids
SELECT s."_pipeledger_quarantine_id" FROM "_pipeledger_stage" AS s WHERE s."status" NOT IN (?, ?);
-- params: ['completed', 'shipped']

-- case: keep_entries of two entries
UPDATE "analytics.orders_quarantine" SET reason = ?, last_checked_run = ? WHERE quarantine_id IN (?, ?);

-- case: resolve_entries of two entries
UPDATE "analytics.orders_quarantine" SET resolved_at = ?, resolved_by_run = ?, last_checked_run = ? WHERE quarantine_id IN (?, ?) AND resolved_at IS NULL;
