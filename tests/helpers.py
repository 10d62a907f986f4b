"""A test project: a folder with pipeledger.toml, source files, and ways to look at the result."""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg
from click.testing import CliRunner

import pipeledger.cli.app  # noqa: F401  (registers every command on the group)
from pipeledger.cli.common import app

# run the CLI once the gate file exists: argv = gate, number, pipeledger arguments
_AFTER_GATE = """
import os, sys, time
from pipeledger.cli.app import main
gate, number, *args = sys.argv[1:]
open(f"{gate}.{number}", "w").close()
while not os.path.exists(gate):
    time.sleep(0.002)
sys.argv = ["pipeledger", *args]
main()
"""

ORDERS_HEADER = ["order_id", "qty", "order_date", "amount", "status", "customer_id", "updated_at"]


def toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(value)


def orders_pipeline(**overrides: Any) -> dict[str, Any]:
    pipeline: dict[str, Any] = {
        "source": {"kind": "csv", "path": "data/orders*.csv"},
        "target": "analytics.orders",
        "key": ["order_id"],
        "cursor": "updated_at",
        "on_conflict": "update",
        "columns": {"amount": "numeric(12,2)"},
    }
    pipeline.update(overrides)
    return pipeline


def order(order_id: int, updated_at: str, **values: Any) -> list[Any]:
    row = {
        "order_id": order_id,
        "qty": 1,
        "order_date": "2024-01-01",
        "amount": "10.00",
        "status": "completed",
        "customer_id": 100 + order_id,
        "updated_at": updated_at,
    }
    row.update(values)
    return [row[c] for c in ORDERS_HEADER]


def _backend(warehouse_url: str | None) -> str:
    """``sqlite`` (the embedded default: no url), ``duckdb`` or ``postgres``."""
    if warehouse_url is None:
        return "sqlite"
    return "duckdb" if warehouse_url.startswith("duckdb:") else "postgres"


