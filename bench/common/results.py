"""``bench/RESULTS.md``: each benchmark owns the lines between its ``<!-- BEGIN X -->`` and
``<!-- END X -->`` markers and rewrites them whole; the rest of the file stays as it is.
Also what every report is made of: targets with a verdict, Markdown tables, a run line."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "RESULTS.md"


@dataclass(frozen=True)
class Target:
    """A target of a benchmark; ``passed`` None: not measured this time."""

    name: str
    passed: bool | None
    detail: str

    @property
    def verdict(self) -> str:
        return "SKIP" if self.passed is None else ("PASS" if self.passed else "FAIL")


def markers(name: str) -> tuple[str, str]:
    """The markers of block ``name``: ``<!-- BEGIN NAME -->``, ``<!-- END NAME -->``."""
    return f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"


def block(text: str, name: str) -> str | None:
    """Block ``name`` of ``text``, its markers included; None if it has none."""
    begin, end = markers(name)
    if begin not in text or end not in text:
        return None
    return text[text.index(begin) : text.index(end) + len(end)]


def replace_block(path: Path, begin: str, end: str, new: str) -> None:
    """Write ``new`` (its markers included) in place of the block between ``begin`` and
    ``end`` in ``path``, or at the end of the file the first time."""
    old = path.read_text() if path.exists() else ""
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        text = head + new + rest.split(end, 1)[1]
    else:
        text = old.rstrip() + "\n\n" + new + "\n"
    path.write_text(text)


def write_block(path: Path, name: str, lines: Sequence[str]) -> None:
    """Block ``name`` of ``path`` becomes ``lines`` between its markers."""
    begin, end = markers(name)
    replace_block(path, begin, end, "\n".join([begin, *lines, end]))


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table."""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return out + ["| " + " | ".join(row) + " |" for row in rows]


def target_table(targets: Sequence[Target]) -> list[str]:
    return table(["target", "result", "detail"], [[t.name, t.verdict, t.detail] for t in targets])


def invocation(module: str) -> str:
    """How this run was started, as the report says it: ``python -m MODULE ARGS``."""
    return " ".join(["python -m", module, *sys.argv[1:]])


def run_line(module: str) -> str:
    """``Run <UTC time> by `python -m MODULE ARGS```, which opens every block."""
    return f"Run {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC by `{invocation(module)}`"
