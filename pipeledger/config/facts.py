"""What reading a model's SQL found, remembered by the text it was found in, so that a run of
models whose SQL did not change does not read it again (nor import the SQL parser): the
tables a query reads, and that a model's incremental plan was made or its SQL translated
for the embedded SQLite without an error.

Each fact is keyed by a hash of everything it depends on: the model's SQL text, its
settings, the views' texts it reads through, the upstream columns a translation typed
with. The whole file is stamped with pipeledger's version and the modification times of
the parser's own modules and sqlglot's version: a fact found by other code is not kept.
A fact never decides anything the parser would not: it only skips a reading that found
no error before. A missing, unreadable or stale file is read as empty; a file that cannot
be written is left alone (the facts are found again next time).

The file is ``.pipeledger/model-facts.json`` beside ``pipeledger.toml`` (the embedded
warehouse's folder), like dbt's ``target/partial_parse.msgpack``; it is rewritten
atomically, and only when a fact was learned.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import uuid
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from pipeledger.common.columns import TableName
from pipeledger.common.version import __version__

FACTS_FILE = "model-facts.json"
KEPT = 4096  # facts of each kind kept, the most recently used
# the modules whose code decides what a fact says (their mtimes stamp the file)
_DECIDERS = ("common/sqlparse.py", "common/lineage.py", "common/translate/sqlite.py")


def fact_key(*parts: object) -> str:
    """A key for the fact that ``parts`` (texts, names, settings) decide."""
    text = "\x00".join(json.dumps(p, sort_keys=True, default=str) for p in parts)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@functools.cache
def _stamp() -> str:
    package = Path(__file__).resolve().parent.parent
    times = []
    for module in _DECIDERS:
        with contextlib.suppress(OSError):
            times.append(str((package / module).stat().st_mtime_ns))
    try:
        sqlglot = metadata.version("sqlglot")
    except metadata.PackageNotFoundError:
        sqlglot = "-"
    return "|".join([__version__, sqlglot, *times])


class ModelFacts:
    """The facts of one project (``path``; None: remembered for this process only), by kind
    (``tables``, ``plan``, ``translated``) and key (:func:`fact_key`), each a JSON value."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._facts: dict[str, dict[str, list[Any]]] = {}  # kind -> key -> [last used, value]
        self._clock = 0
        self._learned = False
        if path is not None:
            self._read(path)

    def _read(self, path: Path) -> None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if not isinstance(data, dict) or data.get("stamp") != _stamp():
            return
        with contextlib.suppress(TypeError, ValueError, AttributeError):
            clock = int(data.get("clock", 0))
            facts = {
                str(kind): {str(k): [int(used), value] for k, (used, value) in dict(keys).items()}
                for kind, keys in dict(data.get("facts", {})).items()
            }
            self._clock, self._facts = clock, facts

    def get(self, kind: str, key: str) -> Any:
        """The fact, or None when it is not known."""
        entry = self._facts.get(kind, {}).get(key)
        if entry is None:
            return None
        entry[0] = self._clock  # used: kept over the least recently used
        return entry[1]

    def put(self, kind: str, key: str, value: Any = True) -> None:
        entry = self._facts.setdefault(kind, {}).get(key)
        if entry is None or entry[1] != value:
            self._facts[kind][key] = [self._clock, value]
            self._learned = True

    # -- the tables a query reads ------------------------------------------------------
    def tables(self, text: str) -> tuple[TableName, ...] | None:
        found = self.get("tables", fact_key(text))
        if not isinstance(found, list):
            return None
        try:
            return tuple(TableName(schema or None, table) for schema, table in found)
        except (TypeError, ValueError):
            return None

    def remember_tables(self, text: str, tables: Iterable[TableName]) -> None:
        self.put("tables", fact_key(text), [[t.schema or "", t.table] for t in tables])

    def save(self) -> None:
        """Write the file if anything was learned (best effort: never an error)."""
        if self.path is None or not self._learned:
            return
        self._learned = False
        kept = {
            kind: dict(sorted(keys.items(), key=lambda kv: -int(kv[1][0]))[:KEPT])
            for kind, keys in self._facts.items()
        }
        data = {"stamp": _stamp(), "clock": self._clock + 1, "facts": kept}
        with contextlib.suppress(OSError):
            _write_atomically(self.path, json.dumps(data, separators=(",", ":")))


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to a file of its own beside ``path`` (made with the process's umask,
    as any other file of the project), then put it in ``path``'s place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    try:
        with temporary.open("x", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
