"""The settings an offline command runs with, resolved as the broker resolves them: a flag, else the
``--broker-config`` files the log dirs carry (``server.properties``), else Kafka's default
(``storage.broker_config.resolve``); ``__transaction_state``'s partition count from the controller's metadata
log first, as ``TransactionStateManager.getTransactionTopicPartitionCount`` asks the metadata cache first.
The offline session (:meth:`~kafkatx.session.session.OfflineSession.resolve_settings`) resolves them once per
command and says the one note naming them (:meth:`~kafkatx.rows.Report.settings`)."""

from __future__ import annotations

from kafkatx.coordinator.state_manager import metadata_partitions_count
from kafkatx.rows import Report
from kafkatx.storage.broker_config import (
    TRANSACTION_MAX_TIMEOUT_MS,
    TXN_STATE_PARTITIONS,
    BrokerConfig,
    Setting,
    resolve,
)
from kafkatx.storage.log_dir import LogDir

__all__ = ["broker_configs", "max_timeout_setting", "partitions_count_setting", "say_settings"]


def broker_configs(dirs: list[LogDir]) -> list[BrokerConfig]:
    """The distinct ``--broker-config`` files the log dirs carry (``log_dir.open_log_dirs``), in order."""
    out: list[BrokerConfig] = []
    for d in dirs:
        config = getattr(d, "broker_config", None)
        if config is not None and all(config is not c for c in out):
            out.append(config)
    return out


def partitions_count_setting(dirs: list[LogDir], partitions_count: int | None, used: list[Setting]) -> int | None:
    """``--txn-state-partitions``, else the topic's partition count in ``__cluster_metadata-0`` (the
    coordinator uses the topic's: ``TransactionStateManager.getTransactionTopicPartitionCount`` asks the
    metadata cache first), else the broker configs' ``transaction.state.log.num.partitions``; with none of
    them, None (``replay_transaction_log`` reads the metadata log or guesses from the partitions on disk)."""
    configs = broker_configs(dirs)
    if partitions_count is None and not configs:
        return None
    if partitions_count is None:
        from_log = metadata_partitions_count(dirs, Report())  # what it says is the replay's to say
        if from_log is not None:
            used.append(Setting(name=TXN_STATE_PARTITIONS, value=from_log,
                                source="the topic's partition count in __cluster_metadata-0"))
            return from_log
    setting = resolve(TXN_STATE_PARTITIONS, partitions_count, "--txn-state-partitions", configs)
    used.append(setting)
    return int(setting.value)


def max_timeout_setting(dirs: list[LogDir], max_timeout_ms: int | None, used: list[Setting]) -> int:
    """``--max-transaction-timeout``, else the broker configs' ``transaction.max.timeout.ms``, else 15 minutes."""
    setting = resolve(TRANSACTION_MAX_TIMEOUT_MS, max_timeout_ms, "--max-transaction-timeout", broker_configs(dirs))
    used.append(setting)
    return int(setting.value)


def say_settings(dirs: list[LogDir], used: list[Setting], report: Report) -> None:
    """Name the settings used, when a broker config was given (without one every value is a flag or the
    documented default, as before)."""
    if used and broker_configs(dirs):
        report.settings(s.describe() for s in used)
