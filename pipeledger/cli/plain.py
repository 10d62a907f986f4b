"""The commands' output when it does not go to a terminal (a pipe, a file, a log): the
text rich would print there, without importing rich (a fifth of a quick command's start).

Rich prints no colours where there is no terminal: markup tags are dropped and escaped
brackets (``\\[``) become brackets. This module does the same for the markup the commands
write; whatever it cannot vouch for (a line rich would wrap, tabs, control characters, a
non-string object) it leaves to rich. ``tests/cli/test_plain.py`` holds it to rich's own
output for the same text.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, TextIO

# rich.markup's own patterns (rich 13-15): a tag, and a tag to escape
_TAGS = re.compile(r"((\\*)\[([a-z#/@][^[]*?)])")
_TO_ESCAPE = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")
# what rich strips or expands in text (rich.control, tab_size): left to rich
_UNSAFE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")
_OPTIONS = frozenset({"markup", "highlight", "soft_wrap", "end"})
_STD_FDS = (0, 1, 2)  # the streams rich asks for the terminal's size, in its order


def escape(markup: str) -> str:
    """Escape markup in ``markup`` as ``rich.markup.escape`` does."""

    def escape_backslashes(match: re.Match[str]) -> str:
        backslashes, text = match.groups()
        return f"{backslashes}{backslashes}\\{text}"

    markup = _TO_ESCAPE.sub(escape_backslashes, markup)
    if markup.endswith("\\") and not markup.endswith("\\\\"):
        return markup + "\\"
    return markup


def strip_markup(markup: str) -> str:
    """The text of ``markup`` without its tags, as rich renders it (``rich.markup._parse``
    and ``render``: pairs of backslashes before a tag are literal backslashes, an odd one
    escapes the tag, and ``\\[`` outside a tag is a bracket)."""
    if "[" not in markup:
        return markup
    parts: list[str] = []
    position = 0
    for match in _TAGS.finditer(markup):
        full_text, escapes, _tag = match.groups()
        start, end = match.span()
        if start > position:
            parts.append(markup[position:start].replace("\\[", "["))
        position = end
        if escapes:
            backslashes, escaped = divmod(len(escapes), 2)
            parts.append("\\" * backslashes)
            if escaped:
                parts.append(full_text[len(escapes) :].replace("\\[", "["))
    if position < len(markup):
        parts.append(markup[position:].replace("\\[", "["))
    return "".join(parts)


def is_terminal(stream: TextIO) -> bool | None:
    """Whether rich would treat ``stream`` as a terminal (its ``Console.is_terminal``);
    None when only rich can tell (a notebook, IDLE)."""
    if "ipykernel" in sys.modules or "idlelib" in sys.modules:
        return None
    tty_compatible = os.environ.get("TTY_COMPATIBLE", "")
    if tty_compatible in ("0", "1"):
        return tty_compatible == "1"
    force_color = os.environ.get("FORCE_COLOR")
    if force_color is not None:
        return force_color != ""
    isatty = getattr(stream, "isatty", None)
    try:
        return False if isatty is None else bool(isatty())
    except ValueError:  # a closed stream
        return False


def width() -> int:
    """The width rich wraps at (``Console.size``): the first standard stream that is a
    terminal, ``COLUMNS`` over it, else 80."""
    columns: int | None = None
    for fd in _STD_FDS:
        try:
            columns = os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):
            continue
        break
    env = os.environ.get("COLUMNS")
    if env is not None and env.isdigit():
        columns = int(env)
    return columns or 80


def render(objects: tuple[Any, ...], options: dict[str, Any]) -> str | None:
    """What ``Console.print(*objects, **options)`` writes to a stream that is not a
    terminal, or None when this module cannot be sure (rich prints it then)."""
    if not options.keys() <= _OPTIONS or not all(isinstance(o, str) for o in objects):
        return None
    end = options.get("end", "\n")
    if not isinstance(end, str):
        return None
    markup = options.get("markup", True)
    texts = [strip_markup(o) if markup else o for o in objects]
    text = " ".join(texts)
    if _UNSAFE.search(text):
        return None
    if not options.get("soft_wrap", False):
        limit = width()
        if not text.isascii() or any(len(line) > limit for line in text.split("\n")):
            return None  # rich would wrap it (or measure its cells)
    return text + end
