"""``python -m bench.models``: SQL models against hand-written SQL and dbt on PostgreSQL.

Bronze (1M orders, loaded by pipeledger) -> silver (an incremental ``merge``, newer wins)
-> gold (a per-day aggregate, ``partition_overwrite``) on a throwaway PostgreSQL with the
server's default settings (fsync on), in three phases: the first build, a no-op re-run,
and an incremental run after 150k bronze rows changed. Each phase runs pipeledger in
process and as a whole ``pipeledger run`` process, the hand-written SQL a careful engineer
writes (in process, and as a ``psql -1`` process), and dbt-core + dbt-postgres as a
``dbt run`` process (its own venv under ``bench/work``). Every tool's silver and gold are
compared with a full recompute from bronze. Then the overhead check: no-op runs of a
20-node project, as whole processes, on the embedded default and on PostgreSQL.
"""
