"""Database adapters, chosen by URL scheme. Only these modules import drivers."""

from __future__ import annotations

from pipeledger.errors import ConfigError
from pipeledger.redact import redact
from pipeledger.warehouse.session import Session, SourceReader, Warehouse

__all__ = ["Session", "SourceReader", "Warehouse", "open_reader", "open_warehouse"]


def _scheme(url: str) -> str:
    return url.split(":", 1)[0].lower()


def open_warehouse(url: str, client: str | None = None) -> Warehouse:
    """A warehouse for ``postgresql://...`` or ``sqlite:///path`` (the embedded default).
    ``client``: the name its sessions carry where the database shows it (a run's, from
    :func:`pipeledger.clients.client_name`)."""
    scheme = _scheme(url)
    if scheme in ("postgresql", "postgres"):
        from pipeledger.adapters.postgres import PostgresWarehouse

        return PostgresWarehouse(url, client)
    if scheme == "sqlite":
        from pipeledger.adapters.sqlite import SqliteWarehouse

        return SqliteWarehouse(url)
    raise ConfigError(f"warehouse url {redact(url)!r}: use postgresql://... or sqlite:///path")


def open_reader(url: str) -> SourceReader:
    """A read side for a SQL source URL."""
    scheme = _scheme(url)
    if scheme in ("postgresql", "postgres"):
        from pipeledger.adapters.postgres import PostgresReader

        return PostgresReader(url)
    if scheme == "sqlite":
        from pipeledger.adapters.sqlite import SqliteReader

        return SqliteReader(url)
    raise ConfigError(f"source url {redact(url)!r}: use postgresql://... or sqlite:///path")
