"""``pipeledger demo``: a guided tour on the embedded default, in an empty folder."""

from __future__ import annotations

import csv
import sys
import tempfile
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from pipeledger import api
from pipeledger.api import ConfigError, PipeledgerError

HEADER = ["order_id", "customer_id", "status", "total_amount", "order_date", "updated_at"]
STATUSES = ["processing", "shipped", "completed", "cancelled"]
DAY1 = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)
CONFIG = """\
# no [warehouse] url: the embedded default, .pipeledger/warehouse.db
[pipelines.orders]
source = { kind = "csv", path = "data/orders_*.csv" }
target = "shop.orders"
key = ["order_id"]
cursor = "updated_at"
on_conflict = "newer_wins"   # the newer version of an order wins
lateness = "2h"              # re-read the last 2h, for late rows
max_backfill = "30d"
columns = { total_amount = "numeric(12,2)" }
"""
MODELS = """
[models.silver_orders]       # cleaned: no cancelled orders
sql = "models/silver_orders.sql"
target = "silver.orders"
materialized = "merge"
key = ["order_id"]
cursor = "updated_at"
on_conflict = "newer_wins"

[models.gold_daily]          # revenue per order day
sql = "models/gold_daily.sql"
target = "gold.daily_revenue"
materialized = "partition_overwrite"
partition_by = "order_date"
"""
SILVER_SQL = """\
select order_id, customer_id, status, total_amount, order_date, updated_at
from shop.orders
where status <> 'cancelled'
"""
GOLD_SQL = """\
select order_date, sum(total_amount) as revenue, count(*) as orders
from silver.orders
group by order_date
"""
TRUTH_SQL = (
    'SELECT order_date, sum(CAST(total_amount AS REAL)), count(*) FROM "shop.orders" '
    "WHERE status <> 'cancelled' GROUP BY order_date"
)
GOLD_ROWS = 'SELECT order_date, revenue, orders, _pipeledger_run_id FROM "gold.daily_revenue"'


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _row(
    order_id: int, moment: datetime, status: str | None = None, day: datetime | None = None
) -> list[str]:
    """An order; ``day``: when it was placed (default: when it was last changed)."""
    amount = f"{(order_id * 37) % 500 + 9.99:.2f}"
    return [
        str(order_id),
        str(1000 + order_id % 97),
        status or STATUSES[order_id % 3],
        amount,
        (day or moment).strftime("%Y-%m-%d"),
        _stamp(moment),
    ]


