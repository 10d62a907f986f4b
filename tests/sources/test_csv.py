"""CSV: decimal text stays exact, fields of any size load, and the shapes CSV takes in the
wild (a byte-order mark, CRLF, quoted newlines and delimiters) read as written."""

from __future__ import annotations

import csv
import io
import json
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from tests.helpers import Project

HEADER = ["id", "amount", "updated_at"]


def pipeline(**extra: Any) -> dict[str, Any]:
    return {
        "source": {"kind": "csv", "path": "data/*.csv"},
        "target": "ledger",
        "key": ["id"],
        "cursor": "updated_at",
        "on_conflict": "update",
        **extra,
    }


def column_type(project: Project, table: str, column: str) -> str:
    if project.backend == "postgres":
        rows = project.query(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = to_regclass(%s) AND attname = %s",
            [table, column],
        )
    else:
        rows = project.query(
            f"SELECT type FROM pragma_table_info('{table}') WHERE name = %s", [column]
        )
    return str(rows[0][0])


def stamp(i: int) -> str:
    return f"2024-01-01T00:00:{i % 60:02d}Z"


# -- decimal text -----------------------------------------------------------------------


def test_decimal_text_loads_as_exact_numeric_and_sums_exactly(project: Project) -> None:
    rng = random.Random(7)
    amounts = [f"{rng.randint(-(10**12), 10**12) / 100:.2f}" for _ in range(5000)]
    amounts[:4] = ["21168.23", "0.1", "-5", ""]  # one decimal, none, and an empty field
    project.write_csv("ledger.csv", [[i, a, stamp(i)] for i, a in enumerate(amounts)], HEADER)
    project.configure(ledger=pipeline())
    assert project.run("ledger")["rows_inserted"] == 5000
    expected = sum(Decimal(a) for a in amounts if a)
    if project.backend == "postgres":
        assert column_type(project, "ledger", "amount") == "numeric(38,2)"
        (total,) = project.query('SELECT sum(amount) FROM "ledger"')[0]
        assert total == expected
        (first,) = project.query('SELECT amount FROM "ledger" WHERE id = 0')[0]
        assert first == Decimal("21168.23")
    else:
        assert column_type(project, "ledger", "amount") == "DECIMAL_TEXT(38,2)"
        texts = [r[0] for r in project.query('SELECT amount FROM "ledger" ORDER BY id')]
        assert texts[:4] == ["21168.23", "0.10", "-5.00", None]
        assert sum(Decimal(t) for t in texts if t is not None) == expected
    # a float declared wins
    project.configure(floats=pipeline(target="floats", columns={"amount": "double precision"}))
    project.run("floats")
    assert column_type(project, "floats", "amount") == "double precision"


def test_scientific_notation_inf_and_nan_stay_floats_integers_stay_integers(
    project: Project,
) -> None:
    header = ["id", "sci", "inf", "nan", "whole", "exact", "long", "updated_at"]
    rows = [
        [1, "1e10", "1.5", "2.5", "7", "1.5", "1." + "1" * 40, stamp(1)],
        [2, "2.5", "inf", "nan", "-8", "NULL", "2.5", stamp(2)],
    ]
    project.write_csv("ledger.csv", rows, header)
    project.configure(ledger=pipeline())
    project.run("ledger")
    types = {name: column_type(project, "ledger", name) for name in header[1:-1]}
    floating = "double precision"  # on SQLite too: its declared type
    numeric = "numeric(38,1)" if project.backend == "postgres" else "DECIMAL_TEXT(38,1)"
    assert types == {
        "sci": floating, "inf": floating, "nan": floating, "whole": "bigint", "exact": numeric,
        "long": floating,  # 41 digits: no numeric(38, s) holds it
    }  # fmt: skip
    exact = project.query('SELECT exact FROM "ledger" ORDER BY id')
    assert [r[0] for r in exact] in ([Decimal("1.5"), None], ["1.5", None])


