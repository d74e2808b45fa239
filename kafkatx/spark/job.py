"""``kafkatx scan``: the offline analysis as a PySpark job over many log dirs.

The driver holds the fleet's metadata only (:func:`plan_scan`: the log dirs, their partition folders and
segment sizes, the replica choice); the executors run the single process's code on whole partitions and
hand Spark Arrow record batches (``mapInArrow``, :mod:`kafkatx.spark.tasks`); the coordinator's rows are
DataFrames joined with the partitions' rows, never collected. Four Spark jobs, the four writes (each job
costs a round trip and a stage's set-up; :func:`_run_jobs` says what each does):

1. ``batches/`` written: every segment of every copy, decoded a bin of whole partitions per task (run
   beside the others, from a thread of its own);
2. ``partitions/`` written as the first action of the replay (each chosen partition replayed and reduced
   where it lies; kept for 3 and 4); its notes come back by accumulator;
3. ``transactions/`` written: the producer ids the partitions name joined (one row) onto the coordinator's
   fold tasks, the coordinator folded per ``__transaction_state`` partition (a row per id a named producer
   id could resolve to, or past its timeout), each producer id resolved in its group, the spans joined;
4. ``hanging/`` written: the open transactions joined with their producer ids' entries, grouped by
   transactional id with its timed-out row, classified there and the owed aborts decided there.

pyspark is imported inside functions only (``kafkatx --help`` must not pay for it).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import msgspec
from msgspec import Struct, field

from kafkatx.coordinator.rules import DEFAULT_MAX_TIMEOUT_MS
from kafkatx.coordinator.state_manager import coordinator_from_folds, txn_state_partitions_count
from kafkatx.coordinator.txn_fold import TXN_STATE_TOPIC
from kafkatx.errors import KafkaTxError, UsageError
from kafkatx.rows import HangingRow, LagRow
from kafkatx.session.offline import no_high_watermark_notice
from kafkatx.spark import rows as R
from kafkatx.spark.schema import COLUMNS, DATASETS, TYPES
from kafkatx.spark.trace import span
from kafkatx.storage.log_dir import LogDir
from kafkatx.storage.replicas import as_log_dirs, choose_replicas

T = TypeVar("T")

DEFAULT_MASTER = "local[*]"
# A packed virtualenv (--pack-env, python -m kafkatx.spark.pack) is unpacked by Spark into
# each executor's working directory under this name (spark.archives FILE#environment).
PACKED_DIR = "environment"
PACKED_PYTHON = f"./{PACKED_DIR}/bin/python"
# Defaults the user's --conf may override. The web UI is off (an on-call laptop does not
# want a port opened); our own status poller replaces Spark's console progress bar.
DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    # batches/ is written beside the other jobs (job._Beside): FAIR shares the cores between its pool and
    # theirs instead of queueing their short jobs behind it (FIFO)
    "spark.scheduler.mode": "FAIR",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
}


class ScanProgress(Protocol):
    """Receives the job's progress (the CLI draws it; this module never imports rich).

    ``completed``/``total``: tasks of the running Spark stages (``statusTracker()``);
    ``bytes_done``/``bytes_total``: segment bytes decoded so far / in all (each decode task
    adds its segments' sizes to an accumulator when it ends).
    """

    def update(self, description: str, completed: int, total: int, bytes_done: int, bytes_total: int) -> None: ...


class ScanSummary(Struct, frozen=True, kw_only=True):
    """What ``kafkatx scan`` prints after writing the datasets."""

    output: str
    log_dirs: list[str]
    segments: int
    bytes: int
    batches: int
    crc_errors: int
    decode_errors: int
    partitions: int
    partitions_with_lag: int
    transactions_commit: int
    transactions_abort: int
    transactions_open: int
    hanging: int
    skipped_partitions: int
    wall_time_ms: int


class ScanResult(Struct, frozen=True, kw_only=True):
    summary: ScanSummary
    lag: list[LagRow]
    hanging: list[HangingRow]
    notices: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- planning

class ScanPlan(Struct, frozen=True, kw_only=True):
    tasks: list[R.SegmentTask]  # every segment of every copy of every partition (batches/)
    infos: list[R.PartitionInfo]  # chosen replicas, sorted by (topic, partition)
    txn_state_partitions: list[tuple[int, str]]  # (number, path) of chosen __transaction_state replicas
    notices: list[str]


# Rows per Parquet file at most (Spark's maxRecordsPerFile): a task's rows are one file up to this many
# (~55 MB of batches/ rows: 1,000,000 one-record batches of __transaction_state take ~13.4 MB), so a fleet's
# batches/ is files of a useful size, not one per task and topic.
ROWS_PER_FILE = 4_000_000

# What a task pays per partition beyond its bytes (opening the folder and its files, the replay's set-up),
# in bytes of data: bins are balanced by bytes + this, so 10,000 small partitions spread like data.
PARTITION_WEIGHT = 64 * 1024

# The least weight (bytes + PARTITION_WEIGHT per partition, as the bins weigh units) a bin of any job
# carries: a small scan is a task per job and a file per dataset, a large one is cut as before. Measured on
# the project's 2-core machine (local[2], warm Python workers, Spark's event log, load 4-7): one more task
# costs 0.3-0.6 s of task time in the batches/ job, 0.25-0.45 s in the replay's (scheduling, a Python
# worker's round trip, a file's commit), where a task decodes ~100 MB of weight a second (batches/) and
# replays ~45 MB. A bin of 64 MiB is then ~0.7 s of batches/ work (1-2x a task's fixed cost) and ~1.5 s of
# replay (3-6x): cut finer, a task would cost more than it does; cut coarser, idle cores would wait for
# work a bin holds (at 1,000,000 ids, 264 MB of weight, a 256 MiB minimum made batches/ one task).
MIN_BIN_WEIGHT = 64 * 1024 * 1024


def plan_scan(log_dirs: Iterable[str | Path | LogDir], *, split_bytes: int | None = None) -> ScanPlan:
    """The fleet's metadata, listed on the driver: its log dirs and their partition folders (the segment
    files each holds, their sizes, the checkpoints), never a record. ``split_bytes``: segments larger than
    this are cut into byte ranges at batch boundaries (a header walk) for the ``batches/`` decode.
    """
    # Absolute paths: executors of a cluster run in their own working directories.
    dirs = as_log_dirs([d if isinstance(d, LogDir) else Path(d).absolute() for d in log_dirs])
    notices: list[str] = [n for d in dirs for n in d.skipped]
    choices = choose_replicas(dirs, notices=notices)
    chosen = {str(c.partition.path) for c in choices}
    tasks: list[R.SegmentTask] = []
    for d in dirs:
        for part in d.partitions():
            for seg in part.segments:
                size = seg.size
                base = R.SegmentTask(log_dir=str(d.path), topic=part.topic, partition=part.partition,
                                     partition_path=str(part.path), segment_path=str(seg.log_path),
                                     segment_base_offset=seg.base_offset, size=size,
                                     chosen=str(part.path) in chosen)
                if split_bytes and size > split_bytes:
                    tasks.extend(_split(base, split_bytes))
                else:
                    tasks.append(base)
    infos = []
    hw_cache: dict[str, dict[tuple[str, int], int]] = {}
    for c in choices:
        part = c.partition
        log_dir = part.log_dir
        key = str(log_dir.path) if log_dir is not None else str(part.path.parent)
        if key not in hw_cache:
            try:
                hw_cache[key] = log_dir.high_watermarks if log_dir is not None else {}
            except KafkaTxError as err:
                notices.append(f"{key}: replication-offset-checkpoint unreadable ({err}); using log end offsets")
                hw_cache[key] = {}
        recovery = None
        if log_dir is not None:
            try:
                recovery = log_dir.recovery_points.get(part.key)
            except KafkaTxError as err:
                notices.append(f"{key}: recovery-point-offset-checkpoint unreadable ({err})")
        infos.append(R.PartitionInfo(log_dir=key, topic=part.topic, partition=part.partition,
                                     partition_path=str(part.path), log_start_offset=part.log_start_offset,
                                     high_watermark=hw_cache[key].get(part.key),
                                     clean_shutdown=log_dir.clean_shutdown if log_dir is not None else True,
                                     recovery_point=recovery))
    txn = [(c.partition.partition, str(c.partition.path)) for c in choices if c.partition.topic == TXN_STATE_TOPIC]
    return ScanPlan(tasks=tasks, infos=infos, txn_state_partitions=txn, notices=notices)


def _split(task: R.SegmentTask, split_bytes: int) -> list[R.SegmentTask]:
    from kafkatx.errors import DecodeError
    from kafkatx.storage.segment import iter_batches_windowed, open_windowed

    cuts = [0]
    try:
        with open_windowed(Path(task.segment_path)) as (buf, win):  # forward only: windows on the pread path
            for h in iter_batches_windowed(buf, win):
                if h.position - cuts[-1] >= split_bytes:
                    cuts.append(h.position)
    except (DecodeError, KafkaTxError):
        pass  # the last range runs to the end and reports the bad bytes itself
    ends: list[int | None] = [*cuts[1:], None]
    return [msgspec.structs.replace(task, start=s, end=e, size=(e if e is not None else task.size) - s)
            for s, e in zip(cuts, ends, strict=True)]


def partition_units(tasks: Sequence[R.SegmentTask], split_bytes: int | None) -> list[list[R.SegmentTask]]:
    """The ``batches/`` work in units, in (topic, partition, log dir) order: each copy of a partition whole,
    unless it holds more than ``split_bytes``: then each of its segments (or byte ranges) is a unit."""
    by_copy: dict[str, list[R.SegmentTask]] = {}
    for t in sorted(tasks, key=lambda t: (t.topic, t.partition, t.log_dir, t.segment_base_offset, t.start)):
        by_copy.setdefault(t.partition_path, []).append(t)
    units: list[list[R.SegmentTask]] = []
    for segs in by_copy.values():
        if split_bytes and sum(t.size for t in segs) > split_bytes:
            units.extend([t] for t in segs)
        else:
            units.append(segs)
    return units


def bins_for(total_weight: int, n_bins: int, min_weight: int = 0) -> int:
    """``n_bins``, fewer when bins that many would weigh less than ``min_weight`` each (then as many as
    ``min_weight`` fits in ``total_weight``), at least 1."""
    n = n_bins if min_weight <= 0 else min(n_bins, total_weight // min_weight)
    return max(1, n)


def bin_count(weights: Sequence[int], n_bins: int, min_weight: int = 0) -> int:
    """How many bins :func:`contiguous_bins` makes of units of these weights: :func:`bins_for` their total,
    fewer when there are fewer units."""
    return max(1, min(len(weights), bins_for(sum(weights), n_bins, min_weight)))


def contiguous_bins(weights: Sequence[int], n_bins: int, min_weight: int = 0) -> list[int]:
    """The bin (0..n_bins-1) of each unit, in order: runs of neighbouring units of about equal summed
    weight (each unit goes to the bin its midpoint falls in). Neighbours share a bin, so a topic's
    partitions land in one or two tasks, and a file's rows cover a narrow range of topics. No bin is
    planned lighter than ``min_weight`` (:func:`bin_count`): the units of a light total share fewer bins."""
    total = sum(weights) or 1
    n = bin_count(weights, n_bins, min_weight)
    out = []
    acc = 0
    for w in weights:
        out.append(min(n - 1, int((acc + w / 2) * n / total)))
        acc += w
    return out


# ----------------------------------------------------------------------------- Spark session

def _java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").exists():
        return True
    return shutil.which("java") is not None


def _session_running() -> bool:
    try:
        from pyspark import SparkContext
    except ImportError:
        return False
    return SparkContext._active_spark_context is not None


def is_local_master(master: str) -> bool:
    """``local``, ``local[N]``, ``local[*]``, ``local[N,F]``: executors inside the driver's JVM."""
    return master == "local" or master.startswith("local[")


