"""The benchmarks class statements by the text pipeledger's builders write
(``bench/load/phases.py``, ``bench/ledger/phases.py``). These tests keep the classes in step
with the builders: each class matches exactly the golden cases it names, and the
benchmarks' own load, run with its ledger, shows every class such a load runs (not a
heartbeat, which waits for its interval, nor the insert and the dedupe of a new target or
a stage with repeated keys)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.common.orders import PIPELINE, generate, link_source, pipeline
from bench.ledger import phases as ledger
from bench.load import phases as load
from pipeledger import api
from pipeledger.config.model import parse_config
from pipeledger.warehouse.dialect import POSTGRES
from pipeledger.warehouse.session import StatementKind, observe_statements
from tests.golden.cases import CASES

MERGE, INSERT, KEY, INDEX, DEDUPE, HASHES = (c.label for c in load.CLASSES)
MIGRATIONS, WATCHDOG, REGISTER, RUNNING, HEARTBEAT, SNAPSHOT, FINAL = ledger.LABELS
# golden case -> the class of its statements that have one (the others have none)
LOAD_CASES = {
    "merge under on_conflict=update": MERGE,
    "merge under on_conflict=newer_wins": MERGE,
    "merge under on_conflict=ignore": MERGE,
    "merge under on_conflict=error": MERGE,
    "merge of a composite key into a target without fingerprints": MERGE,
    "merge unfiltered (an incremental batch) under on_conflict=newer_wins": MERGE,
    "merge of a delete marker pipeline that soft-deletes": MERGE,
    "merge under on_conflict=ignore of a soft-deleting pipeline": MERGE,
    "insert_new into a target this run created": INSERT,
    "add_primary_key after a bulk insert": KEY,
    "promote_stage into the target": KEY,
    "unique_key_index on the stage": INDEX,
    "unique_key_index on the deduplicated stage": INDEX,
    "dedupe_stage": DEDUPE,
    "dedupe_stage of a delete marker pipeline": DEDUPE,
    "dedupe_stage of an SCD2 history (one row per key and cursor)": DEDUPE,
    "dedupe_stage of a snapshot without a cursor": DEDUPE,
    "stored_hashes_within a range of the target's storage": HASHES,
    "staged_key_hashes": HASHES,
}
LEDGER_CASES = {
    "upsert_run": RUNNING,
    "heartbeat": HEARTBEAT,
    "renew_waiter": HEARTBEAT,  # a queued run's lease (the heartbeat's statement)
    "finish_run": FINAL,
    "insert_task": FINAL,
    "insert_event": FINAL,
    "insert_snapshot": FINAL,
    "insert_quality": FINAL,
    "ensure_pipeline": REGISTER,
    "upsert_pipeline": REGISTER,
    "delete_dependencies": REGISTER,
    "insert_dependency": REGISTER,
    "running_runs": WATCHDOG,
    "abandon_run": WATCHDOG,
    "abandon_dead_waiters": WATCHDOG,  # queued runs whose lease expired (the queue's watchdog)
}
Statements = list[tuple[StatementKind, str]]


def golden_statements() -> Iterator[tuple[str, str]]:
    """(case name, statement) of every golden case on PostgreSQL, the benchmarks' backend."""
    for case in CASES:
        if "postgres" in case.dialects:
            for _, statement in case.build(POSTGRES).statements:
                yield case.name, statement


def assert_classes(classify: Callable[[str], str | None], cases: dict[str, str]) -> None:
    """Of every golden statement, exactly those of ``cases`` have a class: theirs."""
    seen: dict[str, set[str]] = defaultdict(set)
    for name, statement in golden_statements():
        label = classify(statement)
        if label is not None:
            assert cases.get(name) == label, f"{name}: {statement[:120]}"
            seen[name].add(label)
    assert {name: {label} for name, label in cases.items()} == seen


def test_each_load_class_matches_exactly_the_builders_it_names() -> None:
    def classify(sql: str) -> str | None:
        label = load.statement_class(sql)
        return None if label == load.OTHER_SQL else label

    assert_classes(classify, LOAD_CASES)


def test_each_ledger_class_matches_exactly_the_builders_it_names() -> None:
    assert_classes(ledger.ledger_class, LEDGER_CASES)


class Recorder:
    """Every statement the sessions report, by the step running when it ran."""

    def __init__(self) -> None:
        self.step = ""
        self.seen: dict[str, Statements] = defaultdict(list)

    def __call__(self, kind: StatementKind, sql: str, seconds: float) -> None:
        self.seen[self.step].append((kind, sql))


def run_orders(url: str, tmp_path: Path) -> dict[str, Statements]:
    """The orders pipeline of the benchmarks: a first load, an incremental file alone, then
    a backfill of the whole range, each with the statements its sessions ran."""
    data = generate(tmp_path / "work", 2_000, 1, 200, 100, "classes")
    assert data.incremental is not None
    source = link_source(tmp_path / "source", data.base)
    body = {"warehouse": {"url": url}, "pipelines": {PIPELINE: pipeline(source.name)}}
    config = parse_config(body, tmp_path / "pipeledger.toml")
    recorder = Recorder()
    with observe_statements(recorder):
        recorder.step = "first-load"
        api.run_one(config, PIPELINE)
        link_source(source, data.incremental)
        recorder.step = "incremental"
        api.run_one(config, PIPELINE)
        recorder.step = "backfill"
        api.backfill(config, PIPELINE, data.cursor_min, data.cursor_max)
    return recorder.seen


def test_a_load_and_its_ledger_run_every_class_the_benchmarks_report(
    postgres_url: str, tmp_path: Path
) -> None:
    runs = run_orders(postgres_url, tmp_path)
    loads = {step: {load.classify(k, sql) for k, sql in found} for step, found in runs.items()}
    assert {load.STAGE, KEY} <= loads["first-load"]
    assert {load.STAGE, INDEX, MERGE} <= loads["incremental"]
    assert HASHES in loads["backfill"]
    ledgers = {ledger.ledger_class(sql) for found in runs.values() for _, sql in found}
    assert {MIGRATIONS, WATCHDOG, REGISTER, RUNNING, SNAPSHOT, FINAL} <= ledgers
