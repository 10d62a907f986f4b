"""Quality gates between transform and publish: the checks, the learned row-count band,
schema drift, and the quarantine of rows that fail (replayed by ``runs/replay``)."""
