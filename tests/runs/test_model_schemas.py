"""Schemas are made outside a run's transaction: four models into one new PostgreSQL schema,
side by side, all succeed on the first DAG run of a fresh database, every time."""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg

from tests.helpers import Project, order

TRIES = 5


def test_four_models_into_one_new_schema_side_by_side(postgres_server: str, tmp_path: Path) -> None:
    for attempt in range(TRIES):
        name = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            root = tmp_path / f"try{attempt}"
            root.mkdir()
            project = Project(root, postgres_server.rsplit("/", 1)[0] + f"/{name}")
            query = "select order_id, amount, updated_at from bronze.orders"
            models = {
                f"m_{m}": {
                    "query": query,
                    "target": f"silver.m_{m}",
                    "key": ["order_id"],
                    "cursor": "updated_at",
                }
                for m in "abcd"
            }
            project.configure(
                models=models,
                orders={
                    "source": {"kind": "csv", "path": "data/orders*.csv"},
                    "target": "bronze.orders",
                    "key": ["order_id"],
                    "cursor": "updated_at",
                    "on_conflict": "update",
                },
            )
            project.write_csv("orders.csv", [order(i, "2024-01-01T00:00:00Z") for i in range(50)])
            outcomes = project.run_json("run", "--threads", "4")
            assert [o["status"] for o in outcomes] == ["success"] * 5, attempt
        finally:
            with psycopg.connect(postgres_server, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
