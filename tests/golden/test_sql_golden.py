"""Golden SQL: what every pure SQL builder produces for fixed inputs, per dialect, against the
text kept in ``tests/golden/<dialect>/<module>.sql`` (as sqlglot pins its generator in its
``tests/dialects/``), so that a change to generated SQL shows in a diff and not in a failing
load. Every golden also runs, on the real database of its dialect, in a transaction that
is rolled back, after what it needs was built: a golden that is wrong SQL cannot pass.

The inputs are in :mod:`tests.golden.cases`. After a deliberate change to a builder::

    .venv/bin/python -m pytest tests/golden --update-golden     # then review git diff
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pipeledger.common.columns import ROW_HASH, Column
from pipeledger.ledger.tables import LEDGER
from pipeledger.publish import merge_sql as load_sql
from pipeledger.quality import checks
from pipeledger.runs.replay import ROW_ID
from pipeledger.state import guard_sql
from pipeledger.state.tables import STATE
from pipeledger.warehouse import stage
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.warehouse.dialect import POSTGRES, SQLITE, Dialect
from pipeledger.warehouse.migrations import migrate
from pipeledger.warehouse.session import Session
from tests.golden.cases import CASES, COLUMNS, MODULES, STAGED_ROW, TARGET, Case, spec

HERE = Path(__file__).parent
DIALECTS: dict[str, Dialect] = {"postgres": POSTGRES, "sqlite": SQLITE}
NAMES = {"postgres": "PostgreSQL", "sqlite": "SQLite"}
CASE_HEADER = "-- case: "


def golden_file(dialect: str, module: str) -> Path:
    return HERE / dialect / f"{module}.sql"


def render_file(dialect: str, module: str) -> str:
    """A golden file as the builders write it today."""
    d = DIALECTS[dialect]
    lines = [
        f"-- Golden SQL of {MODULES[module]} on {NAMES[dialect]}, for the inputs in",
        "-- tests/golden/cases.py. Not edited by hand: after changing a builder, run",
        "-- `.venv/bin/python -m pytest tests/golden --update-golden` and review the diff.",
    ]
    for case in CASES:
        if case.module == module and dialect in case.dialects:
            lines += ["", f"{CASE_HEADER}{case.name}", case.build(d).render()]
    return "\n".join(lines) + "\n"


def sections(text: str) -> dict[str, str]:
    """Case name -> its expected text, from a golden file."""
    found: dict[str, str] = {}
    name: str | None = None
    body: list[str] = []
    for line in [*text.splitlines(), f"{CASE_HEADER}(end)"]:
        if line.startswith(CASE_HEADER):
            if name is not None:
                found[name] = "\n".join(body).strip("\n")
            name, body = line.removeprefix(CASE_HEADER), []
        elif name is not None:
            body.append(line)
    return found


def _files() -> set[tuple[str, str]]:
    return {(dialect, case.module) for case in CASES for dialect in case.dialects}


@pytest.fixture(scope="module", autouse=True)
def update_golden(request: pytest.FixtureRequest) -> None:
    """``--update-golden``: rewrite every golden file from the builders first."""
    if not request.config.getoption("--update-golden"):
        return
    for dialect, module in _files():
        path = golden_file(dialect, module)
        path.parent.mkdir(exist_ok=True)
        path.write_text(render_file(dialect, module))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_=]+", "_", text).strip("_")


def _params(select: bool = False) -> list[Any]:
    return [
        pytest.param(dialect, case, id=f"{dialect}-{case.module}-{_slug(case.name)}")
        for case in CASES
        for dialect in case.dialects
        if case.runs or not select
    ]


@pytest.mark.parametrize(("dialect", "case"), _params())
def test_generated_sql_matches_its_golden(dialect: str, case: Case) -> None:
    path = golden_file(dialect, case.module)
    expected = sections(path.read_text()) if path.exists() else {}
    assert case.name in expected, f"{path} has no case {case.name!r}: run with --update-golden"
    assert case.build(DIALECTS[dialect]).render() == expected[case.name]


def test_every_golden_file_and_section_has_a_case() -> None:
    kept = {(p.parent.name, p.stem) for p in HERE.glob("*/*.sql")}
    assert kept == _files(), "stale or missing golden files: run with --update-golden"
    for dialect, module in _files():
        wanted = [c.name for c in CASES if c.module == module and dialect in c.dialects]
        assert list(sections(golden_file(dialect, module).read_text())) == wanted


# -- running each golden ----------------------------------------------------------------


@pytest.fixture(scope="module")
def databases(postgres_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
    dict[str, str]
]:  # fmt: skip
    """One database per dialect for this module; every case rolls back what it did."""
    name = f"golden_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    sqlite = tmp_path_factory.mktemp("golden") / "golden.db"
    yield {
        "postgres": postgres_server.rsplit("/", 1)[0] + f"/{name}",
        "sqlite": f"sqlite:///{sqlite}",
    }
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def build_world(session: Session, parts: frozenset[str]) -> None:
    """What a case needs before its SQL can run, made with pipeledger's own builders."""
    d = session.dialect
    statements: list[str] = []
    if "ledger" in parts:
        migrate(session, LEDGER)
    if "state" in parts:
        migrate(session, STATE)
    if parts & {"schema", "target", "quarantine"}:
        statements += [s for s in [stage.create_schema(d, TARGET)] if s]
    if "target" in parts:
        statements.append(load_sql.create_target(d, spec()))
    if "trigger" in parts:
        statements.append(guard_sql.forget_hash_trigger(d, TARGET))
    if "quarantine" in parts:
        statements.append(checks.create_quarantine(d, TARGET))
    staged = [*COLUMNS, ROW_HASH]
    if "replay_stage" in parts:
        staged.append(Column(ROW_ID, "text"))
    if parts & {"stage", "replay_stage"}:
        statements.append(stage.create_stage(d, staged))
    for statement in statements:
        session.execute(statement)
    if parts & {"stage", "replay_stage"}:  # one staged row: the statements meet real values
        row = [*STAGED_ROW, "q1"][: len(staged)]
        session.execute(stage.insert_stage(d, [c.name for c in staged]), row)
    if "stage_unique" in parts:
        session.execute(load_sql.dedupe_stage(d, spec()))


def run_statement(session: Session, statement: str, params: list[Any] | None) -> None:
    """With values, for real; without, a statement that takes parameters is EXPLAINed with
    NULLs (it is planned against the real tables but writes nothing)."""
    marks = statement.count(session.dialect.param)
    if params is not None or not marks:
        session.execute(statement, params or [])
    else:
        session.execute(f"EXPLAIN {statement}", [None] * marks)


@pytest.mark.parametrize(("dialect", "case"), _params(select=True))
def test_golden_sql_runs_on_the_database(
    dialect: str, case: Case, databases: dict[str, str]
) -> None:
    golden = case.build(DIALECTS[dialect])
    with open_warehouse(databases[dialect]).session() as session:
        session.mark_rollback()
        build_world(session, case.world)
        for statement in case.setup(session.dialect):
            session.execute(statement)
        params = list(golden.params) if golden.params is not None else None
        if params is None and case.bind is not None:
            params = case.bind(session.dialect)
        for _, statement in golden.statements:
            run_statement(session, statement, params)
