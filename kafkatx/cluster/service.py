"""The online commands: list-txn, describe-txn, describe-producers, find-hanging, lag,
abort-hanging, asked of a live cluster through a :class:`ClusterBackend`.

Each function takes the backend first, so the CLI passes :func:`connect`'s
answer and the tests pass a fake. The rows are ``kafkatx.rows``'s, the same
the offline path prints, so ``--bootstrap-server`` and ``--log-dir`` output can be
compared line by line.

find-hanging follows Kafka's ``kafka-transactions.sh find-hanging``
(tools/src/main/java/org/apache/kafka/tools/TransactionsCommand.java,
FindHangingTransactionsCommand): DescribeProducers on every partition, internal
topics included; an open transaction whose producer last wrote more than the
max transaction timeout ago is hanging when its producer id maps (ListTransactions
filtered by producer id, then DescribeTransactions) to no transaction that
still includes the partition. kafkatx splits Kafka's single verdict into the
kinds cli.md names, so the operator knows which repair applies.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from msgspec import Struct
from msgspec.structs import replace

from kafkatx.cluster.admin import KafkaPythonAdmin
from kafkatx.cluster.backend import (
    API_KEYS,
    ClusterBackend,
    ClusterMetadata,
    Isolation,
    OffsetSpecName,
    ProducerState,
    TopicPartitionKey,
    TransactionListing,
    TransactionState,
)
from kafkatx.cluster.config import ClientConfig, resolve
from kafkatx.cluster.confluent import ConfluentClient, fence_timeout_ms
from kafkatx.cluster.partial import coordinator_name, describe_producers_each, describe_transactions_each
from kafkatx.coordinator.groups import OFFSETS_TOPIC
from kafkatx.coordinator.rules import (
    DEFAULT_MAX_TIMEOUT_MS,
    PREPARE_STATES,
    TIMEOUT_STATES,
    HangingKind,
    below_log_start,
    classify,
    ghost_kind,
    is_distributed_two_phase_commit,
    is_timed_out,
    listed,
    state_from_name,
)
from kafkatx.coordinator.state import tp_name
from kafkatx.errors import ClusterError, UnsupportedApi, UsageError
from kafkatx.format.txn_log import TxnState, coordinator_partition
from kafkatx.rows import (
    UNTOUCHED_2PC_REASON,
    AbortPlanRow,
    HangingRow,
    LagRow,
    PartitionStatus,
    ProducerRow,
    Report,
    RowAction,
    RowResult,
    TransactionDescription,
    TransactionRow,
)
from kafkatx.session.offline import compile_pattern, parse_states
from kafkatx.storage.partition import is_log_manager_topic

log = logging.getLogger("kafkatx.cluster")

# The online rows' actions (RowAction): fence-epoch, write-abort-marker, write-commit-marker, and
# force-terminate (Admin.forceTerminateTransaction, KIP-939) for a prepared 2PC transaction only.
_MARKERS = {RowAction.WRITE_ABORT_MARKER: "ABORT", RowAction.WRITE_COMMIT_MARKER: "COMMIT"}


# ------------------------------------------------------------------ the live backend

class LiveCluster:
    """A :class:`ClusterBackend` over a real cluster: confluent-kafka for metadata, ListOffsets and
    InitProducerId; kafka-python for ListTransactions, DescribeTransactions, DescribeProducers
    and WriteTxnMarkers (KIP-664), which librdkafka does not offer."""

    def __init__(self, bootstrap_server: str, config: ClientConfig, *, timeout_s: float = 30.0) -> None:
        self.bootstrap_server = bootstrap_server
        self._confluent = ConfluentClient(bootstrap_server, config.confluent, timeout_s=timeout_s)
        self._admin = KafkaPythonAdmin(bootstrap_server, config.kafka_python, timeout_s=timeout_s)

    def metadata(self, topics: Sequence[str] | None = None) -> ClusterMetadata:
        return self._confluent.metadata(topics)

    def list_offsets(self, partitions: Iterable[TopicPartitionKey], *, isolation: Isolation,
                     spec: OffsetSpecName) -> dict[TopicPartitionKey, int]:
        return self._confluent.list_offsets(partitions, isolation=isolation, spec=spec)

    def list_transactions(self, *, states: Sequence[str] | None = None,
                          producer_ids: Sequence[int] | None = None, duration_filter_ms: int | None = None,
                          pattern: str | None = None) -> list[TransactionListing]:
        return self._admin.list_transactions(states=states, producer_ids=producer_ids,
                                             duration_filter_ms=duration_filter_ms, pattern=pattern)

    def api_version(self, api: str) -> int | None:
        return self._admin.api_version(api)

    def describe_transactions(self, transactional_ids: Iterable[str]) -> dict[str, TransactionState]:
        return self._admin.describe_transactions(transactional_ids)

    def describe_producers(self, partitions: Iterable[TopicPartitionKey]
                           ) -> dict[TopicPartitionKey, list[ProducerState]]:
        return self._admin.describe_producers(partitions)

    def write_txn_markers(self, *, topic: str, partition: int, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int, commit: bool = False) -> None:
        self._admin.write_txn_markers(topic=topic, partition=partition, producer_id=producer_id,
                                      producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch,
                                      commit=commit)

    def fence_transactional_id(self, transactional_id: str, *, transaction_timeout_ms: int | None = None) -> None:
        self._confluent.fence_transactional_id(transactional_id, transaction_timeout_ms=transaction_timeout_ms)

    def record_timestamps(self, offsets: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
        return self._confluent.record_timestamps(offsets)

    def force_terminate_transaction(self, transactional_id: str, *, transaction_timeout_ms: int = 60_000) -> None:
        self._confluent.force_terminate_transaction(transactional_id, transaction_timeout_ms=transaction_timeout_ms)

    def list_groups(self) -> list[str]:
        return self._admin.list_groups()

    def unstable_groups(self, groups: Iterable[str]) -> set[str]:
        return self._admin.unstable_groups(groups)

    def supports(self, api: str) -> bool:
        return self._admin.supports(api)

    def close(self) -> None:
        self._admin.close()
        self._confluent.close()


def connect(*, bootstrap_server: str | None, command_config: Path | None = None, profile: str | None = None,
            timeout_s: float = 30.0) -> ClusterBackend:
    """Open a live backend and check the cluster answers a metadata request within ``timeout_s``.

    ``bootstrap_server`` may be None/empty when ``profile`` names one. Raises UsageError for bad
    settings, ClusterError (naming the broker) when it cannot be reached or refuses us.
    """
    if timeout_s <= 0:
        raise UsageError(f"--timeout must be positive, got {timeout_s:g}")
    bootstrap, cfg = resolve(bootstrap_server=bootstrap_server, command_config=command_config, profile=profile)
    probe_bootstrap(bootstrap, timeout_s=min(timeout_s, PROBE_TIMEOUT_S))
    backend = LiveCluster(bootstrap, cfg, timeout_s=timeout_s)
    try:
        backend.metadata()
    except ClusterError:
        backend.close()
        raise
    return backend


PROBE_TIMEOUT_S = 4.0  # a refused or unresolvable bootstrap list fails well within 5 s


def _addresses(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for item in bootstrap.split(","):
        item = item.strip()
        if "://" in item:  # PLAINTEXT://host:port, as in listeners
            item = item.split("://", 1)[1]
        host, _, port = item.rpartition(":")
        host = host.strip("[]")
        if host and port.isdigit():
            out.append((host, int(port)))
    return out


def probe_bootstrap(bootstrap: str, *, timeout_s: float) -> None:
    """Fail fast when no bootstrap address accepts a TCP connection.

    librdkafka retries a refused connection until the request timeout; an operator at 3 a.m.
    should hear "connection refused" at once. A plain TCP connect per address (in parallel,
    each bounded by ``timeout_s``): when every one is refused or does not resolve, raise
    ClusterError naming them; when one connects, or one only times out (a slow network, not a
    refusal), the client's own connection, bounded by ``--timeout``, decides.
    """
    addresses = _addresses(bootstrap)
    if not addresses:
        return
    from concurrent.futures import ThreadPoolExecutor

    def attempt(addr: tuple[str, int]) -> str | None:
        try:
            with socket.create_connection(addr, timeout=timeout_s):
                return None
        except TimeoutError:
            return None
        except socket.gaierror as err:
            return f"{addr[0]}:{addr[1]}: cannot resolve host ({err.strerror or err})"
        except OSError as err:
            return f"{addr[0]}:{addr[1]}: {err.strerror or err}"

    with ThreadPoolExecutor(max_workers=min(len(addresses), 8)) as pool:
        failures = list(pool.map(attempt, addresses))
    if all(f is not None for f in failures):
        raise ClusterError(f"broker {bootstrap}: unreachable: " + "; ".join(f for f in failures if f))


# ------------------------------------------------------------------ helpers

def _now_ms(now_ms: int | None) -> int:
    return int(time.time() * 1000) if now_ms is None else now_ms


def _row(desc: TransactionState) -> TransactionRow:
    return TransactionRow(
        transactional_id=desc.transactional_id,
        producer_id=desc.producer_id,
        producer_epoch=desc.producer_epoch,
        state=desc.state,
        timeout_ms=desc.timeout_ms,
        start_timestamp_ms=desc.start_timestamp,
        last_update_timestamp_ms=None,  # DescribeTransactions does not carry it
        partitions=[tp_name(tp) for tp in sorted(desc.partitions)],
        coordinator_partition=None,
        coordinator_id=desc.coordinator_id,
    )


def _all_partitions(backend: ClusterBackend, topic: str | None = None) -> list[TopicPartitionKey]:
    md = backend.metadata([topic] if topic is not None else None)
    # A broker's Metadata never lists the KRaft metadata log; a fake or proxy that did is not followed.
    return [(p.topic, p.partition) for p in md.partitions if is_log_manager_topic(p.topic)]


# ------------------------------------------------------------------ list / describe

def list_transactions(backend: ClusterBackend, *, states: list[str] | None = None,
                      pattern: str | None = None, producer_ids: Sequence[int] | None = None,
                      duration_ms: int | None = None, now_ms: int | None = None,
                      report: Report | None = None) -> list[TransactionRow]:
    """ListTransactions on every broker, then DescribeTransactions for the details.

    The filters are ListTransactions' own (``kafkatx.coordinator.rules.listed``), sent to the broker where
    its version takes them: ProducerIdFilters (v0), DurationFilter (v1, Kafka 3.8, KIP-994),
    TransactionalIdPattern (v2, Kafka 4.1, KIP-1152: a full match). An older broker gets the
    filter applied here instead, with a note in ``report`` saying so (the duration then counts
    from DescribeTransactions' start time at this machine's clock ``now_ms``). An id whose coordinator
    does not answer DescribeTransactions is left out and its coordinator named in ``report``'s
    ``incomplete`` (``cluster.partial``; without a report the failure is raised).
    """
    regex = compile_pattern(pattern)
    # the same state names as offline (case-insensitive), sent to the broker as Kafka spells them
    parsed = parse_states(states)
    names = sorted(s.kafka_name for s in parsed) if parsed else None
    pids = sorted(set(producer_ids)) if producer_ids else None
    version = backend.api_version("ListTransactions") if (pattern is not None or duration_ms is not None) else None
    on_broker_duration = duration_ms is not None and version is not None and version >= 1
    on_broker_pattern = pattern is not None and version is not None and version >= 2
    said = report if report is not None else Report()
    if duration_ms is not None and not on_broker_duration:
        said.note(f"broker {backend.bootstrap_server} takes ListTransactions v{version} (DurationFilter needs v1, "
                    "Kafka 3.8, KIP-994): --duration-filter applied here, to DescribeTransactions' start time")
    if pattern is not None and not on_broker_pattern:
        said.note(f"broker {backend.bootstrap_server} takes ListTransactions v{version} (TransactionalIdPattern "
                    "needs v2, Kafka 4.1, KIP-1152): --transactional-id-pattern applied here, as a full match")
    listings = backend.list_transactions(states=names, producer_ids=pids,
                                         duration_filter_ms=duration_ms if on_broker_duration else None,
                                         pattern=pattern if on_broker_pattern else None)
    now = _now_ms(now_ms)
    client_regex = None if on_broker_pattern else regex
    ids = [t.transactional_id for t in listings
           if listed(transactional_id=t.transactional_id, producer_id=t.producer_id, state=t.state, start_ms=None,
                     pattern=client_regex, producer_ids=pids)]
    described, _failed = describe_transactions_each(backend, ids, report)
    rows = []
    for tid in sorted(described):
        desc = described[tid]
        if names and desc.state not in names:
            continue  # changed state between the two calls
        if not on_broker_duration and not listed(transactional_id=tid, producer_id=desc.producer_id,
                                                 state=desc.state, start_ms=desc.start_timestamp,
                                                 duration_ms=duration_ms, now=now):
            continue
        rows.append(_row(desc))
    return rows


def _open_status(backend: ClusterBackend, desc: TransactionState,
                 report: Report | None = None) -> list[PartitionStatus]:
    """Per partition of ``desc`` whether its leader still has the producer's transaction open
    (DescribeProducers); a partition whose leader does not answer is shown as not open and named in
    ``report``'s ``incomplete``, as offline a partition that cannot be read."""
    if not desc.partitions:
        return []
    if not backend.supports("DescribeProducers"):
        if report is not None:
            report.lacks(backend.bootstrap_server, "DescribeProducers", API_KEYS["DescribeProducers"][1],
                         "whether each partition still holds the transaction open is not shown")
        return []
    producers, _failed = describe_producers_each(backend, sorted(desc.partitions), report)
    status = []
    for tp in sorted(desc.partitions):
        first = next((p.current_txn_start_offset for p in producers.get(tp, [])
                      if p.producer_id == desc.producer_id and p.current_txn_start_offset is not None), None)
        status.append(PartitionStatus(partition=tp_name(tp), open=first is not None, first_offset=first))
    return status


