"""Which partitions are tiered (KIP-405): whether the broker loads a log with remote storage enabled.

Kafka's ``LogLoader`` takes the log start offset from ``log-start-offset-checkpoint`` as it is when
remote storage is enabled for the log, and otherwise raises it to the first local segment's base
(``newLogStartOffset = isRemoteLogEnabled ? checkpoint : max(checkpoint, first segment base)``);
``UnifiedLog`` keeps the first local segment's base (at least the log start) apart as
``localLogStartOffset``. ``UnifiedLog.isRemoteLogEnabled``: the broker's
``remote.log.storage.system.enable`` and the topic's ``remote.storage.enable``, and the topic is neither
compacted nor internal (``__consumer_offsets``, ``__transaction_state``, ``__share_group_state``,
``__remote_log_metadata``, ``__cluster_metadata``).

The two rules give different answers only where the checkpoint is below the first local segment, so
only such a partition is asked about (:func:`remote_log_rule`; none of the others costs anything).
What decides, in order:

1. an internal or compacted topic: never tiered;
2. ``--broker-config`` with ``remote.log.storage.system.enable=false`` (Kafka's default when the file
   does not set it): not tiered;
3. the metadata log (``__cluster_metadata-0`` in the log dirs): the topic's ``ConfigRecord``
   ``remote.storage.enable``; ``true`` is tiered (without ``--broker-config`` too: Kafka refuses that
   config on a cluster whose brokers do not enable the system, ``LogConfig.validateRemoteStorageOnlyIfSystemEnabled``),
   anything else is not;
4. neither says (no metadata log, or it does not know the topic): the partition *looks* tiered.
   ``LogManager.checkpointLogStartOffsetsInDir`` writes an entry below the first local segment only
   for a remote-enabled log (other logs only when their log start is above it), so after a clean
   shutdown the checkpoint is followed; after a crash it may be stale (retention moved the log start
   up and deleted segments after the last checkpoint), so the first segment's base is taken, as a
   broker without tiered storage (Kafka's default) would. Either way the answer says it guessed.

Reads the metadata log once per group of log dirs opened together, on the first question.
"""

from __future__ import annotations

from msgspec import Struct

from kafkatx.errors import KafkaTxError
from kafkatx.storage.broker_config import REMOTE_STORAGE_SYSTEM_ENABLE, BrokerConfig
from kafkatx.storage.log_dir import log_dir_group, remember_in_group

REMOTE_STORAGE_ENABLE = "remote.storage.enable"  # TopicConfig.REMOTE_LOG_STORAGE_ENABLE_CONFIG
CLEANUP_POLICY = "cleanup.policy"
REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"  # TopicBasedRemoteLogMetadataManagerConfig
# Topic.isInternal (Topic.INTERNAL_TOPICS) and the two UnifiedLog.isRemoteLogEnabled names besides
_NEVER_TIERED = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state",
                           REMOTE_LOG_METADATA_TOPIC, "__cluster_metadata"})

# RemoteLogRule.code values
INTERNAL = "internal-topic"
COMPACTED = "compacted-topic"
SYSTEM_DISABLED = "broker-config-disabled"
TOPIC_ENABLED = "topic-config"
TOPIC_DISABLED = "topic-config-disabled"
LOOKS_TIERED = "looks-tiered"


class RemoteLogRule(Struct, frozen=True, kw_only=True):
    """What decided whether a partition's log loads with remote storage enabled."""

    enabled: bool  # the log start follows the checkpoint (LogLoader's remote branch)
    decided: bool  # False: neither the metadata log nor --broker-config said (the partition looks tiered)
    code: str  # one of the constants above
    why: str  # one clause for the notices and JSON


class _TopicFacts(Struct):
    """A topic's configs as the metadata log sets them, and where that log is."""

    source: str | None  # the metadata log read; None: none in these log dirs (or unreadable)
    configs: dict[str, dict[str, tuple[str, int]]]
    topics: frozenset[str] = frozenset()  # the topics the metadata log knows
    note: str | None = None  # why it could not be read


