"""One measured step of the models benchmark, in a fresh process:
``python -m bench.models.child --step STEP ...``. ``hand``: the hand-written SQL in one
psycopg transaction; ``pipeledger``: ``api.run`` of one pair of models; ``bronze``: the
bronze load (not timed by the report). It prints one JSON object: its seconds (the work
alone: imports, a run's lazy ones too, and interpreter start excluded), what each node
reported and how many statements it issued, by kind (``observe_statements``)."""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg

from bench.common.process import own_peak_rss_mb
from bench.models.project import BRONZE_PIPELINE, hand_statements

SLOWEST = 5  # statements named in the report: where a phase's time goes
SHOWN = 160  # characters of each


def hand(url: str, schema: str) -> dict[str, Any]:
    """The hand-written silver + gold, as one transaction (connecting included, as
    pipeledger's run includes its own)."""
    started = time.perf_counter()
    with psycopg.connect(url) as conn:
        for statement in hand_statements(schema):
            conn.execute(statement)
        conn.commit()
    return {"seconds": time.perf_counter() - started}


def pipeledger_run(config_path: Path, nodes: list[str]) -> dict[str, Any]:
    """``api.run`` of ``nodes`` (config read included), with every statement counted."""
    # what a run imports lazily (the config's model, the runner, the models' publishing,
    # the PostgreSQL adapter and with it psycopg: 0.27-0.32 s here) is imported before the
    # clock: the seconds are the work alone, as the hand SQL's are (it imports psycopg
    # first too); what imports cost shows in the whole `pipeledger run` process
    import pipeledger.config.model
    import pipeledger.runs.model.job
    import pipeledger.runs.nodes
    import pipeledger.warehouse.adapters.postgres  # noqa: F401
    from pipeledger import api
    from pipeledger.common.buffers import prefer_system_allocator
    from pipeledger.warehouse.session import observe_statements

    prefer_system_allocator()  # as the pipeledger command does
    kinds: Counter[str] = Counter()
    statement_s = 0.0
    timed: list[tuple[float, str]] = []

    def observe(kind: str, sql: str, seconds: float) -> None:
        nonlocal statement_s
        kinds[kind] += 1
        statement_s += seconds
        timed.append((seconds, " ".join(sql.split())[:SHOWN]))

    with observe_statements(observe):
        started = time.perf_counter()
        outcomes = api.run(api.load_config(config_path), nodes)
        seconds = time.perf_counter() - started
    nodes_out = [o.to_json() for o in outcomes]
    return {
        "seconds": seconds,
        "nodes": nodes_out,
        "statements": dict(kinds),
        "statement_s": statement_s,
        "slowest": sorted(timed, reverse=True)[:SLOWEST],
    }


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--step", required=True, choices=["hand", "pipeledger", "bronze"])
    p.add_argument("--url", help="hand: the database")
    p.add_argument("--schema", help="hand: its schema")
    p.add_argument("--config", type=Path, help="pipeledger, bronze: the project's config")
    p.add_argument("--node", action="append", default=[], help="pipeledger: a node to run")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    if args.step == "hand":
        out = hand(args.url, args.schema)
    else:
        out = pipeledger_run(args.config, args.node or [BRONZE_PIPELINE])
    out["vmhwm_mb"] = own_peak_rss_mb()
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
