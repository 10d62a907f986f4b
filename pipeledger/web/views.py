"""What each page shows, gathered from :mod:`pipeledger.api` (and nothing else): one
function per page, returning the values its template lays out. No question is asked here
in SQL: a page shows the answers the CLI prints."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pipeledger import api
from pipeledger.web import charts
from pipeledger.web.project import Project

HEALTH_ORDER = api.HEALTH_ORDER
PAGE_SIZE = api.PAGE_LIMIT
CHART_RUNS = 60  # runs on a node's charts
CHECK_RUNS = 20  # runs in a node's checks over time
WARNING_Z = 2  # the volume verdict's WARNING: |z| > 2 (pipeledger.ledger.reads.queries)


class BadRequest(ValueError):
    """A query parameter the page cannot take (the message says which)."""


def ts(value: datetime | str | None) -> str:
    """An instant as ``2024-06-15 12:00:00Z`` (UTC), or ``-``."""
    if value is None:
        return "-"
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def ago(value: datetime | None, now: datetime) -> str:
    return "-" if value is None else f"{api.span(max((now - value).total_seconds(), 0))} ago"


def duration(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.0f} ms" if ms < 1000 else api.span(ms / 1000)


def written(run: api.RunRow) -> int:
    return (run.rows_inserted or 0) + (run.rows_updated or 0)


def split_note(message: str | None, pipeline: str, run_id: str) -> tuple[str, str | None]:
    """A run's error and its "what happens next" note (recorded after it, beginning with
    ``pipeline NAME (run ID):`` or ``model NAME (run ID):``)."""
    if not message:
        return "", None
    for kind in ("pipeline", "model"):
        for what in ("run", "replay"):
            start = message.find(f"{kind} {pipeline} ({what} {run_id})")
            if start > 0:
                return message[:start].rstrip(), message[start:]
    return message, None


# -- the overview -----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class NodeLine:
    """One load or model on the overview."""

    name: str
    kind: str
    health: str
    reasons: tuple[str, ...]
    status: api.PipelineStatus | None
    sparkline: Any = None  # drawn for the lines of the page shown only
    volume: str
    quarantined: int | None
    failing: bool  # its latest run failed, timed out or was abandoned
    blocks: tuple[str, ...] = ()  # downstream of its failure: for the lines of the page shown
    waits_on: tuple[str, ...]  # why it is blocked


def _graph(project: Project) -> tuple[dict[str, Any], str | None]:
    """The DAG (``pipeledger dag --json``), or the reason there is none."""
    try:
        return api.graph(project.config), None
    except api.PipeledgerError as exc:
        return {"nodes": [], "edges": []}, api.redact(str(exc))


def downstream(graph: Mapping[str, Any], name: str) -> list[str]:
    """Every node that reads from ``name``, directly or not, in the graph's order."""
    below: dict[str, list[str]] = defaultdict(list)
    for edge in graph["edges"]:
        below[edge["from"]].append(edge["to"])
    seen: list[str] = []
    todo = list(below[name])
    while todo:
        node = todo.pop(0)
        if node not in seen:
            seen.append(node)
            todo += below[node]
    order = [n["name"] for n in graph["nodes"]]
    return sorted(seen, key=lambda n: order.index(n) if n in order else len(order))


def volume_band(anomaly: api.VolumeAnomaly | None) -> charts.Band | None:
    """Where an interval's rows are expected: the mean ± 2 sd of its history (beyond that
    the volume verdict says WARNING)."""
    if anomaly is None or anomaly.mean is None or anomaly.stddev is None:
        return None
    spread = WARNING_Z * anomaly.stddev
    return charts.Band(max(anomaly.mean - spread, 0.0), anomaly.mean + spread, anomaly.mean)


def _days(now: datetime, days: int = 30) -> list[str]:
    return [(now - timedelta(days=days - 1 - i)).date().isoformat() for i in range(days)]