def _write(path: Path, rows: Iterable[Sequence[str]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        writer.writerows(rows)


class Tour:
    def __init__(self, root: Path, console: Console) -> None:
        self.root = root
        self.console = console
        self.config_path = root / "pipeledger.toml"
        self.step = 0
        self.surprises = 0

    def say(self, title: str, text: str) -> None:
        self.step += 1
        panel = Panel(escape(text), title=f"step {self.step}: {title}", title_align="left")
        self.console.print(panel)

    def load(
        self, expect: tuple[int, int], start: str | None = None, end: str | None = None
    ) -> api.LoadResult:
        config = api.load_config(self.config_path)
        if start and end:
            done = api.backfill(config, "orders", start, end)
            assert isinstance(done, api.LoadResult)  # "orders" is a load
            result = done
        else:
            result = api.run_one(config, "orders")
        c = result.counts
        before = result.watermark(result.watermark_before) or "(none)"
        staged = f"staged {result.rows_staged:,} · " if result.mode == "backfill" else ""
        self.console.print(
            f"  [bold]{result.mode}[/]: read {result.rows_read:,} · {staged}"
            f"inserted {c.inserted:,} · "
            f"updated {c.updated:,} · unchanged {c.unchanged:,}\n"
            f"  watermark {before} -> {result.watermark(result.watermark_after)}",
            highlight=False,
        )
        if (c.inserted, c.updated) == expect:
            self.console.print(
                f"  [green]as expected[/]: {expect[0]} inserted, {expect[1]} updated\n"
            )
        else:
            self.console.print(
                f"  [bold red]unexpected[/]: wanted {expect[0]} inserted, {expect[1]} updated\n"
            )
            self.surprises += 1
        return result

    def run(self) -> None:
        self.setup()
        self.full_load()
        self.identical_rerun()
        self.increment()
        self.backfill()
        self.models()
        self.correction()
        self.ledger()
        self.wrap_up()

    def setup(self) -> None:
        (self.root / "data").mkdir()
        _write(
            self.root / "data" / "orders_day1.csv",
            (_row(i, DAY1 + timedelta(minutes=i)) for i in range(1, 1001)),
        )
        self.config_path.write_text(CONFIG)
        self.say(
            "a source and a config",
            f"In {self.root}: data/orders_day1.csv holds 1,000 "
            "orders, and pipeledger.toml says how to load them:\n\n" + CONFIG.strip(),
        )

    def full_load(self) -> None:
        self.say(
            "full load",
            "The first run has no watermark, so it reads every row, stages "
            "them, merges them on order_id and stores the greatest updated_at as the "
            "watermark, all in one transaction.",
        )
        self.load((1000, 0))

    def identical_rerun(self) -> None:
        self.say(
            "the same run again",
            "A scheduler retry or a tired human re-runs it. Only "
            "rows with updated_at >= watermark - 2h are read; every one of them is already "
            "there and identical, so nothing is written: 0 inserted, 0 updated.",
        )
        self.load((0, 0))

    def increment(self) -> None:
        day2 = DAY1 + timedelta(days=1)
        placed = [DAY1 + timedelta(minutes=i) for i in range(1, 51)]
        rows = [
            _row(i, day2 + timedelta(minutes=i), "completed", day=placed[i - 1])
            for i in range(1, 51)
        ]
        rows += [_row(i, day2 + timedelta(minutes=i)) for i in range(1001, 1101)]
        late = DAY1 + timedelta(minutes=1000) - timedelta(minutes=30)
        rows.append(_row(1200, late))  # arrives now, but happened before the watermark
        _write(self.root / "data" / "orders_day2.csv", rows)
        self.say(
            "an incremental batch with updates and a late row",
            "orders_day2.csv brings "
            "50 status updates, 100 new orders and one late order stamped 30 minutes "
            "before the watermark. The lateness buffer re-reads the last 2h, so the late "
            "row lands; older rows outside the window are not read at all.",
        )
        self.load((101, 50))

    def backfill(self) -> None:
        old = DAY1 - timedelta(days=3)
        _write(
            self.root / "data" / "orders_correction.csv",
            [_row(2000 + i, old + timedelta(minutes=i)) for i in range(5)],
        )
        self.say(
            "a backfill",
            "Five orders from three days ago turn up in a correction file. "
            "They are far behind the watermark, so an incremental run will not read them:",
        )
        self.load((0, 0))
        start, end = _stamp(old), _stamp(old + timedelta(hours=1))
        self.console.print(
            f"  so we backfill exactly [{start}, {end}]; the live watermark must not move:",
            highlight=False,
        )
        self.load((5, 0), start, end)
        self.console.print(
            "  the same backfill again must change nothing; it does not even stage the rows:"
            " each matches the fingerprint stored with the target's row:",
            highlight=False,
        )
        self.load((0, 0), start, end)

    def models(self) -> None:
        (self.root / "models").mkdir()
        (self.root / "models" / "silver_orders.sql").write_text(SILVER_SQL)
        (self.root / "models" / "gold_daily.sql").write_text(GOLD_SQL)
        with self.config_path.open("a") as handle:
            handle.write(MODELS)
        self.say(
            "models: bronze -> silver -> gold",
            "shop.orders is the bronze layer. Two SQL models build on it in the warehouse: "
            "silver drops cancelled orders, gold sums revenue per order day. Their upstreams "
            "are read from the SQL itself, so one `pipeledger run` runs all three in order:\n\n"
            + MODELS.strip()
            + "\n\nmodels/silver_orders.sql:\n"
            + SILVER_SQL
            + "\nmodels/gold_daily.sql:\n"
            + GOLD_SQL,
        )
        self.dag_run()

    def correction(self) -> None:
        fix = DAY1 + timedelta(days=5)
        day2 = DAY1 + timedelta(days=1)
        rows = [_row(i, fix + timedelta(minutes=i), day=day2) for i in range(60, 100, 2)]
        _write(self.root / "data" / "orders_fix.csv", rows)
        self.say(
            "a late correction moves orders between days",
            "orders_fix.csv corrects 20 orders of 2024-03-01: they were placed on 2024-03-02. "
            "One run carries the correction through silver into gold, which recomputes just "
            "the two days it touches (the day the orders left, known from the versions the "
            "merge replaced, and the day they joined): gold is right again.",
        )
        self.dag_run()

    def dag_run(self) -> None:
        config = api.load_config(self.config_path)
        for outcome in api.run(config):
            data = outcome.to_json()
            self.console.print(
                f"  {data['pipeline']:<14} {data['status']:<8} inserted "
                f"{data.get('rows_inserted') or 0:>5,}  updated {data.get('rows_updated') or 0:>4,}"
                f"  deleted {data.get('rows_deleted') or 0:>3,}",
                highlight=False,
            )
        truth = {str(d): (f"{t:.2f}", int(n)) for d, t, n in api.query(config, TRUTH_SQL)}
        gold = api.query(config, GOLD_ROWS)
        mine = {str(d): (f"{float(r):.2f}", int(n)) for d, r, n, _ in gold}
        for day, revenue, orders, _ in sorted(gold):
            self.console.print(
                f"  gold {day}: revenue {revenue:>10}  orders {orders}", highlight=False
            )
        if mine == truth:
            self.console.print("  [green]as expected[/]: gold equals a GROUP BY over bronze\n")
        else:
            self.console.print(
                "  [bold red]unexpected[/]: gold differs from a GROUP BY over bronze\n"
            )
            self.surprises += 1

    def ledger(self) -> None:
        runs = list(reversed(api.recent_runs(self.config_path, limit=100)))
        self.say(
            "the run ledger",
            "Every run above was recorded in SQL, in the same "
            "transaction as its rows and watermark: one row per attempt, with its counts.",
        )
        for run in runs:
            self.console.print(
                f"  {run.run_id[:8]} {run.pipeline:<13} {run.trigger_type:<8} {run.status:<7} "
                f"read {run.rows_read or 0:>5,} ins {run.rows_inserted or 0:>5,} "
                f"upd {run.rows_updated or 0:>3,}",
                highlight=False,
            )
        self.console.print("")

    def wrap_up(self) -> None:
        db = self.root / ".pipeledger" / "warehouse.db"
        self.say(
            "look for yourself",
            f"Everything is plain SQL in {db}:\n\n"
            f"  sqlite3 {db} 'select count(*) from \"shop.orders\"'\n"
            f"  sqlite3 {db} 'select * from \"pipeledger.pipeline_state\"'\n\n"
            f"  sqlite3 {db} 'select * from \"pipeledger.pipeline_runs\"'\n\n"
            f"or, from {self.root}: pipeledger runs, pipeledger status, "
            "pipeledger show RUN_ID, pipeledger state",
        )
        self.console.print(
            "[bold]the dashboard[/]: the same ledger in a browser (read-only, on "
            "http://127.0.0.1:8420, until Ctrl-C):\n\n"
            f"  {_command()} -c {self.config_path} ui\n",
            highlight=False,
            soft_wrap=True,
        )


def _command() -> str:
    """How this process was started, when it is the ``pipeledger`` command (``./dev demo``
    runs ``.venv/bin/pipeledger``, which may not be on PATH)."""
    started = Path(sys.argv[0])
    return str(started.resolve()) if started.name == "pipeledger" else "pipeledger"


def run_demo(directory: Path | None, console: Console) -> Path:
    """Run the tour in ``directory`` (must be empty) or a new temporary folder."""
    root = directory or Path(tempfile.mkdtemp(prefix="pipeledger-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise ConfigError(f"demo: {root} is not empty; give an empty folder with --dir")
    tour = Tour(root.resolve(), console)
    tour.run()
    if tour.surprises:
        raise PipeledgerError(f"demo: {tour.surprises} step(s) did not do what they should")
    return root
