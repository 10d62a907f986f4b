"""What one invocation works with: its config, and the warehouse and the ledger the config
names, each built once and handed down (a DAG run's nodes share them).

A warehouse is opened once per URL: when the ledger lives in the warehouse, the ledger's
database is the warehouse itself. A run's sessions carry its name without a warehouse of
their own (:func:`pipeledger.warehouse.clients.acting_for`).
"""

from __future__ import annotations

import hashlib
import logging
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from pipeledger import lineage
from pipeledger.common.secrets import redact
from pipeledger.common.who import who as who
from pipeledger.config.model import Config, ModelConfig, SqlSource
from pipeledger.errors import WarehouseError
from pipeledger.ledger.ledger import Ledger, NullLedger, PipelineInfo
from pipeledger.ledger.queue import Concurrency
from pipeledger.ledger.run import RunObserver
from pipeledger.ledger.store import Op
from pipeledger.state.tables import STATE, read_commits
from pipeledger.warehouse.adapters import open_warehouse
from pipeledger.warehouse.session import Warehouse

log = logging.getLogger("pipeledger.run")


class Site:
    """One invocation's config, warehouses (one per URL), ledger, and the observer of its
    runs (None without lineage)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._warehouses: dict[str, Warehouse] = {}
        self._lock = threading.Lock()
        self.warehouse = self.database(config.warehouse_url)
        self.ledger = _ledger(config, self)
        self.observer: RunObserver | None = lineage.observer(config, self.warehouse)

    def __enter__(self) -> Site:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """The end of the invocation: close the connections its warehouses keep between
        sessions, so that none outlives the call that made them (an API caller's process
        goes on; a server sees its clients leave). The site stays usable."""
        with self._lock:
            warehouses = list(self._warehouses.values())
        for warehouse in warehouses:
            warehouse.close()

    def database(self, url: str) -> Warehouse:
        """The invocation's one warehouse object for ``url``."""
        with self._lock:
            found = self._warehouses.get(url)
            if found is None:
                tenant = self.config.ledger.tenant
                found = self._warehouses[url] = open_warehouse(url, tenant=tenant)
            return found

    def registration(self, name: str) -> list[Op]:
        """Ops putting the pipeline (or model), its config version and the nodes it reads
        from in the ledger's registry."""
        config = self.config
        node = config.node(name)
        text = node.model_dump_json()
        if isinstance(node, ModelConfig):  # the query is part of what the model is
            text += config.model_sql(name).text
        info = PipelineInfo(
            name=name,
            config_text=redact(text),
            description=node.description,
            owner=node.owner,
            source_system=_describe_source(config, name),
            target_system=f"{redact(config.warehouse_url)} {node.target}",
            freshness_sla=node.freshness_sla,
            depends_on=config.upstreams(name),
            max_duration=node.max_duration,
        )
        return self.ledger.registration(info)


def _ledger(config: Config, site: Site) -> Ledger:
    """The ledger the config describes; a :class:`NullLedger` when ``[ledger] enabled =
    false``. Sharing the warehouse, it also migrates the watermark state when it opens."""
    settings = config.ledger
    if not settings.enabled:
        return NullLedger()
    separate = config.separate_ledger
    return Ledger(
        config.ledger_url,
        separate=separate,
        spool=config.resolve(settings.spool),
        on_unavailable=settings.on_unavailable,
        lease=settings.lease,
        heartbeat=settings.heartbeat,
        environment=settings.environment,
        components=() if separate else (STATE,),
        commits=WarehouseCommits(site.warehouse) if separate else None,
        write_timeout=settings.write_timeout,
        database=site.database(config.ledger_url),
        code_version=lambda: project_version(config),
        tenant=settings.tenant,
        concurrency=_concurrency(config),
    )


def _concurrency(config: Config) -> Concurrency | None:
    """The tenant's slots and queue, when ``[limits] max_concurrent_runs`` is set."""
    limits = config.limits
    if limits.max_concurrent_runs is None:
        return None
    return Concurrency(
        tenant=config.ledger.tenant,
        max_concurrent_runs=limits.max_concurrent_runs,
        queue_capacity=limits.queue_capacity,
        queue_timeout=limits.queue_timeout,
        queue_poll=limits.queue_poll,
    )


def project_version(config: Config) -> str:
    """The version of the project a run comes from: the git commit of the folder its
    config is in (``+dirty`` when tracked files differ from it), else the hash of its config
    file, ``config:<12 hex>``. pipeledger's own version is in each run's registry row."""
    folder = config.source_file.parent
    commit = _git(folder, "rev-parse", "HEAD")
    if commit:
        dirty = _git(folder, "status", "--porcelain", "--untracked-files=no")
        return commit + ("+dirty" if dirty else "")
    try:
        text = config.source_file.read_bytes()
    except OSError:
        text = config.model_dump_json().encode()
    return "config:" + hashlib.sha256(text).hexdigest()[:12]


def _git(folder: Path, *args: str) -> str | None:
    """What ``git args`` prints in ``folder``, or None (no git, not a repository)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


class WarehouseCommits:
    """The warehouse's commit log, as the ledger's watchdog asks it (``ledger.watchdog``)."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse

    def committed(self, run_ids: Sequence[str]) -> Mapping[str, list[Op]]:
        try:
            with self.warehouse.session(write=False) as session:
                found = read_commits(session, run_ids)
        except WarehouseError as exc:  # unknown for now: the lease decides
            log.warning("could not read the warehouse's commit log: %s", exc)
            return {}
        return {
            run_id: [Op.from_json(line) for line in text.splitlines() if line.strip()]
            for run_id, text in found.items()
            if text
        }


def _describe_source(config: Config, name: str) -> str:
    node = config.node(name)
    if isinstance(node, ModelConfig):
        return f"model {node.sql or 'query'} ({node.materialized})"
    source = node.source
    if isinstance(source, SqlSource):
        return f"{redact(source.url)} {source.table or 'query'}"
    return f"{source.kind} {source.path}"
