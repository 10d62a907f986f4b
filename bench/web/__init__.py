"""Dashboard and ledger-question benchmark (``python -m bench.web``; a script, not a test).

A synthetic ledger (:mod:`bench.web.seed`) of ``--runs`` (100,000) runs of ``--nodes``
(500) nodes, in a fresh PostgreSQL database (a throwaway server unless ``--postgres-url``)
and copied into an embedded SQLite file. For each backend the dashboard serves on a free
port of 127.0.0.1 in this process and each page, HTML and JSON, is fetched through a real
HTTP request ``--calls`` times after a warm-up: median, p95 and max against the target of
200 ms. Then ``sla`` and ``task_trends`` are asked ``--questions`` times, through
:mod:`pipeledger.api` and through their CLI command in-process, against 50 ms; and each
command once as a whole process. On PostgreSQL every statement the pages and questions
ran is EXPLAINed with the values it ran with: none may read the runs, tasks or check
results with a sequential scan.

Results go to the "Web dashboard" block of ``bench/RESULTS.md`` (between ``<!-- BEGIN
WEB -->`` and ``<!-- END WEB -->``); the exit code is 1 when a target is missed.

Usage::

    .venv/bin/python -m bench.web                                   # ~4 min
    .venv/bin/python -m bench.web --runs 20000 --calls 3 --no-write
"""
