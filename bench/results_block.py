"""The part of ``bench/RESULTS.md`` that one benchmark owns: the lines between its
``<!-- BEGIN X -->`` and ``<!-- END X -->`` markers, replaced whole by its next run (or
added at the end of the file the first time); the rest of the file stays as it is."""

from __future__ import annotations

from pathlib import Path


def replace_block(path: Path, begin: str, end: str, block: str) -> None:
    """Write ``block`` (its markers included) in place of the one between ``begin`` and
    ``end`` in ``path``."""
    old = path.read_text() if path.exists() else ""
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        new = head + block + rest.split(end, 1)[1]
    else:
        new = old.rstrip() + "\n\n" + block + "\n"
    path.write_text(new)