def worker_python(master: str, conf: dict[str, str], pack_env: str | None = None) -> str | None:
    """The interpreter the Python workers must run, or None to leave Spark's own choice.

    PySpark takes the workers' interpreter from the driver's ``PYSPARK_PYTHON`` environment
    variable when the context is created from Python (``SparkContext.pythonExec``, default
    ``python3`` looked up on each executor's PATH): a ``spark.pyspark.python`` setting never
    reaches it unless spark-submit launched the driver. So, in order:
    ``--conf spark.pyspark.python=X`` (as spark-submit honours it); ``--pack-env`` (the
    archive's interpreter, ``./environment/bin/python`` in each executor's work dir); the
    user's ``PYSPARK_PYTHON``; for local masters the interpreter running kafkatx (the one
    that has kafkatx's dependencies, whatever the PATH holds); else Spark's default.
    """
    if conf.get("spark.pyspark.python"):
        return conf["spark.pyspark.python"]
    if pack_env:
        return PACKED_PYTHON
    if os.environ.get("PYSPARK_PYTHON"):
        return None
    if is_local_master(master):
        return sys.executable
    return None


def spark_environ(master: str, conf: dict[str, str], pack_env: str | None = None) -> dict[str, str]:
    """Environment variables to set before the JVM and the SparkContext start (see :func:`worker_python`).

    Local masters also get ``PYSPARK_DRIVER_PYTHON`` (pyspark's ``bin/find-spark-home``, run
    when the JVM is launched, would otherwise run ``python3`` from the PATH) and, on
    ``PYTHONPATH``, the directory this kafkatx was imported from: local workers inherit the
    JVM's environment, so they import the very code (and C extension) the driver runs.
    """
    env: dict[str, str] = {}
    python = worker_python(master, conf, pack_env)
    if python is not None:
        env["PYSPARK_PYTHON"] = python
    if is_local_master(master):
        if not os.environ.get("PYSPARK_DRIVER_PYTHON"):
            env["PYSPARK_DRIVER_PYTHON"] = sys.executable
        import kafkatx

        root = str(Path(kafkatx.__file__).resolve().parent.parent)
        current = os.environ.get("PYTHONPATH", "")
        if root not in current.split(os.pathsep):
            env["PYTHONPATH"] = os.pathsep.join(p for p in (current, root) if p)
    return env


def _launched_by_spark_submit() -> bool:
    """spark-submit started this driver (its JVM is already running: PythonRunner's gateway)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def resolve_master(master: str | None) -> str:
    """``None``: spark-submit's ``--master`` when it launched us, else :data:`DEFAULT_MASTER`."""
    if master:
        return master
    if _launched_by_spark_submit():
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()  # connects to spark-submit's JVM: SparkConf() reads its settings
        return SparkConf().get("spark.master", DEFAULT_MASTER) or DEFAULT_MASTER
    return DEFAULT_MASTER