def describe_transaction(backend: ClusterBackend, transactional_id: str,
                         report: Report | None = None) -> TransactionDescription | None:
    """DescribeTransactions for one id (None when the coordinator does not know it), plus per
    partition whether the partition leader still has the producer's transaction open. Online
    there is no history (that needs the __transaction_state log itself). What could not be asked is said
    in ``report``."""
    desc = backend.describe_transactions([transactional_id]).get(transactional_id)
    if desc is None:
        return None
    return TransactionDescription(transaction=_row(desc), history=[],
                                  partition_status=_open_status(backend, desc, report))


def describe_producers(backend: ClusterBackend, *, topic: str, partition: int) -> list[ProducerRow]:
    """DescribeProducers on the partition's leader, sorted by producer id.

    ``ghost`` is set when the producer's open transaction began below the log start
    (ListOffsets earliest, asked only when some transaction is open): only the leader's
    producer state remembers it, as offline only a ``.snapshot`` does.
    """
    md = backend.metadata([topic])
    if not any(p.partition == partition for p in md.partitions):
        raise ClusterError(f"broker {backend.bootstrap_server}: topic {topic!r} has no partition {partition}")
    tp = (topic, partition)
    states = backend.describe_producers([tp]).get(tp, [])
    log_start: int | None = None
    if any(s.current_txn_start_offset is not None for s in states):
        log_start = backend.list_offsets([tp], isolation="read_uncommitted", spec="earliest").get(tp)
    return [
        ProducerRow(producer_id=s.producer_id, producer_epoch=s.producer_epoch,
                    coordinator_epoch=s.coordinator_epoch, last_sequence=s.last_sequence,
                    last_timestamp_ms=s.last_timestamp, current_txn_first_offset=s.current_txn_start_offset,
                    ghost=below_log_start(s.current_txn_start_offset, log_start))
        for s in sorted(states, key=lambda s: s.producer_id)
    ]


