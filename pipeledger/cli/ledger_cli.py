"""Ledger commands: runs, checks, show, status, anomalies, sla, alerts, tasks, audit,
blocked, ledger prune/migrate/grant-reader.

Each command is a few lines over a question of :mod:`pipeledger.api`. Until the ledger's
tables exist, the read commands say so (``[]`` with ``--json``) instead of failing.
``status`` and ``anomalies`` take ``--fail-on``: exit 1 when a pipeline is at or above that
level, for cron and monitoring scripts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import click

from pipeledger import api
from pipeledger.api import ConfigError
from pipeledger.cli.common import (
    err,
    fail,
    json_option,
    locate,
    out,
    print_json,
    read_config,
    reporting,
    since_option,
)
from pipeledger.cli.render import escape

NO_RUNS = "no runs recorded yet"
COLOURS = {
    "success": "green",
    "failed": "red",
    "timed_out": "red",
    "abandoned": "red",
    "partial": "yellow",
    "cancelled": "yellow",
    "running": "cyan",
    "skipped": "dim",
    "HEALTHY": "green",
    "OK": "green",
    "UNKNOWN": "dim",
    "INSUFFICIENT_HISTORY": "dim",
    "DEGRADED": "yellow",
    "WARNING": "yellow",
    "CRITICAL": "bold red",
    "pending": "yellow",
    "delivered": "green",
    "PASS": "green",
    "FAIL": "red",
    "WARN": "yellow",
    "NOT_LEARNED": "dim",
}

# the values of pipeledger.ledger.vocabulary.RunStatus (tests/cli/test_json.py checks they agree)
RUN_STATUSES = (
    "running",
    "success",
    "failed",
    "partial",
    "cancelled",
    "timed_out",
    "skipped",
    "abandoned",
    "queued",
    "rejected",
)
# the values of pipeledger.ledger.vocabulary.TriggerType (tests/cli/test_ui.py checks they agree)
TRIGGER_TYPES = ("scheduled", "manual", "backfill", "retry", "replay", "event", "reconcile")


# -- plumbing ---------------------------------------------------------------------------


def _now() -> datetime:
    return datetime.now(UTC)


def parse_since(text: str, now: datetime, option: str = "--since") -> datetime:
    """``7d`` (back from ``now``) or an ISO-8601 time (UTC when it has no offset)."""
    try:
        return api.parse_moment(text, now)
    except ValueError:
        raise ConfigError(
            f"{option} {text!r}: use a duration back from now (7d, 12h) or an ISO time"
        ) from None


def _empty(where: api.Located, sentence: str) -> str:
    """What an empty answer means: nothing of that kind, or a ledger without runs yet."""
    return sentence if api.has_ledger(where) else NO_RUNS


_LEVEL_RANK = {"WARNING": 1, "CRITICAL": 2}


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width)


def _span(seconds: float) -> str:
    return api.span(seconds)


def _fail_on(found: Sequence[tuple[str, str]], floor: str | None) -> None:
    """Exit 1 when ``found`` (pipeline, level at or above the floor) is not empty."""
    if floor is None or not found:
        return
    named = ", ".join(f"{pipeline} ({level})" for pipeline, level in found)
    err.print(
        f"{len(found)} pipeline(s) at or above {floor.upper()}: {escape(named)}",
        soft_wrap=True,
        highlight=False,
    )
    raise fail(1)


def _page_line(page: api.Page[Any]) -> str:
    """Where a page of ``status`` stands in the whole answer."""
    last = page.first + len(page.items)
    more = f"; --page {page.number + 1} for the next" if page.has_next else ""
    return f"pipelines {page.first + 1}-{last} of {page.total} (page {page.number}{more})"


def _past_the_end(page: api.Page[Any]) -> str:
    if page.total == 0:
        return NO_RUNS
    return f"page {page.number} is past the last ({page.pages} of {page.total} pipelines)"


def _report(
    rows: Sequence[Any],
    as_json: bool,
    lines: Callable[[Any], list[str]],
    empty: Callable[[], str],
) -> None:
    """JSON, or each row's lines, or a sentence when there is nothing to show."""
    if as_json:
        print_json([row.to_json() for row in rows])
        return
    if not rows:
        out.print(empty(), highlight=False)
    out.lines(line for row in rows for line in lines(row))


