"""What publishing staged rows did to a target, as an immutable value."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MergeCounts:
    """What the merge did with the staged rows.

    ``unchanged`` counts staged rows that left the target as it was: identical rows, and
    rows the policy declined (older under ``newer_wins``, re-seen under ``ignore``).
    ``superseded`` counts rows that lost to a newer row of the same key in the same run.
    ``deleted`` counts rows deleted (or soft-deleted; SCD2: versions closed by a delete).
    ``net_rows`` is how much the target's row count changed, where that is not
    ``inserted - deleted`` (soft deletes keep rows; SCD2 rewrites versions).
    """

    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    superseded: int = 0
    deleted: int = 0
    net_rows: int | None = None

    @property
    def wrote(self) -> bool:
        """Whether any row of the target was written (inserted, changed, replaced or
        deleted): ``superseded`` counts too, to be safe where a mode keeps them."""
        return bool(self.inserted or self.updated or self.deleted or self.superseded)

    @property
    def growth(self) -> int:
        """The change in the target's row count."""
        return self.inserted - self.deleted if self.net_rows is None else self.net_rows
