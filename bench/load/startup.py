"""The quick commands' start-up: ``pipeledger --help``, ``state``, ``runs`` and ``status``
as whole processes on the embedded default and on PostgreSQL, beside the interpreter's own
start and the PostgreSQL driver's import; its targets and its block of ``RESULTS.md``
(``STARTUP``), which the full run writes and ``--only startup`` rewrites alone."""

from __future__ import annotations

import json
import shutil
import statistics
import sys
from pathlib import Path

from bench.common.clock import spread
from bench.common.machine import LOAD_AVERAGE
from bench.common.orders import PIPELINE, SEED, generate, pipeline_toml
from bench.common.postgres import fresh_database, settle
from bench.common.process import Process, pipeledger_command, run_exiting, run_process
from bench.common.results import Target, markers, run_line, table, target_table
from bench.load.measure import APP_NAME, Measurement

BLOCK = "STARTUP"
ROWS = 10_000  # the small load the quick commands look at
QUICK = ("state", "runs", "status")
EMBEDDED = "embedded SQLite"
POSTGRES = "PostgreSQL"
IMPORT_PSYCOPG = 'python -c "import psycopg"'
MAX_HELP_S = 0.2  # `pipeledger --help`, median wall time
MAX_QUICK_S = 0.2  # `pipeledger state`, `runs`, `status` on the embedded default, the same
MAX_UNCHANGED_S = 0.2  # `pipeledger run` of an unchanged folder, beyond its start-up (medians)
UNCHANGED_FILES = 8  # the folder of the incremental = "files" pipeline
UNCHANGED = f"pipeledger run, {UNCHANGED_FILES} files unchanged"
# `run`'s own start-up: the same command and config with a selector that picks no node: it
# reads and validates the config, imports the runner and exits 2 before any node runs
NO_NODE = "tag:no_node_has_this_tag"
STARTED = "pipeledger run, no node selected"


def timed_command(
    command: str, argv: list[str], calls: int, where: str = "", rows: int = 0
) -> dict[str, Measurement]:
    """The median wall time of ``calls`` runs of ``argv`` as a whole process; ``command``
    names it, ``where`` is the warehouse it reads (none for the baselines)."""
    runs = [run_process(argv, PGAPPNAME=APP_NAME) for _ in range(calls)]
    return measured(command, runs, where, rows)


def measured(
    command: str, runs: list[Process], where: str = "", rows: int = 0
) -> dict[str, Measurement]:
    """The measurement of ``runs`` of ``command`` (see :func:`timed_command`)."""
    name = f"{command} ({where})" if where else command
    walls = [run.wall for run in runs]
    m = Measurement(
        name=name,
        family="startup",
        rows_in_file=0,
        table_rows=rows,
        seconds=statistics.median(walls),
        rows_read=0,
        rows_inserted=0,
        rows_updated=0,
        peak_rss_mb=max(run.rss_mb for run in runs),
        process_seconds=max(walls),
    )
    m.extra.update(command=command, warehouse=where)
    m.extra["calls_s"] = [round(w, 3) for w in walls]
    m.extra["calls_cpu_s"] = [round(run.cpu, 3) for run in runs]
    print(f"  {name:<40} {m.seconds:6.3f} s (median of {len(runs)})", file=sys.stderr)
    return {name: m}


def source(work: Path) -> Path:
    """The small orders CSV of the start-up part (``ROWS`` rows), written once."""
    return generate(work, ROWS, SEED, 0, 0, "startup").base


def project(work: Path, name: str, csv: Path, url: str | None) -> Path:
    """A fresh folder ``work/<name>/`` with ``csv`` under ``data/`` and a pipeledger.toml
    of one CSV pipeline; without ``url`` it has no ``[warehouse]`` (the embedded default:
    ``.pipeledger/warehouse.db`` beside it). Returns the config's path."""
    folder = work / name
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "data").mkdir(parents=True)
    (folder / "data" / csv.name).hardlink_to(csv)
    warehouse = f'[warehouse]\nurl = "{url}"\n\n' if url else ""
    config = folder / "pipeledger.toml"
    config.write_text(warehouse + pipeline_toml("data"))
    return config


