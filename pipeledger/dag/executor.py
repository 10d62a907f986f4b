"""Run selected nodes in dependency order: a node starts when every selected upstream has
finished; independent branches run side by side on ``threads`` workers. A node whose
upstream failed (or was halted by its gate) is not run: it is recorded as skipped with the
reason ``upstream_failed``, and so is everything downstream of it; the other branches go on.

With one thread (or one node) every node runs in the calling thread (an interrupt stops
the running node's transaction at once); with more, an interrupt first stops every running
run (:func:`pipeledger.runs.scaffold.interrupt_all`: its statement is cancelled and it may
run no other), then waits for the workers to roll back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from graphlib import TopologicalSorter
from typing import Generic, TypeVar

from pipeledger.common.stop import SIGNAL_WAKE_S
from pipeledger.dag.graph import Graph

Outcome = TypeVar("Outcome")  # what running a node gives: the runner decides


def execute(
    graph: Graph,
    selected: Sequence[str],
    run_node: Callable[[str], Outcome],
    skip_node: Callable[[str], Outcome],
    failed: Callable[[Outcome], bool],
    threads: int = 1,
    interrupt: Callable[[], None] = lambda: None,
) -> list[Outcome]:
    """Every selected node's outcome, in ``selected``'s order. ``run_node`` and
    ``skip_node`` never raise (a failure is an outcome)."""
    chosen = set(selected)
    order = TopologicalSorter({n: [u for u in graph.upstreams[n] if u in chosen] for n in selected})
    order.prepare()
    state = _Progress(graph, run_node, skip_node, failed)
    if min(threads, len(selected)) <= 1:
        state.sequential(order)
    else:
        state.parallel(order, threads, interrupt)
    return [state.outcomes[name] for name in selected]


class _Progress(Generic[Outcome]):
    def __init__(
        self,
        graph: Graph,
        run_node: Callable[[str], Outcome],
        skip_node: Callable[[str], Outcome],
        failed: Callable[[Outcome], bool],
    ) -> None:
        self.graph = graph
        self.run_node = run_node
        self.skip_node = skip_node
        self.failed = failed
        self.blocked: set[str] = set()
        self.outcomes: dict[str, Outcome] = {}

    def _finish(self, order: TopologicalSorter[str], name: str, outcome: Outcome) -> None:
        self.outcomes[name] = outcome
        if self.failed(outcome):
            self.blocked |= self.graph.downstream(name)
        order.done(name)

    def sequential(self, order: TopologicalSorter[str]) -> None:
        while order.is_active():
            for name in sorted(order.get_ready()):
                runner = self.skip_node if name in self.blocked else self.run_node
                self._finish(order, name, runner(name))

    def parallel(
        self, order: TopologicalSorter[str], threads: int, interrupt: Callable[[], None]
    ) -> None:
        with ThreadPoolExecutor(threads, thread_name_prefix="pipeledger-node") as pool:
            running: dict[Future[Outcome], str] = {}
            try:
                while order.is_active():
                    self._start_ready(order, pool, running)
                    if running:
                        self._collect(order, running)
            except BaseException:
                interrupt()  # every running statement stops; the workers roll back
                pool.shutdown(wait=True, cancel_futures=True)
                raise

    def _start_ready(
        self,
        order: TopologicalSorter[str],
        pool: ThreadPoolExecutor,
        running: dict[Future[Outcome], str],
    ) -> None:
        for name in sorted(order.get_ready()):
            if name in self.blocked:
                self._finish(order, name, self.skip_node(name))
            else:
                running[pool.submit(self.run_node, name)] = name

    def _collect(self, order: TopologicalSorter[str], running: dict[Future[Outcome], str]) -> None:
        # in slices (a SIGTERM that the kernel gave a worker: common.stop.SIGNAL_WAKE_S)
        done, _ = wait(running, timeout=SIGNAL_WAKE_S, return_when=FIRST_COMPLETED)
        for future in done:
            name = running.pop(future)
            self._finish(order, name, future.result())
