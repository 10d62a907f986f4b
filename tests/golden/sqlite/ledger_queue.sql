-- Golden SQL of pipeledger.ledger.queue on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: lock_tenant
INSERT INTO "pipeledger.run_queues" (tenant, decided_at) VALUES (?, ?) ON CONFLICT (tenant) DO UPDATE SET decided_at = excluded.decided_at;

-- case: abandon_dead_waiters
UPDATE "pipeledger.pipeline_runs" SET status = 'abandoned', ended_at = ?, error_message = 'its process stopped renewing its lease while it waited queued' WHERE status = 'queued' AND lease_expires_at < ? AND run_id IN (SELECT run_id FROM "pipeledger.run_slots" WHERE tenant = ?);

-- case: free_ended
DELETE FROM "pipeledger.run_slots" WHERE tenant = ? AND run_id NOT IN (SELECT run_id FROM "pipeledger.pipeline_runs" WHERE status IN ('queued', 'running'));

-- case: occupancy
SELECT sum(CASE WHEN r.status = 'running' THEN 1 ELSE 0 END), sum(CASE WHEN r.status = 'queued' THEN 1 ELSE 0 END) FROM "pipeledger.run_slots" s JOIN "pipeledger.pipeline_runs" r ON r.tenant = s.tenant AND r.run_id = s.run_id WHERE s.tenant = ?;

-- case: first_waiter
SELECT s.run_id FROM "pipeledger.run_slots" s JOIN "pipeledger.pipeline_runs" r ON r.tenant = s.tenant AND r.run_id = s.run_id WHERE s.tenant = ? AND r.status = 'queued' ORDER BY s.queued_at, s.run_id LIMIT 1;

-- case: take_slot
INSERT INTO "pipeledger.run_slots" (run_id, tenant, pipeline, queued_at) VALUES (?, ?, ?, ?);

-- case: start_waiter
UPDATE "pipeledger.pipeline_runs" SET status = 'running', started_at = ?, heartbeat_at = ?, lease_expires_at = ? WHERE tenant = pipeledger_tenant() AND run_id = ? AND status = 'queued';

-- case: renew_waiter
UPDATE "pipeledger.pipeline_runs" SET heartbeat_at = ?, lease_expires_at = ? WHERE tenant = pipeledger_tenant() AND run_id = ? AND status = 'queued';

-- case: end_waiter
UPDATE "pipeledger.pipeline_runs" SET status = ?, ended_at = ?, duration_ms = ?, error_code = ?, error_message = ? WHERE tenant = pipeledger_tenant() AND run_id = ? AND status = 'queued';

-- case: status_of
SELECT status FROM "pipeledger.pipeline_runs" WHERE tenant = pipeledger_tenant() AND run_id = ?;

-- case: set_apart_sql (status: rejected and queued runs)
SELECT r.pipeline, sum(CASE WHEN r.status = 'rejected' THEN 1 ELSE 0 END), sum(CASE WHEN r.status = 'queued' THEN 1 ELSE 0 END) FROM "pipeledger.pipeline_runs" r WHERE r.tenant = pipeledger_tenant() AND (r.status = 'queued' OR (r.status = 'rejected' AND r.started_at >= ?)) GROUP BY r.pipeline;
