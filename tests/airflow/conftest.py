"""Real Airflow 3 and 2.11, each in a venv of its own (``./dev test-airflow`` builds them
from the frozen pins in ``requirements/`` and runs this folder). The default suite leaves
the folder out: it needs those venvs and minutes of Airflow start-up."""

from __future__ import annotations

import os

if not os.environ.get("PIPELEDGER_AIRFLOW_TESTS"):
    collect_ignore_glob = ["*.py"]
