"""The house's shape holds as code is added: the package root holds only its four modules,
and the folders (rooms) import each other without a circle, so the tree can be read top
down as the data path (a room's imports under ``TYPE_CHECKING`` count too: a type is a
dependency)."""

from __future__ import annotations

import ast
import itertools
from collections import defaultdict
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pipeledger

PACKAGE = Path(pipeledger.__file__).parent
ROOT_MODULES = {"__init__.py", "__main__.py", "api.py", "errors.py"}


def _room(module: str) -> str:
    """``pipeledger.runs.site`` -> ``runs``; the package's entry (``__init__``,
    ``__main__``), which sits above everything, -> ``pipeledger``."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in {"__init__", "__main__"}:
        return "pipeledger"
    return parts[1]


def _imported(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "pipeledger":
                found += [f"pipeledger.{alias.name}" for alias in node.names]
            elif node.module.startswith("pipeledger."):
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("pipeledger.")]
    return found


def _edges() -> dict[str, dict[str, list[str]]]:
    """room -> the rooms it imports -> the files that do."""
    edges: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        room = _room(".".join(relative.parts))
        for target in _imported(ast.parse(path.read_text())):
            if _room(target) != room:
                edges[room][_room(target)].append(str(relative))
    return edges


def test_the_package_root_holds_only_its_four_modules() -> None:
    modules = {p.name for p in PACKAGE.glob("*.py")}
    assert modules == ROOT_MODULES, sorted(modules - ROOT_MODULES)


def test_every_folder_of_modules_is_a_package() -> None:
    """A folder without ``__init__.py`` is a namespace package: it works from a checkout
    but ``packages.find`` leaves it out of the wheel."""
    folders = {p.parent for p in PACKAGE.rglob("*.py")}
    missing = sorted(
        str(f.relative_to(PACKAGE)) for f in folders if not (f / "__init__.py").exists()
    )
    assert missing == []


def test_the_rooms_import_each_other_without_a_circle() -> None:
    edges = _edges()
    graph = {room: set(targets) for room, targets in edges.items()}
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        circle: list[str] = exc.args[1]  # each room is imported by the next
        shown = [
            f"{b} -> {a}: {', '.join(sorted(set(edges[b][a])))}"
            for a, b in itertools.pairwise(circle)
        ]
        raise AssertionError("rooms import each other in a circle:\n" + "\n".join(shown)) from exc


def test_the_lower_rooms_never_import_a_face() -> None:
    """The faces (cli, web, airflow) sit on the api; nothing below them imports one."""
    faces = {"pipeledger", "cli", "web", "airflow", "api"}
    wrong = {
        f"{room} -> {target}: {files[0]}"
        for room, targets in _edges().items()
        if room not in faces
        for target, files in targets.items()
        if target in faces
    }
    assert wrong == set()