# ------------------------------------------------------------------ find-hanging

def find_hanging(backend: ClusterBackend, *, max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS,
                 now_ms: int | None = None, topic: str | None = None,
                 report: Report | None = None) -> list[HangingRow]:
    """One row per (partition, producer) whose open transaction holds the LSO back.

    The verdict is the rule book's (``kafkatx.coordinator.rules.classify`` and ``ghost_kind``, the
    functions the offline path and Spark call), over what the cluster answers:

    - the coordinator state, start and timeout: DescribeTransactions of the transactional id
      that ListTransactions (filtered by producer id) maps the producer to;
    - the transaction includes the partition when DescribeTransactions lists it for this very
      producer id;
    - the last write: DescribeProducers' ``lastTimestamp``, which is also the row's ``start_ms``
      (DescribeProducers does not say when the transaction's first batch was written), except
      for ``timed-out``, whose ``start_ms`` is the coordinator's transaction start;
    - the log start for ``ghost``: ListOffsets earliest. Only the leader's producer state still
      remembers a ghost (loaded from a ``.snapshot`` after retention deleted the data); Kafka
      clamps the first unstable offset to the log start
      (``UnifiedLog.maybeIncrementFirstUnstableOffset``), so the LSO sticks there. As offline,
      its ``start_ms``/``duration_ms`` are null.

    With a ``report``, what the cluster does not answer is said there, as offline what cannot be read: a
    partition whose leader does not answer DescribeProducers, and the coordinator that does not answer
    ListTransactions or DescribeTransactions (the open transactions it would classify are not, each with
    a note), are its ``incomplete`` entries (``cluster.partial``); without one a failure is raised.
    """
    if max_timeout_ms < 0:
        raise UsageError(f"--max-transaction-timeout must not be negative, got {max_timeout_ms}")
    now = _now_ms(now_ms)
    partitions = _all_partitions(backend, topic)
    producers, _failed = describe_producers_each(backend, partitions, report)
    open_txns = [(tp, p) for tp in sorted(producers) for p in producers[tp] if p.current_txn_start_offset is not None]
    if not open_txns:
        return []
    pids = sorted({p.producer_id for _, p in open_txns})
    unasked: str | None = None  # why no open transaction can be classified (ListTransactions not answered)
    try:
        listings = backend.list_transactions(producer_ids=pids)
    except UnsupportedApi:
        raise
    except ClusterError as err:
        if report is None:
            raise
        report.not_read(coordinator_name(backend, None), str(err))
        listings, unasked = [], "ListTransactions was not answered"
    id_by_pid = {t.producer_id: t.transactional_id for t in listings if t.producer_id in set(pids)}
    described, failed = describe_transactions_each(backend, sorted(set(id_by_pid.values())), report)
    log_start = backend.list_offsets(sorted({tp for tp, _ in open_txns}), isolation="read_uncommitted",
                                     spec="earliest")

    rows: list[HangingRow] = []
    for tp, p in open_txns:
        tid = id_by_pid.get(p.producer_id)
        if report is not None and (unasked is not None or (tid is not None and tid in failed)):
            report.unclassified(tp_name(tp), p.producer_id, p.current_txn_start_offset or 0,
                                unasked or f"DescribeTransactions of {tid!r} was not answered")
            continue
        desc = described.get(tid) if tid is not None else None
        included = desc is not None and tp in desc.partitions and desc.producer_id == p.producer_id
        verdict = classify(state=state_from_name(desc.state) if desc is not None else None,
                           includes_partition=included,
                           start_ms=desc.start_timestamp if desc is not None else None,
                           timeout_ms=desc.timeout_ms if desc is not None else None,
                           last_write_ms=p.last_timestamp, now=now, max_timeout_ms=max_timeout_ms)
        if verdict is None:
            continue
        kind: str = verdict.value
        start_ms = p.last_timestamp
        duration_ms = now - p.last_timestamp if p.last_timestamp is not None else None
        if verdict in (HangingKind.TIMED_OUT, HangingKind.PREPARED_2PC) and desc is not None \
                and desc.start_timestamp is not None:
            start_ms, duration_ms = desc.start_timestamp, now - desc.start_timestamp
        kind = ghost_kind(kind, first_offset=p.current_txn_start_offset, log_start=log_start.get(tp))
        if kind == HangingKind.GHOST:
            start_ms, duration_ms = None, None
        rows.append(HangingRow(
            kind=kind, topic=tp[0], partition=tp[1], producer_id=p.producer_id,
            producer_epoch=p.producer_epoch, transactional_id=tid,
            coordinator_state=desc.state if desc is not None else None,
            first_offset=p.current_txn_start_offset if p.current_txn_start_offset is not None else -1,
            start_ms=start_ms, duration_ms=duration_ms,
        ))
    return _with_blocked_groups(backend, rows, producers, report)


