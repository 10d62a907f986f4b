"""The plain output (:mod:`pipeledger.cli.plain`) is rich's own where there is no terminal:
the same text for the same markup, escapes and print options, or rich prints it."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.errors import MarkupError
from rich.markup import escape as rich_escape

from pipeledger.cli import plain
from pipeledger.cli.render import state_lines
from pipeledger.common.who import who
from tests.helpers import Project, order, orders_pipeline

# text with the characters markup is made of: brackets, backslashes, tag-like words
PIECES = st.sampled_from(
    ["[", "]", "\\", "\\\\", "a", " ", "[a]", "[1]", "[/x", "é", "·", "x" * 30]
)
TEXT = st.lists(PIECES, max_size=12).map("".join)
# a machine busy with other work makes generating text slow; the cases stay the same
SHARED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def rich_output(objects: tuple[Any, ...], options: dict[str, Any], width: int = 0) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=width or plain.width(), emoji=False).print(*objects, **options)
    return buffer.getvalue()


@SHARED
@given(TEXT)
def test_escape_is_riches(text: str) -> None:
    assert plain.escape(text) == rich_escape(text)


STYLES = st.sampled_from(["bold", "red", "green", "yellow", "bold red"])
SEGMENT = st.one_of(
    TEXT.map(rich_escape),
    st.tuples(STYLES, TEXT).map(lambda p: f"[{p[0]}]{rich_escape(p[1])}[/]"),
    st.tuples(STYLES, TEXT).map(lambda p: f"[{p[0]}]{rich_escape(p[1])}[/{p[0]}]"),
)


@settings(SHARED, max_examples=300)
@given(st.lists(SEGMENT, max_size=8).map("".join))
def test_escaped_text_between_tags_prints_as_rich_prints_it(markup: str) -> None:
    try:  # text ending in backslashes before a tag can unbalance rich's tags: it refuses
        rich_output((markup,), {})
    except MarkupError:
        assume(False)
    for options in ({"soft_wrap": True, "highlight": False}, {}, {"end": ""}):
        text = plain.render((markup,), options)
        if text is not None:  # else rich prints it
            assert text == rich_output((markup,), options)


@SHARED
@given(TEXT, st.booleans())
def test_text_without_markup_prints_as_rich_prints_it(text: str, soft_wrap: bool) -> None:
    options = {"markup": False, "soft_wrap": soft_wrap, "highlight": False}
    printed = plain.render((text,), options)
    assert printed is None or printed == rich_output((text,), options)


@pytest.mark.parametrize(
    "objects",
    [
        ("[bold]orders[/] [green]success[/] incremental -> orders in 0.01s (run 1234)",),
        ("  rows      read 0 · inserted 0 · updated 0 · unchanged 0",),
        ("[bold red]error:[/] ", "two objects"),
        ("line one\n[yellow]line two[/]\n  line \\[three]",),
        ("",),
        ("x" * 80,),
    ],
)
def test_the_commands_lines_print_as_rich_prints_them(objects: tuple[str, ...]) -> None:
    for options in ({"soft_wrap": True, "highlight": False}, {}):
        text = plain.render(objects, options)
        if objects[0] != "  rows      read 0 · inserted 0 · updated 0 · unchanged 0" or options:
            assert text is not None
        if text is not None:
            assert text == rich_output(objects, options)


def test_a_line_rich_would_wrap_or_clean_is_left_to_rich() -> None:
    assert plain.render(("x" * 81,), {}) is None  # wrapped at 80 columns
    assert plain.render(("x" * 81,), {"soft_wrap": True}) == "x" * 81 + "\n"
    assert plain.render(("a\tb",), {"soft_wrap": True}) is None  # tabs expanded
    assert plain.render(("a\rb",), {"soft_wrap": True}) is None  # control codes removed
    assert plain.render((1,), {}) is None and plain.render(("a",), {"style": "red"}) is None


def test_a_partition_in_brackets_stays_text() -> None:
    class Row:
        pipeline, partition, watermark, cursor_column, cursor_type = "o[x]", "eu", "w", "c", "t"
        run_id, updated_at, snapshot, files = "r", "u", None, None

    (line,) = state_lines([Row()])  # type: ignore[list-item]
    assert (
        plain.render((line,), {"soft_wrap": True}) == "o[x] [eu]  c (t)  w  (set by run r at u)\n"
    )


def test_the_user_and_host_are_those_getpass_and_socket_say() -> None:
    import getpass
    import socket

    assert who() == f"{getpass.getuser()}@{socket.gethostname()}"


def test_who_without_a_user_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd
    import socket

    for variable in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(variable, raising=False)
    assert who() == f"{pwd.getpwuid(os.getuid())[0]}@{socket.gethostname()}"


def test_a_terminal_still_gets_riches_colours(tmp_path: Path) -> None:
    """Rich prints where the output is a terminal (FORCE_COLOR makes a pipe one for rich):
    the same words, in colour; a pipe gets them without."""
    project = Project(tmp_path, None)
    project.configure(orders=orders_pipeline())
    project.write_csv("orders_1.csv", [order(1, "2024-01-01T10:00:00Z")])
    project.run()
    argv = [sys.executable, "-m", "pipeledger", "state"]
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}

    piped = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=env)
    coloured = subprocess.run(
        argv, cwd=tmp_path, capture_output=True, text=True, env={**env, "FORCE_COLOR": "1"}
    )

    assert piped.returncode == coloured.returncode == 0
    assert "\x1b[" not in piped.stdout and "\x1b[1m" in coloured.stdout
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured.stdout) == piped.stdout