def load_once(config: Path, where: str) -> None:
    """The pipeline's first load, by a whole ``pipeledger run`` process (not timed): the
    quick commands then have a watermark, a run and a status to show."""
    argv = pipeledger_command(["-c", str(config), "run", "--json", PIPELINE])
    ran = run_process(argv, PGAPPNAME=APP_NAME)
    outcome = json.loads(ran.output)[0]
    if outcome["status"] != "success" or outcome["rows_read"] != ROWS:
        raise SystemExit(f"the start-up load into {where} did not load {ROWS:,} rows")


def quick_commands(config: Path, calls: int, where: str) -> dict[str, Measurement]:
    """``state``, ``runs`` and ``status`` against ``config``'s warehouse."""
    ms: dict[str, Measurement] = {}
    for command in QUICK:
        argv = pipeledger_command(["-c", str(config), command])
        ms.update(timed_command(f"pipeledger {command}", argv, calls, where, ROWS))
    return ms


def unchanged_folder(work: Path, csv: Path, calls: int) -> dict[str, Measurement]:
    """``pipeledger run`` of an ``incremental = "files"`` pipeline whose folder of
    ``UNCHANGED_FILES`` CSV files (``csv`` linked under other names) it has taken already:
    the run lists the files, finds none new and ends before the loader is imported; and
    the same command's start-up alone (``NO_NODE`` selects nothing: exit 2), timed
    alternately with it so that both meet the same machine."""
    config = project(work, "startup-files", csv, None)
    data = config.parent / "data"
    for n in range(1, UNCHANGED_FILES):
        (data / f"{n}-{csv.name}").hardlink_to(csv)
    text = config.read_text().replace('path = "data" }', 'path = "data" }\nincremental = "files"')
    config.write_text(text)
    argv = pipeledger_command(["-c", str(config), "run", "--json", PIPELINE])
    outcome = json.loads(run_process(argv, PGAPPNAME=APP_NAME).output)[0]
    if outcome["status"] != "success" or outcome.get("files") is None:
        raise SystemExit("the start-up load of the folder of files did not take its files")
    argv = pipeledger_command(["-c", str(config), "run", PIPELINE])
    started = pipeledger_command(["-c", str(config), "run", NO_NODE])
    unchanged: list[Process] = []
    start_up: list[Process] = []
    for _ in range(calls):  # one call of each in turn: a busy spell weighs on both
        unchanged.append(run_process(argv, PGAPPNAME=APP_NAME))
        start_up.append(run_exiting(started, 2, {"PGAPPNAME": APP_NAME}))
    ms = measured("pipeledger run", unchanged, UNCHANGED, ROWS)
    return ms | measured("pipeledger run", start_up, STARTED, ROWS)


def measure(server_url: str, work: Path, csv: Path, calls: int) -> dict[str, Measurement]:
    """The baselines (the bare interpreter, the PostgreSQL driver's import), ``--help``,
    then ``state``, ``runs`` and ``status`` on the embedded default and on PostgreSQL,
    each after a first load of ``csv``."""
    print("  start-up of the quick commands", file=sys.stderr)
    settle(server_url)  # the loads before it leave the server checkpointing and vacuuming
    ms = timed_command("python -c pass", [sys.executable, "-c", "pass"], calls)
    ms.update(timed_command(IMPORT_PSYCOPG, [sys.executable, "-c", "import psycopg"], calls))
    config = project(work, "startup-embedded", csv, None)
    load_once(config, EMBEDDED)
    help_argv = pipeledger_command(["-c", str(config), "--help"])
    ms.update(timed_command("pipeledger --help", help_argv, calls))
    ms.update(quick_commands(config, calls, EMBEDDED))
    ms.update(unchanged_folder(work, csv, calls))
    with fresh_database(server_url, "pipeledger_bench_startup") as db:
        config = project(work, "startup-postgres", csv, db)
        load_once(config, POSTGRES)
        settle(db)
        ms.update(quick_commands(config, calls, POSTGRES))
    return ms