def _with_blocked_groups(backend: ClusterBackend, rows: list[HangingRow],
                         producers: dict[TopicPartitionKey, list[ProducerState]],
                         report: Report | None = None) -> list[HangingRow]:
    """``blocked_groups`` on the rows about a ``__consumer_offsets`` partition, from what the group
    coordinator answers: the groups whose coordinator partition it is (``GroupCoordinator.partitionFor``:
    ``Utils.abs(groupId.hashCode) % partitions``) and whose OffsetFetch with ``require_stable`` says
    UNSTABLE_OFFSET_COMMIT (coordinator/groups.py has Kafka's rule). Only where the partition holds exactly one
    open transaction: with several, the coordinator does not say which one a group waits on, and the
    rows keep None (unknown), as they do when the cluster does not answer."""
    targets = [r for r in rows if r.topic == OFFSETS_TOPIC and sum(
        1 for p in producers.get((r.topic, r.partition), ()) if p.current_txn_start_offset is not None) == 1]
    if not targets:
        return rows
    try:
        count = sum(1 for p in backend.metadata([OFFSETS_TOPIC]).partitions if p.topic == OFFSETS_TOPIC)
        by_partition: dict[int, list[str]] = {}
        for group in backend.list_groups():
            by_partition.setdefault(coordinator_partition(group, count), []).append(group)
        blocked = {n: sorted(backend.unstable_groups(by_partition.get(n, [])))
                   for n in sorted({r.partition for r in targets})}
    except ClusterError as err:
        if report is None:
            log.warning("the consumer groups the hanging transactions block are unknown: %s", err)
            return rows
        for n in sorted({r.partition for r in targets}):
            report.groups_unknown(f"{OFFSETS_TOPIC}-{n}", err)  # as offline, where the partition does not read
        return rows
    chosen = {id(r) for r in targets}
    return [replace(r, blocked_groups=blocked[r.partition]) if id(r) in chosen else r for r in rows]


# ------------------------------------------------------------------ lag

