-- Golden SQL of pipeledger.quality.quarantine on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: select_entries unresolved
SELECT quarantine_id, run_id, pipeline, check_name, reason, CAST(key_values AS text), CAST(row_data AS text), quarantined_at, resolved_at, resolved_by_run, last_checked_run FROM "analytics.orders_quarantine" WHERE pipeline = ? AND resolved_at IS NULL ORDER BY quarantined_at, quarantine_id;

-- case: select_entries with resolved ones, of one run
SELECT quarantine_id, run_id, pipeline, check_name, reason, CAST(key_values AS text), CAST(row_data AS text), quarantined_at, resolved_at, resolved_by_run, last_checked_run FROM "analytics.orders_quarantine" WHERE pipeline = ? AND substr(run_id, 1, 8) = ? ORDER BY quarantined_at, quarantine_id;

-- case: existing_tables of two tables
SELECT '"' || replace(name, '"', '""') || '"' FROM sqlite_master WHERE type = 'table' AND '"' || replace(name, '"', '""') || '"' IN (?, ?);

-- case: open_counts_sql of two targets
SELECT pipeline, count(*) FROM "analytics.orders_quarantine" WHERE pipeline = ? AND resolved_at IS NULL GROUP BY pipeline UNION ALL SELECT pipeline, count(*) FROM "analytics.orders_quarantine" WHERE pipeline = ? AND resolved_at IS NULL GROUP BY pipeline;
