"""Quarantine commands, a few lines each over :mod:`pipeledger.api`::

    pipeledger quarantine NAME [--run RUN_ID] [--all] [--json]   # what is set aside
    pipeledger quarantine replay NAME [--run RUN_ID] [--json]    # try it again, today's config

``quarantine NAME`` is short for ``quarantine list NAME``. Importing this module adds the
``quarantine`` group to the main app (``cli/app.py`` imports it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from pipeledger import api
from pipeledger.cli.common import F, app, json_option, out, print_json, read_config, reporting
from pipeledger.cli.render import escape

if TYPE_CHECKING:
    from pipeledger.api import QuarantineEntry, ReplayResult


class _ListByDefault(click.Group):
    """A first word that names no subcommand is a pipeline: ``quarantine orders`` runs
    ``quarantine list orders``. (A group with its own NAME argument would read the word
    ``replay`` in ``quarantine replay orders`` as that NAME.)"""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        first = next((a for a in args if not a.startswith("-")), None)
        if first is not None and first not in self.commands:
            args = ["list", *args]
        return super().parse_args(ctx, args)


@app.group(cls=_ListByDefault, no_args_is_help=True)
def quarantine() -> None:
    """Rows the quality gate set aside: list them, or replay them through today's config."""


def run_option(command: F) -> F:
    return click.option(
        "--run", help="Only this run's rows (a run id or its first 8+ characters)."
    )(command)


def _keys(values: dict[str, object]) -> str:
    return "(" + ", ".join(f"{k}={v}" for k, v in values.items()) + ")"


def entry_line(e: QuarantineEntry) -> str:
    when = e.quarantined_at[:19].replace("T", " ")
    line = f"{e.quarantine_id[:10]} {when} run {e.run_id[:8]} {escape(_keys(e.key_values))} "
    line += escape(e.reason)
    if not e.reason.startswith(f"{e.check}:"):
        line += f" (set aside by {escape(e.check)})"
    if e.resolved_at:
        resolved = e.resolved_at[:19].replace("T", " ")
        line += f" [green]resolved {resolved} by run {(e.resolved_by_run or '-')[:8]}[/]"
    return line


def replay_lines(r: ReplayResult) -> list[str]:
    c = r.counts
    lines = [
        f"[bold]{escape(r.pipeline)}[/] quarantine replay -> {r.target} (run {r.run_id})",
        f"  rows      replayed {r.replayed:,} · inserted {c.inserted:,} · updated {c.updated:,} "
        f"· unchanged {c.unchanged + c.superseded:,} · still failing {r.still_failing:,}",
    ]
    lines += [
        f"  [yellow]FAIL[/] {escape(name)}: {rows:,} row(s)" for name, rows in r.failing_checks
    ]
    if r.still_failing:
        lines.append(f"  still quarantined: see pipeledger quarantine {r.pipeline}")
    return lines


@quarantine.command("list")
@click.argument("name")
@run_option
@click.option(
    "--all", "include_resolved", is_flag=True, help="Include entries already resolved by a replay."
)
@json_option
def list_entries(name: str, run: str | None, include_resolved: bool, as_json: bool) -> None:
    """What is set aside (unresolved unless --all), oldest first."""
    with reporting(as_json):
        entries = api.quarantined(read_config(), name, run=run, include_resolved=include_resolved)
        if as_json:
            print_json([e.to_json() for e in entries])
            return
        if not entries:
            out.print(f"nothing quarantined for {escape(name)}", highlight=False)
        for entry in entries:
            out.print(entry_line(entry), soft_wrap=True, highlight=False)
        if any(e.resolved_at is None for e in entries):
            out.print(f"replay with: pipeledger quarantine replay {escape(name)}", highlight=False)


@quarantine.command("replay")
@click.argument("name")
@run_option
@json_option
def replay_entries(name: str, run: str | None, as_json: bool) -> None:
    """Check the unresolved rows again with today's config; publish those that pass."""
    with reporting(as_json):
        result = api.replay(read_config(), name, run=run)
        if as_json:
            print_json(result.to_json())
        elif not result.replayed:
            out.print(f"nothing quarantined for {escape(name)}: nothing to replay", highlight=False)
        else:
            out.lines(replay_lines(result))