def _sparkline(
    name: str, days: Sequence[api.VolumeDay], anomaly: api.VolumeAnomaly | None, now: datetime
) -> Any:
    by_day = {d.day: d.mean for d in days}
    values = [by_day.get(day) for day in _days(now)]
    latest = float(anomaly.rows_written) if anomaly else None
    label = f"{name}: rows per interval, daily mean over 30 days, with the expected band"
    return charts.sparkline(values, volume_band(anomaly), label, latest)


def _health_words(lines: Iterable[NodeLine]) -> list[tuple[str, int]]:
    counted: dict[str, int] = defaultdict(int)
    for line in lines:
        counted[line.health] += 1
    return [(word, counted[word]) for word in HEALTH_ORDER if counted[word]]


def paging(params: Mapping[str, str]) -> tuple[int, int]:
    """``page`` (from 1, default 1) and ``limit`` (1 to ``api.PAGE_MAX``, default
    ``api.PAGE_LIMIT``) from a URL's parameters; BadRequest (400) naming a bad one."""
    page = params.get("page", "").strip() or "1"
    limit = params.get("limit", "").strip() or str(PAGE_SIZE)
    if not page.isdigit() or int(page) < 1:
        raise BadRequest(f"page {page!r}: a whole number from 1")
    if not limit.isdigit() or not 1 <= int(limit) <= api.PAGE_MAX:
        raise BadRequest(f"limit {limit!r}: a whole number from 1 to {api.PAGE_MAX}")
    return int(page), int(limit)


@dataclass(frozen=True, kw_only=True)
class OverviewQuery:
    """The overview's filter and page, as they stand in its URL: ``health`` (a word),
    ``q`` (part of a node's name), ``page`` (from 1) of ``limit`` lines, worst first."""

    health: str | None = None
    q: str | None = None
    page: int = 1
    limit: int = PAGE_SIZE

    @classmethod
    def of(cls, params: Mapping[str, str]) -> OverviewQuery:
        health, q = params.get("health", "").strip().upper(), params.get("q", "").strip()
        if health and health not in HEALTH_ORDER:
            raise BadRequest(f"health {health!r}: one of {', '.join(HEALTH_ORDER)}")
        page, limit = paging(params)
        return cls(health=health or None, q=q or None, page=page, limit=limit)

    def keeps(self, line: NodeLine) -> bool:
        wanted = self.health is None or line.health == self.health
        return wanted and (self.q is None or self.q.lower() in line.name.lower())

    def params(self, **changes: str | None) -> dict[str, str]:
        """The filter and page as URL parameters (those set), with ``changes``."""
        values = {
            "health": self.health,
            "q": self.q,
            "page": str(self.page) if self.page != 1 else None,
            "limit": str(self.limit) if self.limit != PAGE_SIZE else None,
        }
        values.update(changes)
        return {k: v for k, v in values.items() if v}


def overview(project: Project, query: OverviewQuery | None = None) -> dict[str, Any]:
    """Every node's line (the health counts are of them all), and the page of the lines
    the filter keeps, worst first: only those are drawn (a sparkline each)."""
    query = query or OverviewQuery()
    located, now = project.located, project.now()
    both = api.status_with_volumes(located, now=now)
    statuses = {s.pipeline: s for s, _ in both}
    anomalies = {s.pipeline: a for s, a in both if a is not None}
    waits: dict[str, list[str]] = defaultdict(list)
    for b in api.blocked(located, now=now):
        waits[b.downstream].append(b.reason)
    graph, config_error = _graph(project)
    counts = api.quarantine_counts(project.config) if config_error is None else {}
    lines = _lines(graph, statuses, anomalies, counts, waits)
    kept = [line for line in lines if query.keeps(line)]
    page = api.page_of(kept, query.page, query.limit)
    shown, first = page.items, page.first
    days: dict[str, list[api.VolumeDay]] = defaultdict(list)
    if shown:  # the days behind the sparklines: of the page's nodes only
        for day in api.volume_days(located, now=now, among=[line.name for line in shown]):
            days[day.pipeline].append(day)
    drawn = [
        replace(
            line,
            sparkline=_sparkline(line.name, days[line.name], anomalies.get(line.name), now),
            blocks=tuple(downstream(graph, line.name)) if line.failing else (),
        )
        for line in shown
    ]
    return {
        "now": now,
        "lines": lines,
        "shown": drawn,
        "kept": len(kept),
        "first": first,
        "query": query,
        "newer": query.params(page=_page(query.page - 1)) if page.has_prev else None,
        "older": query.params(page=str(query.page + 1)) if page.has_next else None,
        "health_order": HEALTH_ORDER,
        "health_words": _health_words(lines),
        "rejected": sum(s.rejected_7d for s in statuses.values()),  # apart from failures
        "queued": sum(s.queued for s in statuses.values()),
        "strip": work_strip(api.work(located, now=now), now),
        "config_error": config_error,
    }


