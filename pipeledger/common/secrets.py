"""Keep secrets out of messages: passwords in URLs and values interpolated from the environment."""

from __future__ import annotations

import contextlib
import re
from urllib.parse import unquote, urlsplit

_URL_PASSWORD = re.compile(
    r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@\s]*)@"
)
_KEYWORD_PASSWORD = re.compile(r"(?i)\b(password|passwd|pwd)\s*=\s*('[^']*'|\S+)")
_secrets: set[str] = set()

MASK = "***"


def register_secret(value: str) -> None:
    """Remember a value that must never be printed (e.g. one read from ``${ENV_VAR}``)."""
    if len(value) >= 4:
        _secrets.add(value)


def register_url(url: str) -> None:
    """Remember the password of a connection URL (raw and decoded), however odd its
    characters, so that it is masked even where a driver quotes it in an error."""
    candidates = []
    with contextlib.suppress(ValueError):
        candidates.append(urlsplit(url).password or "")  # up to the last '@'
    userinfo = url.split("://", 1)[-1].split("@", 1)[0]  # up to the first '@', as libpq reads
    if ":" in userinfo and "@" in url:
        candidates.append(userinfo.split(":", 1)[1])
    for password in filter(None, candidates):
        register_secret(password)
        register_secret(unquote(password))


def redact(text: str) -> str:
    """Mask URL passwords, ``password=...`` pairs and every registered secret in ``text``."""
    text = _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    text = _KEYWORD_PASSWORD.sub(lambda m: f"{m.group(1)}={MASK}", text)
    for secret in sorted(_secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
