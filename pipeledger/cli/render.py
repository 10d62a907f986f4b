"""How results look on a terminal: plain lines that survive narrow terminals and logs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pipeledger.cli.plain import escape as escape

if TYPE_CHECKING:
    from pipeledger.api import LoadResult, ModelResult, SnapshotState, WatermarkRow


def _mark(value: str | dict[str, str] | None) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "(none)"
    return value


def result_lines(result: LoadResult) -> list[str]:
    colour = {"success": "green", "partial": "yellow"}.get(result.status, "red")
    c = result.counts
    before, after = (
        result.watermark(result.watermark_before),
        result.watermark(result.watermark_after),
    )
    lines = [
        f"[bold]{result.pipeline}[/] [{colour}]{result.status}[/] {result.mode} "
        f"-> {result.target} in {result.duration_s:.2f}s (run {result.run_id})",
        f"  rows      read {result.rows_read:,} · inserted {c.inserted:,} · updated {c.updated:,}"
        + (f" · deleted {c.deleted:,}" if c.deleted else "")
        + f" · unchanged {c.unchanged:,}"
        + (f" · superseded {c.superseded:,}" if c.superseded else ""),
    ]
    if result.watermark_before or result.watermark_after or not result.snapshot:
        lines.append(
            f"  watermark {_mark(before)} -> {_mark(after)}"
            + (" (backfill: the live watermark does not move)" if result.mode == "backfill" else "")
        )
    if result.snapshot is not None:
        lines.append("  " + escape(snapshot_text(result.snapshot, by_run=False)))
    lines += files_lines(result) + quality_lines(result) + late_lines(result)
    if result.status == "success" and result.rows_read == 0 and result.files is None:
        lines.append("  [yellow]note:[/] the source had no rows in the window; nothing to load")
    if c.superseded:
        lines.append(
            f"  [yellow]note:[/] {c.superseded:,} row(s) lost to a newer row of the same key "
            "in this run"
        )
    skipped = result.rows_read - result.rows_staged
    if result.mode == "backfill" and result.status != "failed" and skipped > 0:
        lines.append(
            f"  note: {skipped:,} row(s) matched the stored fingerprint of the target's row "
            "and were not staged (--full-compare compares every row)"
        )
    return lines


def files_lines(result: LoadResult) -> list[str]:
    """``incremental = "files"``: the files a run read, and those it passed by."""
    f = result.files
    if f is None:
        return []
    shown = ", ".join(f.read[:3]) + (f" and {len(f.read) - 3:,} more" if len(f.read) > 3 else "")
    read = f"read {len(f.read):,} new or changed" + (f" ({escape(shown)})" if f.read else "")
    passed = f" · {f.unchanged:,} unchanged" + (
        f" · {f.touched:,} touched, not read" if f.touched else ""
    )
    return [f"  files     {read}{passed}"]


def late_lines(result: LoadResult) -> list[str]:
    """The rows a run found later than its lateness buffer, and what to do about them."""
    late = result.lateness
    if late is None or not late.rows_missed:
        return []
    where = f" in {', '.join(late.missed_in)}" if late.missed_in else ""
    first, last = late.missed_cursors or ("?", "?")
    if result.mode == "backfill":
        return [
            f"  [yellow]note:[/] {late.rows_missed:,} row(s) loaded here had arrived later "
            f"than the lateness buffer ({late.buffer_s:,}s); `pipeledger lateness "
            f"{result.pipeline}` counts them"
        ]
    return [
        f"  [yellow]warning:[/] {late.rows_missed:,} row(s){escape(where)} arrived later than "
        f"the lateness buffer ({late.buffer_s:,}s) and were not loaded (cursor {first} .. "
        f"{last}); `pipeledger backfill {result.pipeline} --start {first} --end {last}` "
        "loads them"
    ]


def model_lines(result: ModelResult) -> list[str]:
    colour = {"success": "green", "partial": "yellow"}.get(result.status, "red")
    c = result.counts
    scope = result.to_json()["recomputed"]
    lines = [
        f"[bold]{result.pipeline}[/] [{colour}]{result.status}[/] model ({result.materialized}, "
        f"{result.mode}) -> {result.target} in {result.duration_s:.2f}s (run {result.run_id})",
        f"  rows      computed {result.rows_computed:,} · inserted {c.inserted:,} · "
        f"updated {c.updated:,} · deleted {c.deleted:,} · unchanged {c.unchanged:,}",
        f"  upstream  {len(result.consumed):,} new run(s) consumed · recomputed: {scope}",
    ]
    if not result.full and not result.consumed:
        lines.append("  [yellow]note:[/] no upstream run since its last run; nothing to do")
    return lines


def quality_lines(result: LoadResult | ModelResult) -> list[str]:
    report = result.quality
    if report is None:
        return []
    lines = [f"  quality   {len(report.results)} check(s): {report.decision}"]
    colours = {"fail": "red", "warn": "yellow", "not_learned": "yellow"}
    for check in report.results:
        if check.status in colours:
            lines.append(f"    [{colours[check.status]}]{escape(check.line())}[/]")
    if report.new_entries:
        lines.append(
            f"  [yellow]warning:[/] {report.quarantined_rows:,} row(s) quarantined into "
            f"{result.target}_quarantine; see: pipeledger quarantine {result.pipeline}"
        )
    elif report.quarantined_rows:
        lines.append(
            f"  note: {report.quarantined_rows:,} row(s) already in quarantine were held back "
            "again (re-read at the watermark)"
        )
    return lines


def results_lines(results: Sequence[LoadResult]) -> list[str]:
    return [line for result in results for line in result_lines(result)]


def dag_lines(graph: dict[str, Any]) -> list[str]:
    lines = []
    for node in graph["nodes"]:
        last = node["last_run"] or {}
        status = last.get("status", "never run")
        reads = ", ".join(node["upstreams"]) or "-"
        lines.append(
            f"[bold]{escape(node['name'])}[/] {node['kind']} -> {escape(node['target'])}  "
            f"reads: {escape(reads)}  last: {escape(status)}"
        )
        if "incremental" in node:
            lines.append("  " + escape(_recompute_text(node["incremental"])))
    return lines


def _recompute_text(plan: dict[str, Any]) -> str:
    """What an incremental run of a model recomputes, and how it finds it."""
    kind = plan["recompute"]
    if kind in ("full", "view"):
        return "recomputes: all" if kind == "full" else "a view: nothing copied"
    parts = [f"recomputes: {kind} by {', '.join(plan['by'])}"]
    parts += [f"traced from {t}.{', '.join(c)}" for t, c in plan["traced"].items()]
    if plan["derived"]:
        parts.append(f"derived from {', '.join(plan['derived'])}")
    if plan["uncovered"]:
        parts.append(f"{', '.join(plan['uncovered'])}: fallback {plan['fallback']}")
    return "; ".join(parts)


def state_lines(rows: Sequence[WatermarkRow]) -> list[str]:
    """One line per pipeline and partition, with what ``--json`` shows; a pipeline without
    a cursor shows its last snapshot or the files it took instead. Every value is
    escaped: a partition shown as ``[eu]`` would otherwise be read as a markup tag."""
    lines = []
    for row in rows:
        partition = f" {escape(f'[{row.partition}]')}" if row.partition else ""
        if row.watermark is None:
            lines.append(f"[bold]{escape(row.pipeline)}[/]  no cursor, no watermark")
        else:
            lines.append(
                f"[bold]{escape(row.pipeline)}[/]{partition}  {escape(row.cursor_column or '')} "
                f"({escape(row.cursor_type or '')})  {escape(row.watermark)}  "
                f"(set by run {escape(row.run_id or '')} at {escape(row.updated_at or '')})"
            )
        if row.snapshot is not None:
            lines.append("  " + escape(snapshot_text(row.snapshot)))
        if row.files is not None:
            f = row.files
            lines.append(
                f"  files     {f.files:,} taken ({f.bytes:,} bytes), the last at "
                f"{escape(f.last_taken_at)}"
            )
    return lines


def snapshot_text(snapshot: SnapshotState, by_run: bool = True) -> str:
    """A full snapshot's state in words: ``state`` says which run read it (``by_run``), a
    run's own lines do not."""
    since = (
        f"unchanged since {snapshot.changed_at} (run {snapshot.changed_by})"
        if snapshot.unchanged
        else "changed"
    )
    read = f", read by run {snapshot.run_id} at {snapshot.taken_at}" if by_run else ""
    return f"snapshot  {snapshot.rows:,} rows, fingerprint {snapshot.fingerprint}{read}: {since}"
