"""pipeledger.toml as parsed: durations, and a file's mistakes, each named with its key."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from pipeledger.common.durations import parse_duration
from pipeledger.config.model import parse_config
from pipeledger.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("2h", timedelta(hours=2)),
        ("400d", timedelta(days=400)),
        ("1d12h", timedelta(days=1, hours=12)),
        ("1w", timedelta(weeks=1)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "2 hours", "h", "-1d", "1y"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def _pipeline(**extra: object) -> dict[str, object]:
    return {
        "source": {"kind": "csv", "path": "x.csv"},
        "target": "t",
        "key": ["id"],
        "cursor": "u",
        "on_conflict": "update",
        **extra,
    }


def test_config_lists_every_problem_with_its_key() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(
            {
                "pipelines": {
                    "orders": _pipeline(lateness="2 hours", keys=["id"]),
                    "bad name": _pipeline(),
                }
            },
            Path("p.toml"),
        )
    message = str(caught.value)
    assert "pipelines.orders.lateness" in message
    assert "pipelines.orders.keys: unknown key" in message
    assert "pipeline name 'bad name'" in message


def test_config_sql_source_needs_exactly_one_of_table_or_query() -> None:
    with pytest.raises(ConfigError, match="exactly one of 'table' or 'query'"):
        parse_config(
            {"pipelines": {"o": _pipeline(source={"kind": "sql", "url": "sqlite:///x"})}},
            Path("p.toml"),
        )


def test_config_cursor_cannot_be_the_key() -> None:
    with pytest.raises(ConfigError, match="cannot also be a key"):
        parse_config({"pipelines": {"o": _pipeline(cursor="id")}}, Path("p.toml"))


def test_missing_environment_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOPE_NOT_SET", raising=False)
    with pytest.raises(ConfigError, match=r"warehouse\.url: environment variable NOPE_NOT_SET"):
        parse_config({"warehouse": {"url": "postgresql://u:${NOPE_NOT_SET}@h/db"}}, Path("p.toml"))
