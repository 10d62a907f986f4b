-- Golden SQL of pipeledger.ledger.sql (scheduled runs of every pipeline at once) on PostgreSQL, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: scheduled_spans of two pipelines
SELECT pipeline, min(data_interval_end), max(data_interval_end) FROM "pipeledger"."pipeline_runs" WHERE tenant = (SELECT current_setting('pipeledger.tenant', true)) AND pipeline = ANY(CAST(%s AS text[])) AND idempotency_key IS NOT NULL AND substr(idempotency_key, 1, 9) = 'schedule:' AND status IN ('running', 'success', 'partial') GROUP BY pipeline;

-- case: held_keys of two pipelines and two keys
SELECT pipeline, idempotency_key FROM "pipeledger"."pipeline_runs" WHERE tenant = (SELECT current_setting('pipeledger.tenant', true)) AND pipeline = ANY(CAST(%s AS text[])) AND idempotency_key = ANY(CAST(%s AS text[])) AND status IN ('running', 'success', 'partial');

-- case: latest_scheduled of two pipelines
WITH heads AS (SELECT n.pipeline, (SELECT x.run_id FROM "pipeledger"."pipeline_runs" x WHERE x.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND x.pipeline = n.pipeline AND substr(x.idempotency_key, 1, 9) = 'schedule:' ORDER BY x.data_interval_end DESC, x.started_at DESC, x.run_id DESC LIMIT 1) AS run_id FROM (SELECT unnest(CAST(%s AS text[])) AS pipeline) n) SELECT h.pipeline, r.run_id, r.status, r.data_interval_start, r.data_interval_end FROM heads h JOIN "pipeledger"."pipeline_runs" r ON r.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND r.run_id = h.run_id;