def lag(backend: ClusterBackend, *, topic: str | None = None, report: Report | None = None) -> list[LagRow]:
    """Per partition: ListOffsets earliest (log start), latest read_uncommitted (high watermark)
    and latest read_committed (LSO, KIP-98).

    Online ``log_end_offset`` is the high watermark: ListOffsets cannot see the leader's
    unreplicated tail. Open-transaction columns come from DescribeProducers when the broker
    has it (Kafka 3.0+); otherwise they are null, not guessed. ``held_by_ghost``: the oldest
    open transaction began below the log start and holds the LSO below the high watermark
    (see :func:`find_hanging`, kind ``ghost``); null without DescribeProducers, like the other
    open-transaction columns (said in ``report``). A partition whose leader does not answer
    DescribeProducers keeps them null too and is named in ``report``'s ``incomplete``.
    """
    partitions = _all_partitions(backend, topic)
    start = backend.list_offsets(partitions, isolation="read_uncommitted", spec="earliest")
    hw = backend.list_offsets(partitions, isolation="read_uncommitted", spec="latest")
    lso = backend.list_offsets(partitions, isolation="read_committed", spec="latest")
    producers: dict[TopicPartitionKey, list[ProducerState]] | None = None
    failed: set[TopicPartitionKey] = set()
    if partitions and backend.supports("DescribeProducers"):
        producers, failed = describe_producers_each(backend, partitions, report)
    elif partitions and report is not None:
        report.lacks(backend.bootstrap_server, "DescribeProducers", API_KEYS["DescribeProducers"][1],
                     "open_transactions, oldest_open_* and held_by_ghost are null")
    rows = []
    for tp in partitions:
        h, s = hw.get(tp), lso.get(tp)
        open_count: int | None = None
        oldest: ProducerState | None = None
        known = producers is not None and tp not in failed
        if producers is not None and known:
            opened = sorted((p for p in producers.get(tp, []) if p.current_txn_start_offset is not None),
                            key=lambda p: (p.current_txn_start_offset or 0, p.producer_id))
            open_count = len(opened)
            oldest = opened[0] if opened else None
        held: bool | None = None if not known else (
            oldest is not None and h is not None and s is not None and s < h
            and below_log_start(oldest.current_txn_start_offset, start.get(tp)))
        rows.append(LagRow(
            topic=tp[0], partition=tp[1], log_start_offset=start.get(tp), lso=s, high_watermark=h,
            log_end_offset=h, lag=h - s if h is not None and s is not None else None,
            open_transactions=open_count,  # None online without DescribeProducers
            oldest_open_producer_id=oldest.producer_id if oldest else None,
            oldest_open_first_offset=oldest.current_txn_start_offset if oldest else None,
            held_by_ghost=held,
        ))
    return rows


# ------------------------------------------------------------------ when the oldest open transaction began

class OpenStart(Struct, frozen=True, kw_only=True):
    """When a partition's oldest open transaction began, and which broker answer says so.

    ``source``: ``DescribeTransactions`` (the coordinator's transactionStartTimeMs: exact),
    ``Fetch`` (the timestamp of the record at the transaction's first offset: the producer's
    CreateTime, or the broker's LogAppendTime) or ``DescribeProducers`` (the producer's last
    write, lastTimestamp: a lower bound of the age, for a transaction whose first batch is gone).
    """

    start_ms: int
    source: str


def open_transaction_starts(backend: ClusterBackend, rows: Sequence[LagRow]) -> dict[TopicPartitionKey, OpenStart]:
    """For each partition whose LSO is held below its high watermark, when the transaction holding
    it began, from the broker's own records (never from when we first looked):

    - DescribeProducers lists the open transactions (currentTransactionStartOffset); each one's
      start is the coordinator's transactionStartTimeMs when its producer id maps
      (ListTransactions, DescribeTransactions) to a transaction that still includes the partition,
      else the timestamp of the record at its first offset (Fetch), else its producer's
      lastTimestamp; the partition's answer is the earliest of them;
    - a broker without DescribeProducers: the record at the LSO, which on Kafka is the first
      offset of the oldest open transaction (``UnifiedLog.firstUnstableOffset``).

    Partitions nothing answers for are left out.
    """
    held = sorted((r.topic, r.partition) for r in rows
                  if r.lso is not None and r.high_watermark is not None and r.lso < r.high_watermark)
    if not held:
        return {}
    if not backend.supports("DescribeProducers"):
        lso = {(r.topic, r.partition): r.lso for r in rows if r.lso is not None}
        stamps = backend.record_timestamps({tp: lso[tp] for tp in held})
        return {tp: OpenStart(start_ms=ts, source="Fetch") for tp, ts in stamps.items()}
    producers = backend.describe_producers(held)
    opened = [(tp, p) for tp in held for p in producers.get(tp, []) if p.current_txn_start_offset is not None]
    if not opened:
        return {}
    described: dict[str, TransactionState] = {}
    id_by_pid: dict[int, str] = {}
    if backend.supports("ListTransactions") and backend.supports("DescribeTransactions"):
        pids = sorted({p.producer_id for _, p in opened})
        id_by_pid = {t.producer_id: t.transactional_id for t in backend.list_transactions(producer_ids=pids)
                     if t.producer_id in set(pids)}
        described = backend.describe_transactions(sorted(set(id_by_pid.values())))
    starts: dict[tuple[TopicPartitionKey, int], OpenStart] = {}
    to_fetch: dict[TopicPartitionKey, int] = {}
    for tp, p in opened:
        desc = described.get(id_by_pid.get(p.producer_id, ""))
        if desc is not None and desc.producer_id == p.producer_id and tp in desc.partitions \
                and desc.start_timestamp is not None:
            starts[(tp, p.producer_id)] = OpenStart(start_ms=desc.start_timestamp, source="DescribeTransactions")
        elif p.current_txn_start_offset is not None:
            # one Fetch per partition: the earliest first offset there (a second one waits its turn)
            first = to_fetch.get(tp)
            if first is None or p.current_txn_start_offset < first:
                to_fetch[tp] = p.current_txn_start_offset
    stamps = backend.record_timestamps(to_fetch) if to_fetch else {}
    for tp, p in opened:
        if (tp, p.producer_id) in starts:
            continue
        if to_fetch.get(tp) == p.current_txn_start_offset and tp in stamps:
            starts[(tp, p.producer_id)] = OpenStart(start_ms=stamps[tp], source="Fetch")
        elif p.last_timestamp is not None:
            starts[(tp, p.producer_id)] = OpenStart(start_ms=p.last_timestamp, source="DescribeProducers")
    out: dict[TopicPartitionKey, OpenStart] = {}
    for (tp, _pid), start in sorted(starts.items()):
        if tp not in out or start.start_ms < out[tp].start_ms:
            out[tp] = start
    return out