# Set when start_spark launched the driver JVM itself, with spark_environ()'s PYTHONPATH:
# local Python workers (children of that JVM) then import the driver's own kafkatx.
_LOCAL_WORKERS_SEE_KAFKATX = False


def _launch_gateway(conf: Any, log_path: Path | None) -> None:
    """Start the driver JVM (unless one runs: an earlier context's, or spark-submit's).

    With ``log_path``, its stdout and stderr go to that file: Spark's JVM writes its
    start-up warnings, log4j lines and executor stacks (local executors live in the
    driver's JVM) to the streams it inherits, while kafkatx's stdout is data and its stderr
    one line per problem (the file is named in errors). ``popen_kwargs`` is pyspark's
    documented hook for capturing them.
    """
    global _LOCAL_WORKERS_SEE_KAFKATX
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or _launched_by_spark_submit():
        return
    if log_path is None:
        gateway = launch_gateway(conf)  # type: ignore[no-untyped-call]
    else:
        with open(log_path, "ab") as log:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})  # type: ignore[no-untyped-call]
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)
    _LOCAL_WORKERS_SEE_KAFKATX = True


def start_spark(master: str | None = DEFAULT_MASTER, conf: dict[str, str] | None = None,
                app_name: str = "kafkatx-scan", *, pack_env: str | None = None,
                jvm_log: Path | None = None) -> Any:
    """A SparkSession for ``master`` with kafkatx's defaults; one-line errors when it cannot start.

    ``master`` None: spark-submit's master when spark-submit launched this driver, else
    ``local[*]``. ``pack_env``: a packed virtualenv (``python -m kafkatx.spark.pack``) the
    executors unpack as ``./environment`` and run (``spark.archives``). ``jvm_log``: when
    this call launches the JVM, its stdout/stderr go to this file instead of the terminal.
    The environment variables of :func:`spark_environ` are set for the JVM and the context's
    creation and restored afterwards (the context keeps what it read).
    """
    try:
        from pyspark import SparkConf
        from pyspark.sql import SparkSession
    except ImportError as err:
        raise KafkaTxError("scan needs pyspark, which is not installed: pip install 'kafkatx[spark]'") from err
    if not _java_available() and not _launched_by_spark_submit():
        raise KafkaTxError("scan needs Java for Spark: no java on PATH and JAVA_HOME is not set")
    resolved = resolve_master(master)
    settings = dict(DEFAULT_CONF)
    settings.update(conf or {})
    if pack_env and is_local_master(resolved):
        raise UsageError(f"--pack-env is for cluster masters, not {resolved}: local workers run this "
                         "interpreter already (Spark unpacks archives elsewhere for local masters)")
    if pack_env:
        archive = _spark_path(pack_env)
        if "://" not in archive and not Path(archive).is_file():
            raise KafkaTxError(f"--pack-env {pack_env}: no such file (build one: python -m kafkatx.spark.pack FILE)")
        archives = [a for a in settings.get("spark.archives", "").split(",") if a]
        settings["spark.archives"] = ",".join([*archives, f"{archive}#{PACKED_DIR}"])
    python = worker_python(resolved, settings, pack_env)
    if python is not None:
        settings.setdefault("spark.pyspark.python", python)  # what spark-submit's cluster mode reads
    env = spark_environ(resolved, settings, pack_env)
    spark_conf = SparkConf().setAppName(app_name)
    if master or not _launched_by_spark_submit():
        spark_conf.setMaster(resolved)
    for k, v in settings.items():
        spark_conf.set(k, v)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        _launch_gateway(spark_conf, jvm_log)
        spark = SparkSession.builder.config(conf=spark_conf).getOrCreate()
    except Exception as err:  # noqa: BLE001 - py4j/pyspark raise plain exceptions: make it one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise KafkaTxError(f"cannot start Spark (master {resolved}): {first}{_log_hint(jvm_log)}") from err
    finally:
        for name, before in saved.items():
            if before is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = before
    spark.sparkContext.setLogLevel("ERROR")
    return spark


_MISSING_MODULE = re.compile(r"No module named '([^']+)'")
_CANNOT_RUN = re.compile(r'Cannot run program "([^"]+)"')
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*): (.*)$")


def _worker_exception(text: str) -> str | None:
    """The Python worker's exception line (``module.Class: message``) in a failed job's text:
    the first unindented line after the last ``Traceback (most recent call last)``."""
    lines = text.splitlines()
    starts = [i for i, ln in enumerate(lines) if "Traceback (most recent call last)" in ln]
    if not starts:
        return None
    for ln in lines[starts[-1] + 1:]:
        if ln and not ln[0].isspace() and _EXCEPTION_LINE.match(ln):
            return ln.strip()
    return None


def _log_hint(jvm_log: Path | None) -> str:
    """`` (Spark's log: FILE)`` when the JVM wrote there (not when spark-submit's JVM was used)."""
    try:
        return f" (Spark's log: {jvm_log})" if jvm_log is not None and jvm_log.stat().st_size > 0 else ""
    except OSError:
        return ""


def job_error(err: BaseException, python: str, jvm_log: Path | None = None) -> KafkaTxError:
    """One line for a failed Spark job (``Py4JJavaError`` / ``PythonException``): the Python
    worker's own error (a missing module named as such) instead of the Java and Python stacks."""
    text = str(err)
    where = _log_hint(jvm_log)
    m = _MISSING_MODULE.search(text)
    if m:
        return KafkaTxError(
            f"a Spark executor's Python ({python}) has no module '{m.group(1)}': install kafkatx's "
            f"dependencies there, or ship them with --pack-env (docs/scan.md){where}")
    m = _CANNOT_RUN.search(text)
    if m:
        return KafkaTxError(f"a Spark executor cannot run the Python interpreter {m.group(1)!r} "
                            f"(PYSPARK_PYTHON / spark.pyspark.python){where}")
    line = _worker_exception(text)
    if line is not None:
        m = _EXCEPTION_LINE.match(line)
        if m and m.group(1).startswith("kafkatx."):
            return KafkaTxError(f"{m.group(2)} (on a Spark executor){where}")  # already names file/byte
        return KafkaTxError(f"Spark job failed in a Python worker: {line}{where}")
    lines = [ln.strip() for ln in text.splitlines()]
    aborted = next((ln for ln in lines if "Job aborted due to stage failure" in ln), None)
    first = aborted or next((ln for ln in lines if ln), type(err).__name__)
    return KafkaTxError(f"Spark job failed: {first[:300]}{where}")


SHIP_PACKAGE_CONF = "spark.kafkatx.shipPackage"  # auto (default) | true | false


def needs_package_zip(sc: Any, pack_env: str | None) -> bool:
    """Whether the executors need kafkatx's code shipped (:func:`ship_package`).

    ``--conf spark.kafkatx.shipPackage=true|false`` decides; ``auto`` (default): not with
    ``--pack-env`` (the archive holds kafkatx, its C extension included), nor for a local
    master whose JVM start_spark launched (the workers run this interpreter with this
    kafkatx on PYTHONPATH); otherwise yes, as executors may lack kafkatx. The zip holds the
    ``.py`` files only and comes first on the workers' ``sys.path``, so those workers decode
    with the pure-Python decoders (same results, slower): executors that have kafkatx
    installed (with its C extension) get the fast path with ``shipPackage=false``.
    """
    choice = (sc.getConf().get(SHIP_PACKAGE_CONF, "auto") or "auto").strip().lower()
    if choice in ("true", "false"):
        return choice == "true"
    if choice != "auto":
        raise UsageError(f"--conf {SHIP_PACKAGE_CONF}={choice}: expected auto, true or false")
    if pack_env:
        return False
    return not (is_local_master(sc.master) and _LOCAL_WORKERS_SEE_KAFKATX)


