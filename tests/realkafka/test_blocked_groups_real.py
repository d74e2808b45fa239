"""Group ``cg-eos``'s transactional offset commits in the real brokers' ``__consumer_offsets``.

In the 3.8.0 (clean, crashed) and 4.0 TV2 scenarios ``tx-eos-D`` (producer 4) commits ``cg-eos``'s offsets
with ``sendOffsetsToTransaction`` in 5 transactions (4 committed, 1 aborted); each one's OffsetCommit
batch on ``__consumer_offsets-22`` is followed by the transaction's marker there, so
``OffsetMetadataManager`` holds nothing pending when the broker stops: no group is blocked, and the
broker answered cg-eos's OffsetFetch with committed offsets (``broker/consumer_groups.json``).
"""

from __future__ import annotations

import json

import pytest

from kafkatx.coordinator.groups import partition_blocked_groups
from kafkatx.format.consumer_offsets import OffsetCommitKey, decode_offsets_key
from kafkatx.format.record_batch import iter_records
from kafkatx.session import offline
from kafkatx.storage.log_dir import LogDir
from kafkatx.storage.replicas import choose_replicas


@pytest.mark.parametrize("name,answers", [("3.8.0/clean", "3.8.0/clean"), ("3.8.0/crashed", "3.8.0/crashed"),
                                          ("4.0-tv2/tv2-clean", "4.0-tv2/tv2-clean")])
def test_cg_eos_has_nothing_pending(real_kafka, name, answers):
    top = real_kafka.extract(name)
    (part,) = [c.partition for c in choose_replicas([LogDir(top)]) if c.partition.name == "__consumer_offsets-22"]
    commits = markers = 0
    for _segment, buf, header in part.iter_batch_buffers():
        if header.producer_id != 4:
            continue
        if header.is_control:
            markers += 1
            continue
        for record in iter_records(buf, header):
            key = decode_offsets_key(record.key)
            assert isinstance(key, OffsetCommitKey) and key.group == "cg-eos" and header.is_transactional
            commits += 1
    assert markers == 5 and commits >= 5  # one marker per transaction: 4 COMMIT, 1 ABORT
    groups, why = partition_blocked_groups(part, [(4, 0)])
    assert why is None and groups == {4: []}
    # find-hanging (at the broker's own clock) has no row on __consumer_offsets, so none names a group
    recorded = json.loads((real_kafka.answers(answers) / "broker" / "list_offsets.json").read_text())
    rows = offline.find_hanging([LogDir(top)], now=recorded["recorded_at_ms"], max_timeout_ms=0).rows
    assert not [r for r in rows if r.topic == "__consumer_offsets" or r.blocked_groups]
    fetched = json.loads((real_kafka.answers(answers) / "broker" / "consumer_groups.json").read_text())
    assert set(fetched["cg-eos"]) == {"payments-0", "payments-1"}
