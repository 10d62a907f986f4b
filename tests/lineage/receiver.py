"""A localhost OpenLineage receiver: it takes POSTed events (``/api/v1/lineage``) and keeps
them in order; it can hang (accept a request and not answer) or be stopped (down)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    def __init__(self, port: int = 0) -> None:
        self.events: list[dict[str, Any]] = []
        self.hanging = threading.Event()
        self._released = threading.Event()
        self._arrived = threading.Condition()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if receiver.hanging.is_set():  # took the request, never answers it
                    receiver._released.wait(60)
                    return
                with receiver._arrived:
                    receiver.events.append(json.loads(body))
                    receiver._arrived.notify_all()
                self.send_response(201)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler

    def wait_for(self, count: int, timeout: float = 60.0) -> list[dict[str, Any]]:
        """The events once ``count`` have arrived (AssertionError after ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while len(self.events) < count:
                left = deadline - time.monotonic()
                assert left > 0, f"{len(self.events)} of {count} events arrived: {self.events}"
                self._arrived.wait(left)
            return list(self.events)

    def stop(self) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
