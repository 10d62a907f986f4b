"""Reading ``pipeledger.toml``, and where it says the warehouse and the ledger are.

:func:`read_document` reads the file and :func:`interpolate` puts ``${ENV_VAR}`` values
into its strings (registering them as secrets, so they are never printed);
:mod:`pipeledger.config.model` validates the result completely.

:func:`locate` answers only "where are the warehouse and the ledger?" for the commands
that read them and nothing else (``state``, ``runs``, ``status``, ...). It needs neither
pydantic nor the rest of the config to be valid: those commands start in a fraction of
the time, and still answer while a pipeline's section is being edited (``run`` and
``check`` report what is wrong with it).
"""

from __future__ import annotations

import functools
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeledger.common.secrets import register_secret, register_url
from pipeledger.errors import ConfigError

DEFAULT_CONFIG = "pipeledger.toml"
DEFAULT_TENANT = "default"
TENANT_ENV = "PIPELEDGER_TENANT"
_TENANT = re.compile(r"[a-z][a-z0-9_]{0,39}")
EMBEDDED_DIR = ".pipeledger"
EMBEDDED_FILE = "warehouse.db"
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Document:
    """A parsed ``pipeledger.toml``, not yet interpolated nor validated."""

    data: dict[str, Any]
    source_file: Path

    @property
    def base_dir(self) -> Path:
        """The folder that relative paths (and the embedded warehouse) are anchored to."""
        return self.source_file.parent.resolve()


def read_document(path: Path | None = None) -> Document:
    """Read and parse ``pipeledger.toml`` (or ``path``). A file read before and unchanged
    since (same size, modification time and inode) is not parsed again: a long-lived
    caller (the dashboard, a program asking the api) asks about the same file many times,
    and TOML of 500 nodes takes ~30 ms to parse. The parsed data is shared: never mutated
    (interpolation and validation make new values)."""
    source_file = path or Path(DEFAULT_CONFIG)
    try:
        info = source_file.stat()
    except FileNotFoundError:
        raise ConfigError(f"{source_file}: config file not found") from None
    stamp = (source_file.resolve(), info.st_mtime_ns, info.st_size, info.st_ino)
    return Document(_parsed(source_file, stamp), source_file)


@functools.lru_cache(maxsize=16)
def _parsed(source_file: Path, stamp: tuple[Path, int, int, int]) -> dict[str, Any]:
    """The file's TOML, once per ``stamp`` (read_document)."""
    try:
        text = source_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{source_file}: config file not found") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source_file}: not valid TOML: {exc}") from None


def embedded_url(base_dir: Path) -> str:
    """The embedded default warehouse: a SQLite file in ``.pipeledger/`` beside the config."""
    return f"sqlite:///{base_dir / EMBEDDED_DIR / EMBEDDED_FILE}"


DUCKDB_PREFIX = "duckdb:///"


def default_ledger_url(warehouse_url: str) -> str:
    """Where the ledger is without a ``[ledger] url``: in the warehouse, committed with the
    rows; a DuckDB warehouse's in a SQLite file beside it (``<name>.ledger.db``), since
    DuckDB lets one process at a time open its file and the ledger is read while runs
    write."""
    if not warehouse_url.startswith(DUCKDB_PREFIX):
        return warehouse_url
    path = Path(warehouse_url.removeprefix(DUCKDB_PREFIX))
    return f"sqlite:///{path.with_name(path.stem + '.ledger.db')}"


def interpolate(value: Any, where: str) -> Any:
    """``value`` with every ``${ENV_VAR}`` in its strings replaced (``where`` names the key
    in errors); each value put in is registered as a secret."""
    if isinstance(value, dict):
        return {k: interpolate(v, f"{where}.{k}" if where else k) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, str):
        return _ENV.sub(lambda m: _env_value(m.group(1), where), value)
    return value


def _env_value(name: str, where: str) -> str:
    if name not in os.environ:
        raise ConfigError(f"{where}: environment variable {name} is not set")
    register_secret(os.environ[name])
    return os.environ[name]


def register_urls(value: Any) -> None:
    """Every ``url`` in the document may carry a password: mask it everywhere from now on."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "url" and isinstance(item, str):
                register_url(item)
            else:
                register_urls(item)
    elif isinstance(value, list):
        for item in value:
            register_urls(item)


@dataclass(frozen=True)
class Located:
    """Where a config's warehouse and ledger are, and the names of its nodes."""

    source_file: Path
    warehouse_url: str
    ledger_url: str
    pipelines: tuple[str, ...]
    models: tuple[str, ...]
    tenant: str = DEFAULT_TENANT  # [ledger] tenant: whose runs and reads these are

    def check_pipeline(self, name: str) -> None:
        """Raise ``ConfigError`` when the config has no pipeline ``name``."""
        if name not in self.pipelines:
            known = ", ".join(sorted(self.pipelines)) or "none"
            raise ConfigError(f"{self.source_file}: no pipeline named {name!r} (defined: {known})")


def locate(path: Path | None = None) -> Located:
    """The warehouse and ledger URLs of ``pipeledger.toml`` (or ``path``), checked only as
    far as reading them needs."""
    document = read_document(path)
    where = document.source_file
    warehouse = _url(document, "warehouse") or embedded_url(document.base_dir)
    return Located(
        source_file=where,
        warehouse_url=warehouse,
        ledger_url=_url(document, "ledger") or default_ledger_url(warehouse),
        pipelines=_names(document, "pipelines"),
        models=_names(document, "models"),
        tenant=tenant_of(document),
    )


def tenant_of(document: Document) -> str:
    """The tenant whose ledger rows this config reads and writes: ``PIPELEDGER_TENANT``
    when set (a deployment gives each team's runner its own), else ``[ledger] tenant``."""
    value = os.environ.get(TENANT_ENV) or _section(document, "ledger").get("tenant", DEFAULT_TENANT)
    where = TENANT_ENV if os.environ.get(TENANT_ENV) else "ledger.tenant"
    return check_tenant(value, f"{document.source_file}: {where}")


def check_tenant(value: object, where: str) -> str:
    """``value`` as a tenant name: lowercase letters, digits and ``_``, starting with a
    letter, at most 40 characters (it becomes part of a role name, pipeledger_tenant_<T>)."""
    if not isinstance(value, str) or _TENANT.fullmatch(value) is None:
        raise ConfigError(
            f"{where} = {value!r} is not a tenant name: use lowercase letters, digits and _, "
            "starting with a letter, at most 40 characters; nothing was run"
        )
    return value


def _section(document: Document, name: str) -> dict[str, Any]:
    section = document.data.get(name, {})
    if not isinstance(section, dict):
        raise ConfigError(f"{document.source_file}: invalid configuration: [{name}] is a table")
    return section


def _url(document: Document, section: str) -> str | None:
    """``[section] url``, interpolated and registered for masking, or None."""
    value = _section(document, section).get("url")
    try:
        url = interpolate(value, f"{section}.url")
    except ConfigError as exc:
        raise ConfigError(f"{document.source_file.name}: {exc}") from None
    if url is not None and not isinstance(url, str):
        raise ConfigError(
            f"{document.source_file}: invalid configuration: {section}.url is a string"
        )
    if url is not None:
        register_url(url)
    return url


def _names(document: Document, section: str) -> tuple[str, ...]:
    return tuple(_section(document, section))
