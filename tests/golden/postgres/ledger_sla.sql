-- Golden SQL of pipeledger.ledger.reads.sla on PostgreSQL, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: insert_breach_sql
INSERT INTO "pipeledger"."sla_breaches" (breach_id, pipeline, kind, run_id, due_at, detected_at, ended_at, sla_s, reason) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING;

-- case: open_breaches_sql
SELECT pipeline, breach_id FROM "pipeledger"."sla_breaches" WHERE kind = 'freshness' AND ended_at IS NULL;

-- case: end_breach_sql
UPDATE "pipeledger"."sla_breaches" SET ended_at = %s WHERE breach_id = %s AND ended_at IS NULL;

-- case: slow_runs_sql
SELECT r.run_id, r.pipeline, r.started_at, r.ended_at, r.duration_ms, pl.max_duration_s FROM "pipeledger"."pipeline_runs" r JOIN "pipeledger"."pipelines" pl ON pl.name = r.pipeline WHERE r.ended_at >= %s AND pl.max_duration_s IS NOT NULL AND r.duration_ms > pl.max_duration_s * 1000;

-- case: breaches_sql
SELECT breach_id, pipeline, kind, run_id, due_at, detected_at, ended_at, sla_s, reason FROM "pipeledger"."sla_breaches" WHERE ended_at IS NULL OR due_at >= %s OR detected_at >= %s ORDER BY due_at DESC, breach_id;

-- case: p95_sql
SELECT x.pipeline, x.duration_ms FROM (SELECT r.pipeline, r.duration_ms, row_number() OVER (PARTITION BY r.pipeline ORDER BY r.duration_ms) AS position, count(*) OVER (PARTITION BY r.pipeline) AS n FROM "pipeledger"."pipeline_runs" r WHERE r.status = 'success' AND r.started_at >= %s AND r.trigger_type <> 'reconcile' AND r.duration_ms IS NOT NULL) x WHERE x.position = (95 * x.n + 99) / 100;

-- case: transitions_sql
SELECT x.pipeline, x.failing, x.ended_at FROM (SELECT r.pipeline, r.started_at, r.run_id, r.ended_at, CASE WHEN r.status = 'success' THEN 0 ELSE 1 END AS failing, lag(CASE WHEN r.status = 'success' THEN 0 ELSE 1 END) OVER (PARTITION BY r.pipeline ORDER BY r.started_at, r.run_id) AS before FROM "pipeledger"."pipeline_runs" r WHERE r.started_at >= %s AND r.status IN ('success', 'failed', 'timed_out', 'abandoned') AND r.trigger_type NOT IN ('backfill', 'replay', 'reconcile')) x WHERE x.before IS NULL OR x.before <> x.failing ORDER BY x.pipeline, x.started_at, x.run_id;
