"""What a reconciliation found, as the CLI, ``--json`` and the ledger see it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pipeledger.runs.reconcile.windows import Grain
from pipeledger.state.lateness import RunLateness
from pipeledger.state.watermark import to_text

Verdict = Literal["match", "mismatch"]


@dataclass(frozen=True, kw_only=True)
class WindowDiff:
    """One window whose rows differ: ``start <= cursor < end`` (no bounds: the whole
    snapshot of a pipeline without a cursor)."""

    label: str
    start: str | None
    end: str | None
    source_rows: int
    target_rows: int
    missing_rows: int  # the source has the key in this window, the target has not
    extra_rows: int  # the target has the key in this window, the source has not
    changed_rows: int  # both have it, with other values
    sample_keys: tuple[Any, ...] = ()  # a key, or a list of a composite key's values

    @classmethod
    def of(
        cls,
        grain: Grain,
        label: str,
        rows: tuple[int, int],
        kinds: dict[str, int],
        sample: tuple[Any, ...],
    ) -> WindowDiff:
        bounds = grain.bounds(label)
        return cls(
            label=label,
            start=None if bounds is None else to_text(bounds[0]),
            end=None if bounds is None else to_text(bounds[1]),
            source_rows=rows[0],
            target_rows=rows[1],
            missing_rows=kinds.get("missing", 0),
            extra_rows=kinds.get("extra", 0),
            changed_rows=kinds.get("changed", 0),
            sample_keys=sample,
        )

    @property
    def differing_rows(self) -> int:
        return self.missing_rows + self.extra_rows + self.changed_rows

    def to_json(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "source_rows": self.source_rows,
            "target_rows": self.target_rows,
            "missing_rows": self.missing_rows,
            "extra_rows": self.extra_rows,
            "changed_rows": self.changed_rows,
            "sample_keys": list(self.sample_keys),
        }


@dataclass(frozen=True, kw_only=True)
class Repair:
    """One backfill ``reconcile --repair`` ran (no range: a run of a pipeline without a
    cursor, which compares and applies its whole snapshot)."""

    start: str | None
    end: str | None
    run_id: str
    rows_inserted: int
    rows_updated: int
    rows_deleted: int = 0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True, kw_only=True)
class Reconciliation:
    """The source and the target compared over ``start .. end`` (closed; either may be
    open), capped at each partition's watermark."""

    pipeline: str
    run_id: str
    target: str
    grain: Grain
    start: str | None
    end: str | None
    started_at: datetime
    duration_s: float
    rows_read: int  # source rows in the range
    windows_compared: int
    source_rows: int
    target_rows: int
    windows: tuple[WindowDiff, ...]
    lateness: RunLateness | None = None  # late rows found (SQL sources)
    found: tuple[WindowDiff, ...] | None = None  # before --repair
    repairs: tuple[Repair, ...] = ()

    @property
    def status(self) -> Verdict:
        return "mismatch" if self.windows else "match"

    @property
    def exit_code(self) -> int:
        """0 when the target holds what the source holds, 3 when it does not."""
        return 3 if self.windows else 0

    def totals(self) -> dict[str, int]:
        return {
            "missing_rows": sum(w.missing_rows for w in self.windows),
            "extra_rows": sum(w.extra_rows for w in self.windows),
            "changed_rows": sum(w.changed_rows for w in self.windows),
        }

    def to_json(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "pipeline": self.pipeline,
            "status": self.status,
            "windows": [w.to_json() for w in self.windows],
            "run_id": self.run_id,
            "target": self.target,
            "by": self.grain.name,
            "start": self.start,
            "end": self.end,
            "windows_compared": self.windows_compared,
            "source_rows": self.source_rows,
            "target_rows": self.target_rows,
            **self.totals(),
            "late_rows_missed": self.lateness.rows_missed if self.lateness else 0,
            "duration_s": round(self.duration_s, 3),
        }
        if self.found is not None:
            payload["found"] = [w.to_json() for w in self.found]
            payload["repairs"] = [r.to_json() for r in self.repairs]
        return payload
