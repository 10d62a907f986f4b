"""`pipeledger demo`: the guided tour runs on the embedded default and every step checks itself."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from click.testing import CliRunner

import pipeledger.cli.app  # noqa: F401  (registers every command on the group)
from pipeledger.cli.common import app


def test_demo_runs_every_step_as_expected_in_an_empty_folder(tmp_path: Path) -> None:
    folder = tmp_path / "tour"
    result = CliRunner().invoke(app, ["demo", "--dir", str(folder)], catch_exceptions=False)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "unexpected" not in result.stdout
    assert result.stdout.count("as expected") == 8
    # the second backfill of the same range recognised every row and staged none
    assert "backfill: read 5 · staged 0 · inserted 0 · updated 0 · unchanged 5" in result.stdout
    # it ends by saying how to open its ledger in the dashboard (and does not start it)
    assert f"pipeledger -c {folder.resolve() / 'pipeledger.toml'} ui" in result.stdout
    database = folder / ".pipeledger" / "warehouse.db"
    with sqlite3.connect(database) as conn:
        runs = conn.execute('SELECT status FROM "pipeledger.pipeline_runs"').fetchall()
        (rows,) = conn.execute('SELECT count(*) FROM "shop.orders"').fetchone()
        days = conn.execute('SELECT count(*) FROM "gold.daily_revenue"').fetchone()[0]
    assert [status for (status,) in runs] == ["success"] * (6 + 2 * 3)
    assert rows == 1000 + 101 + 5
    assert days == 4  # the backfill's day and the three days of the orders


def test_after_the_demo_every_pipeline_is_healthy_also_after_a_re_run(tmp_path: Path) -> None:
    """A re-run that finds nothing new (no rows written, no watermark moved) is no volume
    anomaly: status stays HEALTHY."""
    folder = tmp_path / "tour"
    assert CliRunner().invoke(app, ["demo", "--dir", str(folder)]).exit_code == 0
    config = ["--config", str(folder / "pipeledger.toml")]
    for _ in range(2):  # after the tour, then after a re-run of everything
        status = CliRunner().invoke(app, [*config, "status", "--json", "--fail-on", "degraded"])
        assert status.exit_code == 0, status.stdout + status.stderr
        found = {s["pipeline"]: s["health"] for s in json.loads(status.stdout)}
        assert found == dict.fromkeys(("gold_daily", "orders", "silver_orders"), "HEALTHY")
        assert CliRunner().invoke(app, [*config, "run"]).exit_code == 0


def test_demo_refuses_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    result = CliRunner().invoke(app, ["demo", "--dir", str(tmp_path)])
    assert result.exit_code == 2
    assert (tmp_path / "keep.txt").read_text() == "mine"