def _page(number: int) -> str | None:
    return str(number) if number > 1 else None  # the first page is the bare URL


def _lines(
    graph: Mapping[str, Any],
    statuses: Mapping[str, api.PipelineStatus],
    anomalies: Mapping[str, api.VolumeAnomaly],
    counts: Mapping[str, int],
    waits: Mapping[str, list[str]],
) -> list[NodeLine]:
    """Every node of the graph and every pipeline of the ledger, worst first."""
    kinds = {n["name"]: n["kind"] for n in graph["nodes"]}
    names = list(kinds) + sorted(set(statuses) - set(kinds))
    lines = []
    for name in names:
        s = statuses.get(name)
        failing = s is not None and s.last_status in ("failed", "timed_out", "abandoned")
        anomaly = anomalies.get(name)
        lines.append(
            NodeLine(
                name=name,
                kind=kinds.get(name, "not in the config"),
                health=s.health.value if s else "UNKNOWN",
                reasons=s.reasons if s else ("no run recorded yet",),
                status=s,
                volume=anomaly.reason if anomaly else "no interval yet",
                quarantined=counts.get(name),
                failing=failing,
                waits_on=tuple(waits.get(name, [])),
            )
        )
    lines.sort(key=lambda line: api.worst_first(line.health, line.name))
    return lines


def work_strip(hours: Sequence[api.WorkHour], now: datetime) -> dict[str, Any]:
    """The last 24 hours of work by state, as the strip chart and its totals."""
    first = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=23)
    labels = [(first + timedelta(hours=i)).strftime("%Y-%m-%dT%H") for i in range(24)]
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    totals: dict[str, int] = defaultdict(int)
    for h in hours:
        counts[h.hour][h.status] = h.runs
        totals[h.status] += h.runs
    states = charts.states_in_order(list(totals))
    chart = charts.state_strip(labels, counts, "runs per hour over the last 24 hours, by state")
    return {
        "chart": chart,
        "totals": [(s, totals[s], charts.colour(s)) for s in states],
        "runs": sum(totals.values()),
    }


# -- a node -----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RunQuery:
    """The node page's filters, as they stand in its URL (the CLI's ``runs`` options)."""

    status: str | None = None
    trigger: str | None = None
    since: str | None = None
    until: str | None = None
    before: str | None = None
    logical_run: str | None = None
    correlation_id: str | None = None
    limit: int = PAGE_SIZE

    @classmethod
    def of(cls, params: Mapping[str, str]) -> RunQuery:
        def one(key: str) -> str | None:
            value = params.get(key, "").strip()
            return value or None

        status, trigger = one("status"), one("trigger")
        if status is not None and status not in [s.value for s in api.RunStatus]:
            raise BadRequest(f"status {status!r}: not a run state")
        if trigger is not None and trigger not in [t.value for t in api.TriggerType]:
            raise BadRequest(f"trigger {trigger!r}: not a trigger type")
        limit = one("limit") or str(PAGE_SIZE)
        if not limit.isdigit() or not 1 <= int(limit) <= 1000:
            raise BadRequest(f"limit {limit!r}: a whole number from 1 to 1000")
        return cls(
            status=status,
            trigger=trigger,
            since=one("since"),
            until=one("until"),
            before=one("before"),
            logical_run=one("logical_run"),
            correlation_id=one("correlation_id"),
            limit=int(limit),
        )

    def moments(self, now: datetime) -> tuple[datetime | None, datetime | None]:
        found = []
        for name, text in (("since", self.since), ("until", self.until)):
            try:
                found.append(api.parse_moment(text, now) if text else None)
            except ValueError as exc:
                raise BadRequest(f"{name} {exc}") from None
        return found[0], found[1]

    def params(self, **changes: str | None) -> dict[str, str]:
        """The filters as URL parameters (those set), with ``changes``."""
        values = {
            "status": self.status,
            "trigger": self.trigger,
            "since": self.since,
            "until": self.until,
            "before": self.before,
            "limit": str(self.limit) if self.limit != PAGE_SIZE else None,
        }
        values.update(changes)
        return {k: v for k, v in values.items() if v}


