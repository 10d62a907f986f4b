-- Golden SQL of pipeledger.ledger.reads (runs, checks, activity) on PostgreSQL, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: list_runs_sql of every filter and a page
SELECT run_id, logical_run_id, attempt, pipeline, status, trigger_type, started_at, ended_at, duration_ms, rows_read, rows_inserted, rows_updated, rows_unchanged, rows_rejected, rows_deleted, watermark_before, watermark_after, error_code, error_message, parent_run_id, data_interval_start, data_interval_end, correlation_id FROM "pipeledger"."pipeline_runs" r WHERE r.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND pipeline = %s AND started_at >= %s AND started_at < %s AND status = %s AND trigger_type = %s AND logical_run_id = %s AND correlation_id = %s AND started_at <= %s AND (started_at < %s OR run_id < %s) ORDER BY started_at DESC, run_id DESC LIMIT %s;
-- params: ['orders', datetime.datetime(2024, 1, 1, 10, 0, tzinfo=datetime.timezone.utc), datetime.datetime(2024, 1, 7, 18, 30, tzinfo=datetime.timezone.utc), 'failed', 'retry', '6f1c7f0e-3c55-4b7e-9a55-0c6f1b0d2a11', 'dag-1', datetime.datetime(2024, 1, 7, 18, 30, tzinfo=datetime.timezone.utc), datetime.datetime(2024, 1, 7, 18, 30, tzinfo=datetime.timezone.utc), '6f1c7f0e-3c55-4b7e-9a55-0c6f1b0d2a11', 20]

-- case: count_runs_sql of one pipeline, state and trigger
SELECT count(*) FROM "pipeledger"."pipeline_runs" r WHERE r.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND pipeline = %s AND status = %s AND trigger_type = %s;
-- params: ['orders', 'failed', 'manual']

-- case: run_start_sql
SELECT r.started_at, r.run_id FROM "pipeledger"."pipeline_runs" r WHERE r.run_id = %s AND r.tenant = (SELECT current_setting('pipeledger.tenant', true));

-- case: run_checks_sql
SELECT run_id, pipeline, target_table, check_name, kind, level, status, observed, expected, failing_rows, sample_keys, created_at FROM "pipeledger"."quality_results" q WHERE q.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND run_id = %s ORDER BY created_at, check_name;

-- case: check_history_sql since a time
SELECT run_id, pipeline, target_table, check_name, kind, level, status, observed, expected, failing_rows, sample_keys, created_at FROM "pipeledger"."quality_results" q WHERE q.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND pipeline = %s AND created_at >= %s ORDER BY created_at DESC, run_id DESC, check_name LIMIT %s;

-- case: check_history_sql
SELECT run_id, pipeline, target_table, check_name, kind, level, status, observed, expected, failing_rows, sample_keys, created_at FROM "pipeledger"."quality_results" q WHERE q.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND pipeline = %s ORDER BY created_at DESC, run_id DESC, check_name LIMIT %s;

-- case: work_by_state_sql
SELECT to_char(started_at, 'YYYY-MM-DD"T"HH24') AS hour, status, count(*) FROM "pipeledger"."pipeline_runs" w WHERE w.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND started_at >= %s GROUP BY to_char(started_at, 'YYYY-MM-DD"T"HH24'), status ORDER BY hour, status;

-- case: volume_days_sql
SELECT pipeline, day, samples, sample_rows FROM "pipeledger"."pipeline_days" y WHERE y.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND day >= %s AND samples > 0 ORDER BY pipeline, day;

-- case: volume_days_sql of one pipeline
SELECT pipeline, day, samples, sample_rows FROM "pipeledger"."pipeline_days" y WHERE y.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND day >= %s AND pipeline = %s AND samples > 0 ORDER BY pipeline, day;

-- case: volume_days_sql of two pipelines (a page of the overview)
SELECT pipeline, day, samples, sample_rows FROM "pipeledger"."pipeline_days" y WHERE y.tenant = (SELECT current_setting('pipeledger.tenant', true)) AND day >= %s AND pipeline IN (%s, %s) AND samples > 0 ORDER BY pipeline, day;