# ------------------------------------------------------------------ abort-hanging
#
# Rows are txn.model.AbortPlanRow, the class the offline planner fills, so --format json has
# the same keys either way. Online actions: ``fence-epoch`` (InitProducerId for the
# transactional id: the coordinator bumps the epoch and aborts the Ongoing transaction
# itself, so we write no marker), ``write-abort-marker`` / ``write-commit-marker``
# (WriteTxnMarkers straight to the partition leader, as Admin.abortTransaction; a commit
# marker only finishes a PrepareCommit the coordinator already decided, never reverses it).
# For a marker, ``control_type`` and ``marker_epoch`` say what we send; ``marker_offset`` stays
# None because the leader assigns it. A ghost gets an ABORT marker too: the leader's
# ProducerAppendInfo ends the open transaction wherever it began.

def _control_type(action: RowAction) -> str | None:
    """The control record a marker action writes (ControlRecordType's name), None for a fence."""
    return _MARKERS.get(action)


def _with_marker(row: AbortPlanRow) -> AbortPlanRow:
    """``row`` with ``control_type``/``marker_epoch`` filled in when its action writes a marker."""
    control = _control_type(row.state)
    if control is None:
        return row
    return replace(row, control_type=control, marker_epoch=row.producer_epoch)


def _two_pc_action(transactional_id: str | None, force_terminate: frozenset[str]) -> str:
    """A prepared 2PC transaction's action: force-terminate when ``--force-terminate`` names its id, else
    left untouched (its external transaction manager owns the outcome)."""
    if transactional_id in force_terminate:
        return RowAction.FORCE_TERMINATE.text()
    return RowAction.UNTOUCHED.text(UNTOUCHED_2PC_REASON)


def _from_hanging(row: HangingRow, coordinator_epochs: dict[tuple[TopicPartitionKey, int], int],
                  force_terminate: frozenset[str] = frozenset()) -> AbortPlanRow:
    if row.kind == HangingKind.PREPARED_2PC:
        # Never fenced or marked by selection: its external transaction manager owns the outcome.
        action = _two_pc_action(row.transactional_id, force_terminate)
    elif row.kind == HangingKind.TIMED_OUT and row.transactional_id is not None:
        action = RowAction.FENCE_EPOCH.text()
    elif row.kind == HangingKind.INCOMPLETE_MARKERS and state_from_name(row.coordinator_state) is TxnState.PREPARE_COMMIT:
        action = RowAction.WRITE_COMMIT_MARKER.text()
    else:
        action = RowAction.WRITE_ABORT_MARKER.text()
    return _with_marker(AbortPlanRow(
        kind=row.kind, topic=row.topic, partition=row.partition, producer_id=row.producer_id,
        producer_epoch=row.producer_epoch, transactional_id=row.transactional_id,
        coordinator_state=row.coordinator_state, first_offset=row.first_offset, start_ms=row.start_ms,
        duration_ms=row.duration_ms, action=action,
        coordinator_epoch=coordinator_epochs.get(((row.topic, row.partition), row.producer_id)),
        blocked_groups=row.blocked_groups,
    ))


