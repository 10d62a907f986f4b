"""The benchmarks' page-cache reset covers the libraries a step imports."""

from __future__ import annotations

from bench.common.process import drop_cached_libraries


def test_the_venv_s_arrow_and_postgres_libraries_are_dropped_from_the_page_cache() -> None:
    names = {path.name.split(".so")[0] for path in drop_cached_libraries()}
    assert {"libarrow", "libparquet"} <= names
    assert any(name.startswith("_psycopg") or name.startswith("libpq") for name in names)
