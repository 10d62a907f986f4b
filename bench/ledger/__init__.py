"""Run-ledger benchmark for pipeledger on PostgreSQL (a script, not a test).

Two parts, each measured step in a fresh subprocess (as in :mod:`bench.load`):

* ``overhead``  the 1M-row first load of the load benchmark's orders CSV, then the
                identical re-run, with the ledger enabled (the default: in the warehouse,
                committed in the load's transaction) and disabled (``[ledger] enabled =
                false``), in fresh databases, alternating which variant goes first over
                ``--repeat`` rounds; medians and the ratio with/without. The ledger's
                statements, as the sessions report them (``observe_statements``), are
                timed by what they do (migrations check, watchdog, register, the
                ``running`` record, heartbeat, the dataset snapshot, the final record:
                :mod:`bench.ledger.phases`); one extra pair of runs logs every
                statement's server-side duration (``log_min_duration_statement = 0`` for
                those sessions only). The scale check (``--no-scale-check`` skips it)
                re-runs against a ``--scale-factor`` (5x) bigger target with the ledger on,
                to show how the snapshot's cost follows the table.
* ``queries``   a synthetic ledger of ``--runs`` (100,000) runs of 50 pipelines over 60
                days (statuses, triggers and volumes mixed, 3 tasks per finished run),
                written with set-based SQL (the ledger's triggers keep the daily rollup as
                the runs go in), then ``pipeline_status``, ``volume_anomalies``,
                ``list_runs``, ``task_trends``, ``blocked_pipelines`` and the ``sla``
                command's queries through the library on one warm session: median and p95
                of ``--calls`` calls after a warm-up, on PostgreSQL and on the same ledger
                copied into SQLite. ``pipeline_status`` and ``volume_anomalies`` have a
                target on both. Also the ``pipeledger status --json`` command as a whole
                (a new process: interpreter start and imports included), for information.

Results go to the "Run ledger" block of ``bench/RESULTS.md`` (between ``<!-- BEGIN
LEDGER -->`` and ``<!-- END LEDGER -->``; the load benchmark's section is left alone); a
block between ``<!-- BEGIN LEDGER NOTES -->`` and ``<!-- END LEDGER NOTES -->`` is kept.

Usage, from the repository's root::

    .venv/bin/python -m bench.ledger                    # both parts (~4 min)
    .venv/bin/python -m bench.ledger --only queries     # query latency only (~1 min)
    .venv/bin/python -m bench.ledger --only overhead --repeat 3
    .venv/bin/python -m bench.ledger --snapshot HEAD    # a clean export of HEAD

Modules: ``main`` (command line), ``runs`` (the parts' steps), ``child`` (a step
itself), ``synthetic`` (the synthetic ledger), ``phases``, ``report``.
"""
