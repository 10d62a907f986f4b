-- Golden SQL of pipeledger.sources.sql on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: select with window_predicate of a full read
SELECT * FROM "analytics.orders" WHERE 1=1;
-- params: []

-- case: select with window_predicate of an incremental window
SELECT * FROM "analytics.orders" WHERE "updated_at" >= ?;
-- params: [datetime.datetime(2024, 1, 1, 10, 0, tzinfo=datetime.timezone.utc)]

-- case: select with window_predicate of a backfill to a date-only end
SELECT * FROM "analytics.orders" WHERE "updated_at" >= ? AND "updated_at" < ?;
-- params: [datetime.date(2024, 1, 1), datetime.date(2024, 1, 8)]

-- case: select with window_predicate of a backfill to a timestamp
SELECT * FROM "analytics.orders" WHERE "updated_at" >= ? AND "updated_at" <= ?;
-- params: [datetime.datetime(2024, 1, 1, 10, 0, tzinfo=datetime.timezone.utc), datetime.datetime(2024, 1, 7, 18, 30, tzinfo=datetime.timezone.utc)]

-- case: select with window_predicate of a window per partition
SELECT * FROM "analytics.orders" WHERE (CAST("region" AS TEXT) IS NULL OR CAST("region" AS TEXT) NOT IN (?, ?) OR (CAST("region" AS TEXT) = ? AND "updated_at" >= ?) OR (CAST("region" AS TEXT) = ? AND "updated_at" >= ?));
-- params: ['eu', 'us', 'eu', datetime.datetime(2024, 1, 1, 10, 0, tzinfo=datetime.timezone.utc), 'us', datetime.datetime(2024, 1, 1, 8, 0, tzinfo=datetime.timezone.utc)]

-- case: select with window_predicate of an integer cursor
SELECT * FROM "analytics.orders" WHERE "order_id" >= ?;
-- params: [100]

-- case: select_statement of a query
SELECT * FROM (SELECT order_id, updated_at FROM "analytics.orders") AS pipeledger_source WHERE 1=1;
