"""Offline Hive tables for the daily wide table: demo data, and the daily aggregation.

:func:`generate_offline` creates ``<db>.payments``, ``<db>.user_profile`` and ``<db>.social_graph``
(DDL in ``sql/hive/offline_tables.sql``) and fills the given days for the same users the event
generator uses (uid = 10000001 + i). Rows are drawn in Python from ``random.Random`` seeded by
(seed, table, user, day), so they are deterministic for a seed; re-running overwrites the days'
partitions only. They are drawn on the executors, :data:`USERS_PER_TASK` users a task, so the
driver's memory does not grow with the number of users (a million users' day is ~10M rows).

:func:`offline_frame` runs a daily table's offline SQL files (``sql/hive/*.sql``) for one day and
joins their results on the key: the offline columns the daily job writes to HBase family ``h``.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from widehouse.catalog.model import Catalog, WideTable
from widehouse.catalog.offline import day_parameter, render_offline_sql
from widehouse.catalog.spark import spark_type
from widehouse.contracts.identity import OFFLINE_DATABASE
from widehouse.contracts.periods import DAY, DAY_MS, day_start
from widehouse.contracts.types import SPARK_VALUE_TYPES
from widehouse.errors import CatalogError, ConfigError
from widehouse.generator.options import uid_of
from widehouse.generator.values import seeded

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

OFFLINE_TABLES_SQL = "hive/offline_tables.sql"
_DB_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")  # fullmatch
COUNTRIES = ["ID", "IN", "PK", "BD", "EG", "SA", "US", "VN", "TH", "PH"]
LANGUAGES = {
    "ID": "id",
    "IN": "hi",
    "PK": "ur",
    "BD": "bn",
    "EG": "ar",
    "SA": "ar",
    "US": "en",
    "VN": "vi",
    "TH": "th",
    "PH": "en",
}
CHANNELS = ["google_play", "app_store", "card", "wallet", "carrier"]
PRODUCTS = [
    ("diamonds_60", 0.99),
    ("diamonds_300", 4.99),
    ("diamonds_980", 14.99),
    ("diamonds_1980", 29.99),
    ("diamonds_6480", 99.99),
]
EPOCH = dt.datetime(2019, 1, 1, tzinfo=dt.UTC)
USERS_PER_TASK = 20_000
"""Users whose rows one Spark task draws (each table)."""


@dataclass(frozen=True)
class OfflineSpec:
    users: int
    days: tuple[dt.date, ...]
    seed: int = 1
    database: str = OFFLINE_DATABASE

    def validate(self) -> OfflineSpec:
        if not 1 <= self.users <= 10_000_000:
            raise ConfigError(f"users {self.users} must be between 1 and 10,000,000")
        if not self.days:
            raise ConfigError("give at least one day")
        if not _DB_RE.fullmatch(self.database):
            raise ConfigError(f"--database {self.database!r} is not a plain lower-case identifier")
        return self


# ------------------------------------------------------------------------------ data, in Python
def profile_rows(spec: OfflineSpec, indexes: range | None = None) -> Iterator[tuple[Any, ...]]:
    """(uid, nickname, country, language, gender, birth_year, register_time, user_level, vip_level,
    is_anchor, dt): one snapshot row per user per day (of the users ``indexes``, default all)."""
    for index in range(spec.users) if indexes is None else indexes:
        uid = uid_of(index)
        static = seeded(spec.seed, "profile", uid)
        country = static.choices(COUNTRIES, weights=[22, 18, 10, 8, 8, 7, 6, 8, 7, 6])[0]
        gender = static.choices(["male", "female", "unknown"], weights=[55, 40, 5])[0]
        birth_year = static.randint(1970, 2008)
        first_day = min(spec.days)
        span = max(1, int((day_start(first_day) - EPOCH).total_seconds()))
        register = EPOCH + dt.timedelta(seconds=static.randrange(span))
        level0, vip = static.randint(1, 40), static.choices([0, 1, 2, 3, 5], weights=[80, 8, 6, 4, 2])[0]
        is_anchor = static.random() < 0.05
        nickname = f"user{uid % 100000:05d}"
        for day in spec.days:
            grown = level0 + (day - first_day).days // 7
            yield (
                uid,
                nickname,
                country,
                LANGUAGES[country],
                gender,
                birth_year,
                register,
                grown,
                vip,
                is_anchor,
                day.isoformat(),
            )


def payment_rows(spec: OfflineSpec, indexes: range | None = None) -> Iterator[tuple[Any, ...]]:
    """(order_id, uid, pay_time, amount_usd, currency, channel, product, status, dt) of the users
    ``indexes`` (default all)."""
    for index in range(spec.users) if indexes is None else indexes:
        uid = uid_of(index)
        payer = seeded(spec.seed, "payer", uid).random() < 0.15
        if not payer:
            continue
        for day in spec.days:
            rng = seeded(spec.seed, "pay", uid, day.isoformat())
            orders = rng.choices([0, 1, 2, 3, 5], weights=[50, 30, 10, 6, 4])[0]
            for n in range(orders):
                product, price = rng.choices(PRODUCTS, weights=[40, 30, 15, 10, 5])[0]
                status = rng.choices(["success", "failed", "refunded"], weights=[85, 10, 5])[0]
                pay_time = day_start(day) + dt.timedelta(milliseconds=rng.randrange(DAY_MS))
                currency = rng.choice(["USD", "IDR", "INR", "PKR", "EGP"])
                yield (
                    f"{uid}-{day:%Y%m%d}-{n}",
                    uid,
                    pay_time,
                    price,
                    currency,
                    rng.choice(CHANNELS),
                    product,
                    status,
                    day.isoformat(),
                )


def social_rows(spec: OfflineSpec, indexes: range | None = None) -> Iterator[tuple[Any, ...]]:
    """(uid, peer_uid, relation, created_time, dt): each day's snapshot of the follow/block graph,
    the edges from the users ``indexes`` (default all), user by user."""
    last = day_start(max(spec.days)) + DAY
    ends = [(day.isoformat(), day_start(day) + DAY) for day in spec.days]
    for index in range(spec.users) if indexes is None else indexes:
        edges: list[tuple[int | str, int | str, str, dt.datetime]] = []
        uid = uid_of(index)
        rng = seeded(spec.seed, "social", uid)
        count = min(spec.users - 1, int(rng.paretovariate(1.2) * 3))
        peers = rng.sample(range(spec.users), min(spec.users, count + 1))
        for peer in peers:
            if peer == index:
                continue
            relation = "block" if rng.random() < 0.03 else "follow"
            # most edges are old; about one in six was made in the last three days
            window = 3 * 86_400 if rng.random() < 0.15 else 400 * 86_400
            created = last - dt.timedelta(seconds=1 + rng.randrange(window))
            edges.append((uid, uid_of(peer), relation, created))
        for day_text, end in ends:
            for source, target, relation, created in edges:
                if created < end:
                    yield (source, target, relation, created, day_text)


_ROWS = {"payments": payment_rows, "user_profile": profile_rows, "social_graph": social_rows}

_SCHEMAS = {
    "payments": "order_id string, uid bigint, pay_time timestamp, amount_usd double, currency string, "
    "channel string, product string, status string, dt string",
    "user_profile": "uid bigint, nickname string, country string, language string, gender string, "
    "birth_year int, register_time timestamp, user_level int, vip_level int, is_anchor boolean, dt string",
    "social_graph": "uid bigint, peer_uid bigint, relation string, created_time timestamp, dt string",
}


# ------------------------------------------------------------------------------------ Spark
def create_tables(spark: SparkSession, sql_dir: Path, database: str) -> None:
    """``CREATE DATABASE`` and the three tables (``sql/hive/offline_tables.sql``), if missing."""
    if not _DB_RE.fullmatch(database):
        raise ConfigError(f"Hive database {database!r} is not a plain lower-case identifier")
    path = sql_dir / OFFLINE_TABLES_SQL
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogError(f"cannot read {path}: {exc}") from exc
    spark.sql(f"CREATE DATABASE IF NOT EXISTS `{database}`")
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    for statement in body.split(";"):
        if statement.strip():
            spark.sql(statement.replace("${db}", f"`{database}`"))


def generate_offline(
    spark: SparkSession, spec: OfflineSpec, sql_dir: Path, users_per_task: int = USERS_PER_TASK
) -> dict[str, int]:
    """Create the offline tables and (over)write the spec's days. Returns rows written per table.

    Each table's rows are drawn by ``ceil(users / users_per_task)`` tasks (:class:`_TaskRows`), so
    nothing on the driver holds them."""
    spec = spec.validate()
    create_tables(spark, sql_dir, spec.database)  # the session allows dynamic partitions (spark_conf)
    tasks = math.ceil(spec.users / users_per_task)
    days = ", ".join(f"'{day.isoformat()}'" for day in spec.days)
    counts = {}
    for table in ("payments", "user_profile", "social_graph"):
        draw = _TaskRows(table, spec, users_per_task)
        drawn = spark.sparkContext.parallelize(range(tasks), tasks).flatMap(draw)
        frame = spark.createDataFrame(drawn, _SCHEMAS[table])
        view = f"widehouse_offline_{table}"
        frame.createOrReplaceTempView(view)
        columns = ", ".join(f"`{c}`" for c in frame.columns)
        # Hive semantics: only the partitions (days) present in the data are replaced
        spark.sql(
            f"INSERT OVERWRITE TABLE `{spec.database}`.`{table}` PARTITION (dt) SELECT {columns} FROM {view}"
        )
        spark.catalog.dropTempView(view)
        # the days were replaced whole: what they hold now is what was drawn
        written = spark.sql(f"SELECT count(*) FROM `{spec.database}`.`{table}` WHERE dt IN ({days})")
        counts[table] = int(written.collect()[0][0])
    return counts


@dataclass(frozen=True)
class _TaskRows:
    """What one task of :func:`generate_offline` draws: the rows of ``table`` for its slice of users
    (plain config, shipped to the executors)."""

    table: str
    spec: OfflineSpec
    users_per_task: int

    def __call__(self, task: int) -> Iterator[tuple[Any, ...]]:
        first = task * self.users_per_task
        return _ROWS[self.table](self.spec, range(first, min(self.spec.users, first + self.users_per_task)))


def offline_frame(
    spark: SparkSession, catalog: Catalog, table: WideTable, day: dt.date | str, database: str
) -> DataFrame:
    """The offline columns of ``table`` for ``day``: key + every offline column, one row per key.

    Each source's SQL runs with ``:day`` bound as a parameter; results are outer-joined on the key and
    cast to the catalog's types (a SQL file returning another shape raises CatalogError).
    """
    from pyspark.sql import functions as sf

    if not table.offline:
        raise CatalogError(f"wide table {table.name} has no offline columns")
    key = table.key_name
    # Delta's SQL parser drops bound parameters on Spark >= 4.1 (delta-io/delta#7640); the legacy
    # binding (parameters only where constants go, which is all we use) still works.
    spark.conf.set("spark.sql.legacy.parameterSubstitution.constantsOnly", "true")
    result: DataFrame | None = None
    for source in table.offline:
        frame = spark.sql(render_offline_sql(source, database), args=day_parameter(day))
        wanted = [key, *(c.name for c in source.columns)]
        if sorted(frame.columns) != sorted(wanted):
            raise CatalogError(
                f"{source.sql_path} returns columns {frame.columns}; the catalog ({table.file.name}, offline "
                f"source {source.name}) expects {wanted}"
            )
        expected = {key: spark_type("bigint" if table.key_type == "long" else "string")}
        expected.update({c.name: spark_type(SPARK_VALUE_TYPES[c.type]) for c in source.columns})
        wrong = [
            f"{name} is {frame.schema[name].dataType.simpleString()}, not {kind.simpleString()}"
            for name, kind in expected.items()
            if frame.schema[name].dataType != kind
        ]
        if wrong:
            raise CatalogError(f"{source.sql_path} (offline source {source.name}): {'; '.join(wrong)}")
        frame = frame.select(*(sf.col(c) for c in wanted))
        result = frame if result is None else result.join(frame, on=key, how="full_outer")
    assert result is not None
    return result.select(key, *(c.name for c in table.offline_columns))


def missing_partitions(spark: SparkSession, table: WideTable, day: dt.date, database: str) -> list[str]:
    """The Hive inputs of ``table``'s offline SQL that are missing for ``day``: ``<db>.<table>`` (no
    table) or ``<db>.<table> partition dt=<day>`` (no partition of the day), in catalog order."""
    if not _DB_RE.fullmatch(database):
        raise ConfigError(f"Hive database {database!r} is not a plain lower-case identifier")
    day_text = day.isoformat()
    missing: list[str] = []
    for hive_table in dict.fromkeys(t for source in table.offline for t in source.hive_tables):
        name = f"{database}.{hive_table}"
        if not spark.catalog.tableExists(name):
            missing.append(name)
            continue
        found = spark.sql(
            f"SHOW PARTITIONS `{database}`.`{hive_table}` PARTITION (dt='{day_text}')"
        ).collect()
        if not found:
            missing.append(f"{name} partition dt={day_text}")
    return missing
