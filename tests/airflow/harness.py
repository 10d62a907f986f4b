"""Driving a real Airflow from the tests: its venv, an ``AIRFLOW_HOME`` per test, its CLI, and
the LocalExecutor's processes (Airflow 3: api-server for the Execution API, dag-processor,
scheduler; Airflow 2: the scheduler alone), each started in a process group of its own and
stopped by it. Every wait is for a state the test names, polled, with a generous cap."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import psycopg

ROOT = Path(__file__).resolve().parents[2]
DAGS = Path(__file__).parent / "dags"
CAP = 240.0  # seconds any wait may take on a busy 2-core machine before the test fails
T = TypeVar("T")


def venv(version: int) -> Path:
    path = ROOT / f".venv-airflow{version}"
    assert (path / "bin" / "airflow").exists(), f"{path}: run ./dev test-airflow"
    return path


def wait_for(what: str, probe: Callable[[], T | None], cap: float = CAP) -> T:
    """``probe()``'s first answer that is not None (AssertionError naming ``what`` after
    ``cap`` seconds)."""
    deadline = time.monotonic() + cap
    while True:
        found = probe()
        if found is not None:
            return found
        assert time.monotonic() < deadline, f"waited {cap:.0f} s for {what}"
        time.sleep(0.2)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Airflow:
    """One Airflow installation (``version``) with a home of its own under ``home``."""

    def __init__(self, version: int, home: Path, config: Path, metadata: str | None = None):
        self.version = version
        self.home = home
        self.bin = venv(version) / "bin"
        home.mkdir(parents=True, exist_ok=True)
        dags = home / "dags"
        dags.mkdir(exist_ok=True)
        shutil.copy(DAGS / "pipeledger_dag.py", dags)
        self.metadata = metadata or f"sqlite:///{home / 'airflow.db'}"
        self.port = free_port()
        self.env = {
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("AIRFLOW", "PIPELEDGER_TEST"))
            },
            "PATH": f"{self.bin}:{os.environ['PATH']}",
            "PYTHONWARNINGS": "ignore",
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.metadata,
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__API_AUTH__JWT_SECRET": "pipeledger-tests",
            "PIPELEDGER_TEST_CONFIG": str(config),
        }
        self.processes: list[subprocess.Popen[bytes]] = []

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.bin / "airflow"), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=CAP * 2,
        )
        if check:
            assert done.returncode == 0, f"airflow {' '.join(args)}: {done.stdout}\n{done.stderr}"
        return done

    # -- the LocalExecutor ------------------------------------------------------------
    def local_executor(self, parallelism: int = 4) -> None:
        self.env.update(
            {
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__PARALLELISM": str(parallelism),
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{self.port}/execution/",
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "5",
                "AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL": "5",
                "AIRFLOW__SCHEDULER__DAG_DIR_LIST_INTERVAL": "5",
                "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "30",
                "AIRFLOW__SCHEDULER__SCHEDULER_ZOMBIE_TASK_THRESHOLD": "30",
            }
        )

    def start(self) -> None:
        """The process set of the LocalExecutor, once the metadata database is migrated."""
        logs = self.home / "process-logs"
        logs.mkdir(exist_ok=True)
        commands = [["scheduler"]]
        if self.version >= 3:
            api = ["api-server", "--apps", "execution", "-w", "1", "-H", "127.0.0.1"]
            commands = [[*api, "-p", str(self.port)], ["dag-processor"], ["scheduler"]]
        for command in commands:
            log = (logs / f"{command[0]}.log").open("wb")
            self.processes.append(
                subprocess.Popen(
                    [str(self.bin / "airflow"), *command],
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: stopped as one
                )
            )
        if self.version >= 3:
            wait_for("the Execution API", self._healthy)

    def _healthy(self) -> bool | None:
        self._all_alive()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/execution/health") as r:
                return True if r.status == 200 else None
        except OSError:
            return None

    def _all_alive(self) -> None:
        for process in self.processes:
            assert process.poll() is None, f"an Airflow process ended: see {self.home}/process-logs"

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()

    # -- the metadata database (PostgreSQL) -------------------------------------------
    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        url = self.metadata.replace("postgresql+psycopg2://", "postgresql://")
        with psycopg.connect(url, autocommit=True) as conn:
            return list(conn.execute(sql, params).fetchall())

    def dag_run_state(self, dag_id: str, run_id: str) -> str | None:
        rows = self.query(
            "SELECT state FROM dag_run WHERE dag_id = %s AND run_id = %s", (dag_id, run_id)
        )
        return str(rows[0][0]) if rows else None

    def wait_for_dag(self, dag_id: str) -> None:
        def parsed() -> bool | None:
            self._all_alive()
            rows = self.query("SELECT 1 FROM dag WHERE dag_id = %s AND NOT is_paused", (dag_id,))
            return True if rows else None

        wait_for(f"Airflow to parse {dag_id}", parsed)

    def wait_for_run(self, dag_id: str, run_id: str) -> str:
        def ended() -> str | None:
            self._all_alive()
            state = self.dag_run_state(dag_id, run_id)
            return state if state in ("success", "failed") else None

        return wait_for(f"DAG run {run_id} to end", ended)

    def task_states(self, dag_id: str, run_id: str) -> dict[str, tuple[str, int]]:
        rows = self.query(
            "SELECT task_id, state, try_number FROM task_instance "
            "WHERE dag_id = %s AND run_id = %s",
            (dag_id, run_id),
        )
        return {str(t): (str(s), int(n)) for t, s, n in rows}


@contextmanager
def running(airflow: Airflow) -> Iterator[Airflow]:
    airflow.start()
    try:
        yield airflow
    finally:
        airflow.stop()