def _quick_target(m: Measurement, limit: float, where: str) -> Target:
    calls = m.extra["calls_s"]
    return Target(
        f"`{m.extra['command']}` < {limit} s{where} (median wall time)",
        m.seconds < limit,
        f"{spread(calls, 3)} s over {len(calls)} runs",
    )


def targets(ms: dict[str, Measurement]) -> list[Target]:
    """The quick commands answer at once: ``--help`` anywhere, ``state``, ``runs`` and
    ``status`` on the embedded default (PostgreSQL's driver import alone exceeds the limit)."""
    found = [_quick_target(ms["pipeledger --help"], MAX_HELP_S, "")]
    for command in QUICK:
        m = ms[f"pipeledger {command} ({EMBEDDED})"]
        found.append(_quick_target(m, MAX_QUICK_S, " on the embedded default"))
    return [*found, _unchanged_target(ms)]


def _unchanged_target(ms: dict[str, Measurement]) -> Target:
    """An unchanged folder (``incremental = "files"``) is passed by at once: the whole
    ``pipeledger run`` process, beyond the same command's start-up (``NO_NODE``)."""
    run, started = ms[f"pipeledger run ({UNCHANGED})"], ms[f"pipeledger run ({STARTED})"]
    beyond = run.seconds - started.seconds
    return Target(
        f"`{UNCHANGED}` < {MAX_UNCHANGED_S} s beyond `run`'s own start-up (the same "
        f"command and config with `{NO_NODE}`, which selects no node) on the embedded "
        "default (medians)",
        beyond < MAX_UNCHANGED_S,
        f"{beyond:.3f} s beyond ({run.seconds:.3f} s against {started.seconds:.3f} s); runs "
        f"{spread(run.extra['calls_s'], 3)} s",
    )


def _start_up_information(ms: dict[str, Measurement]) -> str:
    """Where an unchanged folder's run goes beyond ``--help``: mostly ``run``'s start-up
    (reading and validating the config with pydantic, importing the runner)."""
    run, started = ms[f"pipeledger run ({UNCHANGED})"], ms[f"pipeledger run ({STARTED})"]
    help_ = ms["pipeledger --help"].seconds
    return (
        f"`{UNCHANGED}` {run.seconds:.3f} s is {run.seconds - help_:.3f} s beyond "
        f"`pipeledger --help` ({help_:.3f} s): {started.seconds - help_:.3f} s of it is "
        f"`run`'s start-up (`{NO_NODE}`: {started.seconds:.3f} s; the config's validation "
        "with pydantic, whose import alone is most of it, and the runner's imports) and "
        f"{run.seconds - started.seconds:.3f} s the run (listing and comparing the files, "
        "the warehouse, the ledger's records)"
    )


def information(ms: dict[str, Measurement]) -> list[str]:
    """The baselines, and how much of PostgreSQL's quick commands the driver import is."""
    bare, driver = ms["python -c pass"].seconds, ms[IMPORT_PSYCOPG].seconds
    driver_cost = driver - bare
    pg = {c: ms[f"pipeledger {c} ({POSTGRES})"].seconds for c in QUICK}
    embedded = {c: ms[f"pipeledger {c} ({EMBEDDED})"].seconds for c in QUICK}
    times = ", ".join(f"`{c}` {t:.3f} s (embedded {embedded[c]:.3f} s)" for c, t in pg.items())
    shares = ", ".join(f"{driver_cost / t:.0%} of `{c}`" for c, t in pg.items())
    added = ", ".join(f"{pg[c] - embedded[c]:.3f} s to `{c}`" for c in QUICK)
    return [
        _start_up_information(ms),
        f"baselines: the interpreter's own start (`python -c pass`, the venv's site) "
        f"{bare:.3f} s; `{IMPORT_PSYCOPG}` {driver:.3f} s, so importing the PostgreSQL "
        f"driver costs {driver_cost:.3f} s",
        f"PostgreSQL (information, not targets): {times}. The driver's import alone "
        f"({driver_cost:.3f} s) is {shares}; against the embedded default PostgreSQL adds "
        f"{added} (the driver's import, connecting and the server's round trips, less "
        "what the SQLite file costs)",
    ]


