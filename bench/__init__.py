"""pipeledger's benchmarks: scripts, not tests, run from the repository's root.

- ``python -m bench.load``: the load path against raw COPY and a hand-written upsert, and
  the quick commands' start-up (``./dev bench``);
- ``python -m bench.ledger``: what the run ledger costs a load, and its queries' latency;
- ``python -m bench.gate``: what the quality gate costs a load;
- ``python -m bench.history``: full-snapshot deletes and SCD2 against a plain merge;
- ``python -m bench.embedded``: the embedded default (and a DuckDB warehouse) against a
  hand-written DuckDB load of the peers' 1M-row orders file, as whole processes.

:mod:`bench.common` holds what they share: the clock and the statistics, the PostgreSQL
server and its fresh databases, the subprocesses, the orders source, the machine line and
the writer of their blocks of ``bench/RESULTS.md``. bench/README.md says what each
measures and its targets.

A benchmark's parent process imports :mod:`pipeledger` only inside the functions that need
it, after ``--snapshot`` has put a clean export of a commit first on the import path; the
measured steps run in subprocesses (``*.child`` modules), which import it freely.
"""
