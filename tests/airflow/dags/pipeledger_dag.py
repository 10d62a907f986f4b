"""The DAG Airflow parses in these tests: the config named by the environment, as one DAG."""

import os

from pipeledger.airflow import dag_from_config

dag = dag_from_config(
    os.environ["PIPELEDGER_TEST_CONFIG"], dag_id=os.environ.get("PIPELEDGER_TEST_DAG", "pl_etl")
)
