-- Golden SQL of pipeledger.alerts (events, outbox) on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: ended_runs_sql
SELECT run_id, pipeline, status, error_code, error_message, ended_at, rows_rejected FROM "pipeledger.pipeline_runs" WHERE ended_at >= ? AND status IN ('failed', 'timed_out', 'abandoned', 'partial') ORDER BY ended_at, run_id;

-- case: mismatches_sql
SELECT run_id, pipeline, target_table, windows_differing, missing_rows, extra_rows, changed_rows, created_at FROM "pipeledger.reconciliations" WHERE created_at >= ? AND status = 'mismatch' ORDER BY created_at, run_id;

-- case: insert_sql
INSERT INTO "pipeledger.alerts" (alert_key, webhook, event, pipeline, run_id, reason, payload, status, attempts, created_at, next_attempt_at, last_attempt_at, delivered_at, last_error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, alert_key, webhook) DO NOTHING;

-- case: due_sql of two webhooks
SELECT alert_key, webhook, payload, attempts FROM "pipeledger.alerts" WHERE tenant = pipeledger_tenant() AND status = 'pending' AND next_attempt_at <= ? AND webhook IN (?, ?) ORDER BY created_at, alert_key, webhook LIMIT ?;

-- case: claim_sql
UPDATE "pipeledger.alerts" SET attempts = attempts + 1, last_attempt_at = ?, next_attempt_at = ? WHERE tenant = pipeledger_tenant() AND alert_key = ? AND webhook = ? AND status = 'pending' AND next_attempt_at <= ?;

-- case: outcome_sql
UPDATE "pipeledger.alerts" SET status = ?, delivered_at = ?, next_attempt_at = ?, last_error = ? WHERE tenant = pipeledger_tenant() AND alert_key = ? AND webhook = ?;

-- case: list_sql
SELECT alert_key, webhook, event, pipeline, run_id, reason, status, attempts, created_at, next_attempt_at, delivered_at, last_error FROM "pipeledger.alerts" a WHERE a.tenant = pipeledger_tenant() AND created_at >= ? ORDER BY created_at DESC, alert_key, webhook;

-- case: list_sql of one run
SELECT alert_key, webhook, event, pipeline, run_id, reason, status, attempts, created_at, next_attempt_at, delivered_at, last_error FROM "pipeledger.alerts" a WHERE a.tenant = pipeledger_tenant() AND created_at >= ? AND run_id = ? ORDER BY created_at DESC, alert_key, webhook;
