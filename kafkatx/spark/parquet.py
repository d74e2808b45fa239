"""Reading ``kafkatx scan``'s Parquet datasets back without Spark (pyarrow), and the filesystem they live on.

The datasets are written by Spark's own writer (``spark/job.py``) as a few files each, ``topic`` a
column; an older kafkatx wrote ``batches/`` with ``partitionBy("topic")`` (``topic=<t>/`` directories,
escaped as Spark escapes path names), which :func:`read_arrow` still reads. Spark's committer writes
``_SUCCESS`` once every task's file is in place.

Any filesystem pyarrow knows (local, ``hdfs://``, ``s3://``, ...) works: paths go
through ``pyarrow.fs.FileSystem.from_uri``. pyarrow is imported inside functions only.
"""

from __future__ import annotations

from typing import Any

from kafkatx.spark.schema import COLUMNS, NOT_NULL, PARTITION_COLUMN, TYPES


def arrow_schema(name: str, *, with_partition_column: bool = True) -> Any:
    """The ``pyarrow.Schema`` of dataset ``name`` (schema.py's types and nullability)."""
    import pyarrow as pa

    arrow_types = {"string": pa.string(), "int": pa.int32(), "long": pa.int64(), "boolean": pa.bool_(),
                   "array<string>": pa.list_(pa.string())}
    return pa.schema([pa.field(col, arrow_types[TYPES[name][col]], nullable=col not in NOT_NULL[name])
                      for col in COLUMNS[name] if with_partition_column or col != PARTITION_COLUMN])


def _fs(path: str) -> tuple[Any, str]:
    from pyarrow import fs

    if "://" in path:
        got: tuple[Any, str] = fs.FileSystem.from_uri(path)
        return got
    return fs.LocalFileSystem(), path


def read_arrow(output: str, name: str) -> Any:
    """Read ``<output>/<name>/`` back as a ``pyarrow.Table`` with the schema's columns and order
    (the pyarrow twin of ``schema.read_dataset``)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    filesystem, p = _fs(f"{output}/{name}")
    from pyarrow import fs as pafs

    listed = filesystem.get_file_info(pafs.FileSelector(p, allow_not_found=True))
    by_topic = any(info.base_name.startswith(f"{PARTITION_COLUMN}=") for info in listed)
    partitioning = ds.partitioning(pa.schema([pa.field(PARTITION_COLUMN, pa.string())]), flavor="hive") \
        if by_topic else None
    data = ds.dataset(p, filesystem=filesystem, format="parquet", partitioning=partitioning,
                      schema=arrow_schema(name))
    return data.to_table(columns=list(COLUMNS[name]))

