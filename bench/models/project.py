"""What the models benchmark builds, as text: the bronze orders pipeline, the silver and gold
models of pipeledger (one pair run in process, one by the ``pipeledger`` command), the same
two models for dbt, the hand-written SQL a careful engineer would write, and the 20-node
project of the overhead check. Pure: nothing here touches a database or a file."""

from __future__ import annotations

from pathlib import Path

BRONZE = "bronze.orders"
BRONZE_PIPELINE = "bronze_orders"
# pipeledger's two pairs of models: one run in process (api.run), one by the command; each
# writes its own schema, both read the one bronze table every tool reads
IN_PROCESS = ("silver_orders", "gold_daily", "pl")
COMMAND = ("cli_silver_orders", "cli_gold_daily", "plcli")
DBT_SCHEMA = "dbt"
SILVER_COLUMNS = "order_id, customer_id, order_date, amount, status, qty, updated_at"

# silver: one cleaned row per live order; the same text for every tool
SILVER_SELECT = """select order_id,
       customer_id::bigint as customer_id,
       order_date,
       coalesce(amount, 0)::numeric(12,2) as amount,
       status,
       coalesce(qty, 0) as qty,
       updated_at
from {source}
where status <> 'cancelled'"""
GOLD_SELECT = """select order_date, sum(amount) as revenue, count(*) as orders
from {silver}
group by order_date"""


def silver_sql(source: str = BRONZE) -> str:
    return SILVER_SELECT.format(source=source)


def gold_sql(silver: str) -> str:
    return GOLD_SELECT.format(silver=silver)


def pipeledger_toml(url: str, source: Path) -> str:
    """The project: the bronze load of the orders CSVs in folder ``source``, and both pairs
    of models (``merge`` newer-wins on ``order_id``; ``partition_overwrite`` by day)."""
    lines = [
        f'[warehouse]\nurl = "{url}"\n',
        f"[pipelines.{BRONZE_PIPELINE}]",
        f'source = {{ kind = "csv", path = "{source}" }}',
        f'target = "{BRONZE}"',
        'key = ["order_id"]\ncursor = "updated_at"\non_conflict = "newer_wins"',
        'columns = { amount = "numeric(12,2)" }\n',
    ]
    for silver, gold, schema in (IN_PROCESS, COMMAND):
        lines += [
            f"[models.{silver}]",
            f'sql = "models/{silver}.sql"',
            f'target = "{schema}.silver_orders"',
            'materialized = "merge"\nkey = ["order_id"]\ncursor = "updated_at"',
            'on_conflict = "newer_wins"\n',
            f"[models.{gold}]",
            f'sql = "models/{gold}.sql"',
            f'target = "{schema}.gold_daily"',
            'materialized = "partition_overwrite"\npartition_by = "order_date"\n',
        ]
    return "\n".join(lines)


def pipeledger_model_files() -> dict[str, str]:
    """``models/NAME.sql`` of both pairs, by file name."""
    files = {}
    for silver, gold, schema in (IN_PROCESS, COMMAND):
        files[f"{silver}.sql"] = silver_sql() + "\n"
        files[f"{gold}.sql"] = gold_sql(f"{schema}.silver_orders") + "\n"
    return files


# -- the hand-written SQL: one transaction per run ---------------------------------------
HAND_SCHEMAS = ("hand", "handcli")  # in process (psycopg), and the psql process


def hand_statements(schema: str) -> list[str]:
    """Every run's statements into ``schema``, in one transaction: the tables made if
    missing; the rows of bronze newer than the stored watermark upserted newer-wins; a key
    whose newer version is cancelled deleted; gold's touched days (where the changed rows
    land, and where their previous silver versions were) deleted and inserted again; the
    watermark kept in the same transaction."""
    s = schema
    return [
        f"CREATE SCHEMA IF NOT EXISTS {s}",
        f"""CREATE TABLE IF NOT EXISTS {s}.silver_orders (
  order_id bigint PRIMARY KEY, customer_id bigint NOT NULL, order_date date NOT NULL,
  amount numeric(12,2) NOT NULL, status text NOT NULL, qty integer NOT NULL,
  updated_at timestamptz NOT NULL)""",
        f"""CREATE TABLE IF NOT EXISTS {s}.gold_daily (
  order_date date PRIMARY KEY, revenue numeric NOT NULL, orders bigint NOT NULL)""",
        f"""CREATE TABLE IF NOT EXISTS {s}.watermark (
  model text PRIMARY KEY, wm timestamptz NOT NULL)""",
        f"LOCK TABLE {s}.watermark IN SHARE ROW EXCLUSIVE MODE",
        f"""CREATE TEMP TABLE chg ON COMMIT DROP AS
SELECT order_id, customer_id::bigint AS customer_id, order_date,
       coalesce(amount, 0)::numeric(12,2) AS amount, status, coalesce(qty, 0) AS qty,
       updated_at
FROM {BRONZE}
WHERE updated_at > coalesce(
  (SELECT wm FROM {s}.watermark WHERE model = 'silver_orders'), '-infinity')""",
        f"""CREATE TEMP TABLE touched ON COMMIT DROP AS
SELECT order_date FROM chg WHERE status <> 'cancelled'
UNION
SELECT t.order_date FROM {s}.silver_orders t JOIN chg c USING (order_id)
WHERE c.updated_at > t.updated_at""",
        f"""INSERT INTO {s}.silver_orders AS t
SELECT * FROM chg WHERE status <> 'cancelled'
ON CONFLICT (order_id) DO UPDATE SET
  customer_id = excluded.customer_id, order_date = excluded.order_date,
  amount = excluded.amount, status = excluded.status, qty = excluded.qty,
  updated_at = excluded.updated_at
WHERE excluded.updated_at > t.updated_at""",
        f"""DELETE FROM {s}.silver_orders t USING chg c
WHERE c.order_id = t.order_id AND c.status = 'cancelled' AND c.updated_at > t.updated_at""",
        f"DELETE FROM {s}.gold_daily WHERE order_date IN (SELECT order_date FROM touched)",
        f"""INSERT INTO {s}.gold_daily
SELECT order_date, sum(amount), count(*) FROM {s}.silver_orders
WHERE order_date IN (SELECT order_date FROM touched)
GROUP BY order_date""",
        f"""INSERT INTO {s}.watermark
SELECT 'silver_orders', max(updated_at) FROM chg HAVING max(updated_at) IS NOT NULL
ON CONFLICT (model) DO UPDATE SET wm = greatest({s}.watermark.wm, excluded.wm)""",
    ]


