"""The crash and concurrency drill: SIGKILLs at random points of loads and backfills,
concurrent triggers of one pipeline and a separate ledger going away, on PostgreSQL and
SQLite, with every invariant checked against an exact model after every step.

Run it with ``python -m tests.drills`` (see ``__main__``); the test suite runs a short
version (tests/drills/test_drill.py).
"""