def ship_package(sc: Any, workdir: str) -> None:
    """Send this kafkatx package (its ``.py`` files) to the executors."""
    import kafkatx

    if getattr(sc, "_kafkatx_shipped", False):
        return  # Spark refuses to add a file of the same name with other contents
    root = Path(kafkatx.__file__).parent
    path = Path(workdir) / "kafkatx.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(root.rglob("*.py")):
            info = zipfile.ZipInfo(str(Path("kafkatx") / f.relative_to(root)), date_time=(1980, 1, 1, 0, 0, 0))
            zf.writestr(info, f.read_bytes(), zipfile.ZIP_DEFLATED)
    sc.addPyFile(str(path))
    sc._kafkatx_shipped = True


class _StatusPoller(threading.Thread):
    """Polls ``SparkContext.statusTracker()`` (tasks done / total of the running stages) and the
    decoded-bytes accumulator from a driver thread and hands both to a :class:`ScanProgress`."""

    def __init__(self, sc: Any, progress: ScanProgress, bytes_total: int, interval: float = 0.25) -> None:
        super().__init__(name="kafkatx-scan-progress", daemon=True)
        self.tracker = sc.statusTracker()
        self.progress = progress
        self.interval = interval
        self.phase = "starting"
        self.bytes_total = bytes_total
        self.decoded = sc.accumulator(0)
        self._stop_event = threading.Event()

    def poll(self) -> None:
        done = total = 0
        for sid in self.tracker.getActiveStageIds():
            info = self.tracker.getStageInfo(sid)
            if info is not None:
                total += info.numTasks
                done += info.numCompletedTasks
        # min(): a decode task re-run after a lost cached block counts its bytes twice
        self.progress.update(self.phase, done, total, min(self.decoded.value, self.bytes_total), self.bytes_total)

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - progress must never break the job (e.g. at shutdown)
                pass

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=2)


# ----------------------------------------------------------------------------- the job

def _spark_path(output: str | Path) -> str:
    text = str(output)
    return text if "://" in text else str(Path(text).resolve())


def run_scan(log_dirs: Sequence[str | Path | LogDir], output: str | Path, *, now: int | None = None,
             max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS, partitions_count: int | None = None,
             master: str | None = DEFAULT_MASTER, conf: dict[str, str] | None = None, spark: Any = None,
             split_bytes: int | None = None, progress: ScanProgress | None = None,
             pack_env: str | Path | None = None, jvm_log: Path | None = None) -> ScanResult:
    """Run the scan job and write ``batches/``, ``transactions/``, ``partitions/``, ``hanging/`` under ``output``.

    ``spark``: an existing SparkSession to use (tests share one); otherwise one is started
    for ``master`` with ``conf`` (:func:`start_spark`: ``pack_env``, ``jvm_log``) and
    stopped at the end. A job that fails on the executors (a worker's Python lacking a
    module, ...) raises one-line :class:`KafkaTxError` (:func:`job_error`).
    """
    if max_timeout_ms < 0:
        raise UsageError(f"--max-transaction-timeout must not be negative, got {max_timeout_ms}")
    t0 = time.monotonic()
    try:
        import pyarrow  # noqa: F401 - the executors write the Parquet files with it (spark/parquet.py)
    except ImportError as err:
        raise KafkaTxError("scan needs pyarrow, which is not installed: pip install 'kafkatx[spark]'") from err
    now = int(time.time() * 1000) if now is None else now
    with span("driver-plan"):
        plan = plan_scan(log_dirs, split_bytes=split_bytes)
    out = _spark_path(output)
    pack = str(pack_env) if pack_env is not None else None
    own = spark is None and not _session_running()
    poller = None
    interrupted = False
    try:
        if spark is None:
            # getOrCreate: reuses a session the caller already runs
            spark = start_spark(master, conf, pack_env=pack, jvm_log=jvm_log)
        with tempfile.TemporaryDirectory(prefix="kafkatx-scan-") as workdir:
            sc = spark.sparkContext
            if needs_package_zip(sc, pack):
                ship_package(sc, workdir)
            if progress is not None:
                poller = _StatusPoller(sc, progress, sum(t.size for t in plan.tasks))
                poller.start()
            try:
                with _sigint_seen() as sigint:
                    result = _run(spark, plan, out, now=now, max_timeout_ms=max_timeout_ms,
                                  partitions_count=partitions_count, poller=poller, split_bytes=split_bytes)
            except Exception as err:
                if sigint:
                    # Ctrl-C landed inside a py4j call: pyspark's own handler then fails on the broken
                    # gateway ("Gateway must be connected to send cancel cmd") and that error, not the
                    # KeyboardInterrupt, reaches here. The interrupt is the news.
                    raise KeyboardInterrupt from err
                if isinstance(err, KafkaTxError) or not _from_spark(err):
                    raise
                raise job_error(err, sc.pythonExec, jvm_log) from err
            if poller is not None:
                poller.poll()  # the final state (all bytes decoded) before the bar goes
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        if poller is not None:
            poller.stop()
        if own and interrupted:
            # Ctrl-C broke the py4j conversation spark.stop() needs: end the JVM and its workers instead.
            _close_accumulator_server(spark)
            stop_started_processes()
        elif own and spark is not None:
            spark.stop()
    wall = int((time.monotonic() - t0) * 1000)
    summary = msgspec.structs.replace(result.summary, wall_time_ms=wall,
                                  log_dirs=[str(getattr(d, "path", d)) for d in log_dirs])
    return msgspec.structs.replace(result, summary=summary)


def _close_accumulator_server(spark: Any, wait_s: float = 3.0) -> None:
    """Shut pyspark's accumulator server (the SparkContext's ``_accumulatorServer``: the driver's socket the JVM
    sends the tasks' accumulator updates to) before the JVM is killed: its handler would otherwise read the
    end of the JVM's connection and print a stack to stderr (the JVM opens that connection after the first
    task with updates ends). Its ``shutdown`` returns within its 1 s poll; waited for ``wait_s`` at most."""
    server = getattr(getattr(spark, "sparkContext", None), "_accumulatorServer", None)
    if server is None:
        return

    def shut() -> None:
        with contextlib.suppress(Exception):  # a server already closed, a socket gone: nothing left to say
            server.shutdown()

    closing = threading.Thread(target=shut, name="kafkatx-accumulator-close", daemon=True)
    closing.start()
    closing.join(wait_s)


