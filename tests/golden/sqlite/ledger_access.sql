-- Golden SQL of pipeledger.ledger.access, pipeledger.ledger.reads.access on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: record_sql
INSERT INTO main."pipeledger.access_reads" AS a (tenant, minute, via, what, pipeline, db_role, os_user, client, reads, first_at, last_at) VALUES (?, ?, ?, ?, ?, '', ?, ?, 1, ?, ?) ON CONFLICT (tenant, minute, via, what, pipeline, db_role, os_user, client) DO UPDATE SET reads = a.reads + 1, last_at = excluded.last_at;

-- case: access_rows_sql
SELECT minute, tenant, via, what, pipeline, db_role, os_user, client, reads, first_at, last_at FROM "pipeledger.access_reads" WHERE tenant = ? AND minute >= ? ORDER BY minute DESC, last_at DESC, what LIMIT ?;

-- case: access_rows_sql of one pipeline
SELECT minute, tenant, via, what, pipeline, db_role, os_user, client, reads, first_at, last_at FROM "pipeledger.access_reads" WHERE tenant = ? AND minute >= ? AND pipeline = ? ORDER BY minute DESC, last_at DESC, what LIMIT ?;
