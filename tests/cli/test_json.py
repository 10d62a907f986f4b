"""With ``--json`` every command prints one JSON document on stdout whatever happens (a
broken source, a broken config, an unexpected error, a command line the parser refuses),
with ``status`` and ``error``, and exits with the documented code. Run as a user runs it:
the installed command in a process of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers import Project, order, orders_pipeline


@pytest.fixture
def embedded(tmp_path: Path) -> Project:
    """A project on the embedded default: what is printed does not depend on the backend."""
    return Project(tmp_path, None)


def pipeledger(project: Project, *args: str) -> tuple[int, Any, str]:
    """Exit code, stdout parsed as JSON (it must parse), stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "pipeledger", *args],
        cwd=project.root,
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        payload = json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"stdout is not one JSON document:\n{done.stdout}\nstderr:\n{done.stderr}")
    return done.returncode, payload, done.stderr


def failed(payload: Any, code: int, error_type: str | None = None) -> str:
    """The error of a failed command's document (a dict, or a run's list of outcomes)."""
    documents = payload if isinstance(payload, list) else [payload]
    assert documents, payload
    for document in documents:
        assert document["status"] in ("failed", "skipped"), document
        assert document["error"], document
        assert document["exit_code"] == code, document
        if error_type is not None:
            assert document["error_type"] == error_type, document
    return " ".join(str(d["error"]) for d in documents)


def broken_config(project: Project) -> None:
    project.configure(orders=orders_pipeline(on_confict="update"))


def corrupt_parquet(project: Project) -> None:
    """A Parquet file whose footer is whole but whose data pages were overwritten (a disk
    or a copy gone wrong): the reader fails when it decompresses them."""
    rows = 1000
    table = pa.table(
        {
            "order_id": pa.array(range(rows), pa.int64()),
            "status": pa.array([f"s{i % 7}" for i in range(rows)]),
            "updated_at": pa.array([datetime(2024, 1, 1, tzinfo=UTC)] * rows),
        }
    )
    path = project.root / "data" / "orders.parquet"
    pq.write_table(table, path, compression="snappy")
    data = bytearray(path.read_bytes())
    data[100:600] = b"\xab" * 500
    path.write_bytes(bytes(data))
    project.configure(
        orders=orders_pipeline(
            columns={}, source={"kind": "parquet", "path": "data/orders.parquet"}, checks={}
        )
    )


# -- run, backfill, state, check, watchdog ----------------------------------------------


def test_run_json_on_a_broken_source_is_a_list_of_outcomes(embedded: Project) -> None:
    embedded.configure(orders=orders_pipeline())  # no source file
    code, payload, _ = pipeledger(embedded, "run", "--json")
    assert code == 1
    assert "no file matches" in failed(payload, 1)
    assert payload[0]["pipeline"] == "orders" and payload[0]["run_id"]


@pytest.mark.parametrize(
    "args",
    [
        ("run", "--json"),
        ("backfill", "orders", "--start", "2024-01-01", "--end", "2024-01-02", "--json"),
        ("dag", "--json"),
        ("check", "orders", "--json"),
        ("watchdog", "--json"),
    ],
    ids=["run", "backfill", "dag", "check", "watchdog"],
)
def test_a_broken_config_is_one_json_error_exit_2(embedded: Project, args: tuple[str, ...]) -> None:
    broken_config(embedded)
    code, payload, err = pipeledger(embedded, *args)
    assert code == 2, err
    assert "pipelines.orders.on_confict: unknown key" in failed(payload, 2, "ConfigError")


