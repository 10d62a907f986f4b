"""Reading ``pipeledger.toml``: where its warehouse and ledger are, read without the config
model (``pipeledger.config.locate``), must be what the validated config says (one answer, two
readers); and what the reader says when a source has no kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeledger.common.secrets import redact
from pipeledger.config.locate import locate
from pipeledger.config.model import load_config
from pipeledger.errors import ConfigError

PIPELINE = """
[pipelines.orders]
source = { kind = "csv", path = "data/*.csv" }
target = "analytics.orders"
key = ["order_id"]
cursor = "updated_at"
on_conflict = "update"
"""


@pytest.mark.parametrize(
    "head",
    [
        "",
        '[warehouse]\nurl = "postgresql://u:secret@db.example/wh"\n',
        '[ledger]\nurl = "postgresql://u:secret@db.example/ledger"\n',
        '[warehouse]\nurl = "sqlite:///elsewhere.db"\n[ledger]\nurl = "sqlite:///ledger.db"\n',
        '[warehouse]\nurl = "postgresql://u:${PIPELEDGER_TEST_PASSWORD}@db.example/wh"\n',
    ],
    ids=["embedded", "warehouse", "ledger-only", "both", "env"],
)
def test_locate_agrees_with_the_validated_config(
    tmp_path: Path, head: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIPELEDGER_TEST_PASSWORD", "hunter2-locate")
    path = tmp_path / "pipeledger.toml"
    path.write_text(head + PIPELINE)
    config = load_config(path)
    located = locate(path)
    assert (located.warehouse_url, located.ledger_url) == (config.warehouse_url, config.ledger_url)
    assert located.pipelines == ("orders",) and located.models == ()
    assert "hunter2-locate" not in redact(located.warehouse_url)
    assert "secret" not in redact(located.warehouse_url + located.ledger_url)


def test_locate_reads_past_a_mistake_elsewhere_but_not_in_what_it_reads(tmp_path: Path) -> None:
    path = tmp_path / "pipeledger.toml"
    path.write_text(PIPELINE.replace("on_conflict", "on_confict"))
    with pytest.raises(ConfigError, match="on_confict"):
        load_config(path)
    assert locate(path).ledger_url.endswith(".pipeledger/warehouse.db")

    path.write_text('warehouse = "sqlite:///x.db"\n' + PIPELINE)
    with pytest.raises(ConfigError, match=r"\[warehouse\] is a table"):
        locate(path)
    with pytest.raises(ConfigError, match="config file not found"):
        locate(tmp_path / "missing.toml")
    path.write_text(PIPELINE)
    located = locate(path)
    with pytest.raises(ConfigError, match="no pipeline named 'nosuch'"):
        located.check_pipeline("nosuch")


def test_a_source_without_its_kind_says_which_kinds_there_are(tmp_path: Path) -> None:
    path = tmp_path / "pipeledger.toml"
    path.write_text(PIPELINE.replace('kind = "csv"', 'type = "csv"'))
    with pytest.raises(ConfigError, match=r'pipelines\.orders\.source: needs kind = "csv"'):
        load_config(path)


def test_an_unchanged_config_is_parsed_once_and_a_changed_one_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import tomllib

    from pipeledger.config import locate as module

    parsed: list[str] = []
    real = tomllib.loads

    def counting(text: str) -> dict[str, Any]:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(tomllib, "loads", counting)
    path = tmp_path / "pipeledger.toml"
    path.write_text('[warehouse]\nurl = "sqlite:///a.db"\n')
    assert module.locate(path).warehouse_url == "sqlite:///a.db"
    assert module.locate(path).warehouse_url == "sqlite:///a.db"
    assert len(parsed) == 1
    path.write_text('[warehouse]\nurl = "sqlite:///b.db"\n')  # same size, a new time
    stamp = path.stat().st_mtime_ns + 1_000_000
    os.utime(path, ns=(stamp, stamp))
    assert module.locate(path).warehouse_url == "sqlite:///b.db"
    path.write_text('[warehouse]\nurl = "sqlite:///longer.db"\n')
    os.utime(path, ns=(stamp, stamp))  # the same time, another size
    assert module.locate(path).warehouse_url == "sqlite:///longer.db"
    assert len(parsed) == 3
