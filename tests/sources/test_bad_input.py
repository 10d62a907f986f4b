"""Bad input gets a clear error that says where, and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import ORDERS_HEADER, Project, order, orders_pipeline


def _fails_cleanly(project: Project, code: int, *words: str) -> str:
    exit_code, out, err = project.cli("run")
    assert exit_code == code, (out, err)
    for word in words:
        assert word in err, err
    assert "Traceback" not in err
    return err


def _loaded_one_good_file(project: Project) -> dict[str, str]:
    project.write_csv(
        "orders_1.csv", [order(1, "2024-01-01T10:00:00Z"), order(2, "2024-01-01T11:00:00Z")]
    )
    project.run()
    return project.watermarks()


def test_unknown_config_key(project: Project) -> None:
    project.configure(orders=orders_pipeline(on_confict="update"))
    _fails_cleanly(project, 2, "pipeledger.toml", "pipelines.orders.on_confict", "unknown key")
    assert not project.exists()


def test_missing_config_key(project: Project) -> None:
    pipeline = orders_pipeline()
    del pipeline["key"]
    project.configure(orders=pipeline)
    _fails_cleanly(project, 2, "pipelines.orders.key", "required")


@pytest.mark.parametrize(
    "override",
    [
        {"target": "analytics.orders; DROP TABLE x"},
        {"key": ['order_id"; DROP TABLE x; --']},
        {"columns": {"amount) ; DROP TABLE x; --": "numeric(12,2)"}},
        {"columns": {"amount": "numeric(12,2)); DROP TABLE x; --"}},
    ],
)
def test_identifiers_carrying_sql_are_refused(
    project: Project, override: dict[str, object]
) -> None:
    project.configure(orders=orders_pipeline(**override))
    _fails_cleanly(project, 2, "pipelines.orders")
    assert not project.exists()


def test_source_column_name_carrying_sql(project: Project) -> None:
    project.configure(orders=orders_pipeline(columns={}))
    header = ["order_id", 'x"); DROP TABLE y; --', "updated_at"]
    project.write_csv("orders_1.csv", [[1, "a", "2024-01-01T10:00:00Z"]], header)
    _fails_cleanly(project, 1, "not a valid identifier", "nothing was written")
    assert not project.exists()


def test_csv_row_with_too_few_fields(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    marks = _loaded_one_good_file(project)
    path = project.write_csv(
        "orders_2.csv", [order(3, "2024-01-02T10:00:00Z"), order(4, "2024-01-02T11:00:00Z")]
    )
    path.write_text(path.read_text() + "5,1,2024-01-01\n")
    _fails_cleanly(
        project,
        1,
        "orders_2.csv row 3",
        "expected 7 fields, found 3",
        "nothing was written",
        "2024-01-01T11:00:00",
    )
    assert project.count() == 2 and project.watermarks() == marks


def test_unparsable_value_names_file_row_and_column(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    marks = _loaded_one_good_file(project)
    project.write_csv(
        "orders_2.csv",
        [order(3, "2024-01-02T10:00:00Z"), order(4, "2024-01-02T11:00:00Z", qty="many")],
    )
    _fails_cleanly(project, 1, "orders_2.csv row 2", "'qty'", "'many'", "nothing was written")
    assert project.count() == 2 and project.watermarks() == marks


def test_unparsable_declared_value_on_first_load(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    project.write_csv(
        "orders_1.csv",
        [order(1, "2024-01-01T10:00:00Z"), order(2, "2024-01-01T11:00:00Z", amount="12.x")],
    )
    _fails_cleanly(project, 1, "orders_1.csv row 2", "'amount'", "'12.x'")
    assert not project.exists()


def test_null_key(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    marks = _loaded_one_good_file(project)
    project.write_csv(
        "orders_2.csv",
        [
            order(3, "2024-01-02T10:00:00Z"),
            ["", 1, "2024-01-01", "1.00", "x", 1, "2024-01-02T11:00:00Z"],
        ],
    )
    _fails_cleanly(project, 1, "orders_2.csv row 2", "'order_id'", "empty")
    assert project.count() == 2 and project.watermarks() == marks


def test_null_cursor(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z"), order(2, "")])
    _fails_cleanly(project, 1, "orders_1.csv row 2", "'updated_at'")
    assert not project.exists()


def test_cursor_that_is_neither_time_nor_integer(project: Project) -> None:
    project.configure(orders=orders_pipeline(cursor="status"))
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    _fails_cleanly(project, 1, "cursor column 'status' is text", "date, a timestamp or an integer")
    assert not project.exists()


def test_missing_source_file(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    _fails_cleanly(project, 1, "no file matches", "orders*.csv", "nothing was written")


def test_missing_config_file(tmp_path: Path) -> None:
    project = Project(tmp_path, None)
    code, _, err = project.cli("run")
    assert code == 2 and "config file not found" in err


def test_unknown_pipeline_name(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    code, _, err = project.cli("run", "ordres")
    assert code == 2 and "no pipeline or model named 'ordres'" in err


def test_passwords_never_appear(tmp_path: Path) -> None:
    project = Project(tmp_path, "postgresql://loader:s3cretpw@127.0.0.1:1/dw")
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    for args in (("run",), ("run", "--json"), ("--debug", "run"), ("state",)):
        code, out, err = project.cli(*args)
        assert code == 75  # connection refused: transient
        assert "s3cretpw" not in out + err
        assert "loader:***@" in out + err


def test_env_interpolated_secret_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DW_URL", "postgresql://loader:an0therpw@127.0.0.1:1/dw?password=an0therpw")
    project = Project(tmp_path, None)
    project.configure(orders=orders_pipeline())
    (tmp_path / "pipeledger.toml").write_text(
        '[warehouse]\nurl = "${DW_URL}"\n' + (tmp_path / "pipeledger.toml").read_text()
    )
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    code, out, err = project.cli("--debug", "run")
    assert code == 75 and "an0therpw" not in out + err  # unreachable: transient


def test_a_new_source_column_is_reported_and_nothing_written(project: Project) -> None:
    project.configure(orders=orders_pipeline())
    marks = _loaded_one_good_file(project)
    header = [*ORDERS_HEADER, "coupon"]
    project.write_csv("orders_2.csv", [[*order(3, "2024-01-02T10:00:00Z"), "SPRING"]], header)
    _fails_cleanly(project, 1, "orders_2.csv", "new column(s) 'coupon'", "nothing was written")
    assert project.count() == 2 and project.watermarks() == marks


def test_one_failed_pipeline_does_not_stop_the_others(project: Project) -> None:
    project.configure(
        broken=orders_pipeline(source={"kind": "csv", "path": "data/missing*.csv"}),
        orders=orders_pipeline(),
    )
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    code, out, _ = project.cli("run", "--json")
    assert code == 1
    by_name = {r["pipeline"]: r for r in json.loads(out)}
    assert (
        by_name["broken"]["status"] == "failed" and "no file matches" in by_name["broken"]["error"]
    )
    assert by_name["orders"]["status"] == "success" and project.count() == 1
