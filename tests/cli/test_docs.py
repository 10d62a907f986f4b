"""The README documents every command, every option of every command and every
``pipeledger.toml`` key, found by walking the click app and the config model (as
sqlite-utils' tests/test_docs.py walks its CLI), so a new command, option or key fails
here until it is documented.

Where each must stand (a mention in passing is not documentation):

- a **command** has an entry in "## Command reference": a top-level list item that opens
  with it in code, ``- `pipeledger ledger prune --older-than AGE` ...`` (its words are
  read against the app, so ``- `pipeledger [--config PATH] ...``` is the entry of the
  global options);
- an **option** is named in its command's entry in code, as ```--name``` or
  ```--name VALUE```;
- a **key** is in the first cell of a table row, ``| `key` |`` (several may share one
  row), under a heading of "## Configuration reference" that names its table in code,
  ``### `[pipelines.NAME.checks]` ...`` (one heading may name several tables).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import click
import pytest
from pydantic import BaseModel

import pipeledger.cli.app  # noqa: F401  (registers every command on the group)
from pipeledger.cli.common import app
from pipeledger.config.model import Config

README = Path(__file__).resolve().parents[2] / "README.md"
#: Config fields the loader sets from the file's location: not keys of the file.
NOT_KEYS = frozenset({"base_dir", "source_file"})


# -- what there is ------------------------------------------------------------------------


Words = tuple[str, ...]  # a command's words after `pipeledger`: ("ledger", "prune")


def commands(group: click.Group = app, path: Words = ()) -> Iterator[tuple[Words, click.Command]]:
    """Every command under ``group`` with its words (``()``: the app itself), groups too."""
    if not path:
        yield path, group
    for name, command in group.commands.items():
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))


def long_options(command: click.Command) -> list[str]:
    """Its options' long names (click adds ``--help`` to every command: not listed). The
    global options every command also takes are documented once, in their own entry."""
    own = [p for p in command.params if isinstance(p, click.Option)]
    if command is not app:
        shared = {n for p in app.params for n in p.opts}
        own = [p for p in own if not shared & set(p.opts)]
    names = [n for p in own for n in (*p.opts, *p.secondary_opts)]
    return [n for n in names if n.startswith("--")]


def tables_in(annotation: Any) -> Iterator[tuple[type[BaseModel], bool]]:
    """The config tables a field's type holds (through Annotated, optional and union types),
    each with whether it sits under a dict (one table per name the user gives)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        yield from tables_in(get_args(annotation)[0])
    elif origin is dict:
        yield from ((model, True) for model, _ in tables_in(get_args(annotation)[1]))
    elif origin in (Union, UnionType):
        for member in get_args(annotation):
            yield from tables_in(member)
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation, False


def keys_of(model: type[BaseModel], table: str) -> Iterator[tuple[str, str]]:
    """``([table], key)`` for every key of ``model``, then of the tables nested in it
    (``[pipelines.NAME.checks.range.COLUMN]``: one per column the user names)."""
    for name, field in model.model_fields.items():
        key = field.alias or name  # the key as the file spells it
        yield f"[{table}]", key
        each = ".COLUMN" if key == "range" else ".NAME"  # what the user's names name
        for nested, per_name in tables_in(field.annotation):
            yield from keys_of(nested, f"{table}.{key}" + (each if per_name else ""))


def config_keys() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for name, field in Config.model_fields.items():
        if name in NOT_KEYS:
            continue
        for model, per_name in tables_in(field.annotation):
            found += keys_of(model, f"{name}.NAME" if per_name else name)
    return list(dict.fromkeys(found))  # a source's kinds share path: once


COMMANDS = [path for path, _ in commands()]
OPTIONS = [(path, option) for path, command in commands() for option in long_options(command)]
KEYS = config_keys()


def _words(path: Words) -> str:
    return " ".join(("pipeledger", *path))


# -- what the README says -----------------------------------------------------------------


@cache
def section(title: str) -> str:
    """The README's ``## title`` section, up to the next ``## `` heading."""
    text = README.read_text(encoding="utf-8")
    found = re.search(rf"^## {re.escape(title)}[^\n]*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert found, f"README.md has no section '## {title}'"
    return found.group(1)


def command_named(words: list[str]) -> Words:
    """The command that the leading words name: ``ledger prune --older-than`` -> (ledger,
    prune); words that name no command (``NAME``, ``[--json]``) end it."""
    path: list[str] = []
    command: click.Command = app
    for word in words:
        if not isinstance(command, click.Group) or word not in command.commands:
            break
        path.append(word)
        command = command.commands[word]
    return tuple(path)


@cache
def command_entries() -> dict[Words, str]:
    """Each entry of the command reference (with its indented lines), by its command."""
    entries: dict[Words, str] = {}
    for item in re.split(r"^(?=- )", section("Command reference"), flags=re.M):
        opening = re.match(r"- \**`pipeledger\b([^`]*)`", item)
        if opening:
            entries[command_named(opening.group(1).split())] = item
    return entries


@cache
def config_tables() -> list[tuple[str, set[str]]]:
    """Each ``###``/``####`` heading of the configuration reference, with the keys that
    the first cells of the table rows under it name."""
    parts = re.split(r"^(#{3,4} [^\n]*)$", section("Configuration reference"), flags=re.M)
    tables = []
    for heading, body in zip(parts[1::2], parts[2::2], strict=True):
        cells = [line.split("|")[1] for line in body.splitlines() if line.startswith("|")]
        tables.append((heading, {key for cell in cells for key in re.findall(r"`([^`]+)`", cell)}))
    return tables


# -- the tests ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", COMMANDS, ids=_words)
def test_every_command_has_an_entry_in_the_command_reference(path: Words) -> None:
    assert path in command_entries(), f"README.md: no entry '- `{_words(path)} ...`'"


@pytest.mark.parametrize(("path", "option"), OPTIONS, ids=[f"{_words(p)} {o}" for p, o in OPTIONS])
def test_every_option_is_named_in_its_commands_entry(path: Words, option: str) -> None:
    entry = command_entries().get(path, "")
    assert re.search(rf"`{re.escape(option)}[ `]", entry), (
        f"README.md: the entry of `{_words(path)}` does not name `{option}`"
    )


@pytest.mark.parametrize(("table", "key"), KEYS, ids=[f"{t} {k}" for t, k in KEYS])
def test_every_config_key_is_in_the_table_of_its_section(table: str, key: str) -> None:
    under = [keys for heading, keys in config_tables() if f"`{table}`" in heading]
    assert under, f"README.md: no heading naming `{table}` in the configuration reference"
    assert any(key in keys for keys in under), f"README.md: `{key}` is not in a row of `{table}`"


def test_the_walks_find_what_there_is() -> None:
    """A walk that finds nothing passes every test above: it must see nested commands,
    options and keys."""
    assert ("ledger", "prune") in COMMANDS and ("quarantine", "replay") in COMMANDS
    assert (("backfill",), "--full-compare") in OPTIONS and ((), "--config") in OPTIONS
    assert ("[pipelines.NAME.checks.range.COLUMN]", "min") in KEYS
    assert ("[pipelines.NAME.source]", "delimiter") in KEYS
    assert ("[models.NAME]", "materialized") in KEYS and ("[ledger]", "spool") in KEYS
    assert ("[alerts]", "webhooks") in KEYS and not {k for _, k in KEYS} & NOT_KEYS
