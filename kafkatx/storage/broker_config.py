"""The broker's own configuration: its ``server.properties`` (``--broker-config``).

What the broker builds when it starts on its log dirs depends on a few of its settings; the
offline commands take them from the file the broker ran with rather than from flags typed
again by hand. Each value a command uses is named with where it came from: a flag (which
always wins), the file, or Kafka's default (the file does not set it). Kafka's names and
defaults (``KafkaConfig``, ``TransactionLogConfigs``, ``TransactionStateManagerConfigs``,
``ServerLogConfigs``):

* ``producer.id.expiration.ms`` (86400000): ``ProducerStateManager.isProducerExpired``, applied at
  every snapshot load and by ``removeExpiredProducers`` (``describe-producers``).
* ``transaction.max.timeout.ms`` (900000): the longest timeout any transaction may have; what
  ``kafka-transactions.sh find-hanging --max-transaction-timeout`` is meant to be set to
  (``find-hanging``, ``timeline``).
* ``transaction.state.log.num.partitions`` (50): which ``__transaction_state`` partition an id
  hashes to (``TransactionStateManager.partitionFor``; the coordinator-partition check).
* ``transaction.partition.verification.enable`` (true): the leader checks with the coordinator
  before it appends a transaction's first batch to a partition (``AddPartitionsToTxnManager``). It
  acts only on appends, so no offline answer depends on it; it is read and shown.
* ``log.index.size.max.bytes`` (10485760; ``segment.index.bytes`` is its per-topic name, also
  accepted here): the size ``AbstractIndex`` preallocates an active segment's ``.index`` and
  ``.timeindex`` to (rounded down to whole entries); a crashed broker leaves them at that size.
* ``remote.log.storage.system.enable`` (false): tiered storage (KIP-405) on this broker
  (``RemoteLogManagerConfig``); with it a topic's ``remote.storage.enable=true`` makes the log start
  follow the checkpoint, below the first local segment (``UnifiedLog.isRemoteLogEnabled``,
  ``LogLoader``; ``kafkatx.storage.tiered``).
* ``log.dirs`` (else ``log.dir``, default ``/tmp/kafka-logs``): which log dirs the file belongs to.
  A relative entry is taken relative to the current directory (the broker's own working
  directory is not known offline).

Java properties syntax (``java.util.Properties.load``), shared with ``--command-config``
(``cluster/config.py``): ``key=value``, ``key: value`` or ``key value``; ``#``/``!`` comments; a
trailing backslash continues the line; ``\\`` escapes. Pure apart from reading the file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from msgspec import Struct, field

from kafkatx.errors import UsageError

MAX_BROKER_CONFIG_BYTES = 1 << 20  # a server.properties is a few KB; refuse anything silly

PRODUCER_ID_EXPIRATION_MS = "producer.id.expiration.ms"
TRANSACTION_MAX_TIMEOUT_MS = "transaction.max.timeout.ms"
TXN_STATE_PARTITIONS = "transaction.state.log.num.partitions"
PARTITION_VERIFICATION = "transaction.partition.verification.enable"
INDEX_SIZE_MAX_BYTES = "log.index.size.max.bytes"
REMOTE_STORAGE_SYSTEM_ENABLE = "remote.log.storage.system.enable"
_INDEX_SIZE_TOPIC_NAME = "segment.index.bytes"

# Kafka's defaults, stated here only (storage/loading.py and coordinator/rules.py re-export them).
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # TransactionLogConfigs.PRODUCER_ID_EXPIRATION_MS_DEFAULT
DEFAULT_TRANSACTION_MAX_TIMEOUT_MS = 900_000  # TransactionStateManagerConfigs.TRANSACTIONS_MAX_TIMEOUT_MS_DEFAULT

# name -> (Kafka's default, smallest valid value; None for a boolean)
SETTINGS: dict[str, tuple[int | bool, int | None]] = {
    PRODUCER_ID_EXPIRATION_MS: (DEFAULT_PRODUCER_ID_EXPIRATION_MS, 1),
    TRANSACTION_MAX_TIMEOUT_MS: (DEFAULT_TRANSACTION_MAX_TIMEOUT_MS, 1),
    TXN_STATE_PARTITIONS: (50, 1),
    PARTITION_VERIFICATION: (True, None),
    INDEX_SIZE_MAX_BYTES: (10 * 1024 * 1024, 4),
    REMOTE_STORAGE_SYSTEM_ENABLE: (False, None),  # RemoteLogManagerConfig.DEFAULT_REMOTE_LOG_STORAGE_SYSTEM_ENABLE
}
DEFAULT_LOG_DIR = "/tmp/kafka-logs"  # ServerLogConfigs.LOG_DIR_DEFAULT


class Setting(Struct, frozen=True, kw_only=True):
    """One value a command uses, and where it came from (``flag --x``, the file, or Kafka's default)."""

    name: str
    value: int | bool
    source: str

    def describe(self) -> str:
        value = str(self.value).lower() if isinstance(self.value, bool) else str(self.value)
        return f"{self.name}={value} ({self.source})"


class BrokerConfig(Struct, frozen=True, kw_only=True):
    """A parsed ``server.properties``; :meth:`setting` validates on read (:func:`read_broker_config` up front)."""

    path: Path
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def log_dirs(self) -> tuple[Path, ...]:
        """``log.dirs`` (comma-separated), else ``log.dir``, else Kafka's default; relative to the cwd."""
        raw = self.properties.get("log.dirs") or self.properties.get("log.dir") or DEFAULT_LOG_DIR
        return tuple(Path(p.strip()).expanduser() for p in raw.split(",") if p.strip())

    def setting(self, name: str) -> Setting:
        """The file's value of ``name`` (one of :data:`SETTINGS`), or Kafka's default when it sets none."""
        default, minimum = SETTINGS[name]
        key = name
        raw = self.properties.get(name)
        if raw is None and name == INDEX_SIZE_MAX_BYTES:
            key, raw = _INDEX_SIZE_TOPIC_NAME, self.properties.get(_INDEX_SIZE_TOPIC_NAME)
        if raw is None:
            return Setting(name=name, value=default, source=f"Kafka's default; {self.path} does not set it")
        text = raw.strip()
        value: int | bool
        if minimum is None:
            if text.lower() not in ("true", "false"):
                raise UsageError(f"{self.path}: {key}={raw!r} is not true or false")
            value = text.lower() == "true"
        else:
            if not re.fullmatch(r"[+-]?\d+", text):
                raise UsageError(f"{self.path}: {key}={raw!r} is not an integer")
            value = int(text)
            if value < minimum or value > 2**31 - 1:
                raise UsageError(f"{self.path}: {key}={value} is out of range (Kafka requires "
                                 f"{minimum} to {2**31 - 1})")
        return Setting(name=name, value=value, source=str(self.path))


def read_broker_config(path: Path | str) -> BrokerConfig:
    """Read and check a broker's ``server.properties``; any problem is one :class:`UsageError` line."""
    path = Path(path)
    if path.exists() and not path.is_file():
        raise UsageError(f"{path}: --broker-config is not a file")
    config = BrokerConfig(path=path, properties=read_properties_file(path, "broker config",
                                                                     MAX_BROKER_CONFIG_BYTES))
    for name in SETTINGS:
        config.setting(name)  # a bad value is refused now, not halfway through a replay
    return config


def resolve(name: str, flag: int | bool | None, flag_name: str, configs: Sequence[BrokerConfig]) -> Setting:
    """The value a command uses for ``name``: the flag when given, else the broker configs' (the
    largest when several brokers' files differ, so that nothing is called over a limit that one of
    them would still allow), else Kafka's default."""
    if flag is not None:
        return Setting(name=name, value=flag, source=f"flag {flag_name}")
    if not configs:
        return Setting(name=name, value=SETTINGS[name][0], source="Kafka's default")
    found = [c.setting(name) for c in configs]
    best = max(found, key=lambda s: s.value)
    others = {s.value for s in found}
    if len(others) > 1:
        return Setting(name=name, value=best.value,
                       source=f"{best.source}; the largest of {len(found)} broker configs that differ")
    return best


# ---------------------------------------------------------------- java.util.Properties

def read_properties_file(path: Path, what: str, limit: int) -> dict[str, str]:
    """A Java properties file (a broker's ``server.properties``, a client's ``--command-config``),
    parsed; any problem is one :class:`UsageError` line naming the file and ``what`` it is."""
    try:
        size = path.stat().st_size
        if size > limit:
            raise UsageError(f"{path}: {what} is {size} bytes, larger than {limit}")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise UsageError(f"{path}: {what} file not found") from err
    except UnicodeDecodeError as err:
        raise UsageError(f"{path}: byte {err.start}: {what} is not UTF-8") from err
    except OSError as err:
        raise UsageError(f"{path}: cannot read {what}: {err.strerror}") from err
    return parse_properties(text, source=str(path))


def parse_properties(text: str, *, source: str = "<properties>") -> dict[str, str]:
    """Parse ``java.util.Properties`` text (the subset real client files use)."""
    props: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        # A line ending in an odd number of backslashes continues onto the next one.
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical += line[:-1]
            continue
        logical += line
        key, value = _split_property(logical)
        props[key] = value
        logical = ""
    if logical:
        key, value = _split_property(logical)
        props[key] = value
    return props


def _split_property(line: str) -> tuple[str, str]:
    key_chars: list[str] = []
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line):
            key_chars.append(line[i + 1])
            i += 2
            continue
        if ch in "=: \t":
            break
        key_chars.append(ch)
        i += 1
    rest = line[i:].lstrip(" \t")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t")
    return "".join(key_chars), unescape_property(rest)


def unescape_property(value: str) -> str:
    escapes = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
    out: list[str] = []
    i = 0
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value):
            nxt = value[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", value[i + 2:i + 6] or ""):
                out.append(chr(int(value[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(escapes.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


__all__ = [
    "DEFAULT_LOG_DIR", "DEFAULT_PRODUCER_ID_EXPIRATION_MS", "DEFAULT_TRANSACTION_MAX_TIMEOUT_MS", "INDEX_SIZE_MAX_BYTES", "PARTITION_VERIFICATION", "PRODUCER_ID_EXPIRATION_MS", "SETTINGS",
    "TRANSACTION_MAX_TIMEOUT_MS", "TXN_STATE_PARTITIONS", "BrokerConfig", "Setting", "parse_properties", "read_properties_file",
    "read_broker_config", "resolve", "unescape_property",
]