def plan_abort(backend: ClusterBackend, *, transactional_ids: Sequence[str] = (), topic: str | None = None,
               partition: int | None = None, producer_id: int | None = None, all_: bool = False,
               max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS, now_ms: int | None = None,
               force_terminate: Sequence[str] = (), report: Report | None = None) -> list[AbortPlanRow]:
    """What abort-hanging would do; changes nothing. Why an asked-for id gets no row (unknown, already
    ended) or a blind fence is a note in ``report`` (else logged). A plan is never made from a partial
    answer: what the cluster does not answer is raised here, never left out.

    A prepared two-phase-commit transaction (timeout Integer.MAX_VALUE, ``prepared-2pc``) gets
    ``untouched: prepared-2pc`` unless its id is in ``force_terminate`` (``force-terminate``:
    ``Admin.forceTerminateTransaction``); ids in ``force_terminate`` are selected too.

    - ``all_``: every find-hanging row;
    - ``transactional_ids``: fence each id whose transaction is Ongoing (on a broker without
      DescribeTransactions the fence is planned blind: InitProducerId is safe on any state);
      an id in PrepareCommit/PrepareAbort gets its missing markers instead, since fencing
      cannot finish a decided transaction;
    - ``topic`` [+ ``partition``] [+ ``producer_id``]: an ABORT marker for each open
      transaction there (kafka-transactions.sh abort).
    """
    if partition is not None and topic is None:
        raise UsageError("--partition needs --topic")
    if producer_id is not None and topic is None:
        raise UsageError("--producer-id needs --topic and --partition")
    forced = frozenset(force_terminate)
    transactional_ids = list(dict.fromkeys([*transactional_ids, *force_terminate]))
    if not (all_ or transactional_ids or topic is not None):
        raise UsageError("nothing selected: give --transactional-id, --topic/--partition or --all")
    now = _now_ms(now_ms)
    plan: list[AbortPlanRow] = []

    if all_:
        hanging = find_hanging(backend, max_timeout_ms=max_timeout_ms, now_ms=now)
        epochs: dict[tuple[TopicPartitionKey, int], int] = {}
        marker_tps = sorted({(h.topic, h.partition) for h in hanging})
        if marker_tps:
            for tp, states in backend.describe_producers(marker_tps).items():
                for s in states:
                    epochs[(tp, s.producer_id)] = s.coordinator_epoch
        plan.extend(_from_hanging(h, epochs, forced) for h in hanging)

    for tid in transactional_ids:
        plan.extend(_plan_for_id(backend, tid, now, forced, report))

    if topic is not None:
        tps = [(topic, partition)] if partition is not None else _all_partitions(backend, topic)
        if partition is not None:
            md = backend.metadata([topic])
            if not any(p.partition == partition for p in md.partitions):
                raise ClusterError(f"broker {backend.bootstrap_server}: topic {topic!r} has no partition {partition}")
        for tp, states in sorted(backend.describe_producers(tps).items()):
            for s in states:
                if s.current_txn_start_offset is None:
                    continue
                if producer_id is not None and s.producer_id != producer_id:
                    continue
                plan.append(_with_marker(AbortPlanRow(
                    kind="requested", topic=tp[0], partition=tp[1], producer_id=s.producer_id,
                    producer_epoch=s.producer_epoch, transactional_id=None, coordinator_state=None,
                    first_offset=s.current_txn_start_offset, start_ms=s.last_timestamp,
                    duration_ms=now - s.last_timestamp if s.last_timestamp is not None else None,
                    action=RowAction.WRITE_ABORT_MARKER.text(), coordinator_epoch=s.coordinator_epoch)))

    seen: set[tuple[object, ...]] = set()
    unique = []
    for row in _fence_timeouts(backend, plan):
        key = (row.action, row.transactional_id if row.state in (RowAction.FENCE_EPOCH, RowAction.FORCE_TERMINATE)
               else None,
               row.topic, row.partition, row.producer_id)
        if key not in seen:
            seen.add(key)
            unique.append(row)
    return unique


# An id whose transaction is still undecided can be fenced (InitProducerId bumps the epoch and
# the coordinator aborts what is open).
_FENCEABLE_STATES = frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE})


def _say(report: Report | None, line: str) -> None:
    """A note of the online plan: in ``report``, else logged (a caller without one)."""
    if report is not None:
        report.note(line)
    else:
        log.warning("%s", line)


def _plan_for_id(backend: ClusterBackend, tid: str, now: int,
                 force_terminate: frozenset[str] = frozenset(), report: Report | None = None) -> list[AbortPlanRow]:
    if not backend.supports("DescribeTransactions"):
        _say(report, f"broker {backend.bootstrap_server} has no DescribeTransactions (Kafka 3.0, KIP-664): "
                     f"fencing {tid!r} without knowing its state")
        return [AbortPlanRow(kind="requested", topic=None, partition=None, producer_id=None, producer_epoch=None,
                             transactional_id=tid, coordinator_state=None, first_offset=None, start_ms=None,
                             duration_ms=None, action=RowAction.FENCE_EPOCH.text())]
    desc = backend.describe_transactions([tid]).get(tid)
    if desc is None:
        _say(report, f"transactional id {tid!r} is unknown to its coordinator; nothing to abort")
        return []
    state = state_from_name(desc.state)
    if tid in force_terminate and not (state in TIMEOUT_STATES and is_distributed_two_phase_commit(desc.timeout_ms)):
        raise UsageError(f"--force-terminate {tid}: not a prepared two-phase-commit transaction (state "
                         f"{desc.state}, timeout {desc.timeout_ms} ms); select it with --transactional-id")
    if state in TIMEOUT_STATES and is_distributed_two_phase_commit(desc.timeout_ms):
        action = _two_pc_action(tid, force_terminate)
        two_pc: list[TopicPartitionKey | None] = [*sorted(desc.partitions)] or [None]
        return [AbortPlanRow(kind=HangingKind.PREPARED_2PC.value, topic=tp[0] if tp else None,
                             partition=tp[1] if tp else None, producer_id=desc.producer_id,
                             producer_epoch=desc.producer_epoch, transactional_id=tid, coordinator_state=desc.state,
                             first_offset=None, start_ms=desc.start_timestamp,
                             duration_ms=now - desc.start_timestamp if desc.start_timestamp is not None else None,
                             action=action) for tp in two_pc]
    if state not in _FENCEABLE_STATES and state not in PREPARE_STATES:
        _say(report, f"transactional id {tid!r} is {desc.state}; nothing to abort")
        return []
    start, duration = desc.start_timestamp, (now - desc.start_timestamp if desc.start_timestamp is not None else None)
    timed_out = state in TIMEOUT_STATES and is_timed_out(desc.start_timestamp, desc.timeout_ms, now)
    if state in PREPARE_STATES:
        marker = RowAction.WRITE_COMMIT_MARKER if state is TxnState.PREPARE_COMMIT else RowAction.WRITE_ABORT_MARKER
        producers = backend.describe_producers(sorted(desc.partitions)) if desc.partitions else {}
        rows = []
        for tp in sorted(desc.partitions):
            for s in producers.get(tp, []):
                if s.producer_id == desc.producer_id and s.current_txn_start_offset is not None:
                    rows.append(_with_marker(AbortPlanRow(
                        kind=HangingKind.INCOMPLETE_MARKERS.value, topic=tp[0], partition=tp[1], producer_id=s.producer_id,
                        producer_epoch=s.producer_epoch, transactional_id=tid, coordinator_state=desc.state,
                        first_offset=s.current_txn_start_offset, start_ms=start, duration_ms=duration,
                        action=marker.text(), coordinator_epoch=s.coordinator_epoch)))
        return rows
    parts: list[TopicPartitionKey | None] = [*sorted(desc.partitions)] or [None]
    # first_offset as find-hanging and describe-txn give it: DescribeProducers' currentTransactionStartOffset
    # of this producer on each partition (None where the leader has none open, or without the API)
    first = {status.partition: status.first_offset for status in _open_status(backend, desc)}
    return [AbortPlanRow(kind=HangingKind.TIMED_OUT.value if timed_out else "requested",
                         topic=tp[0] if tp else None, partition=tp[1] if tp else None,
                         producer_id=desc.producer_id, producer_epoch=desc.producer_epoch, transactional_id=tid,
                         coordinator_state=desc.state, first_offset=first.get(tp_name(tp)) if tp else None,
                         start_ms=start, duration_ms=duration, action=RowAction.FENCE_EPOCH.text(),
                         transaction_timeout_ms=fence_timeout_ms(desc.timeout_ms))
            for tp in parts]