@contextlib.contextmanager
def _sigint_seen() -> Iterator[list[int]]:
    """While the job runs, note every SIGINT before the handler in place (Python's: KeyboardInterrupt)
    acts on it (pyspark's, which cancels the jobs first; Python's, KeyboardInterrupt): the list is
    truthy once one arrived. Only the main thread can set handlers; elsewhere nothing is noted.

    A KeyboardInterrupt the handler raised where Python cannot propagate it (inside a finalizer: py4j's
    weakref callbacks run whenever a JavaObject is collected) is swallowed and printed as "Exception
    ignored": it is not printed here, and the body's end raises it instead, so a Ctrl-C noted always ends
    the job as interrupted."""
    seen: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return
    previous = signal.getsignal(signal.SIGINT)
    previous_hook = sys.unraisablehook

    def note(signum: int, frame: Any) -> Any:
        seen.append(signum)
        if callable(previous):
            return previous(signum, frame)
        if previous == signal.SIG_DFL:
            raise KeyboardInterrupt
        return None  # SIG_IGN

    def unraisable(args: Any) -> None:
        if seen and args.exc_type is KeyboardInterrupt:
            return  # the interrupt noted: raised when the body ends
        previous_hook(args)

    signal.signal(signal.SIGINT, note)
    sys.unraisablehook = unraisable
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)
        sys.unraisablehook = previous_hook
    if seen and previous != signal.SIG_IGN:
        raise KeyboardInterrupt  # the body ended although a Ctrl-C came: one swallowed in a finalizer


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def started_processes(pid: int | None = None) -> list[int]:
    """Every live descendant of ``pid`` (default: this process): the Spark JVM pyspark launched, the Python
    workers and daemons the JVM started. Linux (/proc); [] elsewhere."""
    if not os.path.isdir("/proc"):
        return []
    kids = _children()
    out: list[int] = []
    todo = [os.getpid() if pid is None else pid]
    while todo:
        for child in kids.get(todo.pop(), ()):
            out.append(child)
            todo.append(child)
    return [p for p in out if _alive(p)]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def stop_started_processes(grace_s: float = 10.0) -> int:
    """End every process this one started (after Ctrl-C): SIGTERM, then SIGKILL what is left after
    ``grace_s``; children are reaped. Returns how many there were. The JVM ignores SIGINT (pyspark starts
    it so) and would otherwise only notice its stdin closing."""
    import signal

    pids = started_processes()
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        _reap()
        time.sleep(0.05)
    for pid in pids:
        if _alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    _reap()
    return len(pids)


def _reap() -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def remove_incomplete(output: str | Path) -> list[str]:
    """The datasets under ``output`` a stopped scan left without ``_SUCCESS``, removed (their files are a
    partial, mixed state: ``clear_dataset`` emptied them first). Returns the names removed."""
    from kafkatx.spark.parquet import _fs

    filesystem, root = _fs(_spark_path(output))
    from pyarrow import fs as pafs

    removed = []
    for name in DATASETS:
        path = f"{root}/{name}"
        if filesystem.get_file_info(path).type != pafs.FileType.Directory:
            continue
        if filesystem.get_file_info(f"{path}/_SUCCESS").type == pafs.FileType.File:
            continue
        filesystem.delete_dir(path)
        removed.append(name)
    return removed


def _from_spark(err: BaseException) -> bool:
    """A py4j / pyspark exception (a failed job), as opposed to a bug in the driver code."""
    return any(c.__module__.split(".")[0] in ("py4j", "pyspark") for c in type(err).__mro__)


def _phase(sc: Any, poller: _StatusPoller | None, text: str) -> None:
    sc.setJobDescription(text)
    if poller is not None:
        poller.phase = text


def _partition_notices(per_partition: list[tuple[bool, list[str]]], coordinator_level: list[str]) -> list[str]:
    """The fold tasks' notices as find-hanging says them for all partitions at once: each partition's
    notices once each, in partition order, then the coordinator-level ones (``hanging.owed_abort_notices``
    over the pairs every partition holds open, said once by the driver), when any partition was replayed.

    ``offline.hanging_rows`` runs once per partition on the executors, with that partition's state only:
    "transaction X is Ongoing past its timeout but no partition in these log dirs holds it open" is
    true only of all partitions together, so the tasks hand back what they hold open instead of saying it.
    """
    out: list[str] = []
    seen: set[str] = set()
    for _ok, notes in per_partition:
        for note in notes:
            if note not in seen:
                seen.add(note)
                out.append(note)
    if any(ok for ok, _n in per_partition):
        out.extend(n for n in coordinator_level if n not in seen)
    return out


def _work_frame(spark: Any, blobs: list[bytes]) -> Any:
    """A DataFrame of one row per blob, each in a Spark partition of its own (one task each)."""
    sc = spark.sparkContext
    rdd = sc.parallelize(list(enumerate(blobs)), max(1, len(blobs)))
    return spark.createDataFrame(rdd, "bin int, work binary")


def _bins(items: Sequence[Any], weights: Sequence[int], n_bins: int) -> list[list[Any]]:
    """``items`` in at most ``n_bins`` bins of neighbours, none planned lighter than :data:`MIN_BIN_WEIGHT`."""
    out: list[list[Any]] = [[] for _ in range(max(1, n_bins))]
    for item, b in zip(items, contiguous_bins(weights, n_bins, MIN_BIN_WEIGHT), strict=True):
        out[b].append(item)
    return [b for b in out if b]


def _write(sc: Any, poller: _StatusPoller | None, df: Any, path: str, what: str) -> None:
    """``df`` written by Spark's own writer (its committer writes ``_SUCCESS``): a file per task, cut at
    :data:`ROWS_PER_FILE` rows."""
    _phase(sc, poller, f"write {what}")
    df.write.mode("overwrite").option("maxRecordsPerFile", ROWS_PER_FILE).parquet(path)


def _misplaced(rows: list[Any], home_holders: list[Any], numbers: Sequence[int], n: int,
               ) -> tuple[dict[str, int], dict[int, list[str]]]:
    """For ids found in a ``__transaction_state`` partition they do not hash to (a few; each has its
    wrong-coordinator-partition finding): the partition each is taken from, and the
    duplicate-transactional-id notes by partition, as ``coordinator_from_folds`` decides them (run here
    over those ids only)."""
    from kafkatx.coordinator.state_manager import TxnPartitionFold
    from kafkatx.coordinator.txn_fold import TxnIds

    if not rows:
        return {}, {}
    held: dict[int, dict[str, Any]] = {}
    misplaced: dict[int, dict[str, None]] = {}
    for r in sorted([*rows, *home_holders], key=lambda r: (r["fold"], r["tid"])):
        held.setdefault(r["fold"], {})[r["tid"]] = (0, None)
    for r in rows:
        misplaced.setdefault(r["fold"], {})[r["tid"]] = None
    folds = [TxnPartitionFold(partition=f, name=f"{TXN_STATE_TOPIC}-{f}", path="",
                              ids=TxnIds(f, held[f], {}, {}, misplaced.get(f, {})))
             for f in sorted(held)]
    coord = coordinator_from_folds(folds, partitions_count=n, partitions_found=tuple(numbers))
    index = coord.transactions._index  # type: ignore[attr-defined]
    chosen = {}
    for tid in {r["tid"] for r in rows}:
        ids = index.get(tid)
        if ids is not None:
            chosen[tid] = ids.partition
    notes: dict[int, list[str]] = {}
    for f in coord.findings:
        number = int((f.partition or "-0").rsplit("-", 1)[1])
        notes.setdefault(number, []).append(f"{f.severity}: {f.message}")
    return chosen, notes


@contextlib.contextmanager
def _sql_conf(spark: Any, settings: dict[str, str]) -> Iterator[None]:
    """``settings`` on the session for the scan's queries, the session's own values restored after."""
    saved = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, before in saved.items():
            if before is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, before)


def _chosen_sizes(plan: ScanPlan) -> Counter[str]:
    """The bytes of each chosen partition copy (the replay's and the coordinator's fold's weights)."""
    sizes: Counter[str] = Counter()
    for t in plan.tasks:
        if t.chosen:
            sizes[t.partition_path] += t.size
    return sizes


