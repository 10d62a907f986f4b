"""Load benchmark for pipeledger on PostgreSQL (a script, not a test).

One run measures, each step in a fresh subprocess so its peak RSS is its own:

* ``raw-copy``     raw ``COPY ... FROM STDIN (FORMAT csv, HEADER)`` of the source CSV into an
                   empty, unindexed table with matching types (the physical baseline);
* ``first-load``   pipeledger's first load of that CSV into an empty target;
* ``rerun``        the identical run again (the watermark should make it read ~0 rows);
* ``backfill``     a backfill over the whole cursor range (reprocesses everything, writes 0;
                   rows whose stored fingerprint matches are not staged: runs/load/known.py);
* ``backfill-full`` the same with ``--full-compare``: every row staged and compared (info);
* ``reconcile``    ``pipeledger reconcile`` of the loaded source against the target (match);
* ``reconcile-missing`` the same with 1,000 target rows deleted across every window first
                   (put back afterwards): it must find exactly those;
* ``incremental``  a second file (10% of the keys changed, 5% new keys) alone in the
                   source folder;
* ``hand-merge``   the yardstick of the incremental: the same file by hand, COPY into a
                   temporary table and one guarded upsert;
* ``first-load-cli`` the first load as a whole ``pipeledger run`` process.

The start-up part times ``pipeledger --help``, ``state``, ``runs`` and ``status`` as whole
processes (``--calls`` runs each), on the embedded default (a config without a
``[warehouse]`` url: the SQLite file) and on PostgreSQL, beside two baselines measured in
the same run: ``python -c pass`` and ``python -c "import psycopg"``. ``--only startup``
runs that part alone (no load data, no load steps) and rewrites only its block of
``bench/RESULTS.md`` (between ``<!-- BEGIN STARTUP -->`` and ``<!-- END STARTUP -->``).

The scale check (on by default; ``--no-scale-check`` / ``--quick`` skips it) repeats
the load steps with a ``--scale-factor`` (10x) bigger file into a fresh database, with the
*same-size* incremental batch (same absolute number of changed and new keys): its time
must not grow with the table, and peak RSS must not grow with the input. Every step runs
``--repeat`` (3) times in fresh databases and the median round is reported (single runs on
a small shared VM vary by +-30%). Phases come from the run's own steps and its statements
(:mod:`bench.load.phases`). Results go to ``bench/RESULTS.md``; a block between
``<!-- BEGIN NOTES -->`` and ``<!-- END NOTES -->`` in that file is kept, and so are the
blocks of ``python -m bench.ledger``, ``bench.gate``, ``bench.history`` and the drill
(``python -m tests.drills``).

Usage, from the repository's root::

    .venv/bin/python -m bench.load                     # 1M + 10M, 3 rounds (~8 min)
    .venv/bin/python -m bench.load --quick --repeat 1  # 1M rows, one round
    .venv/bin/python -m bench.load --only startup      # the start-up part (20-40 s)
    .venv/bin/python -m bench.load --server-log        # + server-side statement times
    .venv/bin/python -m bench.load --rows 200000       # smaller
    PIPELEDGER_BENCH_POSTGRES_URL=postgresql://... .venv/bin/python -m bench.load

Modules: ``main`` (command line, runs), ``series`` (the rounds' steps), ``measure`` (a
step in a subprocess, the median round), ``child`` (the step itself), ``baselines`` (raw
COPY, the hand-written upsert), ``phases``, ``startup``, ``targets``, ``report``.
"""
