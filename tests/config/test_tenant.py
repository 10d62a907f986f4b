"""``[ledger] tenant``: one key, which the queue and the ledger's row security both read;
``PIPELEDGER_TENANT`` overrides it, for the config model and for the quick commands'
locating alike; a name that cannot become a reader role is refused before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeledger.api import load_config
from pipeledger.config.locate import TENANT_ENV, locate
from pipeledger.errors import ConfigError
from tests.helpers import Project, orders_pipeline


def tenant_config(tmp_path: Path, tenant: str | None) -> Path:
    tmp_path.mkdir(exist_ok=True)
    project = Project(tmp_path, None)
    section = f'[ledger]\ntenant = "{tenant}"\n' if tenant is not None else ""
    return project.configure(section, orders=orders_pipeline())


def tenants_seen(path: Path) -> tuple[str, str]:
    return load_config(path).ledger.tenant, locate(path).tenant


def test_the_tenant_is_default_unless_the_config_names_one(tmp_path: Path) -> None:
    assert tenants_seen(tenant_config(tmp_path / "a", None)) == ("default", "default")
    assert tenants_seen(tenant_config(tmp_path / "b", "team_a")) == ("team_a", "team_a")


def test_the_environment_overrides_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tenant_config(tmp_path, "team_a")
    monkeypatch.setenv(TENANT_ENV, "team_b")
    assert tenants_seen(path) == ("team_b", "team_b")


@pytest.mark.parametrize("name", ["Team_A", "team-a", "1team", "a" * 41, ""])
def test_a_tenant_that_cannot_name_a_role_is_refused(tmp_path: Path, name: str) -> None:
    path = tenant_config(tmp_path, name)
    for read in (load_config, locate):
        with pytest.raises(ConfigError, match=r"ledger\.tenant.*nothing was run"):
            read(path)


def test_a_bad_tenant_from_the_environment_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tenant_config(tmp_path, "team_a")
    monkeypatch.setenv(TENANT_ENV, "Team A")
    for read in (load_config, locate):
        with pytest.raises(ConfigError, match=TENANT_ENV):
            read(path)