def _replay_weights(plan: ScanPlan, sizes: Counter[str] | None = None) -> list[int]:
    """The replay's units' weights: each chosen partition, its bytes + :data:`PARTITION_WEIGHT`."""
    sizes = _chosen_sizes(plan) if sizes is None else sizes
    return [sizes[i.partition_path] + PARTITION_WEIGHT for i in plan.infos]


class _Decoded(Struct, frozen=True, kw_only=True):
    """What job 1 (``batches/``) tells the summary."""

    segments: int
    bytes: int
    batches: int
    crc_errors: int
    decode_errors: int


class _Replayed(Struct, frozen=True, kw_only=True):
    """What jobs 2 to 4 (the replay's, the coordinator's, ``hanging/``'s) tell the summary."""

    counts: dict[str, int]  # their tally: partitions, with_lag, COMMIT, ABORT, OPEN, hanging
    notices: list[str]
    skipped: list[str]


def _run(spark: Any, plan: ScanPlan, out: str, *, now: int, max_timeout_ms: int, partitions_count: int | None,
         poller: _StatusPoller | None, split_bytes: int | None = None) -> ScanResult:
    """:func:`_run_jobs` with adaptive execution off (it would make each shuffle's map stage a Spark job of its
    own: a round trip each), no broadcast joins but the hinted one (a broadcast exchange is a job of its own
    too: a join with a dataset persisted earlier in the scan, known small, would be one), no runtime bloom
    filters (each one an aggregation run as a job before its join) and as many shuffle partitions as replay
    bins (one for a small scan: no bin lighter than :data:`MIN_BIN_WEIGHT`)."""
    par = max(1, spark.sparkContext.defaultParallelism)
    replay_bins = bin_count(_replay_weights(plan), 2 * par, MIN_BIN_WEIGHT)
    with _sql_conf(spark, {"spark.sql.adaptive.enabled": "false", "spark.sql.autoBroadcastJoinThreshold": "-1",
                           "spark.sql.optimizer.runtime.bloomFilter.enabled": "false",
                           "spark.sql.shuffle.partitions": str(replay_bins)}):
        return _run_jobs(spark, plan, out, now=now, max_timeout_ms=max_timeout_ms, partitions_count=partitions_count,
                         poller=poller, split_bytes=split_bytes)