def _topic_facts(log_dir: object) -> _TopicFacts:
    """The metadata log's topic configs for ``log_dir`` and the log dirs opened with it, read once."""
    cached = getattr(log_dir, "tiered_facts", None)
    if isinstance(cached, _TopicFacts):
        return cached
    from kafkatx.storage.cluster_metadata import find_metadata_log, read_cluster_image

    group = log_dir_group(log_dir)
    facts = _TopicFacts(None, {})
    try:
        folder = find_metadata_log(group)
        if folder is not None:
            image = read_cluster_image(folder)
            facts = _TopicFacts(str(folder), image.topic_configs, frozenset(image.topics))
    except (KafkaTxError, OSError) as err:
        facts = _TopicFacts(None, {}, note=f"the metadata log could not be read ({err})")
    remember_in_group(log_dir, "tiered_facts", facts)
    return facts


def decided_rule(topic: str, log_dir: object | None) -> RemoteLogRule | None:
    """:func:`remote_log_rule` where the metadata log or ``--broker-config`` decides (steps 1-3); None where
    only a guess could (a partition with no checkpoint evidence either way)."""
    rule = remote_log_rule(topic, log_dir, True)
    return rule if rule.decided else None


def remote_log_rule(topic: str, log_dir: object | None, clean_shutdown: bool) -> RemoteLogRule:
    """Whether ``topic``'s logs in ``log_dir`` load with remote storage enabled (module docstring);
    asked only for a partition whose log-start checkpoint is below its first local segment."""
    if topic in _NEVER_TIERED:
        return RemoteLogRule(enabled=False, decided=True, code=INTERNAL,
                             why=f"{topic} is an internal topic, never tiered (UnifiedLog.isRemoteLogEnabled)")
    config: BrokerConfig | None = getattr(log_dir, "broker_config", None)
    system = config.setting(REMOTE_STORAGE_SYSTEM_ENABLE) if config is not None else None
    if system is not None and not system.value:
        return RemoteLogRule(enabled=False, decided=True, code=SYSTEM_DISABLED,
                             why=f"{system.describe()}: no tiered storage on this broker")
    facts = _topic_facts(log_dir) if log_dir is not None else _TopicFacts(None, {})
    configs = facts.configs.get(topic)
    if configs is not None or topic in facts.topics:
        policy = configs.get(CLEANUP_POLICY) if configs else None
        if policy is not None and "compact" in policy[0]:
            return RemoteLogRule(enabled=False, decided=True, code=COMPACTED,
                                 why=f"{topic} is compacted ({CLEANUP_POLICY}={policy[0]}), never tiered")
        remote = configs.get(REMOTE_STORAGE_ENABLE) if configs else None
        if remote is not None and remote[0].strip().lower() == "true":
            also = (f" and {system.describe()}" if system is not None else
                    " (no --broker-config: Kafka accepts that topic config only where the brokers enable "
                    "remote.log.storage.system.enable, LogConfig.validateRemoteStorageOnlyIfSystemEnabled)")
            return RemoteLogRule(enabled=True, decided=True, code=TOPIC_ENABLED,
                                 why=f"{REMOTE_STORAGE_ENABLE}=true ({facts.source} at offset {remote[1]}){also}")
        value = remote[0] if remote is not None else "false (not set)"
        return RemoteLogRule(enabled=False, decided=True, code=TOPIC_DISABLED,
                             why=f"{REMOTE_STORAGE_ENABLE}={value} in {facts.source}")
    if facts.source is not None:
        unknown = f"{facts.source} sets no config of topic {topic}"
    else:
        unknown = facts.note or "no metadata log in these log dirs"
    said = f"{system.describe()}, " if system is not None else "no --broker-config, "
    if clean_shutdown:
        return RemoteLogRule(
            enabled=True, decided=False, code=LOOKS_TIERED,
            why=(f"looks tiered: {said}{unknown}; after a clean shutdown Kafka checkpoints a log start below "
                 f"the first local segment only for a remote-enabled log (LogManager."
                 f"checkpointLogStartOffsetsInDir), so the checkpoint is followed"))
    return RemoteLogRule(
        enabled=False, decided=False, code=LOOKS_TIERED,
        why=(f"looks tiered: {said}{unknown}; the broker did not shut down cleanly, so the checkpoint may be "
             f"stale and the first local segment's base is taken (remote storage disabled, Kafka's default)"))


__all__ = ["COMPACTED", "INTERNAL", "LOOKS_TIERED", "REMOTE_LOG_METADATA_TOPIC", "REMOTE_STORAGE_ENABLE",
           "SYSTEM_DISABLED", "TOPIC_DISABLED", "TOPIC_ENABLED", "RemoteLogRule", "decided_rule", "remote_log_rule"]
