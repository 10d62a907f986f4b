"""Names of datasets and runs in OpenLineage's terms (pure: no client, no I/O).

=====================  ============================  ==================================
dataset                namespace                     name
=====================  ============================  ==================================
PostgreSQL table       ``postgres://host:port``      ``database.schema.table``
                                                     (schema ``public`` when not given)
SQLite table           ``sqlite://<absolute path>``  ``[schema.]table`` as configured
CSV / Parquet source   ``file``                      the absolute path (its glob)
=====================  ============================  ==================================

A parent run is written ``namespace/job/run_id`` (as Airflow's OpenLineage provider's
``lineage_parent_id`` macro gives it). A run id that is not a UUID (an Airflow run id used
as the correlation id) becomes a name-based UUID, the same for every node of that run.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from pipeledger.common.columns import TableName

POSTGRES_PORT = 5432


@dataclass(frozen=True, kw_only=True)
class RunRef:
    """A run of another job: a parent or root run."""

    namespace: str
    job: str
    run_id: str


def as_uuid(text: str, namespace: str, job: str) -> str:
    """``text`` if it is a UUID, else the UUID named by the job and ``text``."""
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"openlineage:{namespace}/{job}/{text}"))


def parse_ref(text: str) -> RunRef | None:
    """``namespace/job/run_id`` (the namespace may hold slashes), or None if malformed."""
    parts = text.strip().rsplit("/", 2)
    if len(parts) != 3 or not all(parts):
        return None
    namespace, job, run_id = parts
    return RunRef(namespace=namespace, job=job, run_id=as_uuid(run_id, namespace, job))


def database_namespace(url: str, base_dir: Path) -> str:
    """The namespace of a database named by a pipeledger URL (no user nor password)."""
    parts = urlsplit(url)
    scheme = parts.scheme.split("+")[0]
    if scheme == "sqlite":
        return f"sqlite://{_sqlite_path(url, base_dir)}"
    if scheme in ("postgresql", "postgres"):
        host = parts.hostname or "localhost"
        return f"postgres://{host}:{parts.port or POSTGRES_PORT}"
    return f"{scheme}://{parts.hostname or ''}"


def table_dataset(url: str, table: TableName, base_dir: Path) -> tuple[str, str]:
    """(namespace, name) of a table in the database ``url``."""
    namespace = database_namespace(url, base_dir)
    if not namespace.startswith("postgres://"):
        return namespace, str(table)
    database = unquote(urlsplit(url).path.lstrip("/")) or "postgres"
    return namespace, f"{database}.{table.schema or 'public'}.{table.table}"


def file_dataset(path: Path) -> tuple[str, str]:
    """(namespace, name) of a source file or glob."""
    return "file", str(path)


def _sqlite_path(url: str, base_dir: Path) -> str:
    raw = url.split(":///", 1)[-1] if ":///" in url else url.split("://", 1)[-1]
    path = Path(unquote(raw.split("?", 1)[0]))
    return str(path if path.is_absolute() else (base_dir / path).resolve())
