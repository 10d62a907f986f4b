-- Golden SQL of pipeledger.ledger.reads.sla on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: insert_breach_sql
INSERT INTO "pipeledger.sla_breaches" (breach_id, pipeline, kind, run_id, due_at, detected_at, ended_at, sla_s, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING;

-- case: open_breaches_sql
SELECT b.pipeline, b.breach_id FROM "pipeledger.sla_breaches" b WHERE b.tenant = pipeledger_tenant() AND b.kind = 'freshness' AND b.ended_at IS NULL;

-- case: end_breach_sql
UPDATE "pipeledger.sla_breaches" SET ended_at = ? WHERE breach_id = ? AND ended_at IS NULL;

-- case: slow_runs_sql
SELECT r.run_id, r.pipeline, r.started_at, r.ended_at, r.duration_ms, pl.max_duration_s FROM "pipeledger.pipeline_runs" r JOIN "pipeledger.pipelines" pl ON pl.name = r.pipeline AND pl.tenant = pipeledger_tenant() WHERE r.tenant = pipeledger_tenant() AND r.ended_at >= ? AND pl.max_duration_s IS NOT NULL AND r.duration_ms > pl.max_duration_s * 1000;

-- case: breaches_sql
SELECT breach_id, pipeline, kind, run_id, due_at, detected_at, ended_at, sla_s, reason FROM "pipeledger.sla_breaches" b WHERE b.tenant = pipeledger_tenant() AND (b.ended_at IS NULL OR b.due_at >= ? OR b.detected_at >= ?) ORDER BY b.due_at DESC, b.breach_id;

-- case: timed_successes_sql
WITH recent AS (SELECT x.pipeline, sum(x.finished) AS finished, sum(x.succeeded) AS succeeded, sum(x.success_rows) AS success_rows FROM (SELECT y.pipeline, y.finished, y.succeeded, y.success_rows FROM "pipeledger.pipeline_days" y WHERE y.tenant = pipeledger_tenant() AND y.day > ? UNION ALL SELECT r.pipeline, 1, CASE WHEN r.status = 'success' THEN 1 ELSE 0 END, CASE WHEN r.status = 'success' THEN (COALESCE(r.rows_inserted, 0) + COALESCE(r.rows_updated, 0)) ELSE 0 END FROM "pipeledger.pipeline_runs" r WHERE r.tenant = pipeledger_tenant() AND r.status NOT IN ('running', 'skipped', 'queued', 'rejected') AND r.trigger_type <> 'reconcile' AND r.started_at >= ? AND r.started_at < ?) x GROUP BY x.pipeline) SELECT rc.pipeline, rc.finished, rc.succeeded, rc.succeeded - (SELECT count(*) FROM "pipeledger.pipeline_runs" z WHERE z.tenant = pipeledger_tenant() AND z.pipeline = rc.pipeline AND z.status = 'success' AND z.trigger_type <> 'reconcile' AND z.started_at >= ? AND z.duration_ms IS NULL) FROM recent rc ORDER BY rc.pipeline;

-- case: p95_sql
SELECT CAST(? AS text) AS pipeline, (SELECT r.duration_ms FROM "pipeledger.pipeline_runs" r WHERE r.tenant = pipeledger_tenant() AND r.pipeline = ? AND r.status = 'success' AND r.duration_ms IS NOT NULL AND r.started_at >= ? AND r.trigger_type <> 'reconcile' ORDER BY r.duration_ms DESC LIMIT 1 OFFSET ?) AS duration_ms UNION ALL SELECT CAST(? AS text) AS pipeline, (SELECT r.duration_ms FROM "pipeledger.pipeline_runs" r WHERE r.tenant = pipeledger_tenant() AND r.pipeline = ? AND r.status = 'success' AND r.duration_ms IS NOT NULL AND r.started_at >= ? AND r.trigger_type <> 'reconcile' ORDER BY r.duration_ms DESC LIMIT 1 OFFSET ?) AS duration_ms;

-- case: transitions_sql
SELECT f.pipeline, f.started_at, f.run_id, f.ended_at, (SELECT o.run_id FROM "pipeledger.pipeline_runs" o WHERE o.tenant = pipeledger_tenant() AND o.pipeline = f.pipeline AND (o.started_at, o.run_id) > (f.started_at, f.run_id) AND o.status IN ('success', 'failed', 'timed_out', 'abandoned') AND o.trigger_type NOT IN ('backfill', 'replay', 'reconcile') ORDER BY o.started_at, o.run_id LIMIT 1), (SELECT o.ended_at FROM "pipeledger.pipeline_runs" o WHERE o.tenant = pipeledger_tenant() AND o.pipeline = f.pipeline AND (o.started_at, o.run_id) > (f.started_at, f.run_id) AND o.status IN ('success', 'failed', 'timed_out', 'abandoned') AND o.trigger_type NOT IN ('backfill', 'replay', 'reconcile') ORDER BY o.started_at, o.run_id LIMIT 1) FROM "pipeledger.pipeline_runs" f WHERE f.tenant = pipeledger_tenant() AND f.status IN ('failed', 'timed_out', 'abandoned') AND f.started_at >= ? AND f.trigger_type NOT IN ('backfill', 'replay', 'reconcile') ORDER BY f.pipeline, f.started_at, f.run_id;
