"""The public API is deliberate: everything exported is listed, everything listed exists,
every error a user can meet is drawn in ``pipeledger.errors``, and no module of the package
shares its name with a public function."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
import types

import pipeledger
from pipeledger import api, errors


def test_all_lists_exactly_the_public_names() -> None:
    for name in pipeledger.__all__:  # imported on first use
        getattr(pipeledger, name)
    public = {
        name
        for name, value in vars(pipeledger).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(pipeledger.__all__) - {"__version__"} == public


def test_the_packages_verbs_are_the_apis() -> None:
    for name in pipeledger.__all__:
        value = getattr(pipeledger, name)
        if inspect.isfunction(value) and value.__module__ == "pipeledger.api":
            assert getattr(api, name) is value
            assert name in api.__all__


def test_every_exported_error_is_a_pipeledger_error_but_the_cancel() -> None:
    """``RunCancelled`` alone is a ``BaseException`` (so ``except Exception`` cannot swallow
    a cancel), and the tree says so."""
    outside = []
    for name in pipeledger.__all__:
        value = getattr(pipeledger, name)
        error = isinstance(value, type) and issubclass(value, BaseException)
        if error and not issubclass(value, pipeledger.PipeledgerError):
            outside.append(value)
    assert outside == [pipeledger.RunCancelled]
    assert not issubclass(pipeledger.RunCancelled, Exception)
    assert "BaseException\n    └── RunCancelled" in (errors.__doc__ or "")


def test_every_error_class_is_drawn_in_the_tree() -> None:
    drawing = errors.__doc__ or ""
    classes = [
        value
        for value in vars(errors).values()
        if isinstance(value, type)
        and issubclass(value, BaseException)
        and value.__module__ == "pipeledger.errors"
    ]
    assert len(classes) > 20
    drawn = set(re.findall(r"(?:── |^    )(\w+)", drawing, re.MULTILINE))
    missing = [c.__name__ for c in classes if c.__name__ not in drawn]
    assert missing == []


def _top_level_modules() -> set[str]:
    return {info.name for info in pkgutil.iter_modules(pipeledger.__path__)}


def test_no_module_is_named_after_a_public_function() -> None:
    functions = set(pipeledger.__all__) | set(api.__all__)
    assert _top_level_modules() & functions == set()


def test_importing_every_module_leaves_every_public_name_as_it_was() -> None:
    """In a new process: import each public name, then every module of the package (as a
    run does, in any order), and every name still means what it meant."""
    probe = (
        "import importlib, pkgutil, pipeledger\n"
        "before = {n: getattr(pipeledger, n) for n in pipeledger.__all__}\n"
        "for info in pkgutil.walk_packages(pipeledger.__path__, 'pipeledger.'):\n"
        "    if not info.name.startswith(('pipeledger.testing', 'pipeledger.__main__')):\n"
        "        importlib.import_module(info.name)\n"
        "after = {n: getattr(pipeledger, n) for n in pipeledger.__all__}\n"
        "assert before == after, sorted(n for n in before if before[n] is not after[n])\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True)


def _outside_imports(face: str, *faces: str) -> list[str]:
    """Every ``pipeledger.*`` import of the face's modules that is neither
    ``pipeledger.api``, the face itself nor one of the other ``faces`` it may start."""
    import ast
    from pathlib import Path

    module = importlib.import_module(f"pipeledger.{face}").__file__
    assert module is not None, f"pipeledger.{face} is a namespace package"
    folder = Path(module).parent
    others = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module:
                base = node.module
                names = [f"{base}.{a.name}" if base == "pipeledger" else base for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.startswith("pipeledger") and not name.startswith(
                    ("pipeledger.api", *(f"pipeledger.{f}" for f in (face, *faces)))
                ):
                    others.append(f"{path.name}: {name}")
    return others


def test_the_cli_reaches_the_package_only_through_the_api() -> None:
    """Every ``pipeledger.*`` import of the command line's modules is ``pipeledger.api``,
    ``pipeledger.cli`` itself, or the web face it serves (``ui``, ``serve --ui``): the
    dashboard reads through the api too, so the api never imports a face."""
    assert _outside_imports("cli", "web") == []


def test_the_web_reaches_the_package_only_through_the_api() -> None:
    """The dashboard is a face like the CLI: ``pipeledger.api`` and ``pipeledger.web``."""
    assert _outside_imports("web") == []
