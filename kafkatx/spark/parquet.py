"""Parquet datasets written with pyarrow, from the executors, laid out as Spark's writer would.

Why not ``DataFrame.write``: every row would cross from the Python worker into the driver
JVM (pickled, unpickled by Pyrolite into Java objects, converted to Spark's internal rows,
encoded to Parquet). On a 2-core machine that JVM work took a core of its own and competed
with the Python workers decoding the segments, so ``local[2]`` was barely faster than
``local[1]``. Here each task streams its rows into Arrow record batches and writes its own
Parquet file; only counts and compact events go back to Spark.

Layout (what ``df.write.partitionBy("topic").parquet(dir)`` produces, so
``spark.read.parquet`` and ``pyarrow.dataset`` read it back with the same schema):

    <dir>/topic=<topic>/part-<task>.parquet     topic escaped as Spark escapes path names
    <dir>/_SUCCESS

Each file is written under a hidden name (``.part-...tmp``; Spark and pyarrow skip names
starting with ``.`` or ``_``) and renamed when complete, so a reader never sees half a
file and a retried task replaces its earlier attempt's file instead of duplicating rows.

Any filesystem pyarrow knows (local, ``hdfs://``, ``s3://``, ...) works: paths go
through ``pyarrow.fs.FileSystem.from_uri``. pyarrow is imported inside functions only.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from kafkatx.spark.schema import COLUMNS, NOT_NULL, PARTITION_COLUMN, TYPES

ROWS_PER_CHUNK = 65_536  # rows buffered before they become one Arrow batch (one Parquet row group)

# Spark's ExternalCatalogUtils.escapePathName: these characters (and control characters)
# are written as %XX in partition directory names; Hive-style readers unescape them.
# Legal Kafka topic names ([a-zA-Z0-9._-]) never need it, but a directory name might.
_SPARK_ESCAPED = frozenset('"#%\'*/:=?\\\x7f{[]^')


def escape_partition_value(value: str) -> str:
    """``value`` as Spark writes it into a ``column=value`` directory name."""
    return "".join(f"%{ord(c):02X}" if c in _SPARK_ESCAPED or ord(c) < 0x20 else c for c in value)


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
        return fs.FileSystem.from_uri(path)
    return fs.LocalFileSystem(), path


def clear_dataset(path: str) -> None:
    """Empty ``path`` (create it if missing): ``mode("overwrite")`` before the tasks write."""
    filesystem, p = _fs(path)
    filesystem.create_dir(p, recursive=True)
    filesystem.delete_dir_contents(p, missing_dir_ok=True)


def mark_success(path: str) -> None:
    """Write ``_SUCCESS`` as Spark's committer does once every task's file is in place."""
    filesystem, p = _fs(path)
    filesystem.create_dir(p, recursive=True)
    with filesystem.open_output_stream(f"{p}/_SUCCESS") as f:
        f.write(b"")


class PartitionedWriter:
    """Writes one task's rows of dataset ``name`` into ``<path>/topic=<t>/part-<task>.parquet``.

    Rows are tuples in ``COLUMNS[name]`` order. Feed them grouped by topic (a change of topic
    closes the current file) to keep one file open at a time; a topic seen again opens a
    second file (``part-<task>-1.parquet``). Memory: at most ``ROWS_PER_CHUNK`` rows.
    Call :meth:`close` on success (renames the files into place) or :meth:`abort`.
    """

    def __init__(self, path: str, name: str, task: int) -> None:
        self.fs, self.root = _fs(path)
        self.name = name
        self.task = task
        self.schema = arrow_schema(name, with_partition_column=False)
        self.topic_i = COLUMNS[name].index(PARTITION_COLUMN)
        # Output column j takes tuple element keep[j]: every column but the partition column.
        self.keep = [i for i, c in enumerate(COLUMNS[name]) if c != PARTITION_COLUMN]
        self.topic: str | None = None
        self.rows: list[tuple] = []
        self.writer: Any = None
        self.tmp = ""
        self.final = ""
        self.files: dict[str, int] = {}  # topic -> files opened for it by this task
        self.done: list[tuple[str, str]] = []  # (tmp, final) of closed files, renamed by close()
        self.written = 0

    def write(self, row: tuple) -> None:
        topic = row[self.topic_i]
        if topic != self.topic:
            self._close_file()
            self.topic = topic
        self.rows.append(row)
        if len(self.rows) >= ROWS_PER_CHUNK:
            self._flush()

    def write_all(self, rows: Iterable[tuple]) -> None:
        for row in rows:
            self.write(row)

    def _flush(self) -> None:
        if not self.rows:
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        columns = list(zip(*self.rows, strict=True))
        arrays = [pa.array(columns[i], type=f.type) for i, f in zip(self.keep, self.schema, strict=True)]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        if self.writer is None:
            assert self.topic is not None
            n = self.files.get(self.topic, 0)
            self.files[self.topic] = n + 1
            directory = f"{self.root}/{PARTITION_COLUMN}={escape_partition_value(self.topic)}"
            self.fs.create_dir(directory, recursive=True)
            base = f"part-{self.task:05d}" + (f"-{n}" if n else "")
            self.final = f"{directory}/{base}.parquet"
            self.tmp = f"{directory}/.{base}-{uuid.uuid4().hex}.parquet.tmp"
            self.writer = pq.ParquetWriter(self.fs.open_output_stream(self.tmp), self.schema)
        self.writer.write_batch(batch)
        self.written += len(self.rows)
        self.rows = []

    def _close_file(self) -> None:
        self._flush()
        if self.writer is not None:
            self.writer.close()
            self.done.append((self.tmp, self.final))
            self.writer = None

    def close(self) -> int:
        """Finish the last file and move every file into place; returns the rows written."""
        self._close_file()
        for tmp, final in self.done:
            self.fs.move(tmp, final)  # a retried task's file is replaced, not duplicated
        self.done = []
        return self.written

    def abort(self) -> None:
        if self.writer is not None:
            try:
                self.writer.close()
            finally:
                self.writer = None
                self.done.append((self.tmp, ""))
        for tmp, _final in self.done:
            try:
                self.fs.delete_file(tmp)
            except OSError:
                pass
        self.done = []


def write_rows(path: str, name: str, task: int, rows: Iterable[tuple]) -> int:
    """Write ``rows`` (grouped by topic) as task ``task``'s files of dataset ``name``."""
    writer = PartitionedWriter(path, name, task)
    try:
        writer.write_all(rows)
    except BaseException:
        writer.abort()
        raise
    return writer.close()


def write_dataset(path: str, name: str, rows: Sequence[tuple]) -> int:
    """Replace dataset ``name`` at ``path`` by ``rows`` (a small one, written from the driver)."""
    clear_dataset(path)
    topic_i = COLUMNS[name].index(PARTITION_COLUMN)
    n = write_rows(path, name, 0, sorted(rows, key=lambda r: r[topic_i]))
    mark_success(path)
    return n


def read_arrow(output: str, name: str) -> Any:
    """Read ``<output>/<name>/`` back as a ``pyarrow.Table`` with the schema's columns and order
    (the pyarrow twin of ``schema.read_dataset``)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    filesystem, p = _fs(f"{output}/{name}")
    partitioning = ds.partitioning(pa.schema([pa.field(PARTITION_COLUMN, pa.string())]), flavor="hive")
    data = ds.dataset(p, filesystem=filesystem, format="parquet", partitioning=partitioning,
                      schema=arrow_schema(name))
    return data.to_table(columns=list(COLUMNS[name]))

