"""Explicit Spark schemas of the four Parquet datasets ``kafkatx scan`` writes (docs/scan.md).

Column names and order are those of :class:`kafkatx.render.rows.ScanBatchRow` (``batches/``: its
types and nullability too), :mod:`kafkatx.spark.rows` (``transactions/``) and of :class:`~kafkatx.rows.LagRow` /
:class:`~kafkatx.rows.HangingRow` (``partitions/``, ``hanging/``): the same JSON
keys as ``kafkatx lag`` and ``find-hanging``. Every dataset is a few plain Parquet files, ``topic`` a
column (``batches/``' rows in (topic, partition, log dir, segment, position) order, so a reader's topic
filter skips row groups by their statistics); :func:`read_dataset` reads one back with its explicit schema
(so a topic named ``123`` stays a string) and the original column order. ``PARTITION_COLUMN``: the
directory key of the ``topic=<t>/`` layout earlier versions wrote ``batches/`` in, still read.

pyspark is imported inside the functions only: importing this module stays cheap.
"""

from __future__ import annotations

from typing import Any

import msgspec

from kafkatx.render.rows import ScanBatchRow, field_types
from kafkatx.rows import HangingRow, LagRow
from kafkatx.spark.rows import BATCH_COLUMNS, TRANSACTION_COLUMNS

DATASETS = ("batches", "transactions", "partitions", "hanging")
PARTITION_COLUMN = "topic"

# Spark type per column: "string", "int" (32-bit), "long", "boolean", "array<string>".
# batches/: the row model's fields, Spark types and nullability (kafkatx.render.rows.ScanBatchRow)
_BATCH_FIELDS = field_types(ScanBatchRow)
_BATCH_TYPES = {name: kind for name, (kind, _) in _BATCH_FIELDS.items()}
_TRANSACTION_TYPES = {
    "topic": "string", "partition": "int", "producer_id": "long", "producer_epoch": "int",
    "transactional_id": "string", "first_offset": "long", "last_offset": "long", "marker_offset": "long",
    "outcome": "string", "coordinator_epoch": "int", "start_timestamp_ms": "long", "end_timestamp_ms": "long",
    "duration_ms": "long",
}
_PARTITION_TYPES = {
    "topic": "string", "partition": "int", "log_start_offset": "long", "lso": "long", "high_watermark": "long",
    "log_end_offset": "long", "lag": "long", "open_transactions": "int", "oldest_open_producer_id": "long",
    "oldest_open_first_offset": "long", "held_by_ghost": "boolean", "local_log_start_offset": "long",
    # tiered storage (KIP-405): the scan reads no __remote_log_metadata on the executors, so remote_segments,
    # remote_copied_offset and upload_blocked_bytes stay null there (lag --format json has them)
    "remote_storage": "string", "remote_segments": "string", "remote_copied_offset": "long",
    "upload_blocked_bytes": "long",
}
_HANGING_TYPES = {
    "kind": "string", "topic": "string", "partition": "int", "producer_id": "long", "producer_epoch": "int",
    "transactional_id": "string", "coordinator_state": "string", "first_offset": "long", "start_ms": "long",
    "duration_ms": "long", "blocked_groups": "array<string>", "upload_blocked_bytes": "long",
    "remote_copied_offset": "long",
}

COLUMNS: dict[str, tuple[str, ...]] = {
    "batches": BATCH_COLUMNS,
    "transactions": TRANSACTION_COLUMNS,
    "partitions": tuple(f.name for f in msgspec.structs.fields(LagRow)),
    "hanging": tuple(f.name for f in msgspec.structs.fields(HangingRow)),
}
TYPES: dict[str, dict[str, str]] = {
    "batches": _BATCH_TYPES, "transactions": _TRANSACTION_TYPES,
    "partitions": _PARTITION_TYPES, "hanging": _HANGING_TYPES,
}
# Never null: the keys of a row (an error row of batches/ still names its file).
NOT_NULL: dict[str, frozenset[str]] = {
    "batches": frozenset(name for name, (_, nullable) in _BATCH_FIELDS.items() if not nullable),
    "transactions": frozenset({"topic", "partition", "producer_id", "producer_epoch", "outcome"}),
    "partitions": frozenset({"topic", "partition"}),
    "hanging": frozenset({"kind", "topic", "partition", "producer_id", "producer_epoch", "first_offset"}),
}


def struct_type(name: str) -> Any:
    """The ``pyspark.sql.types.StructType`` of dataset ``name``."""
    from pyspark.sql import types as T

    spark_types = {"string": T.StringType(), "int": T.IntegerType(), "long": T.LongType(),
                   "boolean": T.BooleanType(), "array<string>": T.ArrayType(T.StringType())}
    return T.StructType([T.StructField(col, spark_types[TYPES[name][col]], col not in NOT_NULL[name])
                         for col in COLUMNS[name]])


def read_dataset(spark: Any, output: str, name: str) -> Any:
    """Read ``<output>/<name>/`` back as a DataFrame with the written columns, types and order."""
    return spark.read.schema(struct_type(name)).parquet(f"{output}/{name}").select(*COLUMNS[name])


def dataset_markdown() -> str:
    """The schema tables of docs/scan.md (a test checks the doc matches)."""
    out = []
    for name in DATASETS:
        out.append(f"### `{name}/`\n\n| column | type | nullable |\n| --- | --- | --- |")
        for col in COLUMNS[name]:
            out.append(f"| `{col}` | {TYPES[name][col]} | {'no' if col in NOT_NULL[name] else 'yes'} |")
        out.append("")
    return "\n".join(out)
