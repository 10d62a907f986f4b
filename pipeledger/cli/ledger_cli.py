"""Ledger commands: runs, show, status, anomalies, tasks, audit, blocked, watchdog, ledger."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the ledger commands to the main app."""
