"""A real webhook receiver on localhost for the alert tests: it records every JSON document
POSTed to it, answers with a status of the test's choosing, and can go down and come back
on the same port."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.answer = 200
        self._lock = threading.Lock()
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
                self.send_response(receiver.answer)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Down: connections to its port are refused."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def alerts(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.received)
