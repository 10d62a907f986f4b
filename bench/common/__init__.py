"""What the benchmarks share: :mod:`~bench.common.clock` (seconds per phase, medians),
:mod:`~bench.common.postgres` (the server measured, fresh databases, its log and CPU),
:mod:`~bench.common.process` (subprocesses, peak RSS, the ``pipeledger`` command,
``--snapshot``), :mod:`~bench.common.orders` (the generated orders CSVs and their
pipeline), :mod:`~bench.common.machine` and :mod:`~bench.common.results` (targets, tables
and the blocks of ``bench/RESULTS.md``)."""