def _c(value: object) -> str:
    """A status, health or level word in its colour."""
    text = str(value)
    colour = COLOURS.get(text)
    return f"[{colour}]{escape(text)}[/]" if colour else escape(text)


def _ts(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ") if value else "-"


def _secs(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.0f}ms" if ms < 1000 else f"{ms / 1000:.1f}s"


def _apart(s: Any) -> str:
    """Rejected and queued work, counted apart from the finished runs (not failures)."""
    words = [f"{n} {word}" for n, word in ((s.rejected_7d, "rejected"), (s.queued, "queued")) if n]
    return f" ({', '.join(words)})" if words else ""


def _n(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _short(text: str | None, width: int = 72) -> str:
    text = " ".join((text or "").split())
    return escape(text if len(text) <= width else text[: width - 1] + "…")


# -- what a row looks like --------------------------------------------------------------


def run_lines(r: api.RunRow) -> list[str]:
    lines = [
        f"{r.run_id[:8]} [bold]{escape(r.pipeline)}[/] {_c(r.status)} {_ts(r.started_at)} "
        f"{_secs(r.duration_ms)} read {_n(r.rows_read)} ins {_n(r.rows_inserted)} "
        f"upd {_n(r.rows_updated)}"
    ]
    if r.error_message:
        lines.append(f"  [red]{_short(r.error_message)}[/]")
    return lines


def detail_lines(d: api.RunDetail) -> list[str]:
    r = d.run
    lines = [
        f"run {r.run_id}  [bold]{escape(r.pipeline)}[/] {_c(r.status)}",
        f"  {r.trigger_type}, attempt {r.attempt} of {r.logical_run_id}"
        + (f", retry of {r.parent_run_id}" if r.parent_run_id else ""),
        f"  {_ts(r.started_at)} -> {_ts(r.ended_at)} ({_secs(r.duration_ms)})",
        f"  rows read {_n(r.rows_read)} · inserted {_n(r.rows_inserted)} · updated "
        f"{_n(r.rows_updated)} · deleted {_n(r.rows_deleted)} · unchanged {_n(r.rows_unchanged)} "
        f"· rejected {_n(r.rows_rejected)}",
        f"  watermark {escape(r.watermark_before or '-')} -> {escape(r.watermark_after or '-')}",
    ]
    if r.data_interval_start or r.data_interval_end:
        lines.append(f"  interval {_ts(r.data_interval_start)} -> {_ts(r.data_interval_end)}")
    if r.error_message:
        lines.append(f"  [red]error {escape(r.error_code or '-')}:[/]")
        lines += [f"    [red]{escape(part)}[/]" for part in _wrap(r.error_message, 74)]
    lines += [
        f"  task {t.seq} {escape(t.name)} {_c(t.status)} {_secs(t.duration_ms)} "
        f"in {_n(t.rows_in)} out {_n(t.rows_out)}"
        + (f" [red]{_short(t.error_message, 40)}[/]" if t.error_message else "")
        for t in d.tasks
    ]
    lines += [
        f"  event {_ts(e.created_at)} {escape(e.event_type)} {escape(e.target_table or '')} "
        f"{'' if e.record_count is None else f'({e.record_count:,})'}".rstrip()
        for e in d.events
    ]
    lines += [
        f"  snapshot {escape(s.target_table)} {s.row_count:,} rows, max cursor "
        f"{escape(s.max_cursor or '-')}"
        for s in d.snapshots
    ]
    lines += [
        f"  check {_c(c.status.upper())} {escape(c.check_name)}: observed "
        f"{escape(c.observed or '-')}, expected {escape(c.expected or '-')}"
        for c in d.checks
    ]
    return lines


def check_lines(c: api.CheckRow) -> list[str]:
    rows = f" ({c.failing_rows:,} row(s))" if c.failing_rows else ""
    return [
        f"{_ts(c.created_at)} run {c.run_id[:8]} {_c(c.status.upper())} "
        f"[bold]{escape(c.check_name)}[/]: observed {escape(c.observed or '-')}, expected "
        f"{escape(c.expected or '-')}{rows}"
    ]


def status_lines(s: api.PipelineStatus) -> list[str]:
    rate = "-" if s.success_rate_7d is None else f"{s.success_rate_7d:.0%}"
    fresh = "never" if s.freshness_s is None else f"{_span(s.freshness_s)} ago"
    data = "" if s.data_age_s is None else f" · newest data {_span(s.data_age_s)} old"
    sla = f" (SLA {_span(s.freshness_sla_s)})" if s.freshness_sla_s is not None else ""
    stale = " [red]late[/]" if s.stale else ""
    volume = f"volume {_c(s.anomaly)}" if s.anomaly else "volume -"
    z = f" z {s.z_score:+.2f}" if s.z_score is not None else ""
    slow = " [yellow]slow[/]" if s.slow else ""
    lines = [
        f"[bold]{escape(s.pipeline)}[/] {_c(s.health)}  last run {_ts(s.last_run_at)} "
        f"{_c(s.last_status or '-')} {_secs(s.last_duration_ms)}{slow}",
        f"  7d {rate} of {s.runs_7d}{_apart(s)} · avg {_n(s.avg_rows_7d)} rows · {volume}{z}",
        f"  last success {fresh}{data}{sla}{stale}",
    ]
    if s.last_failure_error:
        lines.append(
            f"  last failure {_ts(s.last_failure_at)} {_c(s.last_failure_status)}: "
            f"[red]{_short(s.last_failure_error, 50)}[/]"
        )
    return lines


def anomaly_lines(a: api.VolumeAnomaly) -> list[str]:
    return [
        f"[bold]{escape(a.pipeline)}[/] {_c(a.level)} run {a.run_id[:8]} {_ts(a.started_at)}",
        f"  {escape(a.reason)} (history of {a.n})",
    ]


def breach_lines(b: api.Breach) -> list[str]:
    end = "[red]open[/]" if b.open else f"ended {_ts(b.ended_at)}"
    return [
        f"[bold]{escape(b.pipeline)}[/] {b.kind} due {_ts(b.due_at)} {end}, "
        f"late {_span(max(b.late_s, 0))}",
        f"  {_short(b.reason, 96)}",
    ]


def reliability_lines(r: api.Reliability) -> list[str]:
    rate = "-" if r.success_rate is None else f"{r.success_rate:.0%}"
    mttr = "-" if r.mttr_s is None else _span(r.mttr_s)
    failing = f" · [red]failing since {_ts(r.failing_since)}[/]" if r.failing_since else ""
    return [
        f"[bold]{escape(r.pipeline)}[/] {r.days}d: {rate} of {r.runs} · MTTR {mttr} "
        f"({r.recoveries} recovered) · p95 {_secs(r.p95_duration_ms)} · {r.breaches} "
        f"breach(es), late {_span(r.late_s)}{failing}"
    ]


def alert_lines(a: api.AlertRow) -> list[str]:
    run = f" run {a.run_id[:8]}" if a.run_id else ""
    lines = [
        f"{_ts(a.created_at)} [bold]{escape(a.event)}[/] {escape(a.pipeline or '-')}{run} -> "
        f"{escape(a.webhook)} {_c(a.status)} ({a.attempts} attempt(s))",
        f"  {_short(a.reason, 96)}",
    ]
    if a.status != "delivered" and a.last_error:
        lines.append(f"  [red]{_short(a.last_error, 90)}[/]")
    return lines


def trend_lines(t: api.TaskTrend) -> list[str]:
    return [
        f"{t.day} {escape(t.pipeline)}/{escape(t.task)} runs {t.runs} avg "
        f"{_secs(t.avg_duration_ms)} max {_secs(t.max_duration_ms)} rows {_n(t.avg_rows_out)}"
    ]


def audit_lines(e: api.AuditRow) -> list[str]:
    lines = [
        f"{_ts(e.created_at)} [bold]{escape(e.event_type)}[/] {escape(e.pipeline or '-')} "
        f"run {(e.run_id or '-')[:8]}"
        + (f" ({e.record_count:,} records)" if e.record_count is not None else "")
    ]
    for label, value in (("old", e.old_values), ("new", e.new_values), ("meta", e.metadata)):
        if value is not None:
            lines.append(f"  {label} {_short(str(value))}")
    return lines


def access_lines(a: api.AccessRow) -> list[str]:
    who = a.os_user + (f" as {a.db_role}" if a.db_role else "")
    origin = f" from {a.client}" if a.client else ""
    about = f" [bold]{escape(a.pipeline)}[/]" if a.pipeline else ""
    return [
        f"{_ts(a.minute)} {a.reads:>5,}x {a.via} {escape(a.what)}{about} · "
        f"{escape(who)}{escape(origin)}"
    ]


def blocked_lines(b: api.Blocked) -> list[str]:
    return [f"[bold red]BLOCKED[/] [bold]{escape(b.downstream)}[/]: {escape(b.reason)}"]


# -- commands ---------------------------------------------------------------------------


def register(app: click.Group) -> None:
    """Add the ledger commands to the main app."""

    @app.command()
    @click.argument("name", required=False)
    @since_option
    @click.option("--until", help="Only runs that started before this (a duration or a time).")
    @click.option("--status", type=click.Choice(RUN_STATUSES), help="Only runs in this state.")
    @click.option("--trigger", type=click.Choice(TRIGGER_TYPES), help="Only runs of this trigger.")
    @click.option("--logical-run", help="Only the attempts of this logical run (its id).")
    @click.option("--correlation-id", help="Only the node runs of this DAG run.")
    @click.option(
        "--before", metavar="RUN_ID", help="The next page: runs that started before this one."
    )
    @click.option(
        "--limit",
        type=click.IntRange(min=1),
        default=50,
        show_default=True,
        help="At most this many.",
    )
    @json_option
    def runs(
        name: str | None,
        since: str | None,
        until: str | None,
        status: str | None,
        trigger: str | None,
        logical_run: str | None,
        correlation_id: str | None,
        before: str | None,
        limit: int,
        as_json: bool,
    ) -> None:
        """Recent runs (of pipeline NAME, default all), newest first."""
        with reporting(as_json):
            now = _now()
            where = locate()
            rows = api.recent_runs(
                where,
                name,
                since=parse_since(since, now) if since else None,
                until=parse_since(until, now, "--until") if until else None,
                status=status,
                trigger_type=trigger,
                logical_run_id=logical_run,
                correlation_id=correlation_id,
                before=before,
                limit=limit,
            )
            _report(
                rows, as_json, run_lines, lambda: "no runs" if api.has_ledger(where) else NO_RUNS
            )

    @app.command()
    @click.argument("name")
    @since_option
    @click.option(
        "--limit",
        type=click.IntRange(min=1),
        default=500,
        show_default=True,
        help="At most this many results.",
    )
    @json_option
    def checks(name: str, since: str | None, limit: int, as_json: bool) -> None:
        """The quality gate's results for pipeline NAME, run by run, newest first: each
        check's status, observed against expected, failing rows."""
        with reporting(as_json):
            where = locate()
            start = parse_since(since, _now()) if since else None
            rows = api.check_history(where, name, since=start, limit=limit)
            _report(
                rows, as_json, check_lines, lambda: _empty(where, f"no check results for {name}")
            )

    @app.command()
    @click.argument("run_id")
    @json_option
    def show(run_id: str, as_json: bool) -> None:
        """One run with its tasks, audit events and snapshots (RUN_ID: a run id, or its
        first 8+ characters)."""
        with reporting(as_json):
            detail = api.show(locate(), run_id)
            if as_json:
                print_json(detail.to_json())
            else:
                out.lines(detail_lines(detail))

    @app.command()
    @json_option
    @click.option(
        "--fail-on",
        type=click.Choice(["degraded", "critical"]),
        help="Exit 1 when a pipeline is this unhealthy or worse.",
    )
    @click.option(
        "--limit",
        type=int,
        help=f"Show this many pipelines, worst first (1 to {api.PAGE_MAX}; default: all, "
        f"or {api.PAGE_LIMIT} with --page).",
    )
    @click.option("--page", type=int, help="Which page of --limit pipelines (from 1).")
    def status(as_json: bool, fail_on: str | None, limit: int | None, page: int | None) -> None:
        """Health per pipeline, worst first: 7-day success rate, freshness, volume
        anomaly. --fail-on judges every pipeline, not only the page shown."""
        with reporting(as_json):
            whole = limit is None and page is None  # every pipeline, as before pages
            number = 1 if page is None else page
            size = api.PAGE_LIMIT if limit is None else limit
            api.check_page(number, size)  # a page it cannot take: said before reading
            rows = [s for s, _ in api.status_with_volumes(locate())]
            shown = (
                api.Page(rows, 1, max(len(rows), 1), len(rows))
                if whole
                else api.page_of(rows, number, size)
            )
            _report(shown.items, as_json, status_lines, lambda: _past_the_end(shown))
            if not as_json and shown.items and (shown.has_prev or shown.has_next):
                out.print(_page_line(shown), highlight=False)
        floor = api.health_rank(fail_on) if fail_on else None
        found = [
            (s.pipeline, s.health.value)
            for s in rows
            if floor is not None and s.health.rank >= floor
        ]
        _fail_on(found, fail_on)

    @app.command()
    @click.argument("name", required=False)
    @json_option
    @click.option(
        "--fail-on",
        type=click.Choice(["warning", "critical"]),
        help="Exit 1 when a volume is at this level or worse.",
    )
    def anomalies(name: str | None, as_json: bool, fail_on: str | None) -> None:
        """Rows written in each pipeline's latest interval against its last 30 days."""
        with reporting(as_json):
            where = locate()
            rows = api.anomalies(where, name)
            _report(rows, as_json, anomaly_lines, lambda: _empty(where, "no successful runs"))
        floor = _LEVEL_RANK[fail_on.upper()] if fail_on else 0
        found = [
            (a.pipeline, a.level.value)
            for a in rows
            if fail_on and _LEVEL_RANK.get(a.level, 0) >= floor
        ]
        _fail_on(found, fail_on)

    @app.command()
    @json_option
    def sla(as_json: bool) -> None:
        """SLA breaches of the last 30 days (and open ones), and per pipeline its success
        rate, mean time to recovery and p95 duration over 7 and 30 days."""
        with reporting(as_json):
            report = api.sla(locate())
            if as_json:
                print_json(report.to_json())
                return
            _report(report.breaches, False, breach_lines, lambda: "no SLA breach in 30 days")
            _report(report.reliability, False, reliability_lines, lambda: NO_RUNS)

    @app.command()
    @since_option
    @click.option("--run", "run_id", help="Only the alerts about this run (its full id).")
    @json_option
    def alerts(since: str | None, run_id: str | None, as_json: bool) -> None:
        """Alerts raised (default: in the last 7 days) and whether each was delivered."""
        with reporting(as_json):
            start = parse_since(since or "7d", _now())
            rows = api.recent_alerts(locate(), since=start, run_id=run_id)
            _report(rows, as_json, alert_lines, lambda: "no alerts raised")

    @app.command()
    @click.argument("name", required=False)
    @click.option(
        "--days",
        type=click.IntRange(min=1),
        default=api.TASK_DAYS,
        show_default=True,
        help="UTC days, today included.",
    )
    @click.option(
        "--limit",
        type=click.IntRange(min=1),
        default=api.TASK_LIMIT,
        show_default=True,
        help="Tasks shown: those whose longest run in the window took longest.",
    )
    @json_option
    def tasks(name: str | None, days: int, limit: int, as_json: bool) -> None:
        """Per task and day: runs, mean and longest duration, mean rows out (of the
        slowest --limit tasks, each with all its days)."""
        with reporting(as_json):
            where = locate()
            rows = api.tasks(where, name, days=days, limit=limit)
            _report(rows, as_json, trend_lines, lambda: _empty(where, f"no tasks in {days} days"))

    @app.command()
    @click.option("--table", required=True, help="Target table, e.g. analytics.orders.")
    @since_option
    @json_option
    def audit(table: str, since: str | None, as_json: bool) -> None:
        """Audit events about one target table, newest first."""
        with reporting(as_json):
            start = parse_since(since, _now()) if since else None
            rows = api.audit(locate(), table, since=start)
            _report(rows, as_json, audit_lines, lambda: f"no audit events for {table}")

    @app.command()
    @json_option
    def blocked(as_json: bool) -> None:
        """Pipelines waiting on an upstream that is not fresh (exit 0 either way)."""
        with reporting(as_json):
            rows = api.blocked(locate())
            _report(rows, as_json, blocked_lines, lambda: "no pipeline is blocked")

    app.add_command(_ledger_group())


def _ledger_group() -> click.Group:
    @click.group(no_args_is_help=True)
    def ledger() -> None:
        """Look after the ledger database."""

    @ledger.command()
    @click.option("--older-than", required=True, help="Delete runs that ended this long ago (90d).")
    @click.option("--dry-run", is_flag=True, help="Count, then roll back.")
    @json_option
    def prune(older_than: str, dry_run: bool, as_json: bool) -> None:
        """Delete old runs with their tasks, events, snapshots and check results (keeps
        running runs and each pipeline's last success), and the access audit's minutes
        before the same cutoff."""
        with reporting(as_json):
            age = api.parse_duration(older_than)
            result = api.prune(locate(), age, dry_run=dry_run)
            _prune_report(result, dry_run, as_json)

    @ledger.command()
    @since_option
    @click.option("--pipeline", help="Only reads about this pipeline.")
    @click.option(
        "--limit", type=click.IntRange(min=1), default=1000, show_default=True, help="At most."
    )
    @json_option
    def access(since: str | None, pipeline: str | None, limit: int, as_json: bool) -> None:
        """Who read the ledger, what and when: the tenant's reads through the CLI, the
        API and the dashboard, per minute and reader, newest first (default: 24 hours)."""
        with reporting(as_json):
            start = parse_since(since or "1d", _now())
            rows = api.access_log(locate(), since=start, pipeline=pipeline, limit=limit)
            _report(rows, as_json, access_lines, lambda: "no reads recorded since then")

    @ledger.command(name="migrate")
    @json_option
    def migrate_command(as_json: bool) -> None:
        """Create or upgrade the ledger tables (ledger database) and the watermark table
        (warehouse)."""
        with reporting(as_json):
            applied = api.migrate(read_config())
            if as_json:
                print_json(applied)
                return
            for part, versions in applied.items():
                done = ", ".join(map(str, versions)) if versions else "none (up to date)"
                out.print(f"{part}: applied version(s) {done}", highlight=False)

    @ledger.command(name="grant-reader")
    @click.argument("role")
    @click.option("--tenant", required=True, help="The tenant whose ledger rows ROLE may read.")
    @json_option
    def grant_reader_command(role: str, tenant: str, as_json: bool) -> None:
        """Let PostgreSQL role ROLE read one tenant's ledger rows, and no other's (row-level
        security keyed on role membership)."""
        with reporting(as_json):
            grant = api.grant_reader(read_config(), role, tenant)
            if as_json:
                print_json(grant.to_json())
                return
            made = " (created)" if grant.created else ""
            out.print(
                f"{role} may read tenant {tenant}'s ledger rows through role "
                f"{grant.tenant_role}{made}: {grant.tables} table(s) and view(s)",
                highlight=False,
            )

    return ledger


def _prune_report(result: api.PruneResult | None, dry_run: bool, as_json: bool) -> None:
    if as_json:
        print_json(result.to_json() if result else None)
        return
    if result is None:
        out.print(NO_RUNS, highlight=False)
        return
    verb = "would delete" if dry_run else "deleted"
    out.print(
        f"{verb} {result.pipeline_runs:,} run(s) that ended before {_ts(result.cutoff)}, "
        f"{result.task_runs:,} task(s), {result.audit_events:,} audit event(s), "
        f"{result.dataset_snapshots:,} snapshot(s), {result.quality_results:,} check result(s), "
        f"{result.access_reads:,} minute(s) of the access audit",
        soft_wrap=True,
        highlight=False,
    )