def hand_script(schema: str) -> str:
    """The same statements as one ``psql -1 -f`` script (the whole-process baseline)."""
    return ";\n".join(hand_statements(schema)) + ";\n"


# -- dbt: the usual incremental pattern ------------------------------------------------------
DBT_SILVER = (
    "{{ config(materialized='incremental', unique_key='order_id', "
    "incremental_strategy='merge') }}\n"
    + silver_sql("{{ source('bronze', 'orders') }}")
    + """
{% if is_incremental() %}
  and updated_at > (select max(updated_at) from {{ this }})
{% endif %}
"""
)
DBT_GOLD = """{{ config(materialized='incremental', unique_key='order_date',
          incremental_strategy='delete+insert') }}
select order_date, sum(amount) as revenue, count(*) as orders, max(updated_at) as max_updated_at
from {{ ref('silver_orders') }}
{% if is_incremental() %}
where order_date in (select distinct order_date from {{ ref('silver_orders') }}
                     where updated_at > (select max(max_updated_at) from {{ this }}))
{% endif %}
group by order_date
"""
DBT_PROJECT = """name: models_bench
version: "1.0"
config-version: 2
profile: models_bench
model-paths: ["models"]
"""
DBT_SOURCES = """version: 2
sources:
  - name: bronze
    schema: bronze
    tables:
      - name: orders
"""


def dbt_profiles(host: str, port: int, user: str, database: str) -> str:
    return f"""models_bench:
  target: bench
  outputs:
    bench:
      type: postgres
      host: "{host}"
      port: {port}
      user: "{user}"
      password: unused
      dbname: "{database}"
      schema: "{DBT_SCHEMA}"
      threads: 4
"""


def dbt_files(host: str, port: int, user: str, database: str) -> dict[str, str]:
    """The dbt project's files, by path under its folder."""
    return {
        "dbt_project.yml": DBT_PROJECT,
        "profiles.yml": dbt_profiles(host, port, user, database),
        "models/sources.yml": DBT_SOURCES,
        "models/silver_orders.sql": DBT_SILVER,
        "models/gold_daily.sql": DBT_GOLD,
    }


# -- the overhead check: a 20-node project ---------------------------------------------------
WIDE_NODES = 20


def wide_toml(url: str | None, source: Path) -> str:
    """A load of a small CSV folder (``incremental = "files"``: a no-op run lists the folder)
    and 19 models over it: a silver model, 9 gold aggregates over silver and 9 over those."""
    lines = [f'[warehouse]\nurl = "{url}"\n'] if url else []
    lines += [
        "[pipelines.raw_orders]",
        f'source = {{ kind = "csv", path = "{source}" }}',
        'target = "raw_orders"\nkey = ["order_id"]\non_conflict = "update"\nincremental = "files"',
        'columns = { amount = "numeric(12,2)" }\n',
        "[models.w_silver]",
        f'query = "{silver_sql("raw_orders")}"'.replace("\n", " "),
        'target = "w_silver"\nmaterialized = "merge"\nkey = ["order_id"]\n',
    ]
    for i in range(1, 10):
        lines += [
            f"[models.w_gold_{i}]",
            f'query = "select order_date, sum(amount) as revenue, count(*) as orders '
            f'from w_silver where qty >= {i} group by order_date"',
            f'target = "w_gold_{i}"\nmaterialized = "partition_overwrite"',
            'partition_by = "order_date"\n',
            f"[models.w_top_{i}]",
            f'query = "select order_date, revenue from w_gold_{i} where orders > {i}"',
            f'target = "w_top_{i}"\nmaterialized = "merge"\nkey = ["order_date"]\n',
        ]
    return "\n".join(lines)