def test_a_later_value_with_more_decimals_than_inferred_is_refused(project: Project) -> None:
    rows = 70_000  # more than the first batch, which decides the scale
    amounts = pa.array([f"{i}.25" for i in range(rows)])
    amounts = pa.concat_arrays([amounts, pa.array(["1.125"])])
    table = pa.table(
        {
            "id": pa.array(range(rows + 1)),
            "amount": amounts,
            "updated_at": pa.array([stamp(i) for i in range(rows + 1)]),
        }
    )
    pacsv.write_csv(table, project.root / "data" / "ledger.csv")
    project.configure(ledger=pipeline())
    code, _, err = project.cli("run", "ledger")
    assert code == 1
    where = f"ledger.csv row {rows + 1} (line {rows + 2}), column 'amount'"
    assert f"{where}: cannot read '1.125' as numeric(38,2), the type the file's first" in err
    assert 'declare its type under columns (e.g. amount = "numeric(38,3)"' in err
    assert not project.exists("ledger")
    # once the target exists, its type reads every later file the same way
    pacsv.write_csv(table.slice(0, 10), project.root / "data" / "ledger.csv")
    assert project.run("ledger")["rows_inserted"] == 10
    project.write_csv("ledger_2.csv", [[99, "3.999", stamp(59)]], HEADER)
    code, _, err = project.cli("run", "ledger")
    assert code == 1
    assert (
        "ledger_2.csv row 1 (line 2), column 'amount': cannot read '3.999' as numeric(38,2)" in err
    )


def test_an_evolved_decimal_column_is_exact_too(project: Project) -> None:
    project.write_csv("ledger_1.csv", [[1, "1.00", stamp(1)]], HEADER)
    project.configure(ledger=pipeline(checks={"schema_drift": "evolve"}))
    project.run("ledger")
    project.write_csv("ledger_2.csv", [[2, "2.00", stamp(2), "0.125"]], [*HEADER, "tax"])
    project.run("ledger")
    expected = "numeric(38,3)" if project.backend == "postgres" else "DECIMAL_TEXT(38,3)"
    assert column_type(project, "ledger", "tax") == expected


# -- fields of any size ---------------------------------------------------------------------


def big_document(megabytes: int) -> str:
    item = {"sku": "A-1", "note": 'comma, "quote"\nand a newline', "qty": 3}
    items = [dict(item, n=i) for i in range(megabytes * 1024 * 1024 // 70)]
    return json.dumps({"items": items})


@pytest.mark.slow
def test_a_field_of_10_mb_loads_and_reads_back_equal(project: Project) -> None:
    document = big_document(10)
    assert len(document) > 10 * 1024 * 1024
    header = ["id", "doc", "updated_at"]
    small = [[i, f"row {i}", stamp(i)] for i in range(20_000)]  # 400 KB before it: mid-file
    project.write_csv("a.csv", [*small, [20_000, document, stamp(1)], [20_001, "after", stamp(2)]],
                      header)  # fmt: skip
    project.write_csv("b.csv", [[30_000, document, stamp(3)], [30_001, "x", stamp(4)]], header)
    project.configure(docs=pipeline(target="docs"))
    assert project.run("docs")["rows_inserted"] == 20_004
    rows = project.query(
        'SELECT id, doc FROM "docs" WHERE id IN (20000, 20001, 30000, 30001) ORDER BY id'
    )
    assert [r[0] for r in rows] == [20_000, 20_001, 30_000, 30_001]
    assert rows[0][1] == document and rows[2][1] == document
    assert (rows[1][1], rows[3][1]) == ("after", "x")
    assert project.count("docs") == 20_004  # nothing read twice
    again = project.run_json("backfill", "docs", "--start", "2024-01-01", "--end", "2024-01-01")
    assert (again[0]["rows_read"], again[0]["rows_staged"]) == (20_004, 0)


# -- the shapes CSV takes --------------------------------------------------------------------


def test_bom_crlf_quoted_newlines_and_delimiters_read_as_written(project: Project) -> None:
    notes = ["plain", "a, b", 'say "hi"', "two\r\nlines", "lf\nonly", "", 'end,\r\n"', "é"]
    rows = [[i, notes[i % len(notes)] * (1 + i % 3), stamp(i)] for i in range(30_000)]
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(["id", "note", "updated_at"])
    writer.writerows(rows)
    path: Path = project.root / "data" / "notes.csv"
    path.write_bytes(b"\xef\xbb\xbf" + buffer.getvalue().encode())
    assert path.stat().st_size > 4 * (256 << 10)  # several blocks: quotes cross their edges
    project.configure(notes=pipeline(target="notes"))
    assert project.run("notes")["rows_inserted"] == 30_000
    got = project.query('SELECT id, note FROM "notes" ORDER BY id')
    assert [(r[0], r[1]) for r in got] == [(r[0], r[1]) for r in rows]
