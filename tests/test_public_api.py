"""The public API is deliberate: everything exported is listed, and everything listed exists."""

from __future__ import annotations

import types

import pipeledger


def test_all_lists_exactly_the_public_names() -> None:
    for name in pipeledger.__all__:  # imported on first use
        getattr(pipeledger, name)
    public = {
        name
        for name, value in vars(pipeledger).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(pipeledger.__all__) - {"__version__"} == public


def test_every_error_is_a_pipeledger_error() -> None:
    for name in pipeledger.__all__:
        value = getattr(pipeledger, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, pipeledger.PipeledgerError)


def test_run_is_the_function_also_after_its_subpackage_is_imported() -> None:
    import pipeledger.runs.runner
    import pipeledger.runs.scaffold

    assert pipeledger.run is pipeledger.runs.runner.run


def test_the_functions_keep_their_names_whatever_is_imported_first() -> None:
    """``run``, ``lateness`` and ``reconcile`` name functions and modules: in a new process,
    importing the modules first (as the loader does) still leaves the names the functions'."""
    import subprocess
    import sys

    probe = (
        "import pipeledger.state.lateness, pipeledger.runs.scaffold\n"
        "import pipeledger.runs.reconcile.compare\n"
        "from pipeledger.state.lateness import RunLateness\n"
        "import pipeledger, pipeledger.runs.runner as r\n"
        "assert (pipeledger.run, pipeledger.lateness, pipeledger.reconcile) == "
        "(r.run, r.lateness, r.reconcile)\n"
        "assert RunLateness.__module__ == 'pipeledger.state.lateness'\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True)
