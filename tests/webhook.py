"""A real webhook receiver on localhost for the alert tests: it records every JSON document
POSTed to it (and its headers), answers with a status of the test's choosing, after a
delay or never (``hang``), and can go down and come back on the same port."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.arrived: list[float] = []  # time.time() of each POST, as it came in
        self.answer = 200
        self.delay = 0.0  # seconds before answering
        self.hang = False  # read the request, never answer (until stop())
        self._released = threading.Event()
        self._lock = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        with socket.socket() as probe:  # a free port, kept across stop() and start()
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/pipeledger"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver._lock:
                    receiver.received.append(json.loads(body))
                    receiver.arrived.append(time.time())
                    receiver.headers.append(dict(self.headers))
                    receiver._lock.notify_all()
                if receiver.hang:
                    receiver._released.wait()
                    return
                time.sleep(receiver.delay)
                try:
                    self.send_response(receiver.answer)
                    self.end_headers()
                except OSError:  # the client gave up first
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._released.clear()
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Down: connections to its port are refused."""
        self._released.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def alerts(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.received)

    def wait_for(self, count: int, timeout: float | None = None) -> list[dict[str, Any]]:
        """The alerts received, once there are at least ``count`` (or after ``timeout``
        seconds, when one is given: without, the test's own timeout bounds the wait)."""
        with self._lock:
            self._lock.wait_for(lambda: len(self.received) >= count, timeout)
            return list(self.received)
