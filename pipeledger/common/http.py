"""The one HTTP client of pipeledger (alerts): an endpoint checked by the client that sends
to it, and a POST bounded in total time.

:func:`endpoint` reads a URL the way :func:`post` will send to it (``http.client`` builds
the request line without connecting), so a URL it would refuse (a space in its path, a
port that is not a number, credentials it cannot send) is refused when the configuration
is read, never at 3 a.m. Credentials in a URL (``https://user:password@host/path``) become
an ``Authorization: Basic`` header, never part of the request line. The URL, its password
and its path with the query are registered as secrets: the path is where Slack, Microsoft
Teams, Discord and PagerDuty webhooks carry their token, so a message shows an endpoint as
``https://hooks.slack.com/***`` (:attr:`Endpoint.shown`) and never its path (of
:data:`SECRET_PATH` characters or more, as tokens are: shorter ones are not secrets).

:func:`post` gives up ``timeout`` seconds after it started, whatever the receiver does:
not answering, answering slowly, or a byte at a time. An answer is its status line: the
body is not waited for.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from pipeledger.common.secrets import MASK, register_secret

# a path this long may be a token; a shorter one ("/hook") is not, and masking it would
# mask its text in every message ("https://hooks.slack.com" holds "/hook")
SECRET_PATH = 10


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """A URL ready to be posted to: where to connect, the request target, and the
    ``Authorization`` header its credentials make (if any)."""

    secure: bool
    host: str
    port: int
    target: str  # path and query, as sent on the request line
    authorization: str | None = None
    shown: str  # the URL for people: no credentials, no secret path

    def connection(self, timeout: float) -> http.client.HTTPConnection:
        if self.secure:
            context = ssl.create_default_context()
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=timeout, context=context
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)


def endpoint(url: str) -> Endpoint:
    """``url`` read as :func:`post` sends to it, else ValueError (its message shows no
    secret). Registers the URL's secrets (module docstring)."""
    register_secret(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"not a valid URL ({exc})") from None
    if parts.password:
        register_secret(parts.password)
        register_secret(unquote(parts.password))
    if parts.scheme not in ("http", "https"):
        raise ValueError("its URL must start with http:// or https://")
    host = parts.hostname or ""
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if len(target) >= SECRET_PATH:
        register_secret(target)
    shown = f"{parts.scheme}://{host}{f':{port}' if port else ''}"
    shown += f"/{MASK}" if len(target) > 1 else ""
    if not host:
        raise ValueError(f"{shown}: the URL names no host")
    found = Endpoint(
        secure=parts.scheme == "https",
        host=host,
        port=port or (443 if parts.scheme == "https" else 80),
        target=target,
        authorization=_basic(parts.username, parts.password),
        shown=shown,
    )
    _check_request_line(found)
    return found


def _basic(user: str | None, password: str | None) -> str | None:
    if user is None and password is None:
        return None
    pair = f"{unquote(user or '')}:{unquote(password or '')}"
    return "Basic " + base64.b64encode(pair.encode()).decode("ascii")


def _check_request_line(found: Endpoint) -> None:
    """What the client would refuse when sending: asked of the client itself, which builds
    the request line without connecting."""
    try:
        connection = found.connection(1.0)
        connection.putrequest("POST", found.target)
        connection.close()
    except (http.client.HTTPException, ValueError, UnicodeError) as exc:
        kind = type(exc).__name__
        raise ValueError(
            f"{found.shown}: the HTTP client refuses this URL ({kind}: a space or another "
            "character that must be percent-encoded, e.g. %20?)"
        ) from None


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str


@contextmanager
def cut_off_after(
    timeout: float, sock: Callable[[], socket.socket | None]
) -> Iterator[threading.Event]:
    """Shut the socket ``sock()`` down ``timeout`` seconds from now, which ends any read
    or write blocked on it; the event yielded says whether it happened. Socket timeouts
    alone do not bound a request: each read that gets a byte starts them again."""
    cut = threading.Event()

    def cut_off() -> None:
        cut.set()
        current = sock()
        if current is not None:
            with contextlib.suppress(OSError):  # closed meanwhile
                current.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(timeout, cut_off)
    timer.daemon = True
    timer.start()
    try:
        yield cut
    finally:
        timer.cancel()


def post(to: Endpoint, body: bytes, headers: dict[str, str], timeout: float) -> Answer:
    """POST ``body``; the answer's status. Raises ``TimeoutError`` when there is no answer
    within ``timeout`` seconds of the start (connecting included), and ``OSError`` or
    ``http.client.HTTPException`` when it cannot be sent or the answer is not HTTP."""
    connection = to.connection(timeout)
    sent = {"Content-Type": "application/json", **headers}
    if to.authorization:
        sent["Authorization"] = to.authorization
    with cut_off_after(timeout, lambda: connection.sock) as cut:
        try:
            connection.request("POST", to.target, body=body, headers=sent)
            response = connection.getresponse()
            return Answer(response.status, response.reason)
        except (OSError, http.client.HTTPException) as exc:
            if cut.is_set() or isinstance(exc, TimeoutError):  # the timer, or the socket's
                raise TimeoutError(f"no answer within {timeout:g} s") from None
            raise
        finally:
            connection.close()
