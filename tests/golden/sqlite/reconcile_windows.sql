-- Golden SQL of pipeledger.runs.reconcile.windows on SQLite, for the inputs in
-- tests/golden/cases.py. Not edited by hand: after changing a builder, run
-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.

-- case: label by hour, day and month
SELECT substr(t."updated_at", 1, 13), substr(t."updated_at", 1, 10), substr(t."updated_at", 1, 7) FROM "analytics.orders" AS t;

-- case: label of integer windows 1000 wide
SELECT CAST((CASE WHEN t."order_id" >= 0 THEN t."order_id" / 1000 ELSE (t."order_id" + 1) / 1000 - 1 END) * 1000 AS TEXT) FROM "analytics.orders" AS t;
