"""Random and mutated bytes into every small-format decoder: only DecodeError subclasses escape."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkatx.errors import DecodeError
from kafkatx.format.checkpoint import read_leader_epoch_checkpoint, read_offset_checkpoint
from kafkatx.format.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_offsets_key,
    decode_offsets_value,
    encode_group_metadata_value,
    encode_offset_commit_value,
)
from kafkatx.format.offset_index import read_offset_index
from kafkatx.format.producer_snapshot import (
    ProducerSnapshotEntry,
    encode_producer_snapshot,
    read_producer_snapshot,
)
from kafkatx.format.time_index import read_time_index
from kafkatx.format.txn_index import read_txn_index
from kafkatx.format.txn_log import (
    TxnLogValue,
    TxnState,
    decode_txn_log_key,
    decode_txn_log_value,
    encode_txn_log_value,
)

OC_KEY = OffsetCommitKey(version=1, group="g", topic="t", partition=0)
GM_KEY = GroupMetadataKey(version=2, group="g")

DECODERS = [
    lambda b: read_offset_index(b, 0),
    lambda b: read_time_index(b, 0),
    read_txn_index,
    read_producer_snapshot,
    lambda b: read_producer_snapshot(b, verify_crc=True),
    decode_txn_log_key,
    decode_txn_log_value,
    decode_offsets_key,
    lambda b: decode_offsets_value(OC_KEY, b),
    lambda b: decode_offsets_value(GM_KEY, b),
]

# valid samples to mutate, so the fuzzer gets past the version checks
SEEDS = [
    encode_txn_log_value(TxnLogValue(version=1, producer_id=1, producer_epoch=2, transaction_timeout_ms=3,
                                     state=TxnState.ONGOING, partitions=(("t", (1, 2)),),
                                     last_update_timestamp=4, start_timestamp=5, next_producer_id=7)),
    encode_txn_log_value(TxnLogValue(version=0, producer_id=1, producer_epoch=2, transaction_timeout_ms=3,
                                     state=TxnState.ONGOING, partitions=(("t", (1, 2)),),
                                     last_update_timestamp=4, start_timestamp=5)),
    encode_offset_commit_value(OffsetCommitValue(version=4, offset=1, leader_epoch=2, metadata="m",
                                                 commit_timestamp=3)),
    encode_group_metadata_value(GroupMetadataValue(
        version=4, protocol_type="consumer", generation=1, protocol="range", leader="m",
        current_state_timestamp=1, members=(MemberMetadata(
            member_id="m", group_instance_id=None, client_id="c", client_host="h", rebalance_timeout=1,
            session_timeout=1, subscription=b"s", assignment=b"a"),))),
    encode_producer_snapshot([ProducerSnapshotEntry(producer_id=1, producer_epoch=0, last_sequence=0,
                                                    last_offset=0, offset_delta=0, timestamp=0,
                                                    coordinator_epoch=0, current_txn_first_offset=-1)]),
    b"0\n1\nt 0 5\n",
]


def _run_all(data: bytes) -> None:
    for decode in DECODERS:
        try:
            decode(data)
        except DecodeError as err:
            assert err.position is None or 0 <= err.position <= len(data)
            assert str(err)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_random_bytes(data):
    _run_all(data)


@st.composite
def _mutated(draw):
    seed = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "cut", "insert"]))
        if op == "flip" and seed:
            i = draw(st.integers(0, len(seed) - 1))
            seed[i] = draw(st.integers(0, 255))
        elif op == "cut" and seed:
            del seed[draw(st.integers(0, len(seed) - 1)):]
        else:
            i = draw(st.integers(0, len(seed)))
            seed[i:i] = draw(st.binary(min_size=1, max_size=6))
    return bytes(seed)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
def test_mutated_valid_records(data):
    _run_all(data)


_checkpointish = st.lists(
    st.sampled_from(["0", "1", "2", "-1", "+3", "t", "é", " ", "\t", "\n", "\r", "\r\n", "99999999999",
                     "9223372036854775808", "x y z"]) | st.text(max_size=5),
    max_size=30,
).map("".join)


@settings(max_examples=400)
@given(_checkpointish)
def test_checkpoint_text(text):
    size = len(text.encode("utf-8", "surrogatepass"))
    for decode in (read_offset_checkpoint, read_leader_epoch_checkpoint):
        try:
            decode(text)
        except DecodeError as err:
            assert err.position is not None and 0 <= err.position <= size


def test_mmap_can_be_closed_after_a_decode_error(tmp_path):
    """A DecodeError's traceback must not pin a view of the caller's mmap (close() would fail)."""
    import mmap

    path = tmp_path / "bad.bin"
    path.write_bytes(b"\x00\x01" + bytes(40) + b"\x07")  # odd size, bad versions everywhere
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        errors = []
        for decode in DECODERS:
            try:
                decode(mm)
            except DecodeError as err:
                errors.append(err)
        assert errors  # several decoders refused it, and still:
        mm.close()
        assert mm.closed
