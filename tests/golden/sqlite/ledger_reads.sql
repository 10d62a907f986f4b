-- Golden SQL of pipeledger.ledger.reads (runs, checks, activity) on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: list_runs_sql of every filter and a page
SELECT run_id, logical_run_id, attempt, pipeline, status, trigger_type, started_at, ended_at, duration_ms, rows_read, rows_inserted, rows_updated, rows_unchanged, rows_rejected, rows_deleted, watermark_before, watermark_after, error_code, error_message, parent_run_id, data_interval_start, data_interval_end, correlation_id FROM "pipeledger.pipeline_runs" r WHERE r.tenant = pipeledger_tenant() AND pipeline = ? AND started_at >= ? AND started_at < ? AND status = ? AND trigger_type = ? AND logical_run_id = ? AND correlation_id = ? AND started_at <= ? AND (started_at < ? OR run_id < ?) ORDER BY started_at DESC, run_id DESC LIMIT ?;
-- params: ['orders', datetime.datetime(2024, 1, 1, 10, 0, tzinfo=datetime.timezone.utc), datetime.datetime(2024, 1, 7, 18, 30, tzinfo=datetime.timezone.utc), 'failed', 'retry', '6f1c7f0e-3c55-4b7e-9a55-0c6f1b0d2a11', 'dag-1', datetime.datetime(2024, 1, 7, 18, 30, tzinfo=datetime.timezone.utc), datetime.datetime(2024, 1, 7, 18, 30, tzinfo=datetime.timezone.utc), '6f1c7f0e-3c55-4b7e-9a55-0c6f1b0d2a11', 20]

-- case: count_runs_sql of one pipeline, state and trigger
SELECT count(*) FROM "pipeledger.pipeline_runs" r WHERE r.tenant = pipeledger_tenant() AND pipeline = ? AND status = ? AND trigger_type = ?;
-- params: ['orders', 'failed', 'manual']

-- case: run_start_sql
SELECT r.started_at, r.run_id FROM "pipeledger.pipeline_runs" r WHERE r.run_id = ? AND r.tenant = pipeledger_tenant();

-- case: run_checks_sql
SELECT run_id, pipeline, target_table, check_name, kind, level, status, observed, expected, failing_rows, sample_keys, created_at FROM "pipeledger.quality_results" q WHERE q.tenant = pipeledger_tenant() AND run_id = ? ORDER BY created_at, check_name;

-- case: check_history_sql since a time
SELECT run_id, pipeline, target_table, check_name, kind, level, status, observed, expected, failing_rows, sample_keys, created_at FROM "pipeledger.quality_results" q WHERE q.tenant = pipeledger_tenant() AND pipeline = ? AND created_at >= ? ORDER BY created_at DESC, run_id DESC, check_name LIMIT ?;

-- case: check_history_sql
SELECT run_id, pipeline, target_table, check_name, kind, level, status, observed, expected, failing_rows, sample_keys, created_at FROM "pipeledger.quality_results" q WHERE q.tenant = pipeledger_tenant() AND pipeline = ? ORDER BY created_at DESC, run_id DESC, check_name LIMIT ?;

-- case: work_by_state_sql
SELECT substr(started_at, 1, 13) AS hour, status, count(*) FROM "pipeledger.pipeline_runs" w WHERE w.tenant = pipeledger_tenant() AND started_at >= ? GROUP BY substr(started_at, 1, 13), status ORDER BY hour, status;

-- case: volume_days_sql
SELECT pipeline, day, samples, sample_rows FROM "pipeledger.pipeline_days" y WHERE y.tenant = pipeledger_tenant() AND day >= ? AND samples > 0 ORDER BY pipeline, day;

-- case: volume_days_sql of one pipeline
SELECT pipeline, day, samples, sample_rows FROM "pipeledger.pipeline_days" y WHERE y.tenant = pipeledger_tenant() AND day >= ? AND pipeline = ? AND samples > 0 ORDER BY pipeline, day;

-- case: volume_days_sql of two pipelines (a page of the overview)
SELECT pipeline, day, samples, sample_rows FROM "pipeledger.pipeline_days" y WHERE y.tenant = pipeledger_tenant() AND day >= ? AND pipeline IN (?, ?) AND samples > 0 ORDER BY pipeline, day;