def node_runs(project: Project, name: str | None, query: RunQuery) -> list[api.RunRow]:
    """The page of runs the filters ask for: the one question behind the node's table
    and ``/api/runs`` (``pipeledger runs [NAME] ... --json``)."""
    since, until = query.moments(project.now())
    return api.recent_runs(
        project.located,
        name,
        since=since,
        until=until,
        status=query.status,
        trigger_type=query.trigger,
        logical_run_id=query.logical_run,
        correlation_id=query.correlation_id,
        before=query.before,
        limit=query.limit,
    )


def _run_bars(runs: Sequence[api.RunRow], values: str) -> list[charts.Bar]:
    out = []
    for r in reversed(runs):
        value = float(written(r)) if values == "rows" else float(r.duration_ms or 0)
        shown = f"{value:,.0f} rows written" if values == "rows" else duration(r.duration_ms)
        title = f"{r.run_id[:8]} {r.status} {ts(r.started_at)}: {shown}"
        out.append(charts.Bar(value, r.status.value, charts.run_href(r.run_id), title))
    return out


def _check_matrix(results: Sequence[api.CheckRow]) -> dict[str, Any]:
    """Checks (rows) over the latest runs that recorded any (columns, oldest first)."""
    runs: list[tuple[str, datetime]] = []
    cells: dict[tuple[str, str], api.CheckRow] = {}
    names: list[str] = []
    for c in results:
        if c.run_id not in [r for r, _ in runs]:
            if len(runs) == CHECK_RUNS:
                continue
            runs.append((c.run_id, c.created_at))
        cells.setdefault((c.check_name, c.run_id), c)
        if c.check_name not in names:
            names.append(c.check_name)
    runs.reverse()
    return {"runs": runs, "names": sorted(names), "cells": cells}


def node(project: Project, name: str, query: RunQuery) -> dict[str, Any]:
    located, now = project.located, project.now()
    runs = node_runs(project, name, query)
    since, until = query.moments(now)
    total = api.count_runs(
        located, name, since=since, until=until, status=query.status, trigger_type=query.trigger
    )
    recent = api.recent_runs(located, name, limit=CHART_RUNS)
    published = [r for r in recent if r.status.value in ("success", "partial")]
    anomaly = next(iter(api.anomalies(located, name, now=now)), None)
    status = next(iter(api.status(located, now=now, pipeline=name)), None)
    graph, config_error = _graph(project)
    me = next((n for n in graph["nodes"] if n["name"] == name), None)
    is_load = me is not None and me["kind"] == "load"
    schedule = []
    if config_error is None and me is not None:
        schedule = api.schedule_status(project.config, selectors=[name])
    return {
        "name": name,
        "now": now,
        "me": me,
        "status": status,
        "query": query,
        "runs": runs,
        "total": total,
        "older": query.params(before=runs[-1].run_id) if len(runs) == query.limit else None,
        "rows_chart": charts.bars(
            _run_bars(published, "rows"),
            f"{name}: rows written per published run, with the expected band",
            volume_band(anomaly),
        ),
        "duration_chart": charts.bars(
            _run_bars(recent, "duration"), f"{name}: duration of its latest runs"
        ),
        "anomaly": anomaly,
        "watermarks": api.watermarks(located, name) if is_load else [],
        "checks": _check_matrix(api.check_history(located, name, limit=CHECK_RUNS * 12)),
        "schedule": schedule[0] if schedule else None,
        "downstream": downstream(graph, name),
        "statuses": [s.value for s in api.RunStatus],
        "triggers": [t.value for t in api.TriggerType],
        "config_error": config_error,
    }


