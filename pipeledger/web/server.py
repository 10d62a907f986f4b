"""Serving the dashboard with uvicorn: in the foreground (``pipeledger ui``) or on a
thread beside the scheduler's loop (``pipeledger serve --ui``).

It binds to 127.0.0.1 unless told otherwise: the dashboard has no login of its own, so
anything wider belongs behind a reverse proxy that authenticates (README, "The web
dashboard")."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from pipeledger import api
from pipeledger.web.app import create_app

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8420
# a read-only page has nothing worth keeping a stop waiting for: a request still open
# after this is cut (uvicorn's default waits for every connection without bound)
GRACE_S = 5
# the longest ``serve`` waits for the server's thread in one piece: a Ctrl-C that the kernel
# gave that thread runs its handler only when this one next runs (as common.stop's
# SIGNAL_WAKE_S, which the web, reaching the package only through the api, does not import)
JOIN_SLICE_S = 1.0


def _server(config_path: Path | None, host: str, port: int) -> uvicorn.Server:
    config = uvicorn.Config(
        create_app(config_path),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        proxy_headers=True,  # X-Forwarded-* from a proxy on this host (forwarded_allow_ips)
        server_header=False,
        timeout_graceful_shutdown=GRACE_S,
    )
    return uvicorn.Server(config)


@dataclass
class Running:
    """A dashboard serving on a thread of this process."""

    server: uvicorn.Server
    thread: threading.Thread
    url: str

    def stop(self) -> None:
        """Stop serving, within the grace period and a little more: a connection or a
        page that is still open then is dropped (``force_exit``), never waited for."""
        self.server.should_exit = True
        self.thread.join(GRACE_S + 1.0)
        if self.thread.is_alive():
            self.server.force_exit = True
            self.thread.join(GRACE_S)


def _url(server: uvicorn.Server, host: str) -> str:
    port = server.servers[0].sockets[0].getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def start(config_path: Path | None, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> Running:
    """Serve on a daemon thread; return once it listens (``port`` 0: a free one). Raise
    ConfigError when it cannot listen (the port is taken, the address is not this host's)."""
    server = _server(config_path, host, port)
    failed: list[BaseException] = []
    listening = threading.Event()

    def serve() -> None:
        try:
            server.run()
        except BaseException as exc:  # uvicorn exits (SystemExit) when it cannot bind
            failed.append(exc)
        finally:
            listening.set()

    thread = threading.Thread(target=serve, name="pipeledger-ui", daemon=True)
    thread.start()
    while not listening.wait(0.01):
        if server.started:
            return Running(server, thread, _url(server, host))
    raise api.ConfigError(
        f"the dashboard could not listen on {host}:{port}: the port is taken or the address "
        "is not this host's; choose another with --port or --host"
    )


def serve(
    config_path: Path | None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve until interrupted (Ctrl-C); ``on_ready`` is told the URL once it listens."""
    running = start(config_path, host, port)
    if on_ready is not None:
        on_ready(running.url)
    try:
        while running.thread.is_alive():
            running.thread.join(JOIN_SLICE_S)
    except KeyboardInterrupt:
        running.stop()
