"""--broker-config: a broker's server.properties, read once, each setting named with where it came from."""

from __future__ import annotations

import pytest

from kafkatx.errors import UsageError
from kafkatx.storage.broker_config import (
    INDEX_SIZE_MAX_BYTES,
    PARTITION_VERIFICATION,
    PRODUCER_ID_EXPIRATION_MS,
    TRANSACTION_MAX_TIMEOUT_MS,
    TXN_STATE_PARTITIONS,
    read_broker_config,
    resolve,
)
from kafkatx.storage.log_dir import open_log_dirs


def _write(path, text):
    path.write_text(text)
    return path


def _log_dir(path):
    path.mkdir(parents=True)
    (path / "meta.properties").write_text("version=1\n")
    return path


def test_values_come_from_the_file_else_kafka_defaults(tmp_path):
    cfg = read_broker_config(_write(tmp_path / "server.properties", "# a broker\nproducer.id.expiration.ms = 60000\n"
                                    "transaction.partition.verification.enable=false\nsegment.index.bytes=4096\n"))
    got = cfg.setting(PRODUCER_ID_EXPIRATION_MS)
    assert (got.value, got.source) == (60000, str(cfg.path))
    assert got.describe() == f"producer.id.expiration.ms=60000 ({cfg.path})"
    assert cfg.setting(PARTITION_VERIFICATION).value is False
    assert cfg.setting(INDEX_SIZE_MAX_BYTES).value == 4096  # the per-topic name of log.index.size.max.bytes
    default = cfg.setting(TRANSACTION_MAX_TIMEOUT_MS)
    assert default.value == 900_000 and default.source.startswith("Kafka's default")
    assert cfg.setting(TXN_STATE_PARTITIONS).value == 50


@pytest.mark.parametrize(("line", "says"), [
    ("producer.id.expiration.ms=soon", "is not an integer"),
    ("producer.id.expiration.ms=0", "out of range"),  # Kafka: atLeast(1)
    ("transaction.max.timeout.ms=99999999999", "out of range"),  # an INT config
    ("transaction.partition.verification.enable=yes", "is not true or false"),
])
def test_a_value_kafka_refuses_is_a_usage_error_naming_the_file(tmp_path, line, says):
    path = _write(tmp_path / "server.properties", line + "\n")
    with pytest.raises(UsageError) as err:
        read_broker_config(path)
    assert str(path) in str(err.value) and says in str(err.value)


def test_missing_or_directory_config_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="not found"):
        read_broker_config(tmp_path / "nope.properties")
    with pytest.raises(UsageError, match="not a file"):
        read_broker_config(tmp_path)


def test_a_flag_overrides_the_file_and_differing_brokers_give_the_largest(tmp_path):
    a = read_broker_config(_write(tmp_path / "a.properties", "transaction.max.timeout.ms=60000\n"))
    b = read_broker_config(_write(tmp_path / "b.properties", "transaction.max.timeout.ms=120000\n"))
    flag = resolve(TRANSACTION_MAX_TIMEOUT_MS, 0, "--max-transaction-timeout", [a, b])
    assert (flag.value, flag.source) == (0, "flag --max-transaction-timeout")
    both = resolve(TRANSACTION_MAX_TIMEOUT_MS, None, "--max-transaction-timeout", [a, b])
    assert both.value == 120000 and str(b.path) in both.source and "differ" in both.source
    none = resolve(TRANSACTION_MAX_TIMEOUT_MS, None, "--max-transaction-timeout", [])
    assert (none.value, none.source) == (900_000, "Kafka's default")


def test_each_config_goes_to_the_log_dirs_its_log_dirs_names(tmp_path):
    d1, d2 = _log_dir(tmp_path / "b1"), _log_dir(tmp_path / "b2")
    c1 = read_broker_config(_write(tmp_path / "1.properties", f"log.dirs={d1}\n"))
    c2 = read_broker_config(_write(tmp_path / "2.properties", f"log.dirs=/elsewhere,{d2}\n"))
    dirs = open_log_dirs([d2, d1], [c1, c2])
    assert [d.broker_config for d in dirs] == [c2, c1]
    # one config applies to every log dir given, whatever its log.dirs says (copied files)
    assert all(d.broker_config is c1 for d in open_log_dirs([d1, d2], [c1]))
    # no --log-dir: the configs' log.dirs
    assert [d.path for d in open_log_dirs([], [c1])] == [d1]
    c3 = read_broker_config(_write(tmp_path / "3.properties", "log.dirs=/nowhere\n"))
    with pytest.raises(UsageError, match="no --broker-config names this log dir"):
        open_log_dirs([d1, d2], [c1, c3])