def _fence_timeouts(backend: ClusterBackend, plan: list[AbortPlanRow]) -> list[AbortPlanRow]:
    """Each fence row with the transactionTimeoutMs its InitProducerId will send: the id's own timeout
    (DescribeTransactions), so the fence changes the epoch and nothing else; the producer default
    where the coordinator cannot be asked (a blind fence)."""
    missing = sorted({r.transactional_id for r in plan
                      if r.state is RowAction.FENCE_EPOCH and r.transaction_timeout_ms is None and r.transactional_id})
    if not missing:
        return plan
    described = backend.describe_transactions(missing) if backend.supports("DescribeTransactions") else {}
    return [replace(r, transaction_timeout_ms=fence_timeout_ms(
                getattr(described.get(r.transactional_id or ""), "timeout_ms", None)))
            if r.state is RowAction.FENCE_EPOCH and r.transaction_timeout_ms is None else r
            for r in plan]


def execute_abort(backend: ClusterBackend, plan: Sequence[AbortPlanRow], *,
                  transaction_timeout_ms: int = 60_000) -> list[AbortPlanRow]:
    """Carry out a plan; each row comes back with ``result`` ``ok`` or ``failed: <reason>``.

    A missing API fails the whole run before anything is touched (UnsupportedApi). Each
    transactional id is fenced once, however many partition rows it has.
    """
    if any(r.state in _MARKERS for r in plan) and \
            not backend.supports("WriteTxnMarkers"):
        raise UnsupportedApi(f"broker {backend.bootstrap_server} does not support WriteTxnMarkers "
                             "(admin abort needs Kafka 3.0, KIP-664)")
    fenced: dict[str, str] = {}
    done: list[AbortPlanRow] = []
    if any(r.state is RowAction.FORCE_TERMINATE for r in plan):
        # InitProducerId with keepPreparedTxn=false, as Admin.forceTerminateTransaction sends it: any client
        # library that can init a transactional producer can do it (UnsupportedApi: a backend that cannot).
        for tid in dict.fromkeys(r.transactional_id for r in plan if r.state is RowAction.FORCE_TERMINATE):
            if tid is not None:
                try:
                    backend.force_terminate_transaction(tid, transaction_timeout_ms=transaction_timeout_ms)
                    fenced[tid] = RowResult.OK.text()
                except UnsupportedApi:
                    raise
                except ClusterError as err:
                    fenced[tid] = RowResult.FAILED.text(str(err))
    for row in plan:
        if row.untouched:
            done.append(row)
            continue
        if row.state is RowAction.FORCE_TERMINATE:
            done.append(replace(row, result=fenced.get(row.transactional_id or "",
                                                       RowResult.FAILED.text("no transactional id"))))
            continue
        try:
            if row.state is RowAction.FENCE_EPOCH:
                if row.transactional_id is None:
                    raise ClusterError("no transactional id to fence")
                if row.transactional_id not in fenced:
                    try:
                        backend.fence_transactional_id(row.transactional_id,
                                                       transaction_timeout_ms=row.transaction_timeout_ms)
                        fenced[row.transactional_id] = RowResult.OK.text()
                    except ClusterError as err:
                        fenced[row.transactional_id] = RowResult.FAILED.text(str(err))
                result = fenced[row.transactional_id]
            elif row.state in _MARKERS:
                if row.topic is None or row.partition is None or row.producer_id is None \
                        or row.producer_epoch is None:
                    raise ClusterError("the plan row lacks the partition or producer to write a marker for")
                backend.write_txn_markers(
                    topic=row.topic, partition=row.partition, producer_id=row.producer_id,
                    producer_epoch=row.producer_epoch,
                    # Admin abort passes the producer's last coordinator epoch; -1 (unknown) becomes 0
                    # as in TransactionsCommand's AbortTransactionCommand.
                    coordinator_epoch=max(row.coordinator_epoch if row.coordinator_epoch is not None else 0, 0),
                    commit=row.state is RowAction.WRITE_COMMIT_MARKER)
                result = RowResult.OK.text()
            else:
                raise ClusterError(f"unknown action {row.action!r}")
        except UnsupportedApi:
            raise
        except ClusterError as err:
            result = RowResult.FAILED.text(str(err))
        done.append(replace(row, result=result))
    return done
