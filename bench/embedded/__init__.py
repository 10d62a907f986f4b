"""The embedded default against DuckDB (a script, not a test): ``python -m bench.embedded``.

On the peers' 1M-row orders file (:mod:`bench.common.peers`: quoted CSV, ISO timestamps
with an offset, and the same rows as Parquet), whole processes, in the same run:

* **pipeledger**: ``pipeledger run orders`` on the embedded default (a ``pipeledger.toml``
  without a ``[warehouse]``: the SQLite file ``.pipeledger/warehouse.db`` beside it), key
  ``order_id``, cursor ``updated_at``, ``on_conflict = "newer_wins"``;
* **DuckDB**, what a careful engineer writes with it (:mod:`bench.embedded.peer`): a
  ``CREATE TABLE AS SELECT * FROM read_csv(...)`` and its primary key, then an ``INSERT ...
  ON CONFLICT DO UPDATE ... WHERE excluded.updated_at > orders.updated_at`` upsert.

Three phases, each tool's process timed from its start to its exit (start-up and imports
included, as a user waits for them): the **first load** of batch 1 into nothing; the
**re-run** with the identical input (pipeledger: the same folder; DuckDB: batch 1 upserted
again; both write nothing); the **incremental**, batch 2 (150k rows: 100k changed keys, 50k
new) added (pipeledger: the file is put beside batch 1 in the source folder; DuckDB:
batch 2 upserted). Every result is checked against the generator's expected table
(:mod:`bench.embedded.verify`), untimed.

Rounds run back to back, in fresh folders, the two tools interleaved phase by phase (DuckDB
first in odd rounds): on a shared, loaded machine the ratio within a round moves less
than either time. The report gives medians over rounds, each phase's ratio pipeledger /
DuckDB as the median of the rounds' ratios (with their range), and the processes' CPU
time (user + system, every thread), which a busy machine inflates less than wall time.
The load average is recorded around every round. Results go to ``bench/RESULTS.md``
between ``<!-- BEGIN EMBEDDED -->`` and ``<!-- END EMBEDDED -->``.

Usage, from the repository's root (DuckDB is in the dev extra)::

    .venv/bin/python -m bench.embedded                    # CSV and Parquet, 5 rounds
    .venv/bin/python -m bench.embedded --formats csv --repeat 3
    .venv/bin/python -m bench.embedded --size 100k        # the small file

Modules: ``main`` (command line, rounds, report), ``peer`` (the DuckDB process),
``verify`` (each tool's table against the expected one).
"""
