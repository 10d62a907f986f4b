"""CSV text encodings: real exports arrive in Latin-1 and Windows-1252. A byte that does not
decode stops the run before anything is written, naming the file, the line, the byte offset
and the encoding that reads it; ``encoding = ...`` then loads the file exactly. A column is
never read as bytes because of one bad byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeledger.sources import encodings
from tests.helpers import Project

HEADER = "id,first_name,last_name,city,updated_at"
# a Latin-1 export: accented names among plain ones
ACCENTED = [
    ("José", "Muñoz", "Málaga"),
    ("François", "Lefèvre", "Besançon"),
    ("Jürgen", "Müller", "Köln"),
    ("Søren", "Kierkegård", "Århus"),
]


def customers(**source: str) -> dict[str, object]:
    return {
        "source": {"kind": "csv", "path": "data/customers.csv", **source},
        "target": "crm.customers",
        "key": ["id"],
        "cursor": "updated_at",
        "on_conflict": "update",
    }


def export(rows: int, accented_every: int) -> list[str]:
    """Lines of a customer export, one accented customer every ``accented_every`` rows."""
    lines = [HEADER]
    for i in range(rows):
        first, last, city = (f"Name{i}", f"Last{i}", "Paris")
        if i % accented_every == accented_every - 1:
            first, last, city = ACCENTED[i // accented_every % len(ACCENTED)]
        lines.append(f"{i},{first},{last},{city},2024-01-01")
    return lines


def write(project: Project, lines: list[str], encoding: str, end: str = "\r\n") -> Path:
    path = project.root / "data" / "customers.csv"
    path.write_bytes((end.join(lines) + end).encode(encoding))
    return path


def stored(project: Project) -> list[tuple[str, ...]]:
    return project.rows("id, first_name, last_name, city", "crm.customers")


def expected(lines: list[str]) -> list[tuple[str, ...]]:
    rows = [tuple(line.split(",")[:4]) for line in lines[1:]]
    return sorted(rows, key=lambda r: int(r[0]))


def test_a_latin1_export_fails_clearly_and_loads_exactly_with_its_encoding(
    project: Project,
) -> None:
    lines = export(3000, accented_every=700)
    path = write(project, lines, "latin-1")
    project.configure(customers=customers())
    code, _, err = project.cli("run")
    assert code == 1
    offset = path.read_bytes().index("José".encode("latin-1")) + 3
    assert f"{path} line 701 (byte offset {offset:,}): byte 0xe9 is not utf-8 text" in err
    assert 'set encoding = "latin-1" in [pipelines.customers.source]' in err
    assert "nothing was written" in err and not project.exists("crm.customers")
    project.configure(customers=customers(encoding="latin-1"))
    assert project.run()["rows_inserted"] == 3000
    assert stored(project) == expected(lines)
    assert ("699", "José", "Muñoz", "Málaga") in stored(project)


def test_a_windows_1252_file_with_curly_quotes_and_euros(project: Project) -> None:
    lines = [
        "id,note,price,updated_at",
        '1,"\u201cQuoted\u201d \u2013 a dash",€5,2024-01-01',
        "2,plain,€10,2024-01-02",
        "3,it\u2019s \u2026,£3,2024-01-03",
    ]
    write(project, lines, "cp1252", "\n")
    project.configure(
        notes={**customers(), "source": {"kind": "csv", "path": "data/customers.csv"}}
    )
    code, _, err = project.cli("run")
    assert code == 1 and "line 2 (byte offset 28): byte 0x93" in err
    assert 'the file reads as cp1252: set encoding = "cp1252"' in err
    project.configure(notes=customers(encoding="cp1252"))
    assert project.run()["rows_inserted"] == 3
    notes = project.rows("id, note, price", "crm.customers")
    assert notes == [
        ("1", "\u201cQuoted\u201d \u2013 a dash", "€5"),
        ("2", "plain", "€10"),
        ("3", "it\u2019s \u2026", "£3"),
    ]


def test_a_bad_byte_far_into_the_file_is_no_blob_column(project: Project) -> None:
    """Past the reader's first block (where it guesses types), the column is text already:
    the byte is the same clear error, never a binary column loaded with exit 0."""
    lines = export(20_000, accented_every=20_000)  # one accented customer, the last one
    path = write(project, lines, "latin-1", "\n")
    assert path.read_bytes().index(b"\xe9") > 128 << 10
    project.configure(customers=customers())
    code, _, err = project.cli("run")
    assert code == 1 and "line 20001" in err and "byte 0xe9 is not utf-8 text" in err
    assert not project.exists("crm.customers")


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (b"id,na\xefme,updated_at\n1,x,2024-01-01\n", 1),  # the header
        (b"id,qty,updated_at\n1,1\xa0000,2024-01-01\n", 2),  # a number
        (b"id,name,updated_at\n1,ok,2024-01-01\n2,S\xf8ren,2024-01-02\n", 3),
    ],
    ids=["header", "numeric column", "first block"],
)
def test_every_bad_byte_names_its_line_and_offset(project: Project, data: bytes, line: int) -> None:
    (project.root / "data" / "customers.csv").write_bytes(data)
    project.configure(customers=customers())
    code, _, err = project.cli("run")
    offset = next(i for i, b in enumerate(data) if b >= 0x80)
    assert code == 1 and f"line {line} (byte offset {offset})" in err
    assert "is not utf-8 text" in err and 'encoding = "latin-1"' in err


def test_byte_order_marks_are_honoured(project: Project) -> None:
    (project.root / "data" / "customers.csv").write_bytes(
        b"\xef\xbb\xbfid,first_name,updated_at\n1,Caf\xc3\xa9,2024-01-01\n"
    )
    project.configure(customers=customers())
    project.run()
    assert project.rows("id, first_name", "crm.customers") == [("1", "Café")]
    utf16 = "id,first_name,updated_at\n1,Søren,2024-01-01\n".encode("utf-16")
    (project.root / "data" / "customers.csv").write_bytes(utf16)
    code, _, err = project.cli("run")
    assert code == 1 and 'set encoding = "utf-16"' in err
    project.configure(customers=customers(encoding="utf-16"))
    project.run()
    assert project.rows("id, first_name", "crm.customers") == [("1", "Søren")]


def test_a_byte_windows_1252_lacks_suggests_latin1(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_bytes(b"id,name\n1,ok\n2,\x81x\n")
    found = encodings.undecodable(path, "cp1252")
    assert found is not None and (found.line, found.offset, found.byte) == (3, 15, 0x81)
    assert encodings.suggest(path, "cp1252") == "latin-1"


def test_an_unknown_encoding_is_refused_before_anything_runs(project: Project) -> None:
    project.configure(customers=customers(encoding="latin-9000"))
    code, _, err = project.cli("run")
    assert code == 2 and "unknown encoding 'latin-9000'" in err


def test_offsets_and_lines_across_the_reads_of_a_large_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file is decoded a chunk at a time: a character split by a chunk's end is no
    error, and a bad byte after it is found at its true offset and line."""
    monkeypatch.setattr(encodings, "CHUNK", 7)
    data = "ab\né\nçd\n".encode() + b"x\xffy\n"
    path = tmp_path / "a.csv"
    path.write_bytes(data)
    found = encodings.undecodable(path, "utf-8")
    assert found is not None
    assert (found.offset, found.line, found.byte) == (data.index(b"\xff"), 4, 0xFF)
    assert found.text == "x\\xffy"
    path.write_bytes("ab\né\nçd\n".encode() * 5)
    assert encodings.undecodable(path, "utf-8") is None
