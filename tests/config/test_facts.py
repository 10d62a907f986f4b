"""What reading the models' SQL found is remembered beside the config (``.pipeledger/
model-facts.json``) and used only for the very text it was found in: an unchanged project is
not parsed again, a changed query is read (and refused) as if nothing were remembered, and a
file that is stale, broken or cannot be written changes nothing but the time taken."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeledger import api
from pipeledger.common import sqlparse
from pipeledger.config.facts import FACTS_FILE
from pipeledger.config.model import Config
from pipeledger.errors import ConfigError
from pipeledger.runs.model.check import refuse_untranslatable
from pipeledger.warehouse.adapters import open_warehouse
from tests.helpers import Project, order, orders_pipeline

SILVER = "select order_id, amount, updated_at from raw.orders where status <> 'cancelled'"
GOLD = "select amount, count(*) as n from s.silver group by amount"


def _configure(project: Project, gold: str = GOLD) -> Path:
    return project.configure(
        orders=orders_pipeline(target="raw.orders"),
        models={
            "silver": {"query": SILVER, "target": "s.silver", "key": ["order_id"]},
            "gold": {"query": gold, "target": "g.gold", "key": ["amount"]},
        },
    )


def _facts_file(project: Project) -> Path:
    return project.root / ".pipeledger" / FACTS_FILE


def _parsed(config: Config) -> list[str]:
    """The models whose SQL was read by the parser while the config was loaded."""
    return [name for name in config.models if "tree" in config.model_sql(name).__dict__]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_an_unchanged_project_is_not_parsed_again(project: Project) -> None:
    path = _configure(project)
    first = api.load_config(path)
    assert _parsed(first) == ["silver", "gold"] and _facts_file(project).is_file()
    again = api.load_config(path)
    assert _parsed(again) == []  # the tables and the plans were remembered
    assert [str(t) for t in again.model_sql("gold").tables] == ["s.silver"]
    assert again.upstreams("gold") == ("silver",) and again.upstreams("silver") == ("orders",)
    assert again.plan_json("silver") == json.loads(json.dumps(first.plan_json("silver")))
    # what the parser would say is still said when asked: the facts only skip a reading
    assert again.model_sql("gold").aggregates and _parsed(again) == ["gold"]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_changed_query_is_read_again(project: Project) -> None:
    api.load_config(_configure(project))
    gold = "select amount, count(*) as n from raw.orders group by amount"
    changed = api.load_config(_configure(project, gold=gold))
    assert _parsed(changed) == ["gold"]
    assert changed.upstreams("gold") == ("orders",)  # the graph follows the new text
    _configure(project, gold="select count(* from s.silver")
    with pytest.raises(ConfigError, match="not valid SQL"):
        api.load_config(project.root / "pipeledger.toml")
    _configure(project, gold="select nextval('seq') as n from s.silver")
    with pytest.raises(ConfigError, match="nextval"):
        api.load_config(project.root / "pipeledger.toml")


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    "content",
    ["not json", "[]", '{"stamp": "another version", "facts": {}}', '{"facts": 3}'],
)
def test_stale_or_broken_facts_are_read_as_none(project: Project, content: str) -> None:
    path = _configure(project)
    api.load_config(path)
    remembered = json.loads(_facts_file(project).read_text())
    if content.startswith('{"facts"'):  # the right stamp, a broken body
        content = json.dumps({"stamp": remembered["stamp"], "facts": 3})
    _facts_file(project).write_text(content)
    config = api.load_config(path)
    assert _parsed(config) == ["silver", "gold"]
    assert config.upstreams("gold") == ("silver",)
    assert json.loads(_facts_file(project).read_text())["stamp"] == remembered["stamp"]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_facts_that_cannot_be_written_change_nothing(project: Project) -> None:
    path = _configure(project)
    _facts_file(project).mkdir(parents=True)  # a folder where the file would go
    for _ in range(2):
        config = api.load_config(path)
        assert _parsed(config) == ["silver", "gold"]
        assert config.upstreams("gold") == ("silver",)
    assert _facts_file(project).is_dir()
    assert not [p for p in _facts_file(project).parent.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_translation_is_checked_again_when_an_upstream_column_changes(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _configure(project)
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    for _ in range(2):  # the second translates with the upstream tables made by the first
        assert [o["status"] for o in project.run_json("run")] == ["success"] * 3
    translated: list[str] = []
    render = sqlparse.render

    def counting(tree: object, where: str, *args: object) -> str:
        translated.append(where)
        return render(tree, where, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlparse, "render", counting)
    config = api.load_config(path)
    warehouse = open_warehouse(config.warehouse_url)
    refuse_untranslatable(config, warehouse, ["silver", "gold"])
    assert translated == []  # both translated before, with these upstream columns
    project.execute('ALTER TABLE "s.silver" ADD COLUMN note text')
    refuse_untranslatable(config, warehouse, ["silver", "gold"])
    assert translated == ["models.gold.query"]  # its upstream's columns changed


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_no_op_run_of_unchanged_models_does_not_import_the_parser(project: Project) -> None:
    from tests.cli.test_startup import probe

    _configure(project)
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    for _ in range(2):  # the second translates with the upstream tables made by the first
        project.run_json("run")
    printed, modules = probe(project.root, ["run", "--json"])
    assert "exit 0" in printed
    assert not {m for m in modules if m.split(".")[0] == "sqlglot"}
    assert "pipeledger.common.sqlparse" not in modules
    # changed: read again
    _configure(project, gold="select amount, max(order_id) as n from s.silver group by 1")
    printed, modules = probe(project.root, ["run", "--json"])
    assert "exit 0" in printed and "pipeledger.common.sqlparse" in modules


def test_the_text_and_the_parser_name_one_dialect() -> None:
    from pipeledger.common import sqltext

    assert sqltext.READ == sqlparse.READ  # spelled twice so that the text never loads sqlglot