class Project:
    def __init__(self, root: Path, warehouse_url: str | None) -> None:
        self.root = root
        self.warehouse_url = warehouse_url
        self.backend = _backend(warehouse_url)
        (root / "data").mkdir(exist_ok=True)

    # -- set-up -----------------------------------------------------------------------
    def configure(
        self,
        raw: str = "",
        models: Mapping[str, dict[str, Any]] | None = None,
        pipelines: Mapping[str, dict[str, Any]] | None = None,
        **named: dict[str, Any],
    ) -> Path:
        """Write pipeledger.toml: ``[pipelines.NAME]`` from ``pipelines`` and the keywords,
        ``[models.NAME]`` from ``models``, then ``raw`` as it is."""
        lines = []
        if self.warehouse_url:
            lines += ["[warehouse]", f"url = {toml_value(self.warehouse_url)}", ""]
        sections = [("pipelines", {**(pipelines or {}), **named}), ("models", models or {})]
        for section, nodes in sections:
            for name, body in nodes.items():
                lines.append(f"[{section}.{name}]")
                lines += [f"{k} = {toml_value(v)}" for k, v in body.items()]
                lines.append("")
        path = self.root / "pipeledger.toml"
        path.write_text("\n".join(lines) + raw)
        return path

    def write_csv(
        self, name: str, rows: Sequence[Sequence[Any]], header: Sequence[str] = ORDERS_HEADER
    ) -> Path:
        path = self.root / "data" / name
        with path.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(header)
            writer.writerows(rows)
        return path

    # -- running ----------------------------------------------------------------------
    def cli(self, *args: str) -> tuple[int, str, str]:
        cwd = Path.cwd()
        os.chdir(self.root)
        try:
            result = CliRunner().invoke(app, list(args), catch_exceptions=False)
        finally:
            os.chdir(cwd)
        return result.exit_code, result.stdout, result.stderr

    def run_json(self, *args: str) -> list[dict[str, Any]]:
        code, out, err = self.cli(*args, "--json")
        assert code == 0, f"exit {code}\nstdout: {out}\nstderr: {err}"
        payload: list[dict[str, Any]] = json.loads(out)
        return payload

    def run(self, *names: str) -> dict[str, Any]:
        return self.run_json("run", *names)[0]

    def spawn(self, *args: str, **options: Any) -> subprocess.Popen[str]:
        """``pipeledger *args`` in a process of its own (``options`` go to Popen)."""
        return subprocess.Popen(
            [sys.executable, "-m", "pipeledger", *args],
            cwd=self.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **options,
        )

    def spawn_together(self, *commands: Sequence[str]) -> list[subprocess.Popen[str]]:
        """One process per command, released at the same instant once every one has
        imported pipeledger (imports would otherwise spread their starts over seconds)."""
        processes, release = self.spawn_gated(*commands)
        release()
        return processes

    def spawn_gated(
        self, *commands: Sequence[str]
    ) -> tuple[list[subprocess.Popen[str]], Callable[[], None]]:
        """One process per command, each waiting after its imports until ``release()``
        (which returns once every one of them is ready, then lets them all go)."""
        gate = self.root / f".gate-{uuid.uuid4().hex[:8]}"
        processes = [
            subprocess.Popen(
                [sys.executable, "-c", _AFTER_GATE, str(gate), str(n), *command],
                cwd=self.root,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n, command in enumerate(commands)
        ]

        def release() -> None:
            while not all(Path(f"{gate}.{n}").exists() for n in range(len(commands))):
                assert all(p.poll() is None for p in processes), "a process ended early"
                time.sleep(0.02)
            gate.touch()

        return processes, release

    # -- looking ----------------------------------------------------------------------
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if self.backend == "duckdb":
            return self._duckdb(sql, params, write=False)
        if self.warehouse_url:
            with psycopg.connect(self.warehouse_url) as conn:
                return list(conn.execute(sql, params or None).fetchall())
        return self._sqlite(self.root / ".pipeledger" / "warehouse.db", sql, params)

    def _sqlite(self, path: Path, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        db = sqlite3.connect(path)
        try:
            return list(db.execute(sql.replace("%s", "?"), params).fetchall())
        finally:
            db.close()

    def _duckdb(self, sql: str, params: Sequence[Any], write: bool) -> list[tuple[Any, ...]]:
        """The DuckDB warehouse; a table it lacks is the ledger's, in the SQLite file
        beside it (where pipeledger keeps a DuckDB warehouse's ledger)."""
        import duckdb

        assert self.warehouse_url is not None
        path = Path(self.warehouse_url.removeprefix("duckdb:///"))
        conn = duckdb.connect(str(path), read_only=not write)
        try:
            conn.execute("SET TimeZone = 'UTC'")
            return list(conn.execute(sql.replace("%s", "?"), list(params)).fetchall())
        except duckdb.CatalogException:
            if write:
                raise
            return self._sqlite(path.with_name(path.stem + ".ledger.db"), sql, params)
        finally:
            conn.close()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """A write outside pipeledger (a person at a SQL prompt), committed."""
        if self.backend == "duckdb":
            self._duckdb(sql, params, write=True)
            return
        if self.warehouse_url:
            with psycopg.connect(self.warehouse_url) as conn:
                conn.execute(sql, params or None)
            return
        db = sqlite3.connect(self.root / ".pipeledger" / "warehouse.db")
        try:
            db.execute(sql.replace("%s", "?"), params)
            db.commit()
        finally:
            db.close()

    def table(self, name: str = "analytics.orders") -> str:
        if self.backend != "postgres":  # one table name, schema and all
            return f'"{name}"'
        return ".".join(f'"{p}"' for p in name.split("."))

    def count(self, name: str = "analytics.orders") -> int:
        return int(self.query(f"SELECT count(*) FROM {self.table(name)}")[0][0])

    def exists(self, name: str = "analytics.orders") -> bool:
        if self.backend == "duckdb":
            assert self.warehouse_url is not None
            if not Path(self.warehouse_url.removeprefix("duckdb:///")).exists():
                return False
            sql = "SELECT 1 FROM information_schema.tables WHERE table_name = ?"
            return bool(self.query(sql, [name]))
        if self.backend == "sqlite":
            if not (self.root / ".pipeledger" / "warehouse.db").exists():
                return False
            rows = self.query("SELECT 1 FROM sqlite_master WHERE name = ?", [name])
        else:
            rows = self.query("SELECT to_regclass(%s)", [name])
            rows = [r for r in rows if r[0] is not None]
        return bool(rows)

    def rows(
        self, columns: str = "order_id, status, amount", name: str = "analytics.orders"
    ) -> list[tuple[Any, ...]]:
        result = self.query(f"SELECT {columns} FROM {self.table(name)} ORDER BY 1")
        return [tuple(str(v) for v in row) for row in result]

    def watermarks(self, pipeline: str = "orders") -> dict[str, str]:
        code, out, err = self.cli("state", pipeline, "--json")
        assert code == 0, err
        return {(r["partition"] or ""): r["watermark"] for r in json.loads(out)}


def write_big_orders_csv(path: Path, rows: int, first_id: int, start: str) -> None:
    """A large orders CSV, written by pyarrow (fast), cursors one second apart from ``start``."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    base = dt.datetime.fromisoformat(start)
    ids = pa.array(range(first_id, first_id + rows), pa.int64())
    seconds = pa.array(range(rows), pa.int64())
    cursor = pc.add(
        pa.scalar(base, pa.timestamp("us", tz="UTC")),
        pc.cast(pc.multiply(seconds, 1_000_000), pa.duration("us")),
    )
    table = pa.table(
        {
            "order_id": ids,
            "qty": pc.add(pc.bit_wise_and(seconds, 7), 1),
            "order_date": pa.array([base.date()] * rows, pa.date32()),
            "amount": pa.array(["19.99"] * rows),
            "status": pa.array(["completed"] * rows),
            "customer_id": pc.bit_wise_and(ids, 1023),
            "updated_at": cursor,
        }
    )
    pacsv.write_csv(table, path)
