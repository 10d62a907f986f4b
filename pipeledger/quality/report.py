"""Results of the quality gate: immutable values the CLI prints and the ledger stores."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

CheckStatus = Literal["pass", "fail", "warn", "not_learned"]
Level = Literal["row", "batch"]


CheckKind = Literal[
    "row_count",  # rows staged against a fixed or learned band
    "key",  # the natural key unique and not null
    "not_null",  # required columns
    "range",  # a column's min / max
    "accepted_values",  # a column's allowed values
    "matches",  # a column's pattern
    "schema_drift",  # columns added, removed or retyped
    "delete_fraction",  # the share of the target a full snapshot would delete
]


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    """One check: what was observed against what was expected, and which rows failed."""

    name: str
    kind: CheckKind
    level: Level
    status: CheckStatus
    observed: str
    expected: str
    failing_rows: int = 0
    sample_keys: tuple[str, ...] = ()
    warn_only: bool = False

    def line(self) -> str:
        sample = f"; e.g. {', '.join(self.sample_keys)}" if self.sample_keys else ""
        rows = f" ({self.failing_rows:,} row(s))" if self.failing_rows else ""
        return (
            f"{self.status.upper():<11} {self.name}: observed {self.observed}, "
            f"expected {self.expected}{rows}{sample}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.name,
            "kind": self.kind,
            "level": self.level,
            "status": self.status,
            "observed": self.observed,
            "expected": self.expected,
            "failing_rows": self.failing_rows,
            "sample_keys": list(self.sample_keys),
        }


Decision = Literal["publish", "quarantine", "halt"]


@dataclass(frozen=True, kw_only=True)
class GateReport:
    """Every check of one run, and the one decision made from all of them."""

    results: tuple[CheckResult, ...]
    decision: Decision
    quarantined_rows: int = 0  # staged rows held back (set aside now or already before)
    schema_changes: dict[str, list[str]] = field(default_factory=dict)
    new_entries: int = 0  # quarantine entries this run added or reopened

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if r.status == "fail")

    def lines(self) -> list[str]:
        return [r.line() for r in self.results]

    def to_json(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "quarantined_rows": self.quarantined_rows,
            "new_quarantine_entries": self.new_entries,
            "schema_changes": self.schema_changes,
            "checks": [r.to_json() for r in self.results],
        }
