-- Golden SQL of pipeledger.ledger.sql on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: upsert_run
INSERT INTO "pipeledger.pipeline_runs" AS r (run_id, logical_run_id, attempt, parent_run_id, correlation_id, pipeline, trigger_type, triggered_by, environment, status, started_at, ended_at, duration_ms, rows_read, rows_inserted, rows_updated, rows_unchanged, rows_rejected, bytes_read, watermark_before, watermark_after, data_interval_start, data_interval_end, error_code, error_message, code_version, host, pid, heartbeat_at, lease_expires_at, extra, idempotency_key, rows_deleted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, run_id) DO UPDATE SET logical_run_id = excluded.logical_run_id, attempt = excluded.attempt, parent_run_id = excluded.parent_run_id, correlation_id = excluded.correlation_id, pipeline = excluded.pipeline, trigger_type = excluded.trigger_type, triggered_by = excluded.triggered_by, environment = excluded.environment, status = excluded.status, started_at = excluded.started_at, ended_at = excluded.ended_at, duration_ms = excluded.duration_ms, rows_read = excluded.rows_read, rows_inserted = excluded.rows_inserted, rows_updated = excluded.rows_updated, rows_unchanged = excluded.rows_unchanged, rows_rejected = excluded.rows_rejected, bytes_read = excluded.bytes_read, watermark_before = excluded.watermark_before, watermark_after = excluded.watermark_after, data_interval_start = excluded.data_interval_start, data_interval_end = excluded.data_interval_end, error_code = excluded.error_code, error_message = excluded.error_message, code_version = excluded.code_version, host = excluded.host, pid = excluded.pid, heartbeat_at = excluded.heartbeat_at, lease_expires_at = excluded.lease_expires_at, extra = excluded.extra, idempotency_key = excluded.idempotency_key, rows_deleted = excluded.rows_deleted WHERE r.status = 'running';

-- case: finish_run
UPDATE "pipeledger.pipeline_runs" SET logical_run_id = ?, attempt = ?, parent_run_id = ?, correlation_id = ?, pipeline = ?, trigger_type = ?, triggered_by = ?, environment = ?, status = ?, started_at = ?, ended_at = ?, duration_ms = ?, rows_read = ?, rows_inserted = ?, rows_updated = ?, rows_unchanged = ?, rows_rejected = ?, bytes_read = ?, watermark_before = ?, watermark_after = ?, data_interval_start = ?, data_interval_end = ?, error_code = ?, error_message = ?, code_version = ?, host = ?, pid = ?, heartbeat_at = ?, lease_expires_at = ?, extra = ?, idempotency_key = ?, rows_deleted = ? WHERE tenant = pipeledger_tenant() AND run_id = ? AND status = 'running';

-- case: heartbeat
UPDATE "pipeledger.pipeline_runs" SET heartbeat_at = ?, lease_expires_at = ? WHERE tenant = pipeledger_tenant() AND run_id = ? AND status = 'running';

-- case: insert_task
INSERT INTO "pipeledger.task_runs" (task_run_id, run_id, name, seq, status, started_at, ended_at, duration_ms, rows_in, rows_out, rows_rejected, bytes, error_message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, task_run_id) DO NOTHING;

-- case: insert_event
INSERT INTO "pipeledger.audit_events" (event_id, run_id, pipeline, event_type, target_table, record_count, old_values, new_values, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, event_id) DO NOTHING;

-- case: insert_snapshot
INSERT INTO "pipeledger.dataset_snapshots" (run_id, target_table, row_count, max_cursor, schema_fingerprint, columns, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, run_id, target_table) DO NOTHING;

-- case: insert_quality
INSERT INTO "pipeledger.quality_results" (result_id, run_id, pipeline, target_table, check_name, kind, level, status, observed, expected, failing_rows, sample_keys, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, result_id) DO NOTHING;

-- case: ensure_pipeline
INSERT INTO "pipeledger.pipelines" (name, version, created_at, updated_at) VALUES (?, 'unregistered', ?, ?) ON CONFLICT (tenant, name) DO NOTHING;

-- case: upsert_pipeline
INSERT INTO "pipeledger.pipelines" (name, version, description, owner, source_system, target_system, freshness_sla_s, created_at, updated_at, max_duration_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, name) DO UPDATE SET version = excluded.version, description = excluded.description, owner = excluded.owner, source_system = excluded.source_system, target_system = excluded.target_system, freshness_sla_s = excluded.freshness_sla_s, updated_at = excluded.updated_at, max_duration_s = excluded.max_duration_s;

-- case: delete_dependencies
DELETE FROM "pipeledger.pipeline_dependencies" WHERE tenant = pipeledger_tenant() AND downstream = ?;

-- case: insert_dependency
INSERT INTO "pipeledger.pipeline_dependencies" (upstream, downstream, created_at) VALUES (?, ?, ?) ON CONFLICT (tenant, upstream, downstream) DO NOTHING;

-- case: running_runs
SELECT run_id, started_at, host, pid, lease_expires_at FROM "pipeledger.pipeline_runs" WHERE tenant = pipeledger_tenant() AND status = 'running';

-- case: abandon_run
UPDATE "pipeledger.pipeline_runs" SET status = 'abandoned', ended_at = ?, duration_ms = ?, error_code = 'LEASE_EXPIRED', error_message = ? WHERE tenant = pipeledger_tenant() AND run_id = ? AND status = 'running';

-- case: insert_reconciliation
INSERT INTO "pipeledger.reconciliations" (run_id, pipeline, target_table, status, range_start, range_end, window_by, windows_compared, windows_differing, source_rows, target_rows, missing_rows, extra_rows, changed_rows, windows, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, run_id) DO NOTHING;