def _run_jobs(spark: Any, plan: ScanPlan, out: str, *, now: int, max_timeout_ms: int, partitions_count: int | None,
              poller: _StatusPoller | None, split_bytes: int | None = None) -> ScanResult:
    """The scan in four Spark jobs, its four writes (a job costs a round trip of the driver and a stage's
    set-up, seconds on a loaded machine):

    1. ``batches/`` written (a decode task per bin of whole partitions);
    2. ``partitions/`` written as the first action of the replay, which is kept (persisted) for 3 and 4;
       its tasks tell the driver (accumulator) their notes;
    3. ``transactions/`` written: the producer ids of the spans and open transactions aggregated to one
       row (their sorted set) and joined onto the coordinator's fold tasks' work rows (a cartesian product
       with one row: no broadcast exchange, which Spark would run as a job of its own); the
       ``__transaction_state`` partitions folded (bins of them), a row per id a named producer id could
       resolve to (and per id past its timeout) made where they were folded, exploded by its named
       producer ids, persisted; grouped by producer id and each group resolved (``applyInArrow``:
       ``CoordinatorState.transactional_id_for``'s rule), persisted; the spans left-joined with it;
    4. ``hanging/`` written: the open transactions left-joined with what their producer ids resolved to,
       cogrouped by transactional id with the timed-out ids' rows, each group classified and its owed
       abort decided where it lies; their notes come back by accumulator.

    (Rare: when ids sit in a ``__transaction_state`` partition they do not hash to, their home partitions
    are folded again for those ids, the producer ids resolved again with ``coordinator_from_folds``' choice
    joined in, and ``transactions/`` rewritten: two jobs more.)

    Job 1 runs from a thread of its own beside 2 to 4 (:class:`_Beside`): neither needs the other's output."""
    from kafkatx.spark import tasks as X

    sc = spark.sparkContext
    par = max(1, sc.defaultParallelism)
    paths = {name: f"{out}/{name}" for name in DATASETS}
    notices = list(plan.notices)
    numbers = tuple(num for num, _p in plan.txn_state_partitions)
    n = txn_state_partitions_count(numbers, partitions_count, notices)
    enc = msgspec.msgpack.encode

    # 1. batches/: every copy of every partition, whole partitions per task (a partition holding more
    # than a task's share of the bytes, or --split-mb, by segment), decoded where it lies.
    total = sum(t.size for t in plan.tasks)
    n_bins = 2 * par
    # batches/ in twice as many bins as the other jobs: it runs beside them, and a core it holds frees for
    # their tasks (FAIR pools) only when one of its tasks ends; fewer when they would weigh less than
    # MIN_BIN_WEIGHT each (a task's share is then the total over that many)
    copies = len({t.partition_path for t in plan.tasks})
    shares = bins_for(total + copies * PARTITION_WEIGHT, 2 * n_bins, MIN_BIN_WEIGHT)
    units = partition_units(plan.tasks, split_bytes or max(1, total // shares))
    work = [enc([t for u in b for t in u]) for b in _bins(units, [sum(t.size for t in u) + PARTITION_WEIGHT
                                                                 for u in units], 2 * n_bins)]
    b_count, b_crc, b_err = sc.accumulator(0), sc.accumulator(0), sc.accumulator(0)
    decoded = poller.decoded if poller is not None else None

    def counted(batches: int, crc: int, errors: int, size: int) -> None:
        b_count.add(batches)
        b_crc.add(crc)
        b_err.add(errors)
        if decoded is not None:
            decoded.add(size)

    batch_ddl = ", ".join(f"`{c}` {f}" for c, f in zip(COLUMNS["batches"], _ddl_types("batches"), strict=True))
    batches = _work_frame(spark, work).mapInArrow(lambda it: X.batch_rows(it, counted), batch_ddl)

    def write_batches() -> _Decoded:
        _write(sc, None, batches, paths["batches"], "batches/")
        return _Decoded(segments=len({t.segment_path for t in plan.tasks}), bytes=total, batches=b_count.value,
                        crc_errors=b_crc.value, decode_errors=b_err.value)

    # batches/ depends on nothing the other jobs make, nor they on it: written from a thread of its own while
    # this one runs the replay's, the coordinator's and hanging/'s jobs (see _Beside); the summary is made
    # of both sides' results once both are done
    with _Beside(sc, write_batches, "driver-batches", tasks=len(work)) as beside:
        rest = _the_rest(spark, plan, out, n, numbers, notices, now=now, max_timeout_ms=max_timeout_ms,
                         poller=poller, n_bins=n_bins)
    decoded, counts = beside.result(), rest.counts
    summary = ScanSummary(
        output=out, log_dirs=[], segments=decoded.segments, bytes=decoded.bytes, batches=decoded.batches,
        crc_errors=decoded.crc_errors, decode_errors=decoded.decode_errors, partitions=counts["partitions"],
        partitions_with_lag=counts["with_lag"], transactions_commit=counts["COMMIT"],
        transactions_abort=counts["ABORT"], transactions_open=counts["OPEN"], hanging=counts["hanging"],
        skipped_partitions=len(rest.skipped), wall_time_ms=0)
    return ScanResult(summary=summary, lag=[], hanging=[], notices=rest.notices, skipped=rest.skipped)


class _Beside(Generic[T]):
    """A Spark job run from a thread of its own (pyspark's ``InheritableThread``: pinned thread mode gives it
    a JVM thread and its own job properties) while the ``with`` body runs others: the driver's work between
    the body's jobs, and the tasks of each, then overlap with this job's tasks. Its jobs go to a scheduler
    pool of their own (``spark.scheduler.pool``; with ``spark.scheduler.mode=FAIR``, kafkatx's default,
    Spark shares the cores between the pools, so the body's short jobs are not queued behind it). The ``with``
    ends when both are done; the first error (the body's first) is raised; a failing body cancels this job.
    The action's return value is :meth:`result` after the ``with`` (its side's result, as the body's is its own).
    """

    POOL = "kafkatx-beside"

    def __init__(self, sc: Any, action: Callable[[], T], what: str, **extra: object) -> None:
        self.sc = sc
        self.action = action
        self.what = what
        self.extra = extra
        self.tag = f"kafkatx-beside-{id(self)}"
        self.error: BaseException | None = None
        self.thread: Any = None
        self._result: list[T] = []  # the action's return value, once it returned

    def _run(self) -> None:
        self.sc.setLocalProperty("spark.scheduler.pool", self.POOL)
        self.sc.addJobTag(self.tag)  # a tag, not a job group: the caller's group (inherited) still holds it
        try:
            with span(self.what, **self.extra):
                self._result.append(self.action())
        except BaseException as err:  # noqa: BLE001 - handed to the main thread, raised there
            self.error = err

    def result(self) -> T:
        """The action's return value; only after the ``with`` ended without an error (its action returned)."""
        if not self._result:
            raise RuntimeError(f"{self.what}: its action has not returned")
        return self._result[0]

    def __enter__(self) -> _Beside[T]:
        from pyspark import InheritableThread

        self.thread = InheritableThread(target=self._run, name="kafkatx-scan-beside", daemon=True)
        self.thread.start()
        return self

    def __exit__(self, kind: Any, err: BaseException | None, tb: Any) -> None:
        if isinstance(err, KeyboardInterrupt):
            return  # pyspark's SIGINT handler cancelled every job; run_scan ends the JVM (the thread is a daemon)
        if err is not None:
            with contextlib.suppress(Exception):
                self.sc.cancelJobsWithTag(self.tag)
            self.thread.join(timeout=30)
            return  # the body's error is the news
        self.thread.join()
        if self.error is not None:
            raise self.error


def _the_rest(spark: Any, plan: ScanPlan, out: str, n: int, numbers: tuple[int, ...], notices: list[str], *,
              now: int, max_timeout_ms: int, poller: _StatusPoller | None, n_bins: int) -> _Replayed:
    """The replay's, the coordinator's and ``hanging/``'s jobs (2 to 4 of :func:`_run_jobs`): their counts,
    notices and skipped partitions (the summary's part beside job 1's :class:`_Decoded`)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from kafkatx.spark import tasks as X

    sc = spark.sparkContext
    paths = {name: f"{out}/{name}" for name in DATASETS}
    enc = msgspec.msgpack.encode

    # 2. the partitions: each chosen one replayed whole where it lies (the single process's replay),
    # reduced there to its lag row, spans, open transactions and notes; kept for 3 and 4. Its first
    # action writes partitions/.
    sizes = _chosen_sizes(plan)
    infos = plan.infos
    work = [enc(b) for b in _bins(infos, _replay_weights(plan, sizes), n_bins)]
    tally = {what: sc.accumulator(0) for what in ("partitions", "with_lag", "COMMIT", "ABORT", "OPEN", "hanging")}
    told = sc.accumulator([], _ListParam())

    def count(what: str, k: int = 1) -> None:
        tally[what].add(k)

    def said(notes: list[X.Said]) -> None:
        told.add([("said", notes)])

    replay = (_work_frame(spark, work).mapInArrow(lambda it: X.replay_partitions(it, now=now, count=count, said=said),
                                                  X.ddl(X.REPLAY))
              .persist(StorageLevel.MEMORY_AND_DISK))

    # 3. the coordinator: the __transaction_state partitions folded (in bins, as the replay's), each fold
    # task handed the producer ids the partitions name (one row, their sorted set, a cartesian product with
    # the work rows: the named ids are few, the ids up to millions), so it makes a row only for an id a named
    # producer id could resolve to and for one past its timeout, with its named producer ids; exploded by
    # them and grouped by producer id, each group resolved where it lies
    # (CoordinatorState.transactional_id_for's rule). Kept (persisted) for 3 and 4; the fold's notes and
    # its misplaced ids (all of them) come back by accumulator.
    by_path = {i.partition_path: i for i in infos}
    coord_told = sc.accumulator([], _ListParam())

    def coord_said(notes: list[X.CoordinatorSaid], misplaced: list[tuple[str, int]]) -> None:
        coord_told.add([(notes, misplaced)])

    def fold(paths_: Sequence[str], *, named: Any = None, tids: list[str] | None = None) -> Any:
        # bins of neighbouring partitions of about equal bytes, as the replay's (a task per partition
        # would pay a Python task's set-up 50 times for 50 small partitions); the filter of the ID rows:
        # named (a one-row DataFrame of the named producer ids, joined onto each work row: a cartesian
        # product, not a broadcast join, whose exchange Spark would run as a job of its own) or tids
        txn_work = [enc([X.TxnPartitionWork(by_path[path], n, tids) for path in b])
                    for b in _bins(paths_, [sizes[path] + PARTITION_WEIGHT for path in paths_], n_bins)]
        work_rows = _work_frame(spark, txn_work)
        if named is not None:
            work_rows = work_rows.crossJoin(named)
        return work_rows.mapInArrow(lambda it: X.fold_coordinator(it, now=now, said=coord_said), X.ddl(X.COORDINATOR))

    with span("driver-kept-plan"):
        named = replay.filter(F.col("kind").isin(X.SPAN, X.OPEN)).agg(
            F.array_sort(F.collect_set("span_producer_id")).alias("named"))  # one row; [] when none
        first = F.coalesce(F.col("pos"), F.lit(0)) == 0  # one row per id (the first of its named producer ids)
        # an id past its timeout that no named producer id names: one row, its pid null (posexplode_outer)
        kept = (fold([p for _num, p in plan.txn_state_partitions], named=named).filter(F.col("kind") == X.ID)
                .select("*", F.posexplode_outer("pids").alias("pos", "pid"))
                .persist(StorageLevel.MEMORY_AND_DISK))

    def coordinator(chosen: dict[str, int]) -> tuple[Any, Any]:
        """The producer ids resolved (persisted) and the timed-out ids, of the rows ``coordinator_from_folds``
        takes: each id's home partition's, or for a misplaced id the partition ``chosen`` names."""
        rows = kept
        taken = F.col("home")
        if chosen:
            rows = kept.join(F.broadcast(spark.createDataFrame(sorted(chosen.items()), "tid string, chosen int")),
                             "tid", "left")
            taken = F.when(F.col("chosen").isNull(), F.col("home")).otherwise(F.col("fold") == F.col("chosen"))
        rows = rows.filter(taken)
        resolved = (rows.filter(F.col("pid").isNotNull()).select(*X.CLAIMANT).groupBy("pid")
                    .applyInArrow(lambda t: X.resolve_groups(t, partitions_count=n), X.ddl(X.RESOLVED))
                    .persist(StorageLevel.MEMORY_AND_DISK))
        return resolved, rows.filter(F.col("timed_out") & first).select(*X.TIMED)

    # 3. transactions/: the spans joined with their producer ids' transactional ids
    span_cols = [F.col(c) if c in ("topic", "partition", "transactional_id") else F.col(f"span_{c}").alias(c)
                 for c in COLUMNS["transactions"]]

    def transactions(resolved: Any) -> Any:
        return replay.filter(F.col("kind") == X.SPAN).join(
            resolved.select(F.col("pid").alias("span_producer_id"), F.col("tid").alias("transactional_id")),
            "span_producer_id", "left").select(*span_cols)

    # 4. hanging/: the open transactions joined with what their producer ids resolved to, grouped by
    # transactional id with that id's timed-out row (cogroup): classified there, the owed abort decided there
    classified_told = sc.accumulator([], _ListParam())

    def classified(notes: list[X.Said], owed: list[tuple[str, str]]) -> None:
        classified_told.add([(notes, owed)])

    def hanging(resolved: Any, timed: Any) -> Any:
        opened = replay.filter(F.col("kind") == X.OPEN).select(
            F.col("span_producer_id").alias("pid"), "open_txn", "snapshot_offset", "info",
            F.col("lag_log_start_offset").alias("log_start_offset")).join(resolved, "pid", "left")
        return opened.groupBy("tid").cogroup(timed.groupBy("tid")).applyInArrow(
            lambda o, t: X.classify_groups(o, t, now=now, max_timeout_ms=max_timeout_ms, partitions_count=n,
                                           count=count, said=classified), X.ddl(X._HANGING)).repartition(1)

    # every query planned before the first of them runs (the analysis of each is the driver's work between
    # jobs otherwise); only ids in a partition they do not hash to (below) make the last two again
    with span("driver-coordinator-plan"):
        resolved, timed = coordinator({})
        transactions_df, hanging_df = transactions(resolved), hanging(resolved, timed)

    # the jobs: 2. partitions/ (the replay's first action), 3. transactions/, 4. hanging/
    lag_cols = [F.col(c) if c in ("topic", "partition") else F.col(f"lag_{c}").alias(c) for c in COLUMNS["partitions"]]
    with span("driver-partitions"):
        _phase(sc, poller, "replaying partitions")
        # one file, the replay still a task per bin: a shuffle to one partition (a coalesce would run the
        # replay in one task), inside this job (adaptive execution is off: see _sql_conf)
        _write(sc, poller, replay.filter(F.col("kind") == X.LAG).select(*lag_cols).repartition(1),
               paths["partitions"], "partitions/")
    said_rows: dict[tuple[int, str, int, int], str | None] = {}
    for _what, notes in told.value:
        for kind, topic, number, seq, text in notes:
            said_rows[(kind, topic, number, seq)] = text
    with span("driver-transactions"):
        _phase(sc, poller, "folding __transaction_state")
        _write(sc, poller, transactions_df, paths["transactions"], "transactions/")
    coord_notes: dict[tuple[int, int], tuple[int, str | None]] = {}
    mis: set[tuple[str, int]] = set()
    for notes, misplaced in coord_told.value:
        for kind, number, seq, text in notes:
            coord_notes[(number, seq)] = (kind, text)
        mis.update(misplaced)
    chosen: dict[str, int] = {}
    dup_notes: dict[int, list[str]] = {}
    if mis:
        # ids found in a partition they do not hash to (rare; each one a finding): their home partitions
        # folded again for the ids taken from there (coordinator_from_folds' choice, made over those ids only),
        # then the producer ids resolved again from the rows it takes and transactions/ rewritten
        from kafkatx.format.txn_log import coordinator_partition

        homes = {coordinator_partition(tid, n) for tid, _f in mis}
        with span("driver-misplaced"):  # the rows of those ids only (the fold's filter by wanted ids)
            holders = [r.asDict() for r in fold([p for num, p in plan.txn_state_partitions if num in homes],
                                                tids=sorted({tid for tid, _f in mis}))
                       .filter((F.col("kind") == X.ID) & F.col("home")).select("tid", "fold").collect()]
        chosen, dup_notes = _misplaced([{"tid": t, "fold": f} for t, f in sorted(mis)], holders, numbers, n)
        resolved.unpersist()
        resolved, timed = coordinator(chosen)
        hanging_df = hanging(resolved, timed)
        with span("driver-transactions"):
            _write(sc, poller, transactions(resolved), paths["transactions"], "transactions/")

    with span("driver-hanging"):
        _write(sc, poller, hanging_df, paths["hanging"], "hanging/")
    for df in (resolved, kept, replay):
        df.unpersist()
    cnotes: list[X.Said] = []  # several open transactions of a partition each number their notes from 0
    owed: list[tuple[str, str]] = []
    for notes, owes in classified_told.value:
        cnotes.extend(notes)
        owed.extend(owes)
    owed.sort()

    # the notes, in the order find-hanging says them: the coordinator's (partition by partition), each
    # partition's (its replay's, then its rows'), the coordinator-level ones; skipped partitions named
    skipped: list[str] = []
    ordered = sorted(coord_notes.items())
    notices.extend(text for _k, (kind, text) in ordered if kind == X.CNOTICE and text is not None)
    for number in sorted({f for f, _s in coord_notes} | set(dup_notes)):
        for (f, _s), (kind, text) in ordered:
            if f == number and kind == X.FINDING and text is not None:
                notices.append(text)
            elif f == number and kind == X.CSKIP and text is not None:
                skipped.append(text)
        notices.extend(dup_notes.get(number, []))
    per_partition: dict[tuple[str, int], list[str]] = {}
    replayed: dict[tuple[str, int], bool] = {}
    no_hw = []
    for (kind, topic, number, _seq), text in sorted(said_rows.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][3])):
        key = (topic, number)
        if kind == X.SKIP:
            skipped.append(text)  # type: ignore[arg-type]
            replayed[key] = False
        elif kind == X.NOTE:
            per_partition.setdefault(key, []).append(text)  # type: ignore[arg-type]
        else:
            no_hw.append(f"{topic}-{number}")
    for _kind, topic, number, _seq, text in sorted(cnotes, key=lambda r: (r[1], r[2], r[3])):
        per_partition.setdefault((topic, number), []).append(text)  # type: ignore[arg-type]
    counts = {what: acc.value for what, acc in tally.items()}
    ok = counts["partitions"] > 0
    notices.extend(_partition_notices([(replayed.get(k, True), v) for k, v in sorted(per_partition.items())]
                                      + [(ok, [])], [text for _tid, text in owed]))
    if no_hw:
        notices.append(no_high_watermark_notice(no_hw))
    return _Replayed(counts=counts, notices=notices, skipped=skipped)


class _ListParam:
    """A Spark accumulator of lists (``AccumulatorParam``): each task adds what it says once, at its end."""

    def zero(self, value: list[Any]) -> list[Any]:
        return []

    def addInPlace(self, value1: list[Any], value2: list[Any]) -> list[Any]:  # noqa: N802 (pyspark's name)
        value1.extend(value2)
        return value1

def _ddl_types(name: str) -> list[str]:
    return [{"string": "string", "int": "int", "long": "bigint", "boolean": "boolean"}[TYPES[name][c]]
            for c in COLUMNS[name]]
