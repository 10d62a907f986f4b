"""Database adapters, chosen by URL scheme. Only these modules import drivers."""

from __future__ import annotations

from datetime import timedelta

from pipeledger.common.secrets import redact
from pipeledger.errors import ConfigError
from pipeledger.warehouse.session import Session, SourceReader, Warehouse

__all__ = ["Session", "SourceReader", "Warehouse", "open_reader", "open_warehouse"]


def _scheme(url: str) -> str:
    return url.split(":", 1)[0].lower()


def open_warehouse(
    url: str, client: str | None = None, wait: timedelta | None = None, tenant: str = "default"
) -> Warehouse:
    """A warehouse for ``postgresql://...``, ``sqlite:///path`` (the embedded default) or
    ``duckdb:///path`` (embedded, one process at a time).
    ``client``: the name its sessions carry where the database shows it (a run's, from
    :func:`pipeledger.warehouse.clients.client_name`). ``wait``: the longest any one statement may
    take, lock waits included, before it fails as transient (PostgreSQL; SQLite's wait for
    its write lock is always bounded). ``tenant``: whose ledger rows its sessions see and
    write (PostgreSQL: row-level security; SQLite: a filter, see ``SqliteWarehouse``)."""
    scheme = _scheme(url)
    if scheme in ("postgresql", "postgres"):
        from pipeledger.warehouse.adapters.postgres import PostgresWarehouse

        return PostgresWarehouse(url, client, wait, tenant)
    if scheme == "sqlite":
        from pipeledger.warehouse.adapters.sqlite import SqliteWarehouse

        return SqliteWarehouse(url, tenant)
    if scheme == "duckdb":
        try:
            from pipeledger.warehouse.adapters.duckdb import DuckdbWarehouse
        except ModuleNotFoundError as exc:
            raise ConfigError(
                f"warehouse url {redact(url)!r}: a DuckDB warehouse needs the duckdb package "
                "(pip install 'pipeledger[duckdb]'); nothing was read or written"
            ) from exc
        return DuckdbWarehouse(url)  # the ledger is never in it: no tenant to keep
    raise ConfigError(
        f"warehouse url {redact(url)!r}: use postgresql://..., sqlite:///path or duckdb:///path"
    )


def open_reader(url: str) -> SourceReader:
    """A read side for a SQL source URL."""
    scheme = _scheme(url)
    if scheme in ("postgresql", "postgres"):
        from pipeledger.warehouse.adapters.postgres import PostgresReader

        return PostgresReader(url)
    if scheme == "sqlite":
        from pipeledger.warehouse.adapters.sqlite import SqliteReader

        return SqliteReader(url)
    raise ConfigError(f"source url {redact(url)!r}: use postgresql://... or sqlite:///path")