def _row(m: Measurement) -> list[str]:
    return [
        f"`{m.extra['command']}`",
        m.extra["warehouse"] or "-",
        f"{m.seconds:.3f}",
        f"{min(m.extra['calls_s']):.3f}",
        f"{max(m.extra['calls_s']):.3f}",
        str(len(m.extra["calls_s"])),
        f"{statistics.median(m.extra['calls_cpu_s']):.3f}",
        f"{m.peak_rss_mb:.1f}",
    ]


def block(ms: dict[str, Measurement], info: dict[str, str], module: str) -> str:
    """The start-up section of ``RESULTS.md``, its markers included: the same from the full
    run and from ``--only startup``, which rewrites it alone."""
    begin, end = markers(BLOCK)
    starts = [m for m in ms.values() if m.family == "startup"]
    lines = [
        begin,
        "## Start-up of the quick commands",
        "",
        f"{run_line(module)} (the full run and "
        "`--only startup` both write this section). Each command is a whole process of this "
        "venv, timed from its start to its exit (the installed `pipeledger` command, as a user "
        "runs it: interpreter start, imports and exit included), after pipeledger's bytecode was "
        "compiled as an installed package has it; the figure is the median wall time of all "
        "its runs (`--calls` in each of `--repeat` rounds), CPU is user + system. The "
        "embedded default: a fresh folder whose `pipeledger.toml` has no `[warehouse] url` "
        "(so the SQLite file `.pipeledger/warehouse.db` beside it) and one CSV pipeline, "
        f"{ROWS:,} rows loaded once by a `pipeledger run` process before the "
        "timing; PostgreSQL: the same pipeline and rows in a fresh database of the "
        "benchmark's server. Baselines, in the same run: the bare interpreter (`python -c "
        "pass`, with the venv's site) and the PostgreSQL driver's import.",
        "",
    ]
    lines += table(
        ["command", "warehouse", "wall median", "min", "max", "runs", "CPU median", "peak RSS MB"],
        [_row(m) for m in starts],
    )
    lines += ["", "### Start-up targets", "", *target_table(targets(ms))]
    lines += ["", "For information (not targets):", ""]
    lines += [f"- {line}" for line in information(ms)]
    lines += [
        f"- machine: {info['cpu']}, {info['cores']} cores, load average at the end "
        f"{info[LOAD_AVERAGE]}; Python {info['python']}, psycopg "
        f"{info['psycopg']}; pipeledger {info['pipeledger commit']}, imported from "
        f"{info['pipeledger imported from']}",
        end,
    ]
    return "\n".join(lines)


def print_figures(ms: dict[str, Measurement]) -> None:
    """The start-up part on stdout: medians, information and targets."""
    print("\nstart-up (whole processes)                  median wall s  CPU s  RSS MB")
    for m in ms.values():
        if m.family == "startup":
            cpu = statistics.median(m.extra["calls_cpu_s"])
            print(f"{m.name:<44} {m.seconds:13.3f} {cpu:6.3f} {m.peak_rss_mb:7.1f}")
    for line in information(ms):
        print(f"info  {line}")
    for t in targets(ms):
        print(f"{t.verdict}  {t.name}: {t.detail}")
