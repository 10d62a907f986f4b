"""SIGTERM and Ctrl-C stop a command's waits for good: ``serve`` between its rounds, a
retry's delay. Each case runs in a process of its own, as a signal reaches a user's."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PREAMBLE = """
import contextlib, linecache, os, signal, sys, threading, time
import click
from pipeledger.cli.common import cancellable
from pipeledger.runs.interrupt import pause

def kill_when_the_main_thread_waits():
    # the kernel gives this thread the signal once the main thread waits in a lock: the
    # wait the signal must end (a signal before it would be handled at once anyway)
    main = threading.main_thread().ident
    while "waiter.acquire(" not in line_of(main):
        time.sleep(0.01)
    time.sleep(0.2)  # inside it, past the line's first instructions
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

def lose(how):
    # a cleanup that fails while the signal's exception passes through replaces it with
    # its own error, which a loop reports as one more failed run
    try:
        os.kill(os.getpid(), how)
        threading.Event().wait()  # the handler raises here
    except BaseException:
        pass

def line_of(thread):
    frame = sys._current_frames()[thread]
    return linecache.getline(frame.f_code.co_filename, frame.f_lineno)

@contextlib.contextmanager
def command():  # as a command ends: its exit code
    try:
        with cancellable():
            yield
    except click.exceptions.Exit as done:
        raise SystemExit(done.exit_code) from None
"""


def outcome(body: str) -> subprocess.CompletedProcess[str]:
    """Run ``body`` after the preamble in a fresh interpreter. The bound on the wait only
    turns a wait that never ends (the defect) into a failure."""
    script = PREAMBLE + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT"])
def test_a_signal_whose_exception_a_cleanup_lost_still_ends_the_next_wait(how: str) -> None:
    # the signal's exception is lost on its way out: the next wait must not begin
    done = outcome(
        f"""
        with command():
            lose(signal.{how})
            print("waited" if pause(3600) else "stopped")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stopped"


def test_the_end_of_the_invocation_undoes_it() -> None:
    done = outcome(
        """
        with command():
            lose(signal.SIGTERM)
        print("waited" if pause(0) else "stopped")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "waited"


def test_a_sigterm_the_kernel_gave_another_thread_ends_a_long_wait() -> None:
    # the kernel may run a process's signal on any of its threads (the dashboard's); the
    # Python handler then waits for the main thread to run, which a wait of an hour in one
    # piece would not do until the hour is over
    done = outcome(
        """
        with command():
            threading.Thread(target=kill_when_the_main_thread_waits).start()
            pause(3600)
        """
    )
    assert done.returncode == 143, done.stderr
    assert "cancelled" in done.stderr


def test_a_sigterm_the_kernel_gave_a_worker_stops_a_run_of_parallel_nodes() -> None:
    # `run --threads 2`: the main thread waits for the nodes' workers; a signal one of them
    # received must reach the run's handler while both nodes still work
    done = outcome(
        """
        from pipeledger.dag.executor import execute
        from pipeledger.dag.graph import Graph

        release = threading.Event()
        workers = []

        def work(name):
            workers.append(threading.get_ident())
            if len(workers) == 2:
                kill_when_the_main_thread_waits()
            release.wait()  # until the interrupt
            return name

        graph = Graph(
            kinds={"a": "load", "b": "load"}, upstreams={"a": (), "b": ()},
            tags={"a": (), "b": ()}, targets={"a": "x.a", "b": "x.b"},
        )
        with command():
            execute(graph, ["a", "b"], work, str, lambda o: False, threads=2,
                    interrupt=release.set)
        """
    )
    assert done.returncode == 143, done.stderr
