-- Golden SQL of pipeledger.ledger.reads.sla on PostgreSQL, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: insert_breach_sql
INSERT INTO "pipeledger"."sla_breaches" (breach_id, pipeline, kind, run_id, due_at, detected_at, ended_at, sla_s, reason) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING;

-- case: open_breaches_sql
SELECT b.pipeline, b.breach_id FROM "pipeledger"."sla_breaches" b WHERE b.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND b.kind = 'freshness' AND b.ended_at IS NULL;

-- case: end_breach_sql
UPDATE "pipeledger"."sla_breaches" SET ended_at = %s WHERE breach_id = %s AND ended_at IS NULL;

-- case: slow_runs_sql
SELECT r.run_id, r.pipeline, r.started_at, r.ended_at, r.duration_ms, pl.max_duration_s FROM "pipeledger"."pipeline_runs" r JOIN "pipeledger"."pipelines" pl ON pl.name = r.pipeline AND pl.tenant = (SELECT current_setting('pipeledger.tenant', true)) WHERE r.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND r.ended_at >= %s AND pl.max_duration_s IS NOT NULL AND r.duration_ms > pl.max_duration_s * 1000;

-- case: breaches_sql
SELECT breach_id, pipeline, kind, run_id, due_at, detected_at, ended_at, sla_s, reason FROM "pipeledger"."sla_breaches" b WHERE b.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND (b.ended_at IS NULL OR b.due_at >= %s OR b.detected_at >= %s) ORDER BY b.due_at DESC, b.breach_id;

-- case: timed_successes_sql
WITH recent AS (SELECT x.pipeline, sum(x.finished) AS finished, sum(x.succeeded) AS succeeded, sum(x.success_rows) AS success_rows FROM (SELECT y.pipeline, y.finished, y.succeeded, y.success_rows FROM "pipeledger"."pipeline_days" y WHERE y.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND y.day > %s UNION ALL SELECT r.pipeline, 1, CASE WHEN r.status = 'success' THEN 1 ELSE 0 END, CASE WHEN r.status = 'success' THEN (COALESCE(r.rows_inserted, 0) + COALESCE(r.rows_updated, 0)) ELSE 0 END FROM "pipeledger"."pipeline_runs" r WHERE r.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND r.status NOT IN ('running', 'skipped', 'queued', 'rejected') AND r.trigger_type <> 'reconcile' AND r.started_at >= %s AND r.started_at < %s) x GROUP BY x.pipeline) SELECT rc.pipeline, rc.finished, rc.succeeded, rc.succeeded - (SELECT count(*) FROM "pipeledger"."pipeline_runs" z WHERE z.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND z.pipeline = rc.pipeline AND z.status = 'success' AND z.trigger_type <> 'reconcile' AND z.started_at >= %s AND z.duration_ms IS NULL) FROM recent rc ORDER BY rc.pipeline;

-- case: p95_sql
SELECT c.pipeline, (SELECT r.duration_ms FROM "pipeledger"."pipeline_runs" r WHERE r.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND r.pipeline = c.pipeline AND r.status = 'success' AND r.duration_ms IS NOT NULL AND r.started_at >= %s AND r.trigger_type <> 'reconcile' ORDER BY r.duration_ms DESC LIMIT 1 OFFSET c.skip) FROM unnest(CAST(%s AS text[]), CAST(%s AS bigint[])) AS c(pipeline, skip);

-- case: transitions_sql
SELECT f.pipeline, f.started_at, f.run_id, f.ended_at, a.run_id, a.ended_at FROM "pipeledger"."pipeline_runs" f LEFT JOIN LATERAL (SELECT o.run_id, o.ended_at FROM "pipeledger"."pipeline_runs" o WHERE o.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND o.pipeline = f.pipeline AND (o.started_at, o.run_id) > (f.started_at, f.run_id) AND o.status IN ('success', 'failed', 'timed_out', 'abandoned') AND o.trigger_type NOT IN ('backfill', 'replay', 'reconcile') ORDER BY o.started_at, o.run_id LIMIT 1) a ON true WHERE f.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND f.status IN ('failed', 'timed_out', 'abandoned') AND f.started_at >= %s AND f.trigger_type NOT IN ('backfill', 'replay', 'reconcile') ORDER BY f.pipeline, f.started_at, f.run_id;