def test_an_unexpected_error_is_json_exit_1(embedded: Project) -> None:
    corrupt_parquet(embedded)
    code, payload, err = pipeledger(embedded, "run", "--json")
    assert code == 1, err
    assert payload[0]["reason"] == "unexpected"
    assert "Corrupt snappy compressed data" in failed(payload, 1)
    code, payload, err = pipeledger(embedded, "check", "orders", "--json")
    assert code == 1, err
    assert "Corrupt snappy compressed data" in failed(payload, 1, "OSError")
    assert "unexpected OSError" in err


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("run", "--json", "--bogus"), "No such option"),
        (("backfill", "orders", "--json"), "Missing option '--start'"),
        (("cancel", "--json"), "Missing argument"),  # check takes no NAME: every model
        (("run", "--json", "--trigger", "sometimes"), "Invalid value for '--trigger'"),
    ],
    ids=["unknown-option", "missing-option", "missing-argument", "bad-value"],
)
def test_a_command_line_the_parser_refuses_is_json_exit_2(
    embedded: Project, args: tuple[str, ...], words: str
) -> None:
    embedded.configure(orders=orders_pipeline())
    code, payload, err = pipeledger(embedded, *args)
    assert code == 2, err
    assert words in failed(payload, 2, "UsageError")
    assert words in err  # a person still reads it on stderr


# -- the ledger's commands --------------------------------------------------------------


@pytest.mark.slow
def test_ledger_commands_answer_in_json_whatever_happens(project: Project) -> None:
    # the read commands need only where the ledger is: a mistake in a pipeline's section
    # does not stop them (run and check report it); migrating validates the whole config
    broken_config(project)
    for args in (("runs", "--json"), ("status", "--json"), ("state", "--json")):
        code, payload, err = pipeledger(project, *args)
        assert (code, payload) == (0, []), (args, err)
    code, payload, err = pipeledger(project, "ledger", "migrate", "--json")
    assert code == 2, err
    assert "on_confict" in failed(payload, 2, "ConfigError")
    for ledger, words in (("url = 5", "ledger.url is a string"),
                          ('url = "${PIPELEDGER_NO_SUCH_VARIABLE}"', "is not set"),
                          ('[ledger]\nurl = "x"', "not valid TOML")):  # fmt: skip
        project.configure(f"[ledger]\n{ledger}\n", orders=orders_pipeline())
        for args in (("runs", "--json"), ("status", "--json"), ("state", "--json")):
            code, payload, err = pipeledger(project, *args)
            assert code == 2, (args, err)
            assert words in failed(payload, 2, "ConfigError")

    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    assert project.run()["status"] == "success"
    code, payload, _ = pipeledger(project, "show", "nosuchrun", "--json")
    assert code == 1
    assert "no run with id 'nosuchrun'" in failed(payload, 1, "PipeledgerError")
    code, payload, _ = pipeledger(project, "runs", "--since", "last tuesday", "--json")
    assert code == 2
    assert "--since 'last tuesday'" in failed(payload, 2, "ConfigError")
    code, payload, _ = pipeledger(project, "runs", "--status", "lost", "--json")
    assert code == 2
    assert "Invalid value for '--status'" in failed(payload, 2, "UsageError")
    code, payload, _ = pipeledger(project, "ledger", "prune", "--json")
    assert code == 2
    assert "Missing option '--older-than'" in failed(payload, 2, "UsageError")


# -- the quarantine's commands ----------------------------------------------------------


def test_quarantine_commands_answer_in_json_whatever_happens(embedded: Project) -> None:
    embedded.configure(orders=orders_pipeline(checks={"on_fail": "quarantine"}))
    code, payload, _ = pipeledger(embedded, "quarantine", "orders", "--run", "abc", "--json")
    assert code == 2
    assert "--run 'abc'" in failed(payload, 2, "ConfigError")
    code, payload, _ = pipeledger(embedded, "quarantine", "nosuch", "--json")
    assert code == 2
    assert "nosuch" in failed(payload, 2)
    code, payload, _ = pipeledger(embedded, "quarantine", "replay", "--json")
    assert code == 2
    assert "Missing argument" in failed(payload, 2, "UsageError")


@pytest.mark.parametrize(
    ("args", "word"),
    [
        (("--limit", "0"), "limit 0"),
        (("--limit", "1001"), "limit 1001"),
        (("--page", "0"), "page 0"),
        (("--page", "-1", "--limit", "5"), "page -1"),
    ],
)
def test_a_page_of_status_it_cannot_take_is_json_exit_2(
    embedded: Project, args: tuple[str, ...], word: str
) -> None:
    code, payload, stderr = pipeledger(embedded, "status", "--json", *args)
    assert code == 2 and failed(payload, 2, "ConfigError").startswith(word) and word in stderr
