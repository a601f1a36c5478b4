"""Builders of small snapshot DataFrames for the analytics tests (one shared SparkSession)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from pyspark.sql import DataFrame, SparkSession

from namesrv_analytics.common import spark_schema

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    """T0 + seconds (UTC)."""
    return T0 + timedelta(seconds=seconds)


def queue_data(spark: SparkSession, rows: Sequence[tuple[str, datetime, str, str, int, int, int]]) -> DataFrame:
    """``queue_data`` rows from (namesrv, time, topic, broker name, read, write, perm)."""
    return spark.createDataFrame(
        [(t, ns, 1, topic, name, r, w, p, 0, t.date()) for ns, t, topic, name, r, w, p in rows],
        spark_schema("queue_data"),
    )


def broker_data(spark: SparkSession, rows: Sequence[tuple[str, datetime, str, str, int, str]]) -> DataFrame:
    """``broker_data`` rows from (namesrv, time, cluster, broker name, broker id, address)."""
    return spark.createDataFrame(
        [
            (t, ns, 1, cluster, name, broker_id, addr, "", False, None, None, None, None, None, None, [], t.date())
            for ns, t, cluster, name, broker_id, addr in rows
        ],
        spark_schema("broker_data"),
    )


def manifest(spark: SparkSession, rows: Sequence[tuple[str, datetime]]) -> DataFrame:
    """``snapshots`` rows from (namesrv, time)."""
    return spark.createDataFrame(
        [(t, ns, 1, f"{ns}-{t:%H%M%S}.parquet", "namesrv", 0, 0, 0, 0, 0, t.date()) for ns, t in rows],
        spark_schema("snapshots"),
    )


def expect(spark: SparkSession, actual: DataFrame, rows: Sequence[Sequence[object]]) -> DataFrame:
    """Expected rows as a DataFrame of ``actual``'s schema (column names and types are asserted
    separately, so this compares values)."""
    return spark.createDataFrame([tuple(r) for r in rows], actual.schema)