# -- a run ------------------------------------------------------------------------------


def _spans(detail: api.RunDetail) -> list[charts.Span]:
    start = detail.run.started_at
    spans = []
    for t in detail.tasks:
        end = t.ended_at or t.started_at
        title = f"{t.name}: {t.status} {duration(t.duration_ms)}, rows out {t.rows_out}"
        spans.append(
            charts.Span(
                t.name,
                (t.started_at - start).total_seconds(),
                (end - start).total_seconds(),
                t.status.value,
                title,
            )
        )
    return spans


def _quarantined(project: Project, pipeline: str, run_id: str) -> list[api.QuarantineEntry]:
    try:
        config = project.config
    except api.PipeledgerError:
        return []
    if pipeline not in config.pipelines or config.pipelines[pipeline].checks is None:
        return []
    return api.quarantined(config, pipeline, run=run_id, include_resolved=True)


def run(project: Project, run_id: str) -> dict[str, Any]:
    located = project.located
    detail = api.show(located, run_id)
    r = detail.run
    attempts = api.recent_runs(located, logical_run_id=r.logical_run_id, limit=100)
    siblings = (
        api.recent_runs(located, correlation_id=r.correlation_id, limit=1000)
        if r.correlation_id
        else []
    )
    error, note = split_note(r.error_message, r.pipeline, r.run_id)
    return {
        "detail": detail,
        "run": r,
        "attempts": sorted(attempts, key=lambda a: a.attempt),
        "siblings": sorted(siblings, key=lambda s: (s.started_at, s.pipeline)),
        "timeline": charts.timeline(_spans(detail), f"tasks of run {r.run_id}"),
        "quarantined": _quarantined(project, r.pipeline, r.run_id),
        "alerts": api.recent_alerts(located, since=r.started_at, run_id=r.run_id),
        "error": error,
        "note": note,
        "written": written(r),
    }


# -- the DAG, alerts and SLAs -----------------------------------------------------------


def dag(project: Project) -> dict[str, Any]:
    graph, config_error = _graph(project)
    nodes = [
        charts.GraphNode(
            n["name"],
            n["kind"],
            tuple(n["upstreams"]),
            n["last_run"]["status"] if n["last_run"] else None,
        )
        for n in graph["nodes"]
    ]
    return {
        "graph": graph,
        "chart": charts.dag(nodes, "the graph of loads and models, left to right"),
        "config_error": config_error,
    }


def alerts(project: Project, limit: int = PAGE_SIZE) -> dict[str, Any]:
    """Every breach (open first); the ``limit`` newest alert deliveries; the reliability of
    the ``limit`` least reliable nodes (still failing first, then the lowest 7-day success
    rate), both windows each, ranked from the daily rollup (``api.sla_page``: only those
    nodes' runs are read). The tiles count them all, and the JSON twins (``/api/sla``,
    ``/api/alerts``) hold the rest."""
    located, now = project.located, project.now()
    page = api.sla_page(located, now=now, limit=limit)
    breaches = sorted(page.breaches, key=lambda b: (not b.open, -b.due_at.timestamp()))
    raised = api.recent_alerts(located, since=now - timedelta(days=7))
    return {
        "now": now,
        "breaches": breaches,
        "open": [b for b in breaches if b.open],
        "reliability": list(page.reliability),
        "nodes": page.nodes,
        "alerts": raised[:limit],
        "raised": len(raised),
        "limit": limit,
    }
